"""Benchmark `shinken triage` on a release-sized synthetic corpus (10,910 bundles).

Measures, in one run:
  * the scale reference: a plain single-process loop that json-loads task.json and
    ast-parses reward.py and initial_setup.py (cold and warm page cache);
  * `shinken triage ROOT --manifest M --report OUT` end to end (process start included):
    cold (page cache dropped, empty triage cache), re-run with nothing changed, and a
    re-run after one bundle changed;
and prints the figures and ratios. Targets: cold < 5 s, unchanged re-run < 1 s.

    .venv/bin/python benchmarks/bench_triage.py [--n 10910] [--dest DIR] [--manifest FILE]

Dropping the page cache needs root (`sync; echo 3 > /proc/sys/vm/drop_caches`); without
it the "cold" figures are warm and say so.
"""

from __future__ import annotations

import argparse
import ast
import os
import resource
import subprocess
import sys
import tempfile
import time
from collections import Counter
from pathlib import Path

import orjson

REPO = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(REPO))
from benchmarks.synthetic_release import make_corpus  # noqa: E402

SHINKEN = Path(sys.executable).with_name("shinken")
DEFAULT_MANIFEST = REPO / "tests" / "data" / "triage_manifest.json"


def drop_caches() -> bool:
    if os.geteuid() != 0:
        return False
    subprocess.run(["sync"], check=True)
    try:
        Path("/proc/sys/vm/drop_caches").write_text("3\n")
    except OSError:
        return False
    return True


def plain_loop(root: Path) -> float:
    """The reference: json + ast over every bundle, one process, no triage logic."""
    t = time.perf_counter()
    for e in os.scandir(root):
        if not e.is_dir():
            continue
        orjson.loads(Path(e.path, "task.json").read_bytes())
        for name in ("reward.py", "initial_setup.py"):
            p = Path(e.path, name)
            if p.exists():
                try:
                    ast.parse(p.read_bytes())
                except SyntaxError:
                    pass
    return time.perf_counter() - t


def _child_cpu() -> float:
    r = resource.getrusage(resource.RUSAGE_CHILDREN)
    return r.ru_utime + r.ru_stime


def cli(root: Path, manifest: Path, out: Path, cache: Path) -> tuple[float, float, dict]:
    """(wall seconds, CPU seconds of the whole process tree, report)."""
    env = {**os.environ, "SHINKEN_CACHE_DIR": str(cache)}
    cpu = _child_cpu()
    t = time.perf_counter()
    p = subprocess.run([str(SHINKEN), "triage", str(root), "--manifest", str(manifest), "--report", str(out)],
                       env=env, stdout=subprocess.DEVNULL, stderr=subprocess.PIPE, text=True)
    dt = time.perf_counter() - t
    if p.returncode != 0:
        raise SystemExit(f"shinken triage failed ({p.returncode}): {p.stderr}")
    return dt, _child_cpu() - cpu, orjson.loads(out.read_bytes())


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--n", type=int, default=10_910)
    ap.add_argument("--seed", type=int, default=0)
    ap.add_argument("--dest", type=Path, help="corpus folder (kept; generated when empty)")
    ap.add_argument("--manifest", type=Path, default=DEFAULT_MANIFEST)
    ap.add_argument("--repeat", type=int, default=1, help="cold/re-run pairs; the best of each is reported")
    a = ap.parse_args()

    with tempfile.TemporaryDirectory(prefix="bench-triage-") as tmp:
        tmp = Path(tmp)
        root = a.dest or tmp / "tasks"
        if not root.is_dir() or not any(root.iterdir()):
            t = time.perf_counter()
            make_corpus(root, a.n, a.seed)
            print(f"generated {a.n} bundles in {time.perf_counter() - t:.1f} s under {root}")
        n = sum(1 for e in os.scandir(root) if e.is_dir())
        print(f"corpus: {n} bundles; cores: {os.cpu_count()}; load average before: {os.getloadavg()[0]:.2f}")

        cold_ok = drop_caches()
        ref_cold = plain_loop(root)
        ref_warm = plain_loop(root)
        print(f"reference plain loop (json + ast, 1 process): cold {ref_cold:.2f} s, warm {ref_warm:.2f} s")

        colds, reruns, touched = [], [], []
        for i in range(a.repeat):
            cache = tmp / f"cache{i}"
            out = tmp / "report.json"
            drop_caches()
            c, c_cpu, cold_report = cli(root, a.manifest, out, cache)
            r, r_cpu, rerun_report = cli(root, a.manifest, out, cache)
            assert rerun_report["summary"]["run"]["analysed"] == 0, rerun_report["summary"]["run"]
            assert [t["verdict"] for t in rerun_report["tasks"]] == [t["verdict"] for t in cold_report["tasks"]]
            victim = next(e.path for e in os.scandir(root) if e.is_dir())
            rp = Path(victim, "reward.py")
            original = rp.read_bytes()
            rp.write_bytes(original + b"\n# touched by bench_triage\n")
            try:
                u, _, touched_report = cli(root, a.manifest, out, cache)
            finally:
                rp.write_bytes(original)
            assert touched_report["summary"]["run"]["analysed"] == 1, touched_report["summary"]["run"]
            colds.append((c, c_cpu, cold_report))
            reruns.append((r, r_cpu))
            touched.append(u)
        cold, cold_cpu, report = min(colds, key=lambda x: x[0])
        (rerun, rerun_cpu), one = min(reruns), min(touched)
        run = report["summary"]["run"]
        print(f"triage cold{'' if cold_ok else ' (page cache NOT dropped: not root)'}: {cold:.2f} s wall, "
              f"{cold_cpu:.2f} s CPU (in-process {run['seconds']:.2f} s, {run['workers']} workers)")
        print(f"triage re-run, nothing changed: {rerun:.2f} s wall, {rerun_cpu:.2f} s CPU")
        print(f"triage re-run, one bundle changed: {one:.2f} s")
        if a.repeat > 1:
            print(f"all cold runs: {', '.join(f'{c[0]:.2f}' for c in colds)} s; all re-runs: "
                  f"{', '.join(f'{r[0]:.2f}' for r in reruns)} s (best reported above)")
        print(f"ratio cold / re-run: {cold / rerun:.1f}x; plain-loop cold / triage cold: {ref_cold / cold:.2f}x")
        print(f"verdicts: {dict(Counter(t['verdict'] for t in report['tasks']))}")
        print(f"load average after: {os.getloadavg()[0]:.2f}")
        print(f"targets: cold < 5 s {'MET' if cold < 5 else 'MISSED'}; re-run < 1 s {'MET' if rerun < 1 else 'MISSED'}")


if __name__ == "__main__":
    main()
