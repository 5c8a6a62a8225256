"""Probe throughput on real Docker: tasks/hour at concurrency 1 and 2 over a mix of CLI
and spreadsheet tasks, the per-task cost split (golden build / forks / rewards), and the
wall time of --repeats 4 against --repeats 1 (target <= 1.6).

Every configuration probes freshly generated bundles (a nonce in each), so every golden
is built cold; the goldens made here are deleted at the end.

    .venv/bin/python benchmarks/bench_probe.py [--image IMAGE] [--cli N] [--sheet N]
    .venv/bin/python benchmarks/bench_probe.py --probe-cost [--rounds R]
    .venv/bin/python benchmarks/bench_probe.py --media-cost [--rounds R]

--probe-cost: what the oracle and vandal probes add. One set of tasks (each with a golden_patch.py
that solves it) is probed once with --probes noop (goldens built cold: a first probe of an export),
then R rounds, in rotating order, of noop / noop,oracle / noop,vandal / noop,vandal,oracle on the
goldens built (each in its own run dir, so nothing resumes). The extra wall time of a probe is
reported against the warm noop run and against the cold first run.

--media-cost: what the probe's media add (a start screenshot per desktop task, a recording per
oracle run; probes/media.py). The same tasks with oracles, --probes noop,oracle, goldens built once
(--no-media), then R rounds of --media / --no-media in alternating order, each in its own run dir.
"""

from __future__ import annotations

import argparse
import json
import statistics
import sys
import tempfile
import time
import uuid
from pathlib import Path

from shinken.probes.executors import LocalExecutor
from shinken.probes.pipeline import ProbeRequest, run_probe

SHEET_SETUP = """from openpyxl import Workbook
wb = Workbook(); ws = wb.active; ws.title = "Sales"
ws.append(["Item", "Quantity", "Unit Price", "Total"])
for i in range({rows}):
    ws.append([f"item{{i}}", i + 1, 1.5, None])
wb.save("/home/user/sales.xlsx")
"""
SHEET_REWARD = """# {nonce}
from openpyxl import load_workbook
ws = load_workbook("/home/user/sales.xlsx")["Sales"]
rows = list(ws.iter_rows(min_row=2, values_only=True))
good = sum(1 for _, q, p, t in rows if isinstance(t, (int, float)) and abs(t - q * p) < 1e-6)
print(f"REWARD: {{good / len(rows):.2f}}")
"""
CLI_SETUP = "#!/bin/bash\nset -e\nmkdir -p /home/user/notes\necho '{nonce}' > /home/user/notes/seed.txt\n"
CLI_REWARD = """# {nonce}
import os
p = "/home/user/hello.txt"
print("REWARD: 1.0" if os.path.exists(p) and open(p).read().strip() == "hello" else "REWARD: 0.0")
"""


CLI_ORACLE = "open('/home/user/hello.txt', 'w').write('hello\\n')\n"
SHEET_ORACLE = """from openpyxl import load_workbook
wb = load_workbook("/home/user/sales.xlsx"); ws = wb["Sales"]
for row in ws.iter_rows(min_row=2):
    row[3].value = row[1].value * row[2].value
wb.save("/home/user/sales.xlsx")
"""


