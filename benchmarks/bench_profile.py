"""Benchmark `shinken profile` and `shinken report` at release scale.

Builds a release-sized synthetic corpus (10,910 bundles) and rollout files for it made from a
real NeMo Gym rollout line (tests/data/gym_rollouts: each copy gets its own task, bundle hash,
response id and a seeded reward; one in 40 masked), then measures in one run:
  * the scale reference: a plain loop that orjson-parses every line of the rollouts file;
  * `shinken profile FILE --task-root ROOT --out DIR` end to end (process start and the
    corpus load included), its peak RSS;
  * a second profile run that adds a second file of the same size (accumulation);
  * `shinken report --profile DIR --html --md` and the page's size.

    .venv/bin/python benchmarks/bench_profile.py [--n 10910] [--repeats 4] [--dest DIR]
"""

from __future__ import annotations

import argparse
import os
import random
import resource
import subprocess
import sys
import tempfile
import time
from pathlib import Path

import orjson

REPO = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(REPO))
from benchmarks.synthetic_release import make_corpus  # noqa: E402

SHINKEN = Path(sys.executable).with_name("shinken")
TEMPLATE = REPO / "tests" / "data" / "gym_rollouts" / "run1" / "rollouts.jsonl"


def write_rollouts(path: Path, tasks: list[tuple[str, str]], repeats: int, seed: int) -> int:
    """One line per (task, repeat) from the real template line; returns the bytes written."""
    template = orjson.loads(TEMPLATE.read_bytes().splitlines()[0])
    rng = random.Random(seed)
    with path.open("wb") as fh:
        for ti, (tid, bhash) in enumerate(tasks):
            p = rng.random()
            for ri in range(repeats):
                masked = rng.random() < 1 / 40
                doc = {**template, "task_id": tid, "bundle_hash": bhash, "_ng_task_index": ti, "_ng_rollout_index": ri,
                       "reward": 0.0 if masked else float(rng.random() < p), "mask_sample": masked,
                       "failure_kind": "session_lost" if masked else None,
                       "response": {**template["response"], "id": f"resp_{seed}_{ti}_{ri}"}}
                fh.write(orjson.dumps(doc) + b"\n")
    return path.stat().st_size


def timed(cmd: list[str]) -> tuple[float, float]:
    """(wall seconds, peak RSS MB of the child) of one command, which must succeed."""
    before = resource.getrusage(resource.RUSAGE_CHILDREN).ru_maxrss
    t0 = time.perf_counter()
    r = subprocess.run(cmd, capture_output=True, text=True)
    wall = time.perf_counter() - t0
    if r.returncode != 0:
        sys.exit(f"{' '.join(cmd[:3])} failed: {r.stderr[-2000:]}")
    peak = resource.getrusage(resource.RUSAGE_CHILDREN).ru_maxrss
    return wall, max(peak, before) / 1024


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--n", type=int, default=10910)
    ap.add_argument("--repeats", type=int, default=4)
    ap.add_argument("--dest", type=Path)
    ns = ap.parse_args()
    from shinken.bundles.loader import load_root

    base = ns.dest or Path(tempfile.mkdtemp(prefix="shinken-bench-profile-"))
    root = base / "tasks"
    if not root.is_dir():
        make_corpus(root, ns.n)
    tasks = [(b.id, b.bundle_hash) for b in load_root(root)]
    run1, run2 = base / "run1.jsonl", base / "run2.jsonl"
    size = write_rollouts(run1, tasks, ns.repeats, 1)
    write_rollouts(run2, tasks, ns.repeats, 2)
    lines = len(tasks) * ns.repeats
    print(f"load average {os.getloadavg()[0]:.1f}; {len(tasks)} tasks, {lines} rollouts per file, "
          f"{size / 1e6:.0f} MB per file")

    t0 = time.perf_counter()
    with run1.open("rb") as fh:
        for raw in fh:
            orjson.loads(raw)
    parse = time.perf_counter() - t0
    out = base / "profile"
    prof, rss = timed([str(SHINKEN), "profile", str(run1), "--task-root", str(root), "--out", str(out), "--reset"])
    acc, rss2 = timed([str(SHINKEN), "profile", str(run2), "--task-root", str(root), "--out", str(out)])
    html = base / "report.html"
    rep, _ = timed([str(SHINKEN), "report", "--profile", str(out), "--html", str(html), "--md", str(base / "report.md")])
    print(f"orjson loop over one file: {parse:.2f} s ({lines / parse:,.0f} lines/s)")
    print(f"shinken profile, one file: {prof:.2f} s ({prof / parse:.2f}x the plain parse; "
          f"{lines / prof:,.0f} rollouts/s); peak RSS {rss:.0f} MB")
    print(f"shinken profile, adding a second file: {acc:.2f} s; peak RSS {rss2:.0f} MB")
    print(f"shinken report of {len(tasks)} profiled tasks: {rep:.2f} s; page {html.stat().st_size / 1e3:.0f} kB")


if __name__ == "__main__":
    main()
