"""A release-sized probe receipt (and, without a corpus, a triage report) for the task browser's
tests and benchmark: what `shinken probe` would write over a triage report, with the media a
probe keeps. Deterministic in `seed`; the mix (share kept, drop reasons, tiers, which tasks ran
an oracle) is an estimate written down here, not a measurement.

    triage = synthetic_triage(root, n=10_910)          # task folders with a task.json each, and their report
    receipt = synthetic_receipt(triage, run_dir, images) # images: name -> bytes of a real WebP/SVG
"""

from __future__ import annotations

import hashlib
import json
import random
from pathlib import Path
from typing import Any

try:  # run as a script (benchmarks/ on sys.path) or imported as benchmarks.synthetic_reports
    from benchmarks.release_mix import APPS
except ImportError:  # pragma: no cover
    from release_mix import APPS

KEEP_SHARE = 0.7  # of the probed (runnable) tasks
DROP_REASONS = ("zero_signal", "setup_error", "reward_error", "nondeterministic", "fidelity", "oracle_fails",
                "reward_passes_vandalism")
TIERS = ("snapshot", "relaunch", "reprovision")
ORACLE_SHARE = 0.1  # of the kept tasks: a solution ran and was recorded
FAMILIES = 400  # template families the tasks fall into
OVERLAP_SHARE = 0.02  # tasks that match a benchmark task
WORDS = ("open the spreadsheet and fill column total with quantity times price then save the file rename every "
         "report in the documents folder so that its name starts with the date").split()
ZERO = "sha256:" + "0" * 64


def _instruction(rng: random.Random) -> str:
    return " ".join(rng.choice(WORDS) for _ in range(rng.randint(12, 40))).capitalize() + "."


def synthetic_triage(root: Path, n: int, seed: int = 0) -> dict[str, Any]:
    """`n` task folders under `root` (a task.json each: id, instruction, app_type) and a triage
    report over them shaped like `shinken triage --report` (verdicts, classes and reasons in the
    release's rough proportions; a `family` and, for a few, `benchmark_matches`)."""
    rng = random.Random(seed)
    apps = [a for a in APPS]
    weights = [a.weight for a in apps]
    tasks = []
    for i in range(n):
        tid = f"{rng.getrandbits(128):032x}"
        tid = f"{tid[:8]}-{tid[8:12]}-{tid[12:16]}-{tid[16:20]}-{tid[20:]}"
        app = rng.choices(apps, weights)[0]
        folder = root / tid
        folder.mkdir(parents=True, exist_ok=True)
        (folder / "task.json").write_text(json.dumps({"id": tid, "instruction": _instruction(rng), "app_type": app.name}))
        cls = "mock_web" if app.mock else ("file_cli" if app.launch is None else "desktop_app")
        blocked = cls == "mock_web" or rng.random() < 0.35
        reasons = [{"code": "needs_mock_web" if cls == "mock_web" else "missing_app", "detail": f"{app.name} (synthetic)",
                    "severity": "blocker", "subject": app.name}] if blocked else []
        task: dict[str, Any] = {"id": tid, "path": str(folder), "class": cls, "verdict": "blocked" if blocked else "runnable",
                                "reasons": reasons, "app_type": app.name, "difficulty": rng.choice(["easy", "medium", "hard"]),
                                "bundle_hash": hashlib.sha256(tid.encode()).hexdigest(),
                                "family": f"{app.name}-f{rng.randrange(FAMILIES // len(apps) + 1):03d}"}
        task["benchmark_matches"] = []  # what `shinken triage` writes for every task (schemas/triage)
        if rng.random() < OVERLAP_SHARE:
            changed = [{"slot": "num", "benchmark": "2", "task": "3"}] if rng.random() < 0.5 else []
            task["benchmark_matches"] = [{"benchmark": rng.choice(["OSWorld", "WindowsAgentArena"]),
                                          "task_id": f"{rng.getrandbits(32):08x}", "score": round(rng.uniform(0.8, 1), 3),
                                          "slots_differ": changed}]
        tasks.append(task)
    by_verdict = {v: sum(t["verdict"] == v for t in tasks) for v in ("runnable", "blocked", "defective")}
    by_class = {c: {"total": sum(t["class"] == c for t in tasks),
                    **{v: sum(t["class"] == c and t["verdict"] == v for t in tasks) for v in by_verdict}}
                for c in ("file_cli", "desktop_app", "mock_web")}
    by_reason: dict[str, int] = {}
    for t in tasks:
        for r in t["reasons"]:
            by_reason[r["code"]] = by_reason.get(r["code"], 0) + 1
    return {"schema": "shinken.triage/1", "image": {"ref": "shinken/sandbox-cua:latest", "id": ZERO},
            "task_root": str(root), "tasks": tasks,
            "summary": {"total": n, "by_verdict": by_verdict, "by_class": by_class, "by_reason": by_reason,
                        "top_missing": [], "by_difficulty": {}, "by_app_type": {}, "examples": {}}}


