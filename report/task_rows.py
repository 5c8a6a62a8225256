"""One row per task for the task browser (`shinken report --tasks`), joined from the triage report,
the probe receipt and the profile (each optional; each already checked against its schema), plus
each task's instruction read from its task file.

Two shapes: the index (`Index`: a column per filterable field, categorical values coded against
a dictionary, so 10,910 rows load and filter fast in the page) and each task's details (what its
row opens: reasons, outcomes with the rewards' output tails, media). Fields other engineers' steps
add to the triage report (`family`, `benchmark_matches`, the `benchmark_overlap` reason) are read
when present and shown as absent otherwise."""

from __future__ import annotations

import re
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import orjson

from shinken.bundles.model import TASK_FILE_NAMES

INSTRUCTION_PREVIEW = 180  # characters of the instruction the index carries (the details carry all)
NOT_TRIAGED, NOT_PROBED = "(not triaged)", "(not probed)"
MEDIA_PATH = re.compile(r"^media/[0-9a-f]{64}\.(webp|svg)$")  # what probes/media.py names a stored image
OVERLAP_CODE = "benchmark_overlap"
CATEGORIES = ("app", "cls", "verdict", "outcome", "tier", "family", "band")  # single-valued coded columns


@dataclass
class Index:
    """The page's index: per task, a value per column; CATEGORIES and `reasons` hold codes into
    `dicts` (a task's `reasons` is a list: its triage reason codes and its probe drop reason).
    Shown, not filtered on: `instruction` (its start), `start` (the screenshot's path or ""),
    `recordings` (how many), `desktop` (1, 0, or -1: not known), `pass_rate`."""

    ids: list[str] = field(default_factory=list)
    cols: dict[str, list[Any]] = field(default_factory=dict)
    dicts: dict[str, list[str]] = field(default_factory=dict)
    _codes: dict[str, dict[str, int]] = field(default_factory=dict)

    def code(self, column: str, value: str) -> int:
        codes = self._codes.setdefault(column, {})
        if value not in codes:
            codes[value] = len(codes)
            self.dicts.setdefault(column, []).append(value)
        return codes[value]

    def to_json(self) -> dict[str, Any]:
        return {"n": len(self.ids), "ids": self.ids, "cols": self.cols, "dicts": self.dicts}


def task_file(folder: str | None) -> dict[str, str]:
    """The instruction and app_type in a task folder's task file, read alone (no bundle load:
    10,910 of them); the ones it has as text."""
    if not folder:
        return {}
    for name in TASK_FILE_NAMES:
        try:
            doc = orjson.loads(Path(folder, name).read_bytes())
        except (OSError, orjson.JSONDecodeError):
            continue
        if not isinstance(doc, dict):
            return {}
        return {k: doc[k] for k in ("instruction", "app_type") if isinstance(doc.get(k), str)}
    return {}


def _media_paths(media: dict[str, Any] | None) -> list[str]:
    if not media:
        return []
    entries = [media.get("start"), *(media.get("recordings") or [])]
    return [e["path"] for e in entries if isinstance(e, dict) and MEDIA_PATH.match(str(e.get("path", "")))]


def _overlaps(triage_task: dict[str, Any]) -> bool:
    return bool(triage_task.get("benchmark_matches")) or any(
        r.get("code") == OVERLAP_CODE for r in triage_task.get("reasons") or [])


