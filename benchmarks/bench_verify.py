"""Verify latency of the demo set, this tree against a baseline tree, side by side in one run
(docs/integrity.md, "Cost"): per task, a fresh fork of its golden, the untouched start verified
(`run_reward`: postconfig + the reward), timed; rounds alternate the two trees' order.

    git worktree add /tmp/shinken-base f382b83          # the tree to compare with (before the verifier)
    .venv/bin/python benchmarks/bench_verify.py --baseline /tmp/shinken-base [--rounds 6] [--cua]

Each tree runs in its own worker process (its `shinken` package first on sys.path) with its own
images (built for its sources, cached by content hash) and goldens. Prints p50/p95 per tree, per
task and over all, and the ratio this/baseline.
"""

from __future__ import annotations

import argparse
import json
import os
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

REPO = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(REPO))
from benchmarks.timing import pct  # noqa: E402

LINUX_TASKS = ("hello-file", "zero-signal", "delete-the-file", "oracle-solves", "vandal-except-pass", "zenity-entry")
CUA_TASKS = ("ced142d7-fb36-55fc-b1c5-2a60c026e7d0", "eba2fc99-802c-5a45-8a46-531d6cc0f05d",
             "20ef0077-ea53-57ed-a5e1-41a934326e1e", "9069338c-532a-5906-bae1-946ff21a370b")

WORKER = r"""
import json, sys, time
from pathlib import Path
from shinken.bundles.loader import load_bundle
from shinken.images.build import build_image
from shinken.sandbox.docker_provider import DockerProvider
image, forks, tasks = sys.argv[1], int(sys.argv[2]), sys.argv[3:]
tag = build_image(image).tag
out = {}
with DockerProvider(run_id="bench-verify") as p:
    base = p.resolve_image(tag)
    for folder in tasks:
        b = load_bundle(Path(folder))
        g = p.ensure_golden(b, base)
        times = []
        for _ in range(forks):
            with p.fork(g) as f:
                t0 = time.perf_counter()
                r = f.run_reward(b, timeout=120)
                times.append(time.perf_counter() - t0)
                assert r.error is None or r.error == "crash", (folder, r)
        out[b.id] = times
print("RESULT " + json.dumps(out))
"""


def worker(tree: Path, image: str, forks: int, tasks: list[Path]) -> dict[str, list[float]]:
    with tempfile.TemporaryDirectory(prefix="bench-verify-") as tmp:
        (Path(tmp) / "shinken").symlink_to(tree)
        env = {**os.environ, "PYTHONPATH": tmp}
        res = subprocess.run([sys.executable, "-c", WORKER, image, str(forks), *map(str, tasks)], env=env,
                             capture_output=True, text=True, timeout=3600)
    line = next((ln for ln in res.stdout.splitlines() if ln.startswith("RESULT ")), None)
    if res.returncode != 0 or line is None:
        raise SystemExit(f"worker for {tree} failed ({res.returncode}): {res.stderr[-2000:]}")
    return json.loads(line[len("RESULT "):])


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--baseline", type=Path, required=True, help="a checkout of the tree to compare with")
    ap.add_argument("--rounds", type=int, default=6)
    ap.add_argument("--forks", type=int, default=2, help="verifies per task per round and tree")
    ap.add_argument("--cua", action="store_true", help="also the desktop demo tasks on sandbox-cua")
    args = ap.parse_args()
    runs = [("linux", [REPO / "demo" / t for t in LINUX_TASKS])]
    if args.cua:
        runs.append(("cua", [REPO / "demo" / t for t in CUA_TASKS]))
    trees = {"this": REPO, "baseline": args.baseline.resolve()}
    times: dict[str, dict[str, list[float]]] = {k: {} for k in trees}
    load = [os.getloadavg()[0]]
    for rnd in range(args.rounds):
        order = list(trees) if rnd % 2 == 0 else list(reversed(list(trees)))
        for name in order:
            for image, tasks in runs:
                for task, ts in worker(trees[name], image, args.forks, tasks).items():
                    times[name].setdefault(task, []).extend(ts)
        load.append(os.getloadavg()[0])
        print(f"round {rnd + 1}/{args.rounds} done, load {load[-1]:.1f}", file=sys.stderr, flush=True)
    print(f"verify latency, {args.rounds} rounds x {args.forks} forks per task and tree, load "
          f"{min(load):.1f}-{max(load):.1f} ({time.strftime('%Y-%m-%d %H:%M')})")
    print(f"{'task':40s} {'this p50':>9s} {'base p50':>9s} {'ratio':>6s}")
    for task in times["this"]:
        a, b = statistics.median(times["this"][task]), statistics.median(times["baseline"][task])
        print(f"{task:40s} {a:9.3f} {b:9.3f} {a / b:6.2f}")
    allt = [x for ts in times["this"].values() for x in ts]
    allb = [x for ts in times["baseline"].values() for x in ts]
    for label, q in (("p50", 0.5), ("p95", 0.95)):
        a, b = pct(allt, q), pct(allb, q)
        print(f"{'all ' + label:40s} {a:9.3f} {b:9.3f} {a / b:6.2f}")


if __name__ == "__main__":
    main()
