"""Fleet figures, measured in one run on a simulated fleet (tests/fleet_harness.py: the machine's
Docker engine plus private dockerds, a Ray head, a loopback registry), shinken/sandbox-linux tasks:

- router overhead: tool-call latency through the fleet vs the local engine on the same Docker engine
  (calls interleaved, so load changes hit both alike);
- seeds per hour and seed p50/p99 with 1, 2 and 3 hosts at a fixed concurrency per host, with each
  host's agent CPU time and its dockerd's CPU time (from /proc), since all hosts share the cores;
- image distribution: registry push, save | load into a new host's engine, and a warm golden on it
  by rebuilding from the bundle vs copying the golden image (docker save | docker load).

    .venv/bin/python benchmarks/bench_fleet.py [--calls 40] [--seeds 12] [--hosts 3]
"""

from __future__ import annotations

import argparse
import json
import os
import shutil
import subprocess
import sys
import tempfile
import threading
import time
import uuid
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent.parent / "tests"))
from fleet_harness import SimFleet  # noqa: E402

from benchmarks.timing import pct  # noqa: E402

DEMO = Path(__file__).resolve().parent.parent / "demo"


def make_task(root: Path, tid: str) -> str:
    shutil.copytree(DEMO / "hello-file", root / tid)
    cfg = json.loads((root / tid / "config.json").read_text())
    cfg["id"] = tid
    (root / tid / "config.json").write_text(json.dumps(cfg))
    return tid


def make_tasks(root: Path, n: int, salt: str) -> list[str]:
    return [make_task(root, f"bench-fleet-{salt}-{i}") for i in range(n)]


def proc_cpu_s(pid: int) -> float:
    """utime+stime of a process and its reaped children (clock ticks -> seconds)."""
    try:
        f = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()
    except OSError:
        return 0.0
    return sum(int(x) for x in f[11:15]) / os.sysconf("SC_CLK_TCK")


def router_overhead(sim: SimFleet, root: Path, tid: str, image: str, calls: int) -> dict:
    from shinken.computer.engine import ComputerEngine
    from shinken.fleet.router import FleetEngine

    # keep_goldens_on_close: the h0 agent holds the same content-addressed golden on the same engine
    local = ComputerEngine(root, image, accept_filesystem=True, gc_interval_s=None, keep_goldens_on_close=True)
    fleet = FleetEngine(sim.address, root, image)
    try:
        gl = local.seed("bench-local", tid)
        gf = fleet.seed("bench-fleet", tid)
        assert gf.startswith("h0~"), gf
        tl, tf = [], []
        for _ in range(calls):
            for eng, s, g, out in ((local, "bench-local", gl, tl), (fleet, "bench-fleet", gf, tf)):
                t0 = time.perf_counter()
                eng.tool(s, g, "computer_exec", {"command": "true"})
                out.append(time.perf_counter() - t0)
        mem = fork_memory(sim, tid)
        local.end("bench-local", gl)
        fleet.end("bench-fleet", gf)
    finally:
        local.close()
    return {"calls": calls, "local_p50_ms": pct(tl, 0.5) * 1e3, "fleet_p50_ms": pct(tf, 0.5) * 1e3,
            "added_p50_ms": (pct(tf, 0.5) - pct(tl, 0.5)) * 1e3, "local_p99_ms": pct(tl, 0.99) * 1e3,
            "fleet_p99_ms": pct(tf, 0.99) * 1e3, "fork_memory_mib": mem}


def fork_memory(sim: SimFleet, tid: str) -> list[float]:
    """Memory (cgroup usage, MiB) of the task's live forks on h0: what one idle computer holds."""
    c = sim.engines[0].client()
    try:
        out = []
        for box in c.containers.list(filters={"label": [f"shinken.task={tid}", "shinken.kind=fork"]}):
            st = box.stats(stream=False)
            out.append(round(st.get("memory_stats", {}).get("usage", 0) / 2**20, 1))
        return out
    finally:
        c.close()


