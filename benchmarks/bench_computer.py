"""Computer-use engine figures, measured in one run on real Docker forks:
seed latency (cold golden, warm golden, warm pool), tool-call latency, tree vs diff size.

    .venv/bin/python benchmarks/bench_computer.py [--rounds 10]
"""

from __future__ import annotations

import argparse
import re
import shutil
import statistics
import tempfile
import time
import uuid
from pathlib import Path

from shinken.computer.engine import ComputerEngine

DEMO = Path(__file__).resolve().parent.parent / "demo"
IMAGE = "shinken/sandbox-linux:latest"


def p50(xs: list[float]) -> float:
    return statistics.median(xs) if xs else float("nan")


def timed(fn, *a, **kw):
    t0 = time.perf_counter()
    out = fn(*a, **kw)
    return out, time.perf_counter() - t0


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--rounds", type=int, default=10)
    ap.add_argument("--calc", action="store_true", help="also measure LibreOffice Calc (sandbox-cua image)")
    args = ap.parse_args()
    if args.calc:
        bench_calc()
    root = Path(tempfile.mkdtemp(prefix="bench-computer-"))
    salt = uuid.uuid4().hex  # private goldens, so the cold build is really cold
    for name in ("hello-file", "zenity-entry"):
        shutil.copytree(DEMO / name, root / name)
        with open(root / name / "reward.py", "a") as fh:
            fh.write(f"\n# bench {salt}\n")

    eng = ComputerEngine(root, IMAGE, accept_filesystem=True)
    pool_eng = None
    try:
        _, cold = timed(eng.seed, "s0", "hello-file")
        eng.end("s0")
        warm, execs, empties = [], [], 0
        for i in range(args.rounds):
            gen, dt = timed(eng.seed, f"s{i}", "hello-file")
            warm.append(dt)
            out, dt = timed(eng.tool, f"s{i}", gen, "computer_exec", {"command": "echo ping"})
            execs.append(dt)
            empties += "ping" not in out
            eng.end(f"s{i}", gen)

        pool_eng = ComputerEngine(root, IMAGE, accept_filesystem=True, pool_size=2, keep_goldens_on_close=True)
        g = pool_eng.seed("p", "hello-file")
        pooled = []
        for i in range(args.rounds):
            time.sleep(1.0)  # let the pool refill, as between rollouts
            g, dt = timed(pool_eng.seed, "p", "hello-file", g)
            pooled.append(dt)

        seeds_gui, trees, diffs, clicks, types, keys = [], [], [], [], [], []
        tree_bytes, diff_bytes = [], []
        entry_re = re.compile(r"\[(e\d+)\] text\b[^\n]*editable")
        scores = []
        for i in range(max(3, args.rounds // 2)):
            gen, dt = timed(eng.seed, f"z{i}", "zenity-entry")
            seeds_gui.append(dt)
            for _ in range(60):
                tree, dt = timed(eng.tool, f"z{i}", gen, "computer_observe", {"mode": "tree"})
                if entry_re.search(tree):
                    break
                time.sleep(0.25)
            trees.append(dt)
            tree_bytes.append(len(tree.encode()))
            entry = entry_re.search(tree).group(1)
            clicks.append(timed(eng.tool, f"z{i}", gen, "computer_click", {"element": entry, "x": None, "y": None})[1])
            types.append(timed(eng.tool, f"z{i}", gen, "computer_type_text", {"text": "Ada Lovelace"})[1])
            diff, dt = timed(eng.tool, f"z{i}", gen, "computer_observe", {"mode": "diff"})
            diffs.append(dt)
            diff_bytes.append(len(diff.encode()))
            keys.append(timed(eng.tool, f"z{i}", gen, "computer_key", {"keys": "Return"})[1])
            eng.tool(f"z{i}", gen, "computer_exec",
                     {"command": "for i in $(seq 50); do [ -f answer.txt ] && break; sleep 0.1; done"})
            res = eng.verify(f"z{i}", gen)
            scores.append(res.reward)
            if res.reward != 1.0:
                print(f"zenity round {i}: reward {res.reward}; diff was {diff!r}; reward said {res.reward_output_tail!r}")
            eng.end(f"z{i}", gen)
    finally:
        if pool_eng is not None:
            pool_eng.close()  # first: its pool holds forks of the golden `eng` deletes
        eng.close()
        shutil.rmtree(root, ignore_errors=True)

    ms = lambda xs: f"{p50(xs) * 1000:7.0f} ms"  # noqa: E731
    print(f"seed, cold golden (build + fork)      {cold * 1000:7.0f} ms")
    print(f"seed, cached golden (fork)    p50     {ms(warm)}")
    print(f"seed, warm pool               p50     {ms(pooled)}   ({p50(warm) / p50(pooled):.1f}x faster than a fork)")
    print(f"seed, GUI task (desktop+zenity) p50   {ms(seeds_gui)}")
    print(f"computer_exec 'echo'          p50     {ms(execs)}   (empty outputs: {empties}/{len(execs)})")
    print(f"computer_observe tree         p50     {ms(trees)}   {p50(tree_bytes):.0f} bytes")
    print(f"computer_observe diff         p50     {ms(diffs)}   {p50(diff_bytes):.0f} bytes "
          f"({p50(tree_bytes) / p50(diff_bytes):.1f}x smaller than the tree)")
    print(f"computer_click                p50     {ms(clicks)}")
    print(f"computer_type_text (12 chars) p50     {ms(types)}")
    print(f"computer_key                  p50     {ms(keys)}")
    print(f"zenity scripted agent rewards         {scores}")


def bench_calc() -> None:
    """Observation size and latency on a real office app: the demo sales.xlsx task in Calc."""
    eng = ComputerEngine(DEMO, "shinken/sandbox-cua:latest", accept_filesystem=True, keep_goldens_on_close=True)
    s = "calc"
    try:
        gen = eng.seed(s, "9a1f6c2e-5b3d-4e8a-9c71-2f0d4b6a8e13")
        eng.tool(s, gen, "computer_exec", {"command": "(setsid soffice --calc /home/user/sales.xlsx >/dev/null 2>&1 &)"})
        tree = ""
        for _ in range(90):
            tree = eng.tool(s, gen, "computer_observe", {"mode": "tree"})
            if 'value="Widget"' in tree:
                break
            time.sleep(1)
        time.sleep(2)
        tree, t_tree = timed(eng.tool, s, gen, "computer_observe", {"mode": "tree"})
        same, t_same = timed(eng.tool, s, gen, "computer_observe", {"mode": "diff"})
        eng.tool(s, gen, "computer_key", {"keys": "ctrl+Home Down Right Right Right"})
        eng.tool(s, gen, "computer_type_text", {"text": "=B2*C2"})
        eng.tool(s, gen, "computer_key", {"keys": "Return"})
        diff, t_diff = timed(eng.tool, s, gen, "computer_observe", {"mode": "diff"})
        print(f"calc tree: {len(tree.encode())} bytes, {tree.count(chr(10)) + 1} lines, {t_tree * 1000:.0f} ms; "
              f"unchanged diff {same!r} {t_same * 1000:.0f} ms")
        print(f"calc diff after entering a formula in D2: {len(diff.encode())} bytes, "
              f"{diff.count(chr(10)) + 1} lines, {t_diff * 1000:.0f} ms")
        print(diff)
    finally:
        eng.close()


if __name__ == "__main__":
    main()