def _stored(run_dir: Path, data: bytes, ext: str) -> str:
    digest = hashlib.sha256(data).hexdigest()
    path = run_dir / "media" / f"{digest}{ext}"
    if not path.exists():
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_bytes(data)
    return digest


def _image(run_dir: Path, data: bytes, mime: str, ext: str, width: int, height: int, **extra: Any) -> dict[str, Any]:
    digest = _stored(run_dir, data, ext)
    return {"path": f"media/{digest}{ext}", "mime": mime, "width": width, "height": height, "bytes": len(data),
            "sha256": digest, **extra}


def synthetic_receipt(triage: dict[str, Any], run_dir: Path, start: bytes, recording: bytes, seed: int = 0) -> dict[str, Any]:
    """A receipt over the triage report's runnable tasks: KEEP_SHARE kept (a tier each), the rest
    dropped for one of DROP_REASONS; every probed desktop task with the start screenshot `start`
    (a WebP), ORACLE_SHARE of the kept ones with an oracle run and the recording `recording`."""
    rng = random.Random(seed)
    lines = []
    for t in triage["tasks"]:
        if t["verdict"] != "runnable":
            continue
        desktop = t["class"] == "desktop_app"
        kept = rng.random() < KEEP_SHARE
        reason = None if kept else rng.choice(DROP_REASONS)
        media: dict[str, Any] = {"desktop": desktop, "start": None, "recordings": [], "errors": []}
        if desktop:
            media["start"] = _image(run_dir, start, "image/webp", ".webp", 640, 360, waited_s=1.2)
        oracle = None
        if kept and rng.random() < ORACLE_SHARE:
            oracle = {"source": "oracle_dir", "path": f"/solutions/{t['id']}.py", "sha256": "0" * 64,
                      "outcome": "oracle_passes", "reward": 1.0, "reward_error": None, "exit_code": 0,
                      "script_tail": "saved /home/user/result.xlsx", "reward_tail": "all cells match\nREWARD: 1.0", "s": 9.5}
            media["recordings"].append(_image(run_dir, recording, "image/webp", ".webp", 640, 360, of="oracle",
                                              kind="screen", seconds=6.2, frames=14))
        lines.append({
            "schema": "shinken.probe.line/1", "task_id": t["id"], "bundle_hash": t["bundle_hash"], "image_id": ZERO,
            "image_ref": "shinken/sandbox-cua:latest", "config_hash": "synthetic", "outcome": "kept" if kept else "dropped",
            "reason": reason, "detail": "synthetic" if kept else f"synthetic {reason}", "rewards": [0.0, 0.0],
            "reward_deviation": None, "replay": [],
            "timings": {"golden_build_s": 12.0, "golden_reused": False, "fork_s": [2.0, 2.1], "reward_s": [0.5, 0.6],
                        "total_s": 20.0},
            "attempts": 1, "infra_errors": [], "lost_processes": [],
            "tier": rng.choice(TIERS) if kept or reason != "fidelity" else None,
            "start_state": {"signature": None, "windows": [], "checked": 2, "passed_over": []},
            "oracle": oracle, "vandal": None, "reward_tail": "expected output missing\nREWARD: 0.0", "media": media,
            "golden": None, "node": "synthetic", "finished_at": "2026-01-01T00:00:00Z"})
    kept = [ln["task_id"] for ln in lines if ln["outcome"] == "kept"]
    dropped = [{"id": ln["task_id"], "reason": ln["reason"], "detail": ln["detail"]} for ln in lines if ln["reason"]]
    by_reason: dict[str, int] = {}
    for d in dropped:
        by_reason[d["reason"]] = by_reason.get(d["reason"], 0) + 1
    return {"schema": "shinken.probe/1", "image": {"ref": "shinken/sandbox-cua:latest", "id": ZERO},
            "task_root": triage["task_root"], "run_dir": str(run_dir), "kept": kept, "dropped": dropped, "tasks": lines,
            "summary": {"total": len(lines), "kept": len(kept), "dropped": len(dropped), "by_reason": by_reason}}