def task_rows(triage: dict | None, receipt: dict | None, profile: dict | None,
              task_root: Path | None = None) -> tuple[Index, list[dict[str, Any]]]:
    """The index and the details, in one order: the triage report's, then tasks only the receipt
    or the profile has. `task_root` (else the triage entries' paths, else the receipt's task root)
    is where instructions are read."""
    by_triage = {t["id"]: t for t in (triage or {}).get("tasks", [])}
    by_probe = {t["task_id"]: t for t in (receipt or {}).get("tasks", [])}
    by_profile = {t["task_id"]: t for t in (profile or {}).get("tasks", [])}
    order = list(dict.fromkeys([*by_triage, *by_probe, *by_profile]))
    root = task_root or (Path(receipt["task_root"]) if receipt and receipt.get("task_root") else None)
    ix = Index(ids=order)
    for name in (*CATEGORIES, "reasons", "overlap", "instruction", "start", "recordings", "desktop", "pass_rate"):
        ix.cols[name] = []
    details = []
    for tid in order:
        tr, pr, pf = by_triage.get(tid) or {}, by_probe.get(tid) or {}, by_profile.get(tid) or {}
        folder = (str(root / tid) if root is not None else None) or tr.get("path")
        read = task_file(folder)
        if not read and tr.get("path") and folder != tr.get("path"):
            read = task_file(tr["path"])
        instruction = read.get("instruction")
        media = pr.get("media") or None
        start = (media or {}).get("start") or None
        recordings = [r for r in (media or {}).get("recordings") or [] if MEDIA_PATH.match(str(r.get("path", "")))]
        values = {
            "app": tr.get("app_type") or pf.get("app_type") or read.get("app_type") or "(none)",
            "cls": tr.get("class") or "",
            "verdict": tr.get("verdict") or NOT_TRIAGED,
            "outcome": pr.get("outcome") or NOT_PROBED,
            "tier": pr.get("tier") or ("none" if pr else ""),
            "family": tr.get("family") or "",
            "band": pf.get("band") or "",
        }
        for name, value in values.items():
            ix.cols[name].append(ix.code(name, value))
        reasons = [f"triage: {c}" for c in dict.fromkeys(r["code"] for r in tr.get("reasons") or [])]
        if pr.get("reason"):
            reasons.append(f"probe: {pr['reason']}")
        ix.cols["reasons"].append([ix.code("reasons", r) for r in reasons])
        ix.cols["overlap"].append(1 if _overlaps(tr) else 0)
        text = instruction or ""
        ix.cols["instruction"].append(text if len(text) <= INSTRUCTION_PREVIEW else text[:INSTRUCTION_PREVIEW - 1] + "…")
        ix.cols["start"].append(start["path"] if start and MEDIA_PATH.match(str(start.get("path", ""))) else "")
        ix.cols["recordings"].append(len(recordings))
        # 1: a desktop task (a start screenshot is taken), 0: none, -1: not known (not probed, or no media kept)
        ix.cols["desktop"].append(-1 if media is None else int(bool(media.get("desktop"))))
        ix.cols["pass_rate"].append(pf.get("pass_rate"))
        details.append(_details(tid, instruction, tr, pr, pf))
    return ix, details


def _details(tid: str, instruction: str | None, tr: dict[str, Any], pr: dict[str, Any],
             pf: dict[str, Any]) -> dict[str, Any]:
    """What a task's row opens (only the fields the page shows; absent parts left out)."""
    out: dict[str, Any] = {"id": tid, "instruction": instruction}
    if tr:
        out["triage"] = {k: tr.get(k) for k in ("class", "verdict", "app_type", "difficulty", "family")}
        out["triage"]["reasons"] = [{k: r.get(k) for k in ("code", "severity", "detail")} for r in tr.get("reasons") or []]
        out["triage"]["benchmark_matches"] = [
            {k: m.get(k) for k in ("benchmark", "task_id", "score", "slots_differ")}
            for m in tr.get("benchmark_matches") or [] if isinstance(m, dict)]
    if pr:
        keep = ("outcome", "reason", "detail", "tier", "rewards", "reward_tail", "replay", "oracle", "vandal", "golden")
        out["probe"] = {k: pr.get(k) for k in keep if pr.get(k) is not None}
        state = pr.get("start_state") or {}
        out["probe"]["windows"] = state.get("windows") or []
        out["probe"]["alerts"] = state.get("alerts") or []
        media = pr.get("media") or {}
        out["media"] = {
            "desktop": bool(media.get("desktop")),
            "start": media.get("start") if (media.get("start") or {}).get("path") in _media_paths(media) else None,
            "recordings": [r for r in media.get("recordings") or [] if r.get("path") in _media_paths(media)],
            "errors": list(media.get("errors") or []),
            "recorded": bool(media),  # False: the probe ran with --no-media, or wrote no media then
        }
    if pf:
        out["profile"] = {k: pf.get(k) for k in ("band", "pass_rate", "passed", "scored", "mean_reward")}
    return out


def media_files(details: list[dict[str, Any]]) -> list[str]:
    """Every stored image the details name (paths relative to the probe's run dir)."""
    out: list[str] = []
    for d in details:
        m = d.get("media") or {}
        out += [e["path"] for e in [m.get("start"), *(m.get("recordings") or [])] if e]
    return list(dict.fromkeys(out))
