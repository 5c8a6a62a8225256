"""What a published dataset holds, computed from the inputs: the splits (the very rows and
split make-workspace writes), one `dropped` row per task left out with its reasons, and the
provenance every claim on the card is made from."""

from __future__ import annotations

import re
from collections import Counter
from dataclasses import dataclass, field
from typing import Any

import shinken
from shinken.bundles.model import Bundle
from shinken.errors import ShinkenError
from shinken.probes.final_receipt import kept_alerts, kept_checks, kept_tiers
from shinken.publish.inputs import Inputs
from shinken.schemas import check_own
from shinken.triage.codes import NOTE, severity
from shinken.workspace import rows as rows_mod
from shinken.workspace.split import Split, root_families, split_bundles

TRIAGE_STAGE_REASONS = ("blocked", "defective", "benchmark_overlap")  # decided before any container ran
BUNDLES_PATH = "artifacts/tasks.tar.zst"


@dataclass(frozen=True)
class SplitOptions:
    val_fraction: float = 0.1
    seed: int = 0
    stratify: str = "app_type"


@dataclass
class Contents:
    repo_id: str
    splits: dict[str, list[dict[str, Any]]]  # train, validation[, band, control]: gym rows
    dropped: list[dict[str, Any]]
    kept: list[Bundle]
    provenance: dict[str, Any]
    license: str
    source_card: dict[str, Any] = field(default_factory=dict)
    summary_md: str | None = None  # `shinken report --md` of the same inputs, when available


def _dropped_row(entry: dict[str, Any], inputs: Inputs) -> dict[str, Any]:
    tid = entry["id"]
    line = inputs.receipt.lines[tid]
    bundle = inputs.bundles.get(tid)
    triaged = inputs.triage.tasks.get(tid) if inputs.triage else None
    stage = "triage" if entry["reason"] in TRIAGE_STAGE_REASONS else "probe"
    codes = [entry["reason"]]
    if stage == "triage" and triaged is not None:
        found = [r["code"] for r in triaged.get("reasons", []) if severity(r["code"]) != NOTE]
        codes = found or codes
    row = {
        "task_id": tid,
        "stage": stage,
        "reason": entry["reason"],
        "codes": codes,
        "detail": entry["detail"],
        "instruction": bundle.instruction if bundle else "",
        "app_type": bundle.app_type if bundle else str((triaged or {}).get("app_type") or ""),
        "difficulty": bundle.difficulty if bundle else (triaged or {}).get("difficulty"),
        "bundle_hash": line["bundle_hash"],
        "rewards": list(line.get("rewards") or []),
        "tier": line.get("tier"),
        "oracle": (line.get("oracle") or {}).get("outcome"),
        "vandal": (line.get("vandal") or {}).get("outcome"),
    }
    check_own("dropped_row", row, f"the dropped row of {tid}")
    return row


def _counts(inputs: Inputs, splits: dict[str, list[dict[str, Any]]], dropped: list[dict[str, Any]]) -> dict[str, Any]:
    r = inputs.receipt
    lines = r.lines.values()
    tiers = Counter(str(ln.get("tier")) if ln.get("tier") is not None else "none" for ln in lines)
    oracles = Counter((ln.get("oracle") or {}).get("outcome") or "not_run" for ln in lines)
    vandals = Counter((ln.get("vandal") or {}).get("outcome") or "not_run" for ln in lines)
    counts: dict[str, Any] = {
        "tasks": r.summary["total"],
        "not_in_receipt": sum(1 for tid in inputs.bundles if tid not in r.lines),
        "splits": {name: len(rows) for name, rows in splits.items()} | {"dropped": len(dropped)},
        "outcome": {"kept": len(r.kept), "dropped": len(r.dropped)},
        "reason": dict(sorted(Counter(d["reason"] for d in r.dropped).items())),
        "stage": dict(sorted(Counter(d["stage"] for d in dropped).items())),
        "tier": dict(sorted(tiers.items())),
        "oracle": dict(sorted(oracles.items())),
        "vandal": dict(sorted(vandals.items())),
        "verdict": None,
        "triage_reason": None,
    }
    if inputs.triage is not None:
        s = inputs.triage.doc["summary"]
        counts["verdict"] = dict(s["by_verdict"])
        counts["triage_reason"] = dict(sorted(s["by_reason"].items()))
    return counts