def make_tasks(root: Path, n_cli: int, n_sheet: int, oracles: bool = False) -> None:
    for i in range(n_cli):
        nonce = uuid.uuid4().hex
        d = root / f"cli-{i}"
        d.mkdir(parents=True)
        (d / "initial_setup.sh").write_text(CLI_SETUP.format(nonce=nonce))
        (d / "reward.py").write_text(CLI_REWARD.format(nonce=nonce))
        if oracles:
            (d / "golden_patch.py").write_text(CLI_ORACLE)
        (d / "config.json").write_text(json.dumps({
            "id": f"cli-{i}", "instruction": "Write hello into /home/user/hello.txt", "app_type": "os",
            "shinken_state_fidelity": "filesystem",
            "config": [{"type": "download", "parameters": {"files": [{"url": "./initial_setup.sh", "path": "/home/user/initial_setup.sh"}]}},
                       {"type": "execute", "parameters": {"command": "bash /home/user/initial_setup.sh"}}],
            "evaluator": {"type": "python", "url": "./reward.py"}}))
    for i in range(n_sheet):
        nonce = uuid.uuid4().hex
        d = root / f"sheet-{i}"
        d.mkdir(parents=True)
        (d / "initial_setup.py").write_text(SHEET_SETUP.format(rows=4 + i))
        (d / "reward.py").write_text(SHEET_REWARD.format(nonce=nonce))
        if oracles:
            (d / "golden_patch.py").write_text(SHEET_ORACLE)
        (d / "task.json").write_text(json.dumps({
            "id": f"sheet-{i}", "instruction": "Fill column D with Quantity * Unit Price",
            # A calc task brings the desktop up on every fork; declared explicitly so the
            # benchmark also runs on the linux image, where triage blocks libreoffice_calc.
            "app_type": "os", "shinken_needs": ["desktop"],
            "config": [{"type": "download", "parameters": {"files": [{"url": "./initial_setup.py", "path": "/home/user/initial_setup.py"}]}},
                       {"type": "execute", "parameters": {"command": "python3 /home/user/initial_setup.py"}}],
            "evaluator": {"type": "python", "url": "./reward.py"}}))


def run(image: str, base: Path, name: str, n_cli: int, n_sheet: int, *, concurrency: int, repeats: int) -> dict:
    root = base / name / "tasks"
    make_tasks(root, n_cli, n_sheet)
    req = ProbeRequest(task_root=root, image=image, run_dir=base / name / "run", repeats=repeats,
                       concurrency=concurrency, state_fidelity="filesystem")
    t0 = time.monotonic()
    doc = run_probe(req, executor=LocalExecutor(concurrency))
    wall = time.monotonic() - t0
    bad = [t for t in doc["tasks"] if t["outcome"] != "kept"]
    if bad:
        print(f"warning: {name}: {len(bad)} task(s) not kept: {[(t['task_id'], t['reason'], t['detail'][:120]) for t in bad]}",
              file=sys.stderr)
    return {"name": name, "wall": wall, "doc": doc, "n": len(doc["tasks"])}


def _timed_probe(req: ProbeRequest, tag: str, label: str, goldens: list[str]) -> tuple[dict, float]:
    """One probe run at concurrency 1: its receipt and wall seconds; its goldens added to `goldens`."""
    t0 = time.monotonic()
    doc = run_probe(req, executor=LocalExecutor(1))
    wall = time.monotonic() - t0
    goldens.extend(t["golden"] for t in doc["tasks"] if t.get("golden"))
    bad = [(t["task_id"], t["reason"]) for t in doc["tasks"] if t["outcome"] != "kept"]
    if bad:
        print(f"warning: {tag}: not kept: {bad}", file=sys.stderr)
    print(f"  {tag}: {label}: {wall:.1f} s", flush=True)
    return doc, wall


