"""Computer-use engine figures, measured in one run on real Docker forks:
seed latency (cold golden, warm golden, warm pool), tool-call latency, tree vs diff size;
with --screenshots: screenshot capture p50/p95 per size and format, bytes per observation, and a
full GUI step (action + screenshot, one exec) against today's a11y step (action + diff
observation), interleaved in one run.

    .venv/bin/python benchmarks/bench_computer.py [--rounds 10] [--calc] [--screenshots]
"""

from __future__ import annotations

import argparse
import re
import shutil
import statistics
import sys
import tempfile
import time
import uuid
from pathlib import Path

from shinken.computer import screen, tools
from shinken.computer.contract import EngineConfig
from shinken.computer.engine import ComputerEngine
from shinken.computer.profiles import Profile

REPO = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(REPO))
from benchmarks.timing import pct  # noqa: E402

DEMO = REPO / "demo"
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
    ap.add_argument("--screenshots", action="store_true", help="only the screenshot figures (sandbox-linux image)")
    args = ap.parse_args()
    if args.screenshots:
        bench_screenshots(args.rounds)
        return
    if args.calc:
        bench_calc()
    root = Path(tempfile.mkdtemp(prefix="bench-computer-"))
    salt = uuid.uuid4().hex  # private goldens, so the cold build is really cold
    for name in ("hello-file", "zenity-entry"):
        shutil.copytree(DEMO / name, root / name)
        with open(root / name / "reward.py", "a") as fh:
            fh.write(f"\n# bench {salt}\n")

    eng = ComputerEngine(EngineConfig(root, IMAGE, accept_filesystem=True))
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

        pool_eng = ComputerEngine(EngineConfig(root, IMAGE, accept_filesystem=True, pool_size=2),
                                  keep_goldens_on_close=True)
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


def _load() -> str:
    with open("/proc/loadavg") as fh:
        return " ".join(fh.read().split()[:3])


