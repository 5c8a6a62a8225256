"""Benchmark the task browser (`shinken report --tasks`) at the release's size against a demo-sized
one, side by side in one run: writing it, and opening it from disk in headless Chromium.

    .venv/bin/python benchmarks/bench_task_browser.py [--n 10910] [--small 22] [--runs 5] [--workdir DIR]

The large one is the synthetic release (benchmarks/synthetic_release.py: N task folders), triaged
for real (`shinken triage --manifest tests/data/triage_manifest.json`), with a receipt over its
runnable tasks (benchmarks/synthetic_reports.py: media a real probe recorded). Per browser and run,
in a fresh Chromium: navigation to the load event, to the index parsed (data/index.js) and to the
first page drawn (`window.SHINKEN_READY_MS`), then one filter change, one page flip and one task
opened (its details file loaded, its images decoded). Prints a table and writes bench.json."""

from __future__ import annotations

import argparse
import json
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

REPO = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(REPO))
sys.path.insert(0, str(REPO / "tests"))
import browser as br  # noqa: E402

from benchmarks.synthetic_release import RELEASE_SIZE, make_corpus  # noqa: E402
from benchmarks.synthetic_reports import synthetic_receipt  # noqa: E402

SHINKEN = REPO / ".venv" / "bin" / "shinken"
MEDIA = REPO / "tests" / "data" / "media"

# In the page: one filter change and one page flip, each timed around its synchronous redraw.
INTERACT = """(() => {
  const s = document.querySelector('select[data-facet="outcome"]');
  const v = [...s.options].map(o => o.value).find(x => x === 'kept') || s.options[1].value;
  let t = performance.now(); s.value = v; s.dispatchEvent(new Event('change')); const filter = performance.now() - t;
  const next = [...document.querySelectorAll('#pager-top button')].pop();
  t = performance.now(); next.click(); const flip = performance.now() - t;
  return {filter, flip}; })()"""


def build(workdir: Path, n: int) -> Path:
    """The task browser of `n` synthetic tasks (triaged for real), its folder (reused when a run
    with the same --workdir made it)."""
    if (workdir / "receipt.json").is_file():
        return workdir
    root = make_corpus(workdir / "tasks", n=n, seed=0)
    triage = workdir / "triage.json"
    subprocess.run([str(SHINKEN), "triage", str(root), "--manifest", str(REPO / "tests/data/triage_manifest.json"),
                    "--report", str(triage), "--no-cache"], check=True, capture_output=True)
    receipt = synthetic_receipt(json.loads(triage.read_text()), workdir / "run",
                                (MEDIA / "zenity-start.webp").read_bytes(), (MEDIA / "zenity-oracle.webp").read_bytes())
    (workdir / "receipt.json").write_text(json.dumps(receipt))
    return workdir


def write_site(workdir: Path) -> tuple[Path, float]:
    site = workdir / "site"
    t0 = time.perf_counter()
    subprocess.run([str(SHINKEN), "report", "--triage", str(workdir / "triage.json"), "--receipt",
                    str(workdir / "receipt.json"), "--tasks", str(site)], check=True, capture_output=True)
    return site, time.perf_counter() - t0


def open_once(site: Path) -> dict[str, float]:
    binary = br.chromium_path()
    if binary is None:
        raise SystemExit("chromium is not installed; run scripts/setup.sh")
    with br.Browser(binary) as b:
        s = b.session()
        b.call("Page.enable", {}, s)
        since = len(b.events)
        t0 = time.perf_counter()
        b.call("Page.navigate", {"url": (site / "index.html").resolve().as_uri()}, s)
        b.wait_event("Page.loadEventFired", s, since)
        load = time.perf_counter() - t0
        index_ms, ready_ms = b.evaluate(s, "[window.SHINKEN_INDEX_MS, window.SHINKEN_READY_MS]")
        acts = b.evaluate(s, INTERACT)
        task = b.evaluate(s, "document.querySelector('#rows tr.row').dataset.task")
        t1 = time.perf_counter()
        b.evaluate(s, f"location.hash = 'task=' + encodeURIComponent({json.dumps(task)})")
        while not b.evaluate(s, "!!document.querySelector('td.detail[data-loaded]') && "
                                "[...document.querySelectorAll('td.detail img')].every(i => i.complete)"):
            time.sleep(0.01)
        opened = time.perf_counter() - t1
    return {"load_s": load, "index_s": index_ms / 1000, "ready_s": ready_ms / 1000, "filter_s": acts["filter"] / 1000,
            "flip_s": acts["flip"] / 1000, "open_task_s": opened}


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--n", type=int, default=RELEASE_SIZE)
    ap.add_argument("--small", type=int, default=22, help="tasks of the comparison browser (the demo has 22)")
    ap.add_argument("--runs", type=int, default=5)
    ap.add_argument("--workdir", type=Path)
    a = ap.parse_args()
    work = Path(a.workdir or tempfile.mkdtemp(prefix="bench-task-browser-"))
    sizes = {"release": a.n, "small": a.small}
    sites, written = {}, {}
    for name, n in sizes.items():
        d = build(work / name, n)
        sites[name], written[name] = write_site(d)
    runs: dict[str, list[dict[str, float]]] = {name: [] for name in sizes}
    for _ in range(a.runs):  # alternated, so both see the same load
        for name in sizes:
            runs[name].append(open_once(sites[name]))
    load = Path("/proc/loadavg").read_text().split()[:3]
    result: dict[str, object] = {"n": sizes, "runs": a.runs, "loadavg": load, "write_s": written,
                                 "index_bytes": {k: (s / "data" / "index.js").stat().st_size for k, s in sites.items()}}
    medians = {name: {k: statistics.median(r[k] for r in rs) for k in rs[0]} for name, rs in runs.items()}
    result["median"] = medians
    result["max"] = {name: {k: max(r[k] for r in rs) for k in rs[0]} for name, rs in runs.items()}
    result["ratio"] = {k: medians["release"][k] / medians["small"][k] if medians["small"][k] else None
                       for k in medians["release"]}
    (work / "bench.json").write_text(json.dumps(result, indent=2))
    print(f"load average {' '.join(load)}; {a.runs} runs each, medians (max)")
    print(f"{'':14}{'release (' + str(a.n) + ')':>22}{'small (' + str(a.small) + ')':>22}{'ratio':>8}")
    print(f"{'write_s':14}{written['release']:>22.2f}{written['small']:>22.2f}{written['release'] / written['small']:>8.1f}")
    worst = result["max"]
    assert isinstance(worst, dict)
    for k in medians["release"]:
        big, small = medians["release"][k], medians["small"][k]
        cells = [f"{big:.3f} ({worst['release'][k]:.3f})", f"{small:.3f} ({worst['small'][k]:.3f})"]
        ratio = f"{big / small:.1f}" if small else "-"  # a one-page browser has no page to flip to
        print(f"{k:14}{cells[0]:>22}{cells[1]:>22}{ratio:>8}")
    print(f"written: {work / 'bench.json'}")


if __name__ == "__main__":
    main()