def _probe_settings(inputs: Inputs) -> dict[str, Any]:
    s = inputs.receipt.summary
    hashes = sorted({ln.get("config_hash", "") for ln in inputs.receipt.lines.values()} - {""})
    return {
        "config_hashes": hashes,
        "repeats": s.get("repeats"),
        "state_fidelity": s.get("state_fidelity"),
        "executor": s.get("executor"),
    }


def image_content_hash(image_id: str, image_ref: str) -> str | None:
    """The `shinken.content_hash` label of the task image when this machine's Docker has it,
    else the hash a `<repo>:<hash12>` reference names. The card must not depend on how fast
    Docker answered (an unchanged re-publish compares the card's bytes), so the wait is long."""
    from docker.errors import DockerException

    from shinken.images.build import LABEL_HASH
    from shinken.sandbox.api import InfraError
    from shinken.sandbox.docker_client import connect

    try:
        labels = connect(timeout=30).images.get(image_id).labels or {}
        found = labels.get(LABEL_HASH)
        if isinstance(found, str) and found:
            return found
    except (InfraError, DockerException):  # no Docker here, or the image is gone: the id alone still names it
        pass
    tag = image_ref.rpartition(":")[2]
    return tag if re.fullmatch(r"[0-9a-f]{12}", tag) and "/" not in tag else None


def _source(inputs: Inputs) -> dict[str, Any] | None:
    src = inputs.source
    if src is None:
        return None
    return {
        "repo_id": src.repo_id,
        "repo_type": src.repo_type,
        "revision": src.revision,
        "archives": [{"path": a.path, "sha256": a.sha256, "size": a.size} for a in src.archives],
        "license": src.license,
    }


def resolve_license(inputs: Inputs, override: str | None) -> tuple[str, str]:
    """(license, where it came from). The source's card decides unless --license is given;
    an unknown license is refused, never written as `unknown`."""
    if override:
        return override, "option"
    if inputs.source is not None and inputs.source.license:
        return inputs.source.license, "source"
    why = ("the task root has no source record (it was not made by `shinken download`)" if inputs.source is None
           else f"the card of {inputs.source.repo_id}@{inputs.source.revision[:12]} names no license")
    raise ShinkenError(f"{why}; pass --license ID with the license the tasks are under (e.g. apache-2.0)")


def hygiene(inputs: Inputs, kept: list[Bundle], split: Split) -> dict[str, Any]:
    """For the card: the benchmark-overlap check (per benchmark from the triage report when given,
    the tasks the probe dropped for it, and the published tasks that match a benchmark task,
    checked here against the shipped benchmarks and named whatever the report says) and the
    published tasks' family sizes, with the checks' settings."""
    from shinken.triage.hygiene import Hygiene, HygieneOptions, families_summary, overlap_summary

    check = Hygiene.load(HygieneOptions())
    settings = check.settings()
    published = [{"id": b.id, "family": fam} for ids in (split.train, split.validation)
                 for b, fam in _families_of(kept, ids, split)]
    matched, _ = check.apply([{"id": b.id, "reasons": [], "verdict": "runnable"} for b in kept],
                          [b.instruction for b in kept])
    flagged = {t["id"]: t["benchmark_matches"] for t in matched if t["benchmark_matches"]}
    triaged = inputs.triage.doc["summary"].get("benchmark_overlap") if inputs.triage else None
    for tid in inputs.receipt.kept:  # matches the triage report found with its own benchmarks (--benchmark DIR)
        entry = (inputs.triage.tasks.get(tid) if inputs.triage else None) or {}
        if entry.get("benchmark_matches") and tid not in flagged:
            flagged[tid] = entry["benchmark_matches"]
    overlap = triaged or overlap_summary([], settings)
    if triaged is None and flagged:  # without the report: kept matches mean they were kept on purpose
        overlap = {**overlap, "policy": "keep"}
    return {
        "benchmark_overlap": {**overlap, "dropped": sum(1 for d in inputs.receipt.dropped if d["reason"] == "benchmark_overlap"),
                              "published": [{"task_id": tid, "benchmark": ms[0]["benchmark"], "benchmark_task": ms[0]["task_id"],
                                             "score": ms[0]["score"]} for tid, ms in sorted(flagged.items())]},
        "families": families_summary(published, settings),
    }