def bench_screenshots(rounds: int) -> None:
    """Capture latency and size per format/size on a zenity fork (through the fork's capture
    channel, through a fresh exec per capture, and by a process of its own, interleaved), then
    GUI steps side by side."""
    root = Path(tempfile.mkdtemp(prefix="bench-screens-"))
    shutil.copytree(DEMO / "zenity-entry", root / "zenity-entry")
    with open(root / "zenity-entry" / "reward.py", "a") as fh:
        fh.write(f"\n# bench {uuid.uuid4().hex}\n")
    png1280 = Profile(observation="screenshot", actions="pixel", size=(1280, 800))
    jpeg1280 = Profile(observation="screenshot", actions="pixel", image_format="jpeg", size=(1280, 800))
    # "channel": the fork's capture channel (one long-lived exec, a relay asking the capture server);
    # "exec": a fresh docker exec running the capture client (the path before the channel);
    # "one-shot": a fresh exec whose python imports Pillow itself (the path before the server).
    shots = {("png", None, "channel"): Profile(observation="screenshot", actions="pixel"),
             ("png", (1280, 800), "channel"): png1280,
             ("png", (1280, 800), "exec"): png1280,
             ("png", (1280, 800), "one-shot"): png1280,
             ("jpeg", (1280, 800), "channel"): jpeg1280,
             ("jpeg", (1280, 800), "exec"): jpeg1280,
             ("webp", (1280, 800), "channel"): Profile(observation="screenshot", actions="pixel", image_format="webp",
                                                      size=(1280, 800)),
             ("jpeg", None, "channel"): Profile(observation="screenshot", actions="pixel", image_format="jpeg")}
    how = {"channel": screen.capture, "exec": screen.capture_exec, "one-shot": screen.capture_oneshot}
    from shinken.images.build import build_image

    image = build_image("linux").tag  # the current sources' image (`:latest` may be another checkout's)
    a11y_eng = ComputerEngine(EngineConfig(root, image, accept_filesystem=True),
                              keep_goldens_on_close=True, gc_interval_s=None)
    vis = png1280
    vis_eng = ComputerEngine(EngineConfig(root, image, accept_filesystem=True, profile=vis),
                             keep_goldens_on_close=True, gc_interval_s=None)
    load0 = _load()
    try:
        gen = vis_eng.seed("cap", "zenity-entry")
        for _ in range(60):  # the dialog is up
            if vis_eng.in_rollout("cap", gen, "dump", lambda ctx: "Shinken" in tools._observe_tool(ctx, "tree")):
                break
            time.sleep(0.25)

        def cpu_ns(ctx) -> int:  # the fork's cgroup (v1 here): every process of the computer, Xvfb included
            out = ctx.fork.exec(["cat", "/sys/fs/cgroup/cpuacct/cpuacct.usage"], timeout=30).output.split()
            return int(out[-1]) if out and out[-1].isdigit() else -1

        # The fork's first capture opens its channel and starts its capture server (Pillow imported once).
        t0 = time.perf_counter()
        cold = vis_eng.in_rollout("cap", gen, "capture", lambda ctx: screen.capture(ctx, png1280))
        cold_s = time.perf_counter() - t0
        # The channel opened again (its relay's start and the exec's), the server already up.
        vis_eng.in_rollout("cap", gen, "close", lambda ctx: ctx.close())
        t0 = time.perf_counter()
        vis_eng.in_rollout("cap", gen, "capture", lambda ctx: screen.capture(ctx, png1280))
        reopen_s = time.perf_counter() - t0
        Key = tuple[str, object, str]
        cpu: dict[Key, list[float]] = {k: [] for k in shots}
        lat: dict[Key, list[float]] = {k: [] for k in shots}
        guest: dict[Key, list[float]] = {k: [] for k in shots}
        proc_cpu: dict[Key, list[float]] = {k: [] for k in shots}
        size: dict[Key, list[int]] = {k: [] for k in shots}
        via = set()
        floor: list[float] = []  # an empty exec through the same guest prefix: what any capture pays first
        for _ in range(rounds):  # formats interleaved, so load drifts hit each alike
            t0 = time.perf_counter()
            vis_eng.in_rollout("cap", gen, "noop", lambda ctx: tools._guest(ctx, ["true"]))
            floor.append(time.perf_counter() - t0)
            for key, prof in shots.items():
                c0 = vis_eng.in_rollout("cap", gen, "cpu", cpu_ns)
                t0 = time.perf_counter()
                shot = vis_eng.in_rollout("cap", gen, "capture", lambda ctx, p=prof, f=how[key[2]]: f(ctx, p))
                lat[key].append(time.perf_counter() - t0)
                cpu[key].append((vis_eng.in_rollout("cap", gen, "cpu", cpu_ns) - c0) / 1e9)
                guest[key].append(shot.guest_ms / 1000)
                proc_cpu[key].append(shot.cpu_ms / 1000)
                size[key].append(len(shot.data))
                via.add(shot.via)
        fell_back = vis_eng.in_rollout("cap", gen, "off", lambda ctx: ctx.extra.get(screen.CHANNEL_OFF))
        tree_bytes = len(vis_eng.in_rollout("cap", gen, "tree", lambda ctx: tools._observe_tool(ctx, "tree")).encode())
        vis_eng.end("cap", gen)

        # Steps side by side: a11y (click by point + diff observation, today's loop) vs vision
        # (click by point answering with a screenshot, one exec), alternating.
        a_gen = a11y_eng.seed("a", "zenity-entry")
        v_gen = vis_eng.seed("v", "zenity-entry")
        vis_eng.first_observation("v", v_gen)  # as the resources server does at seed time
        a_steps, v_steps = [], []
        for i in range(rounds):
            x, y = 5 + i, 5
            t0 = time.perf_counter()
            a11y_eng.tool("a", a_gen, "computer_click", {"element": None, "x": x, "y": y})
            a11y_eng.tool("a", a_gen, "computer_observe", {"mode": "diff"})
            a_steps.append(time.perf_counter() - t0)
            t0 = time.perf_counter()
            out = vis_eng.step("v", v_gen, "computer_click", {"x": x, "y": y})
            v_steps.append(time.perf_counter() - t0)
            assert out.screenshot is not None, out.text
        a11y_eng.end("a", a_gen)
        vis_eng.end("v", v_gen)
    finally:
        vis_eng.close()
        a11y_eng.keep_goldens_on_close = False
        a11y_eng.close()
        shutil.rmtree(root, ignore_errors=True)

    print(f"screenshots on a zenity fork ({image}), {rounds} rounds, load average {load0} -> {_load()}, "
          f"capture via {sorted(via)}")
    print("computer CPU: the fork's cgroup across the capture's exec (Xvfb and the exec's own start included); "
          "capture CPU: the client's python (start included) + the server's work, or the one-shot python (start "
          "and Pillow's import included)")
    print(f"first capture of the fork (opens the channel, starts the server), png 1280x800: {cold_s * 1000:.0f} ms, "
          f"capture CPU {cold.cpu_ms:.0f} ms; the channel opened again (server up): {reopen_s * 1000:.0f} ms")
    if fell_back:
        print(f"NOTE: the channel broke and the rollout fell back to an exec per capture: {fell_back}")
    print("format  size        how        capture p50   p95     in guest p50   computer CPU p50   capture CPU p50   "
          "bytes p50")
    for (fmt, sz, kind), xs in lat.items():
        k = (fmt, sz, kind)
        label = f"{sz[0]}x{sz[1]}" if isinstance(sz, tuple) else "1920x1080"
        print(f"{fmt:6}  {label:10}  {kind:9}  {p50(xs) * 1000:7.0f} ms {pct(xs, 0.95) * 1000:5.0f} ms  "
              f"{p50(guest[k]) * 1000:7.0f} ms     {p50(cpu[k]) * 1000:7.0f} ms      "
              f"{p50(proc_cpu[k]) * 1000:7.0f} ms      {p50(size[k]):9.0f}")
    print(f"empty exec (the same guest prefix, `true`) p50 {p50(floor) * 1000:.0f} ms, p95 {pct(floor, 0.95) * 1000:.0f} ms: "
          "the floor every capture and step pays (docker exec, the wrapper shells)")
    for fmt in ("png", "jpeg"):
        ch, ex = (fmt, (1280, 800), "channel"), (fmt, (1280, 800), "exec")
        print(f"{fmt} 1280x800, exec / channel: capture p50 {p50(lat[ex]) / p50(lat[ch]):.2f}x "
              f"({p50(lat[ex]) * 1000:.0f} vs {p50(lat[ch]) * 1000:.0f} ms), p95 {pct(lat[ex], 0.95) * 1000:.0f} vs "
              f"{pct(lat[ch], 0.95) * 1000:.0f} ms, computer CPU p50 {p50(cpu[ex]) / p50(cpu[ch]):.2f}x; "
              f"pairs where the channel was faster: {sum(a < b for a, b in zip(lat[ch], lat[ex]))}/{len(lat[ch])}")
    srv, one = ("png", (1280, 800), "exec"), ("png", (1280, 800), "one-shot")
    print(f"png 1280x800, one-shot / exec (both a fresh exec; the server vs Pillow imported per capture): "
          f"capture p50 {p50(lat[one]) / p50(lat[srv]):.2f}x, "
          f"capture CPU p50 {p50(proc_cpu[one]) / p50(proc_cpu[srv]):.2f}x, "
          f"computer CPU p50 {p50(cpu[one]) / p50(cpu[srv]):.2f}x")
    print(f"a11y tree of the same screen: {tree_bytes} bytes")
    print(f"GUI step: a11y (click + diff observe, 2 calls) p50 {p50(a_steps) * 1000:.0f} ms, "
          f"vision (click + screenshot 1280x800 png, 1 call) p50 {p50(v_steps) * 1000:.0f} ms, "
          f"ratio vision/a11y {p50(v_steps) / p50(a_steps):.2f}")


def bench_calc() -> None:
    """Observation size and latency on a real office app: the demo sales.xlsx task in Calc."""
    eng = ComputerEngine(EngineConfig(DEMO, "shinken/sandbox-cua:latest", accept_filesystem=True),
                         keep_goldens_on_close=True)
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