def seed_rate(sim: SimFleet, root: Path, tasks: list[str], image: str, hosts: int, per_host: int, seeds: int) -> dict:
    """`seeds` seed+end cycles per host at `per_host` at once per host, over tasks homed anywhere."""
    from shinken.fleet.router import FleetEngine

    fleet = FleetEngine(sim.address, root, image, seed_timeout_s=120)
    for i, tid in enumerate(tasks):  # warm goldens on the tasks' homes first: the rate is of forks
        g = fleet.seed(f"bench-warm-{i}", tid)
        fleet.end(f"bench-warm-{i}", g)
    lat: list[float] = []
    where: dict[str, int] = {}
    lock = threading.Lock()
    todo = list(range(seeds * hosts))
    pids = {e.name: e.proc.pid for e in sim.engines if e.proc is not None}
    cpu0 = {n: proc_cpu_s(p) for n, p in pids.items()}

    def worker(w: int) -> None:
        while True:
            with lock:
                if not todo:
                    return
                i = todo.pop()
            s = f"bench-rate-{w}"
            t0 = time.perf_counter()
            g = fleet.seed(s, tasks[i % len(tasks)])
            dt = time.perf_counter() - t0
            fleet.end(s, g)
            with lock:
                lat.append(dt)
                where[g.split("~")[0]] = where.get(g.split("~")[0], 0) + 1

    started = time.perf_counter()
    threads = [threading.Thread(target=worker, args=(w,)) for w in range(per_host * hosts)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    wall = time.perf_counter() - started
    cpu = {n: round(proc_cpu_s(p) - cpu0[n], 1) for n, p in pids.items()}
    return {"hosts": hosts, "concurrency": per_host * hosts, "seeds": len(lat), "wall_s": round(wall, 1),
            "seeds_per_hour": round(len(lat) / wall * 3600), "p50_s": round(pct(lat, 0.5), 2),
            "p99_s": round(pct(lat, 0.99), 2), "placed": where, "private_dockerd_cpu_s": cpu}


def golden_copy_vs_rebuild(sim: SimFleet, root: Path, image: str, salt: str) -> dict:
    """A warm golden on a host that lacks it: rebuilt there from the bundle (what the agent does:
    a task's first seed minus a warm seed) vs the golden image copied from a host that has it
    (docker save | docker load, what a copy scheme would do)."""
    from shinken.fleet.nodes import home_index
    from shinken.fleet.router import FleetEngine

    names = ["h0", "h1", "h2"]
    i = 0
    while names[home_index(f"bench-golden-{salt}-{i}", names)] != "h1":
        i += 1
    tid = make_task(root, f"bench-golden-{salt}-{i}")
    fleet = FleetEngine(sim.address, root, image)
    times = []
    for k in range(2):
        t0 = time.perf_counter()
        g = fleet.seed(f"bench-g{k}", tid)
        times.append(time.perf_counter() - t0)
        fleet.end(f"bench-g{k}", g)
        assert g.startswith("h1~"), g
    src, dst = sim.engine("h1"), sim.engine("h2")
    c = src.client()
    tag = next(t for img in c.images.list(filters={"label": [f"shinken.task={tid}", "shinken.kind=golden"]})
               for t in img.tags)
    size = c.images.get(tag).attrs["Size"]
    c.close()
    t0 = time.perf_counter()
    save = subprocess.Popen(["docker", "-H", src.host, "save", tag], stdout=subprocess.PIPE)
    subprocess.run(["docker", "-H", dst.host, "load", "-q"], stdin=save.stdout, check=True, capture_output=True)
    save.wait()
    copy_s = time.perf_counter() - t0
    dc = dst.client()
    dc.images.remove(tag)
    dc.close()
    return {"task": tid, "cold_seed_s": round(times[0], 2), "warm_seed_s": round(times[1], 2),
            "rebuild_s": round(times[0] - times[1], 2), "copy_s": round(copy_s, 2),
            "golden_image_mib": round(size / 2**20, 1)}


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--image", default="shinken/sandbox-linux:latest")
    ap.add_argument("--calls", type=int, default=40)
    ap.add_argument("--seeds", type=int, default=8, help="seeds per host in the rate runs")
    ap.add_argument("--per-host", type=int, default=2)
    args = ap.parse_args()
    os.environ.setdefault("RAY_AUTH_MODE", "disabled")
    out: dict = {"load_at_start": os.getloadavg()}
    sim = SimFleet(extra=2, slots=args.per_host)
    root = Path(tempfile.mkdtemp(prefix="bench-fleet-"))
    salt = uuid.uuid4().hex[:8]
    try:
        sim.start_registry()
        for i in (1, 2):
            sim.start_engine(i)
        sim.start_head()
        os.environ.update(sim.env)
        t0 = time.perf_counter()
        r = sim.shinken("image", "push", args.image, "--registry", sim.registry, "--json")
        assert r.returncode == 0, r.stderr
        out["push_s"] = round(time.perf_counter() - t0, 1)
        # Onto the private engines by save | load (pulls from a private dockerd with --bridge none
        # fail at random here: tests/fleet_harness.py SimFleet.preload); join then checks the id.
        for eng in sim.engines[1:]:
            t0 = time.perf_counter()
            sim.preload(eng, args.image)
            out.setdefault("save_load_s", {})[eng.name] = round(time.perf_counter() - t0, 1)
        tasks = make_tasks(root, 12, salt)
        # 1 host: the router's overhead and the 1-host rate
        sim.join(sim.engines[0], args.image)
        out["router"] = router_overhead(sim, root, tasks[0], args.image, args.calls)
        print(json.dumps(out), file=sys.stderr, flush=True)  # each stage as it is measured
        rates = [seed_rate(sim, root, tasks, args.image, 1, args.per_host, args.seeds)]
        print(json.dumps(rates), file=sys.stderr, flush=True)
        for n, eng in ((2, sim.engines[1]), (3, sim.engines[2])):
            t0 = time.perf_counter()
            doc = sim.join(eng, args.image)
            out.setdefault("join", {})[eng.name] = {"join_s": round(time.perf_counter() - t0, 1),
                                                    "pull_s": doc["pulled_s"]}
            rates.append(seed_rate(sim, root, tasks, args.image, n, args.per_host, args.seeds))
            print(json.dumps(rates[-1]), file=sys.stderr, flush=True)
        out["rates"] = rates
        out["golden"] = golden_copy_vs_rebuild(sim, root, args.image, salt)
        out["load_at_end"] = os.getloadavg()
    finally:
        sim.stop()
        shutil.rmtree(root, ignore_errors=True)
    print(json.dumps(out, indent=2))


if __name__ == "__main__":
    main()
