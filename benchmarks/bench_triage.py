"""Benchmark `shinken triage` on a release-sized synthetic corpus (10,910 bundles).

Measures, in one run:
  * the scale reference: a plain single-process loop that json-loads task.json and
    ast-parses reward.py and initial_setup.py (cold and warm page cache);
  * `shinken triage ROOT --manifest M --report OUT` end to end (process start included):
    cold (page cache dropped, empty triage cache), re-run with nothing changed, and a
    re-run after one bundle changed;
  * with `--against REV` (repeatable), the same runs of that git revision's code, taken
    in turns with this tree's in every repeat (same load), as CPU and wall ratios, and
    whether its reports give every task the same verdict and reasons;
and prints the figures and ratios, and the time of the whole-root hygiene pass (benchmark
overlap and task families). Targets: cold < 5 s, unchanged re-run < 1 s; with the
hygiene checks, cold within 2x of the code before them:

    .venv/bin/python benchmarks/bench_triage.py [--n 10910] [--dest DIR] [--manifest FILE]
        [--repeat N] [--against 19c05e5 --against main] [--keep-page-cache] [--target-ratio 2]

Dropping the page cache needs root (`sync; echo 3 > /proc/sys/vm/drop_caches`); without
it (or with --keep-page-cache, kinder on a shared machine) the "cold" figures are warm
page cache, empty triage cache, and say so.
"""

from __future__ import annotations

import argparse
import ast
import os
import resource
import signal
import subprocess
import sys
import tempfile
import time
from collections import Counter
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import orjson

REPO = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(REPO))
from benchmarks.synthetic_release import make_corpus  # noqa: E402

DEFAULT_MANIFEST = REPO / "tests" / "data" / "triage_manifest.json"
# Every variant runs the same way: this interpreter, `shinken` importable from PYTHONPATH.
_CLI = "import sys; from shinken.cli.main import main; sys.argv[0] = 'shinken'; main()"


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


@dataclass
class Variant:
    name: str  # "this tree" or the revision as given
    path: Path  # a folder holding `shinken` (a link to the source tree)
    cold: list[tuple[float, float]] = field(default_factory=list)  # (wall s, CPU s)
    rerun: list[tuple[float, float]] = field(default_factory=list)
    touched: list[float] = field(default_factory=list)
    report: dict[str, Any] | None = None


def checkout(rev: str, dest: Path) -> Variant:
    """`rev`'s tree, exported with git archive (no worktree left behind)."""
    src = dest / "src"
    src.mkdir(parents=True)
    archive = subprocess.run(["git", "-C", str(REPO), "archive", rev], check=True, capture_output=True).stdout
    subprocess.run(["tar", "-x", "-C", str(src)], input=archive, check=True)
    return _linked(rev, src, dest)


def _linked(name: str, src: Path, dest: Path) -> Variant:
    dest.mkdir(parents=True, exist_ok=True)
    (dest / "shinken").symlink_to(src)
    return Variant(name, dest)


def cli(v: Variant, root: Path, manifest: Path, out: Path, cache: Path) -> tuple[float, float, dict[str, Any]]:
    """(wall seconds, CPU seconds of the whole process tree, report)."""
    env = {**os.environ, "SHINKEN_CACHE_DIR": str(cache), "PYTHONPATH": str(v.path)}
    cpu = _child_cpu()
    t = time.perf_counter()
    p = subprocess.run([sys.executable, "-c", _CLI, "triage", str(root), "--manifest", str(manifest),
                        "--report", str(out)], env=env, cwd=cache.parent,
                       stdout=subprocess.DEVNULL, stderr=subprocess.PIPE, text=True)
    dt = time.perf_counter() - t
    if p.returncode != 0:
        raise SystemExit(f"{v.name}: shinken triage failed ({p.returncode}): {p.stderr}")
    return dt, _child_cpu() - cpu, orjson.loads(out.read_bytes())


def verdicts(report: dict[str, Any]) -> dict[str, tuple[str, list[tuple[str, str]]]]:
    return {t["id"] + "\0" + os.path.basename(t["path"]): (t["verdict"], sorted((r["code"], r["detail"]) for r in t["reasons"]))
            for t in report["tasks"]}


