"""`shinken profile` as a library call: read rollouts (adding to what an earlier run recorded
in the output folder), profile every task, choose the band and the control sample."""

from __future__ import annotations

import json

import hashlib
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import orjson

from shinken.errors import ShinkenError
from shinken.runtime import utc_now
from shinken.profiles import documents
from shinken.profiles.bands import BANDS, Settings, TaskInfo, profile_tasks
from shinken.profiles.rollouts import Outcome, expand_inputs, merge, read_file
from shinken.schemas import check_own, validation_error

SCHEMA_ID = "shinken.profile/1"
PROFILE_FILE, BAND_FILE, CONTROL_FILE, OUTCOMES_FILE = "profile.json", "band.json", "control.json", "outcomes.jsonl"


@dataclass(frozen=True)
class ProfileRequest:
    rollouts: list[Path]
    task_root: Path
    out: Path
    receipt: Path | None = None
    settings: Settings = field(default_factory=Settings)
    reset: bool = False  # forget the rollouts an earlier run recorded in `out`


@dataclass
class ProfileResult:
    doc: dict[str, Any]
    band: list[str]
    control: list[str] | None
    outcomes: list[Outcome]
    files: list[Path]  # the rollout files this run read


def task_infos(task_root: Path) -> dict[str, TaskInfo]:
    from shinken.bundles.loader import load_root

    if not task_root.is_dir():
        raise ShinkenError(f"{task_root}: task root is not a folder; pass the folder the rollouts' tasks came from")
    infos: dict[str, TaskInfo] = {}
    for b in load_root(task_root):
        infos.setdefault(b.id, TaskInfo(b.app_type, b.difficulty, b.bundle_hash or None))
    return infos


def load_outcomes(path: Path) -> list[Outcome]:
    """The outcomes an earlier run recorded (none when the file does not exist)."""
    if not path.is_file():
        return []
    outcomes = []
    for n, raw in enumerate(path.read_bytes().splitlines(), 1):
        if not raw.strip():
            continue
        try:
            doc = orjson.loads(raw)
        except orjson.JSONDecodeError:
            doc = None
        if not isinstance(doc, dict) or validation_error("profile_outcome", doc):
            raise ShinkenError(f"{path}:{n}: not an outcome line written by shinken profile; pass --reset to "
                               "start the profile afresh from the given rollouts")
        outcomes.append(Outcome.from_json(doc))
    return outcomes


def outcomes_jsonl(outcomes: list[Outcome]) -> bytes:
    return b"".join(orjson.dumps(o.to_json()) + b"\n" for o in outcomes)


def _sha256(path: Path) -> str:
    h = hashlib.sha256()
    with path.open("rb") as fh:
        for chunk in iter(lambda: fh.read(1 << 20), b""):
            h.update(chunk)
    return h.hexdigest()


def run_profile(req: ProfileRequest) -> ProfileResult:
    s = req.settings
    s.check()
    if req.out.exists() and not req.out.is_dir():
        raise ShinkenError(f"{req.out}: exists and is not a folder; choose another --out")
    files = expand_inputs(req.rollouts)
    if not files:
        raise ShinkenError("no rollout files found in " + ", ".join(map(str, req.rollouts))
                           + "; pass the JSONL `gym eval run` wrote")
    infos = task_infos(req.task_root)
    kept: list[str] = []
    if req.receipt is not None:
        receipt = documents.read_receipt(req.receipt)
        kept = list(receipt["kept"])
        for line in receipt["tasks"]:
            info = infos.get(line["task_id"])
            if info is not None:
                infos[line["task_id"]] = TaskInfo(info.app_type, info.difficulty, info.bundle_hash, line.get("tier"))

    earlier_doc = None if req.reset else documents.read_optional_profile(req.out / PROFILE_FILE)
    outcomes = [] if req.reset else load_outcomes(req.out / OUTCOMES_FILE)
    reads = list(earlier_doc["reads"]) if earlier_doc else []
    for f in files:
        new = read_file(f)
        outcomes, added = merge(outcomes, new)
        reads.append({"path": str(f), "sha256": _sha256(f), "rollouts": len(new), "new": added, "read_at": utc_now()})

    policies = sorted({o.policy_profile for o in outcomes if o.policy_profile})
    if len(policies) > 1:
        raise ShinkenError(f"the rollouts come from {len(policies)} observation/action profiles ({'; '.join(policies)}); "
                           "a pass rate means one profile: profile each workspace's rollouts into its own --out")
    unknown = sorted({o.task_id for o in outcomes} - set(infos))
    if unknown:
        shown = ", ".join(unknown[:3]) + (f" and {len(unknown) - 3} more" if len(unknown) > 3 else "")
        raise ShinkenError(f"{req.task_root}: {len(unknown)} task id(s) of the rollouts are not in the task root "
                           f"({shown}); pass the --task-root the workspace was made from")
    universe = [t for t in kept if t in infos]
    tasks, band, control = profile_tasks(outcomes, infos, universe, s)
    counts = {b: sum(t["band"] == b for t in tasks) for b in BANDS}
    excluded: dict[str, int] = {}
    for t in tasks:
        for k, n in t["excluded_by_kind"].items():
            excluded[k] = excluded.get(k, 0) + n
    doc = {
        "schema": SCHEMA_ID,
        "created_at": utc_now(),
        "task_root": str(req.task_root.resolve()),
        "receipt": str(req.receipt.resolve()) if req.receipt else None,
        "settings": s.to_json(),
        "reads": reads,
        "totals": {
            "tasks": len(tasks),
            "rollouts": sum(t["rollouts"] for t in tasks),
            "scored": sum(t["scored"] for t in tasks),
            "masked": sum(t["masked"] for t in tasks),
            "failed": sum(t["failed"] for t in tasks),
            "stale": sum(t["stale"] for t in tasks),
            "excluded_by_kind": dict(sorted(excluded.items())),
        },
        "counts": counts,
        "band_file": BAND_FILE,
        "policy_profile": json.loads(policies[0]) if policies else None,
        "control_file": CONTROL_FILE if control is not None else None,
        "control_size": len(control) if control is not None else None,
        "tasks": tasks,
    }
    check_own("profile", doc, "the profile")
    return ProfileResult(doc, band, control, outcomes, files)