def _families_of(kept: list[Bundle], ids: list[str], split: Split) -> list[tuple[Bundle, str]]:
    family = {m: f for f, members in split.families.items() for m in members}
    by_id = {b.id: b for b in kept}
    return [(by_id[i], family.get(i, i)) for i in ids]


def summary_markdown(inputs: Inputs) -> str:
    """`shinken report --md` of the same documents, its headings under the card's."""
    from shinken.report.markdown import render_markdown

    return render_markdown(triage=inputs.triage.doc if inputs.triage else None, receipt=inputs.receipt.doc,
                           profile=inputs.profile.doc if inputs.profile else None, level=2)


def build_contents(inputs: Inputs, *, repo_id: str, split: SplitOptions, license: str | None = None,
                   name: str = rows_mod.SERVER_NAME) -> Contents:
    """`name` is make-workspace's --name: the environment the rows' agent_ref points at."""
    from shinken.workspace.gym_config import Names

    kept = inputs.kept_bundles()
    names = Names(name)
    tiers = kept_tiers(inputs.receipt.doc)  # as make-workspace writes them
    alerts = kept_alerts(inputs.receipt.doc)
    checks = kept_checks(inputs.receipt.doc)
    rows = {b.id: rows_mod.make_row(b, agent_name=names.agent_instance, tier=tiers.get(b.id), alerts=alerts.get(b.id),
                                    checks=checks.get(b.id, (None, None))) for b in kept}
    s = split_bundles(kept, val_fraction=split.val_fraction, seed=split.seed, stratify=split.stratify,
                      families=root_families(list(inputs.bundles.values())))
    splits: dict[str, list[dict[str, Any]]] = {
        "train": [rows[i] for i in s.train],
        "validation": [rows[i] for i in s.validation],
    }
    prof = inputs.profile
    for name, ids in (("band", prof.band if prof else None), ("control", prof.control if prof else None)):
        if ids is None:
            continue
        unknown = [i for i in ids if i not in rows]
        if unknown:
            raise ShinkenError(f"the profile's {name} names {len(unknown)} task(s) the receipt did not keep "
                               f"(e.g. {unknown[0]}); profile the same tasks you publish")
        splits[name] = [rows[i] for i in sorted(ids)]
    dropped = [_dropped_row(d, inputs) for d in sorted(inputs.receipt.dropped, key=lambda d: d["id"])]
    lic, lic_from = resolve_license(inputs, license)
    image = inputs.receipt.image
    provenance: dict[str, Any] = {
        "schema": "shinken.provenance/1",
        "repo_id": repo_id,
        "shinken_version": shinken.__version__,
        "license": lic,
        "license_from": lic_from,
        "source": _source(inputs),
        "image": {"ref": image["ref"], "id": image["id"], "content_hash": image_content_hash(image["id"], image["ref"])},
        "probe": _probe_settings(inputs),
        "split": {"val_fraction": split.val_fraction, "seed": split.seed, "stratify": split.stratify,
                  "families": s.families},
        "hygiene": hygiene(inputs, kept, s),
        "environment": name,
        "counts": _counts(inputs, splits, dropped),
        "profile": prof.edges() if prof else None,
        "bundles": {"path": BUNDLES_PATH, "tasks": len(kept), "sha256": None, "size": None, "members": 0},
    }
    return Contents(repo_id=repo_id, splits=splits, dropped=dropped, kept=kept, provenance=provenance,
                    license=lic, source_card=dict(inputs.source.card) if inputs.source else {},
                    summary_md=summary_markdown(inputs))