def measure(v: Variant, i: int, root: Path, manifest: Path, tmp: Path, keep_page_cache: bool) -> None:
    cache = tmp / f"cache-{id(v)}-{i}"
    out = tmp / "report.json"
    if not keep_page_cache:
        drop_caches()
    c, c_cpu, cold_report = cli(v, root, manifest, out, cache)
    r, r_cpu, rerun_report = cli(v, root, manifest, out, cache)
    assert rerun_report["summary"]["run"]["analysed"] == 0, rerun_report["summary"]["run"]
    assert verdicts(rerun_report) == verdicts(cold_report), f"{v.name}: re-run disagrees with cold run"
    victim = next(e.path for e in os.scandir(root) if e.is_dir())
    rp = Path(victim, "reward.py")
    original = rp.read_bytes()
    rp.write_bytes(original + b"\n# touched by bench_triage\n")
    try:
        u, _, touched_report = cli(v, root, manifest, out, cache)
    finally:
        rp.write_bytes(original)
    assert touched_report["summary"]["run"]["analysed"] == 1, touched_report["summary"]["run"]
    v.cold.append((c, c_cpu))
    v.rerun.append((r, r_cpu))
    v.touched.append(u)
    v.report = cold_report


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--n", type=int, default=10_910)
    ap.add_argument("--seed", type=int, default=0)
    ap.add_argument("--dest", type=Path, help="corpus folder (kept; generated when empty)")
    ap.add_argument("--manifest", type=Path, default=DEFAULT_MANIFEST)
    ap.add_argument("--repeat", type=int, default=1, help="cold/re-run rounds; the best of each is reported")
    ap.add_argument("--against", action="append", default=[], metavar="REV",
                    help="also run this git revision's triage in turns with this tree's, and print the ratios")
    ap.add_argument("--target-ratio", type=float, default=0.0, metavar="X",
                    help="also say whether this tree's cold wall time is within X times each --against revision's")
    ap.add_argument("--keep-page-cache", action="store_true",
                    help="do not drop the page cache before cold runs (cold = empty triage cache only)")
    a = ap.parse_args()
    # A terminated run still puts back the bundle it touched (finally blocks run on exit).
    signal.signal(signal.SIGTERM, lambda *_: sys.exit(143))

    with tempfile.TemporaryDirectory(prefix="bench-triage-") as tmp_name:
        tmp = Path(tmp_name)
        root = a.dest or tmp / "tasks"
        if not root.is_dir() or not any(root.iterdir()):
            t = time.perf_counter()
            make_corpus(root, a.n, a.seed)
            print(f"generated {a.n} bundles in {time.perf_counter() - t:.1f} s under {root}")
        n = sum(1 for e in os.scandir(root) if e.is_dir())
        variants = [_linked("this tree", REPO, tmp / "v0")]
        variants += [checkout(rev, tmp / f"v{i + 1}") for i, rev in enumerate(a.against)]
        print(f"corpus: {n} bundles; cores: {os.cpu_count()}; load average before: {os.getloadavg()[0]:.2f}")

        cold_ok = not a.keep_page_cache and drop_caches()
        ref_cold = plain_loop(root)
        ref_warm = plain_loop(root)
        print(f"reference plain loop (json + ast, 1 process): {'cold' if cold_ok else 'warm'} {ref_cold:.2f} s, "
              f"warm {ref_warm:.2f} s")

        for i in range(a.repeat):
            for v in variants:
                measure(v, i, root, a.manifest, tmp, a.keep_page_cache)
        page = "page cache dropped" if cold_ok else "page cache NOT dropped"
        for v in variants:
            cold, cold_cpu = min(v.cold)
            rerun, rerun_cpu = min(v.rerun)
            print(f"[{v.name}] triage cold ({page}, empty triage cache): {cold:.2f} s wall, {cold_cpu:.2f} s CPU; "
                  f"re-run, nothing changed: {rerun:.2f} s wall, {rerun_cpu:.2f} s CPU; "
                  f"one bundle changed: {min(v.touched):.2f} s")
            if a.repeat > 1:
                print(f"    all cold: {', '.join(f'{w:.2f} s/{c:.2f} CPU-s' for w, c in v.cold)}; "
                      f"all re-runs: {', '.join(f'{w:.2f} s/{c:.2f} CPU-s' for w, c in v.rerun)}")
        this = variants[0]
        cold, cold_cpu = min(this.cold)
        rerun, rerun_cpu = min(this.rerun)
        for v in variants[1:]:
            (oc, oc_cpu), (orr, orr_cpu) = min(v.cold), min(v.rerun)
            assert v.report is not None and this.report is not None
            mine, theirs = verdicts(this.report), verdicts(v.report)
            verdict_diff = sum(1 for k in mine.keys() | theirs.keys() if (mine.get(k) or ("",))[0] != (theirs.get(k) or ("",))[0])
            reason_diff = sum(1 for k in mine.keys() | theirs.keys() if mine.get(k) != theirs.get(k))
            print(f"this tree / {v.name}: cold CPU {cold_cpu / oc_cpu:.2f}x, cold wall {cold / oc:.2f}x; "
                  f"re-run CPU {rerun_cpu / orr_cpu:.2f}x, re-run wall {rerun / orr:.2f}x; "
                  f"tasks with another verdict: {verdict_diff}, with other verdict or reasons: {reason_diff}")
            if a.target_ratio:
                print(f"target: cold wall within {a.target_ratio}x of {v.name}: "
                      f"{'MET' if cold / oc <= a.target_ratio else 'MISSED'} ({cold / oc:.2f}x; CPU {cold_cpu / oc_cpu:.2f}x)")
        assert this.report is not None
        run = this.report["summary"]["run"]
        if "hygiene_seconds" in run:
            ov = this.report["summary"].get("benchmark_overlap") or {}
            fam = this.report["summary"].get("families") or {}
            print(f"hygiene pass (benchmark overlap + families over the root): {run['hygiene_seconds']:.2f} s of the "
                  f"cold run; {ov.get('flagged')} task(s) flagged, {fam.get('families')} families "
                  f"({fam.get('with_variants')} with variants)")
        print(f"this tree: {run['workers']} workers; ratio cold / re-run: {cold / rerun:.1f}x; "
              f"plain-loop cold / triage cold: {ref_cold / cold:.2f}x")
        print(f"verdicts: {dict(Counter(t['verdict'] for t in this.report['tasks']))}")
        print(f"load average after: {os.getloadavg()[0]:.2f}")
        print(f"targets: cold < 5 s {'MET' if cold < 5 else 'MISSED'}; re-run < 1 s {'MET' if rerun < 1 else 'MISSED'}")


if __name__ == "__main__":
    main()