def probe_cost(image: str, n_cli: int, n_sheet: int, rounds: int) -> None:
    import os

    base = Path(tempfile.mkdtemp(prefix="shinken-bench-probe-cost-"))
    root = base / "tasks"
    make_tasks(root, n_cli, n_sheet, oracles=True)
    sets = [("noop",), ("noop", "oracle"), ("noop", "vandal"), ("noop", "vandal", "oracle")]
    walls: dict[tuple[str, ...], list[float]] = {p: [] for p in sets}
    # Within each run (same load): seconds of the oracle / vandal step over the tasks' total seconds.
    shares: dict[tuple[str, ...], list[tuple[float, float, float]]] = {p: [] for p in sets}
    goldens: list[str] = []
    loads = [os.getloadavg()[0]]

    def one(probes: tuple[str, ...], tag: str) -> float:
        req = ProbeRequest(task_root=root, image=image, run_dir=base / f"run-{tag}", repeats=2, concurrency=1,
                           state_fidelity="filesystem", probes=probes)
        doc, wall = _timed_probe(req, tag, f"--probes {','.join(probes)}", goldens)
        if probes in shares:
            tm = [t["timings"] for t in doc["tasks"]]
            shares[probes].append((sum(x.get("oracle_s", 0.0) for x in tm), sum(x.get("vandal_s", 0.0) for x in tm),
                                   sum(x["total_s"] for x in tm)))
        return wall

    try:
        cold = one(("noop",), "cold")
        for r in range(rounds):
            for i in range(len(sets)):
                p = sets[(i + r) % len(sets)]
                walls[p].append(one(p, f"r{r}-{'-'.join(p)}"))
            loads.append(os.getloadavg()[0])
    finally:
        cleanup(goldens)
    med = {p: statistics.median(w) for p, w in walls.items()}
    base_warm = med[("noop",)]
    print()
    print(f"probe cost ({n_cli} CLI + {n_sheet} spreadsheet tasks with oracles, repeats 2, concurrency 1, "
          f"median of {rounds} round(s); load average {min(loads):.1f}-{max(loads):.1f} on {os.cpu_count()} cores):")
    print(f"  cold first probe (--probes noop, goldens built): {cold:.1f} s; warm noop: {base_warm:.1f} s")
    for p in sets[1:]:
        extra = med[p] - base_warm
        print(f"  --probes {','.join(p):20s} {med[p]:6.1f} s: +{extra:.1f} s = {med[p] / base_warm:.2f}x warm noop, "
              f"+{extra / cold * 100:.0f}% of the cold first probe")
        o = sum(x[0] for x in shares[p]); v = sum(x[1] for x in shares[p]); tot = sum(x[2] for x in shares[p])
        print(f"      within these runs: oracle step {o:.1f} s, vandal step {v:.1f} s of {tot:.1f} task-seconds "
              f"(oracle {o / tot * 100:.0f}%, vandal {v / tot * 100:.0f}%; they run side by side)")


def media_cost(image: str, n_cli: int, n_sheet: int, rounds: int) -> None:
    import os

    base = Path(tempfile.mkdtemp(prefix="shinken-bench-media-cost-"))
    root = base / "tasks"
    make_tasks(root, n_cli, n_sheet, oracles=True)
    walls: dict[bool, list[float]] = {True: [], False: []}
    goldens: list[str] = []
    loads = [os.getloadavg()[0]]
    sizes: list[int] = []

    def one(media: bool, tag: str) -> float:
        req = ProbeRequest(task_root=root, image=image, run_dir=base / f"run-{tag}", repeats=2, concurrency=1,
                           state_fidelity="filesystem", probes=("noop", "oracle"), media=media)
        doc, wall = _timed_probe(req, tag, "--media" if media else "--no-media", goldens)
        if media:
            sizes.extend(e["bytes"] for t in doc["tasks"] for e in [(t.get("media") or {}).get("start"),
                                                                     *((t.get("media") or {}).get("recordings") or [])] if e)
        return wall

    try:
        cold = one(False, "cold")
        for r in range(rounds):
            for media in ((True, False) if r % 2 == 0 else (False, True)):
                walls[media].append(one(media, f"r{r}-{'media' if media else 'plain'}"))
            loads.append(os.getloadavg()[0])
    finally:
        cleanup(goldens)
    on, off = statistics.median(walls[True]), statistics.median(walls[False])
    print()
    print(f"media cost ({n_cli} CLI + {n_sheet} desktop tasks with oracles, --probes noop,oracle, repeats 2, "
          f"concurrency 1, median of {rounds} round(s); load average {min(loads):.1f}-{max(loads):.1f} on "
          f"{os.cpu_count()} cores):")
    print(f"  cold first probe (--no-media, goldens built): {cold:.1f} s")
    print(f"  --no-media {off:.1f} s, --media {on:.1f} s: {on / off:.2f}x (+{on - off:.1f} s, "
          f"+{(on - off) / cold * 100:.0f}% of the cold first probe); media kept per run: "
          f"{sum(sizes) / max(1, len(walls[True])) / 1024:.0f} KiB")


