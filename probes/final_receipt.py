"""The final probe receipt (`--receipt PATH`): kept ids, dropped ids with reasons, every
task's receipt line and a summary, built from the receipt log so a resumed run ends with
the same document as an uninterrupted one."""

from __future__ import annotations

from collections import Counter
from typing import Any

from shinken.probes.oracle import OUTCOMES as ORACLE_OUTCOMES
from shinken.probes.runner import REASONS
from shinken.probes.vandal import OUTCOMES as VANDAL_OUTCOMES
from shinken.runtime import utc_now
from shinken.schemas import check_own
from shinken.tiers import TIER_VALUES

SCHEMA = "shinken.probe/1"


def build_receipt(*, image_ref: str, image_id: str, task_ids: list[str], lines: dict[str, dict[str, Any]],
                  run_info: dict[str, Any]) -> dict[str, Any]:
    """`lines` maps task id -> its final receipt line; `task_ids` fixes the order."""
    tasks = [lines[t] for t in task_ids if t in lines]
    kept = [ln["task_id"] for ln in tasks if ln["outcome"] == "kept"]
    dropped = [{"id": ln["task_id"], "reason": ln["reason"], "detail": ln["detail"]}
               for ln in tasks if ln["outcome"] == "dropped"]
    by_reason = Counter(d["reason"] for d in dropped)
    by_tier = Counter(ln.get("tier") for ln in tasks if ln["outcome"] == "kept")
    by_oracle = Counter((ln.get("oracle") or {}).get("outcome") for ln in tasks)
    by_vandal = Counter((ln.get("vandal") or {}).get("outcome") for ln in tasks)
    summary: dict[str, Any] = {
        "total": len(tasks),
        "kept": len(kept),
        "dropped": len(dropped),
        "by_reason": {r: by_reason[r] for r in REASONS if by_reason[r]},
        "by_tier": {t: by_tier[t] for t in TIER_VALUES if by_tier[t]},
        "with_alerts": sum(1 for ln in tasks if ln["outcome"] == "kept" and alerts_of(ln)),
        "unsettled": sum(1 for ln in tasks if (ln.get("start_state") or {}).get("settled") is False),
        "by_oracle": {o: by_oracle[o] for o in ORACLE_OUTCOMES if by_oracle[o]},
        "by_vandal": {o: by_vandal[o] for o in VANDAL_OUTCOMES if by_vandal[o]},
        "golden_build_s": round(sum(ln["timings"]["golden_build_s"] for ln in tasks), 3),
        "fork_s": round(sum(sum(ln["timings"]["fork_s"]) for ln in tasks), 3),
        "reward_s": round(sum(sum(ln["timings"]["reward_s"]) for ln in tasks), 3),
        # attempts lost to engine failures (retried, or final for infra_error tasks)
        "infra_retries": sum(len(ln.get("infra_errors") or []) for ln in tasks),
        "finished_at": utc_now(),
    }
    run_info = dict(run_info)
    task_root = str(run_info.pop("task_root", ""))
    run_dir = str(run_info.pop("run_dir", ""))
    summary.update(run_info)
    doc = {
        "schema": SCHEMA,
        "image": {"ref": image_ref, "id": image_id},
        "task_root": task_root,
        "run_dir": run_dir,
        "kept": kept,
        "dropped": dropped,
        "tasks": tasks,
        "summary": summary,
    }
    check_own("probe_receipt", doc, "the probe receipt")  # never hand out a receipt readers would reject
    return doc


def decision_view(doc: dict[str, Any]) -> dict[str, Any]:
    """What must not depend on how a run was executed (resumed, local or Ray): kept,
    dropped with reasons, and the rewards seen."""
    return {
        "kept": doc["kept"],
        "dropped": [(d["id"], d["reason"]) for d in doc["dropped"]],
        "rewards": {t["task_id"]: t["rewards"] for t in doc["tasks"]},
    }


def alerts_of(line: dict[str, Any]) -> list[dict[str, str]]:
    """The alerts a receipt line's start state shows (none for lines of older receipts)."""
    return list((line.get("start_state") or {}).get("alerts") or [])


def kept_alerts(receipt: dict[str, Any] | None) -> dict[str, list[str]]:
    """Kept task id -> its start state's alerts as `app: title`, for the dataset rows
    (`shinken_alerts`); empty when the probe ran with --alerts keep (kept silently)."""
    if receipt is None or (receipt.get("summary") or {}).get("alerts") == "keep":
        return {}
    return {t["task_id"]: [f"{a['app']}: {a['title']}" for a in alerts_of(t)]
            for t in receipt.get("tasks", []) if t.get("outcome") == "kept" and alerts_of(t)}


def kept_checks(receipt: dict[str, Any] | None) -> dict[str, tuple[str | None, str | None]]:
    """Kept task id -> (oracle outcome, vandal outcome) its receipt line records (None: not run).
    make-workspace and publish write these into the dataset rows (`shinken_oracle`, `shinken_vandal`)."""
    if receipt is None:
        return {}
    return {t["task_id"]: ((t.get("oracle") or {}).get("outcome"), (t.get("vandal") or {}).get("outcome"))
            for t in receipt.get("tasks", []) if t.get("outcome") == "kept"}


def kept_tiers(receipt: dict[str, Any] | None) -> dict[str, str | None]:
    """Kept task id -> the start-state tier its receipt line records (none for a plain id list).
    make-workspace and publish write these into the dataset rows (`shinken_tier`)."""
    if receipt is None:
        return {}
    return {t["task_id"]: t.get("tier") for t in receipt.get("tasks", []) if t.get("outcome") == "kept"}