def split(doc: dict, prefix: str) -> dict[str, float]:
    ts = [t for t in doc["tasks"] if t["task_id"].startswith(prefix)]
    med = lambda xs: statistics.median(xs) if xs else 0.0  # noqa: E731
    return {"golden": med([t["timings"]["golden_build_s"] for t in ts]),
            "fork": med([x for t in ts for x in t["timings"]["fork_s"]]),
            "reward": med([x for t in ts for x in t["timings"]["reward_s"]]),
            "task": med([t["timings"]["total_s"] for t in ts])}


def cleanup(image_tags: list[str]) -> None:
    import docker

    client = docker.from_env()
    for tag in image_tags:
        try:
            img = client.images.get(tag)
            if img.labels.get("shinken.kind") == "golden":  # only goldens this benchmark made
                client.images.remove(img.id, force=True)
        except Exception:  # noqa: BLE001
            pass


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--image", default="shinken/sandbox-linux:latest")
    ap.add_argument("--cli", type=int, default=4)
    ap.add_argument("--sheet", type=int, default=4)
    ap.add_argument("--probe-cost", action="store_true", help="measure the oracle and vandal probes' cost")
    ap.add_argument("--media-cost", action="store_true", help="measure what the start screenshots and recordings add")
    ap.add_argument("--rounds", type=int, default=2)
    a = ap.parse_args()
    if a.media_cost:
        media_cost(a.image, a.cli, a.sheet, a.rounds)
        return
    if a.probe_cost:
        probe_cost(a.image, a.cli, a.sheet, a.rounds)
        return
    base = Path(tempfile.mkdtemp(prefix="shinken-bench-probe-"))
    results = {}
    goldens: list[str] = []
    try:
        for name, conc, rep in (("c1", 1, 2), ("c2", 2, 2), ("k1", 1, 1), ("k4", 1, 4)):
            r = run(a.image, base, name, a.cli, a.sheet, concurrency=conc, repeats=rep)
            results[name] = r
            goldens += [t["golden"] for t in r["doc"]["tasks"] if t.get("golden")]
            print(f"{name}: concurrency {conc}, repeats {rep}: {r['n']} tasks in {r['wall']:.1f} s "
                  f"= {r['n'] / r['wall'] * 3600:,.0f} tasks/h", flush=True)
    finally:
        cleanup(goldens)
    c1, c2, k1, k4 = (results[k] for k in ("c1", "c2", "k1", "k4"))
    print()
    print(f"tasks/hour (repeats 2, {a.cli} CLI + {a.sheet} spreadsheet, cold goldens):")
    print(f"  concurrency 1: {c1['n'] / c1['wall'] * 3600:,.0f}   concurrency 2: {c2['n'] / c2['wall'] * 3600:,.0f}"
          f"   speed-up {c1['wall'] / c2['wall']:.2f}x")
    print("per-task cost, median seconds (concurrency 1, repeats 2):")
    for kind in ("cli", "sheet"):
        s = split(c1["doc"], kind)
        print(f"  {kind:5s}: golden build {s['golden']:.2f}  fork (+desktop, post-fork replay) {s['fork']:.2f}"
              f"  reward (postconfig + reward.py) {s['reward']:.2f}  whole task {s['task']:.2f}")
    print(f"--repeats 4 / --repeats 1 wall time: {k4['wall']:.1f} s / {k1['wall']:.1f} s = "
          f"{k4['wall'] / k1['wall']:.2f} (target <= 1.6)")
    for kind in ("cli", "sheet"):  # at concurrency 1 the task times add up to the wall time
        t1 = sum(t["timings"]["total_s"] for t in k1["doc"]["tasks"] if t["task_id"].startswith(kind))
        t4 = sum(t["timings"]["total_s"] for t in k4["doc"]["tasks"] if t["task_id"].startswith(kind))
        print(f"  {kind:5s} tasks only: {t4:.1f} s / {t1:.1f} s = {t4 / t1:.2f}")
    import os

    print(f"load average at the end: {os.getloadavg()[0]:.1f} on {os.cpu_count()} cores")


if __name__ == "__main__":
    main()
