"""Fleet figures, measured in one run (docs/fleet.md, "Measured" and "Capacity model").

Stage `fleet`, on a simulated fleet (tests/fleet_harness.py's registry and Ray head; hosts h1..h3
are private dockerds started here, each in its own network namespace with its loopback up and a
registry process of its own on the fleet registry's port and storage, each accounted in its own
cpuacct cgroup: the engine (dockerd, containerd, shims) and its containers apart), shinken/sandbox-linux
tasks (copies of demo/hello-file):

- router overhead: tool-call latency through the fleet vs a local ComputerEngine on the same
  Docker engine (h1), in pairs (one call on each side back to back, order alternating) so load
  changes hit both alike: the p50 of the pairs' differences with its ~95% confidence interval, for
  a call the engine answers without Docker and for a `docker exec` one (stage `router` measures
  this alone, on the machine's engine joined as h0);
- seeds per hour and seed p50/p99 with 1, 2 and 3 hosts at a fixed concurrency per host, with each
  host's engine, containers and agent CPU time;
- image distribution: a new host (h3, empty data root) brought to the task image by `fleet join`
  pulling it from the registry; a golden on a host that lacks it, through the agents' own path
  (fleet/golden_copy.py): copied from the registry (pushed by the host that built it) vs rebuilt
  (stage `golden` runs only this, on 2 hosts).

Stage `tiers`, on the machine's engine with the desktop image: seed p50/p99 per tier (snapshot,
relaunch, reprovision) at rated load with demand-sized warm pools: a HostAgent with 2 x group
slots, GRPO-like steps of `group` seeds of one task at once, each rollout held `hold` seconds; the
first step (no history) reported apart from the steady state; CPU, memory and disk per computer.

    .venv/bin/python benchmarks/bench_fleet.py [--stages router,fleet,tiers] [--calls 400] [--seeds 10]
        [--group 4] [--steps 5] [--hold 40] [--out results.json]
"""

from __future__ import annotations

import argparse
import json
import os
import shutil
import sys
import tempfile
import threading
import time
import uuid
from pathlib import Path

REPO = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(REPO / "tests"))
sys.path.insert(0, str(REPO))
from fleet_harness import Engine, SimFleet  # noqa: E402

from benchmarks.timing import pct  # noqa: E402

DEMO = Path(__file__).resolve().parent.parent / "demo"


def make_task(root: Path, tid: str, src: str = "hello-file") -> str:
    """A copy of a demo task under the id `tid` (its own golden)."""
    shutil.copytree(DEMO / src, root / tid)
    doc = root / tid / ("task.json" if (root / tid / "task.json").is_file() else "config.json")
    cfg = json.loads(doc.read_text())
    cfg["id"] = tid
    doc.write_text(json.dumps(cfg))
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


def median_ci(xs: list[float], z: float = 1.96) -> tuple[float, float]:
    """A distribution-free ~95% confidence interval of the median of xs (the order statistics
    n/2 -+ z*sqrt(n)/2, from the binomial count of values below the median)."""
    xs = sorted(xs)
    n = len(xs)
    half = z * n ** 0.5 / 2
    return xs[max(0, int(n / 2 - half))], xs[min(n - 1, int(n / 2 + half + 1))]


def paired(local: list[float], fleet: list[float]) -> dict:
    """Latency of both sides and the p50 of the paired differences (fleet - local of one pair),
    with its ~95% confidence interval, in ms."""
    d = [f - x for f, x in zip(fleet, local)]
    lo, hi = median_ci(d)
    return {"pairs": len(d), "local_p50_ms": round(pct(local, 0.5) * 1e3, 2), "fleet_p50_ms": round(pct(fleet, 0.5) * 1e3, 2),
            "local_p99_ms": round(pct(local, 0.99) * 1e3, 1), "fleet_p99_ms": round(pct(fleet, 0.99) * 1e3, 1),
            "added_p50_ms": round(pct(d, 0.5) * 1e3, 2), "added_ci95_ms": [round(lo * 1e3, 2), round(hi * 1e3, 2)],
            "diff_of_p50s_ms": round((pct(fleet, 0.5) - pct(local, 0.5)) * 1e3, 2)}


# The two tool calls measured: one the engine answers without Docker (an empty command is an
# argument error: the whole session path -- router, Ray, agent, engine lock, tool dispatch -- with
# nothing else to hide the hop), and a real one (`true` run in the computer: a docker exec).
ROUTER_CALLS = {"answer": {"command": ""}, "exec": {"command": "true"}}


def router_overhead(sim: SimFleet, eng: Engine, root: Path, tid: str, image: str, calls: int) -> dict:
    """Tool-call latency of one rollout through the fleet (router -> Ray -> the host's agent ->
    its engine) and of one on a local ComputerEngine on the same Docker engine, measured in pairs:
    each pair is one call on each side back to back (their order alternates), so a change of load
    hits both calls of a pair alike, and the added latency is the p50 of the pairs' differences."""
    from shinken.computer.contract import EngineConfig
    from shinken.computer.engine import ComputerEngine
    from shinken.fleet.router import FleetEngine

    saved = os.environ.get("DOCKER_HOST")
    os.environ["DOCKER_HOST"] = eng.host  # the local engine talks to the host's dockerd, as its agent does
    try:
        # keep_goldens_on_close: the agent holds the same content-addressed golden on the same engine
        local = ComputerEngine(EngineConfig(root, image, accept_filesystem=True),
                               gc_interval_s=None, keep_goldens_on_close=True)
    finally:
        if saved is None:
            os.environ.pop("DOCKER_HOST", None)
        else:
            os.environ["DOCKER_HOST"] = saved
    fleet = FleetEngine(sim.address, EngineConfig(root, image, accept_filesystem=True))
    out: dict = {"load1_start": round(os.getloadavg()[0], 1)}
    try:
        gl = local.seed("bench-local", tid)
        gf = fleet.seed("bench-fleet", tid)
        assert gf.startswith(f"{eng.name}~"), gf
        sides = ((local, "bench-local", gl), (fleet, "bench-fleet", gf))
        for kind, args in ROUTER_CALLS.items():
            for e, s, g in sides:  # warm both paths (first calls open connections)
                e.tool(s, g, "computer_exec", args)
            tl: list[float] = []
            tf: list[float] = []
            for i in range(calls):
                for e, s, g in (sides if i % 2 == 0 else sides[::-1]):
                    t0 = time.perf_counter()
                    text = e.tool(s, g, "computer_exec", args)
                    (tl if e is local else tf).append(time.perf_counter() - t0)
                    assert text.startswith("error: command is empty" if kind == "answer" else "exit code 0"), text
            out[kind] = paired(tl, tf)
            print(json.dumps({kind: out[kind]}), file=sys.stderr, flush=True)
        # Ray's own round trip to the agent (a no-op call): the transport's share of the added latency
        agent = fleet._agent(eng.name)
        tp = []
        for _ in range(calls):
            t0 = time.perf_counter()
            fleet.ray.get(agent.ping.remote(), timeout=60)
            tp.append(time.perf_counter() - t0)
        out["ray_ping_p50_ms"] = round(pct(tp, 0.5) * 1e3, 2)
        local.end("bench-local", gl)
        fleet.end("bench-fleet", gf)
    finally:
        local.close()
    out["load1_end"] = round(os.getloadavg()[0], 1)
    return out


def homed_tasks(root: Path, names: list[str], per_host: int, salt: str) -> list[str]:
    """`per_host` tasks homed on each host of `names` (rendezvous hashing over them), interleaved."""
    from shinken.fleet.nodes import home_index

    by: dict[str, list[str]] = {n: [] for n in names}
    i = 0
    while any(len(v) < per_host for v in by.values()):
        tid = f"bench-fleet-{salt}-{len(names)}h-{i}"
        i += 1
        h = names[home_index(tid, names)]
        if len(by[h]) < per_host:
            by[h].append(make_task(root, tid))
    return [by[n][k] for k in range(per_host) for n in names]


def seed_rate(sim: SimFleet, root: Path, image: str, hosts: int, per_host: int, seeds: int, salt: str) -> dict:
    """`seeds` seed+end cycles per host at `per_host` at once per host, over tasks homed evenly on
    the hosts (`per_host` each, so each host meets its share and spills are rare); per host: where
    the seeds went, its engine's and its containers' CPU (cgroups), its agent's CPU."""
    from shinken.computer.contract import EngineConfig
    from shinken.fleet.router import FleetEngine

    names = [h.name for h in FleetEngine(sim.address, EngineConfig(root, image)).view(fresh=True)[0]]
    tasks = homed_tasks(root, names, per_host, salt)
    fleet = FleetEngine(sim.address, EngineConfig(root, image, seed_timeout_s=120))  # finds the task folders made just now
    for i, tid in enumerate(tasks):  # warm goldens on the tasks' homes first: the rate is of forks
        g = fleet.seed(f"bench-warm-{i}", tid)
        fleet.end(f"bench-warm-{i}", g)
    lat: list[float] = []
    where: dict[str, int] = {}
    lock = threading.Lock()
    todo = list(range(seeds * hosts))
    engines = [e for e in sim.engines if getattr(e, "cgroup", None)][:hosts]
    _, info = fleet.view(fresh=True)
    agents = {n: int(i["pid"]) for n, i in info.items() if "pid" in i}
    cpu0 = {e.name: host_cpu_s(e) for e in engines}
    agent0 = {n: proc_cpu_s(p) for n, p in agents.items()}

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

    load0 = os.getloadavg()[0]
    started = time.perf_counter()
    threads = [threading.Thread(target=worker, args=(w,)) for w in range(per_host * hosts)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    wall = time.perf_counter() - started
    per_host_cpu = {}
    for e in engines:
        c1 = host_cpu_s(e)
        per_host_cpu[e.name] = {k: round(c1[k] - cpu0[e.name][k], 1) for k in c1}
        if e.name in agents:
            per_host_cpu[e.name]["agent"] = round(proc_cpu_s(agents[e.name]) - agent0[e.name], 1)
    return {"hosts": hosts, "concurrency": per_host * hosts, "seeds": len(lat), "wall_s": round(wall, 1),
            "seeds_per_hour": round(len(lat) / wall * 3600), "p50_s": round(pct(lat, 0.5), 2),
            "p99_s": round(pct(lat, 0.99), 2), "placed": where, "cpu_s": per_host_cpu,
            "load1": [round(load0, 1), round(os.getloadavg()[0], 1)]}


def golden_copy_vs_rebuild(sim: SimFleet, root: Path, salt: str, pairs: int = 3, *, source: str = "h1",
                           target: str = "h2", src_task: str = "hello-file", image: str = "") -> dict:
    """A golden on a host that lacks it, through the agents' own path (fleet/golden_copy.py), in
    `pairs` interleaved pairs: task A's golden built on h1, which pushes it to the registry, then A's
    first seed on h2 (copied: pulled from the registry); task B's first seed on h2, which the
    registry has no copy of (built there). Per seed, how its golden came and its seconds as h2's
    engine timed them (the seed's timing), and the whole seed's wall time through Ray."""
    from shinken.bundles.loader import load_bundle
    from shinken.computer.contract import EngineConfig
    from shinken.fleet import cluster
    from shinken.fleet.nodes import bundle_payload
    from shinken.fleet.wire import Seeded, SeedRequest

    ray = cluster.connect(sim.address)
    h1, h2 = cluster.find_agent(ray, source), cluster.find_agent(ray, target)
    rollout = EngineConfig(root, image).rollout()

    def seed(agent, session: str, bundle) -> dict:
        ray.get(agent.add_task.remote(bundle_payload(bundle)), timeout=120)
        t0 = time.perf_counter()
        ans = ray.get(agent.seed.remote(SeedRequest(session, bundle.id, bundle.path.name, bundle.bundle_hash, rollout)),
                      timeout=900)
        wall = time.perf_counter() - t0
        assert isinstance(ans, Seeded), ans
        ray.get(agent.end.remote(session, ans.generation), timeout=300)
        return {**ans.timing, "wall_s": round(wall, 2)}

    rows = []
    for k in range(pairs):
        a = load_bundle(root / make_task(root, f"bench-copy-{salt}-{k}", src_task))
        b = load_bundle(root / make_task(root, f"bench-rebuild-{salt}-{k}", src_task))
        source = seed(h1, f"bench-src-{k}", a)
        deadline = time.monotonic() + 300
        while a.id not in ray.get(h1.info.remote(), timeout=60).get("pushed", []):
            assert time.monotonic() < deadline, "h1 did not push the golden"
            time.sleep(0.2)
        copied = seed(h2, f"bench-copy-{k}", a)
        built = seed(h2, f"bench-build-{k}", b)
        rows.append({"source_on_h1": source, "copied_on_h2": copied, "built_on_h2": built,
                     "load1": round(os.getloadavg()[0], 1)})
        print(json.dumps(rows[-1]), file=sys.stderr, flush=True)
    cp = [r["copied_on_h2"]["golden_s"] for r in rows if r["copied_on_h2"].get("golden") == "copied"]
    bl = [r["built_on_h2"]["golden_s"] for r in rows if r["built_on_h2"].get("golden") == "built"]
    c = sim.engine(target).client()
    goldens = c.images.list(filters={"label": ["shinken.kind=golden", f"shinken.task=bench-copy-{salt}-0"]})
    layer = (goldens[0].attrs["Size"] - c.images.get(image or sim.image).attrs["Size"]) if goldens else None
    c.close()
    info = ray.get(h2.info.remote(), timeout=60)
    return {"pairs": rows, "copied_golden_s": cp, "built_golden_s": bl,
            "copied_p50_s": round(pct(cp, 0.5), 2) if cp else None, "built_p50_s": round(pct(bl, 0.5), 2) if bl else None,
            "rebuild_over_copy": round(pct(bl, 0.5) / pct(cp, 0.5), 1) if cp and bl else None,
            "golden_layer_mib": round(layer / 2**20, 2) if layer is not None else None,
            "h2_counts": {k: info.get(k) for k in ("goldens_copied", "goldens_built", "copy_fallbacks")},
            "load1": os.getloadavg()[0]}


def golden_stage(args: argparse.Namespace) -> dict:
    """Only the golden copy-vs-rebuild measurement: the registry, h1 and h2, the head, both joined."""
    from shinken.runtime import cache_root

    os.environ.setdefault("RAY_AUTH_MODE", "disabled")
    sim = SimFleet(extra=0, slots=args.per_host, cache=cache_root() / "fleet-test")
    sim.image = args.image  # type: ignore[attr-defined]
    root = Path(tempfile.mkdtemp(prefix="bench-golden-"))
    try:
        sim.start_registry()
        engines = [start_host_engine(sim, 1), start_host_engine(sim, 2)]
        sim.start_head()
        os.environ.update(sim.env)
        r = sim.shinken("image", "push", args.image, "--registry", sim.registry, "--json", timeout=1800)
        assert r.returncode == 0, r.stderr
        for eng in engines:
            sim.join(eng, args.image)
        return golden_copy_vs_rebuild(sim, root, uuid.uuid4().hex[:8], args.pairs)
    finally:
        sim.stop()
        remove_cgroups(sim)
        shutil.rmtree(root, ignore_errors=True)


def golden_desktop_stage(args: argparse.Namespace) -> dict:
    """Golden copy vs rebuild for desktop tasks (the desktop image): the machine's engine as host
    h0 (it holds the desktop image; its agent builds each golden and pushes it), one private
    dockerd h1 with an empty data root (the image loaded into it), a registry in a temporary
    folder. Nothing persists: the registry, h1's data root and the goldens go at the end."""
    os.environ.setdefault("RAY_AUTH_MODE", "disabled")
    sim = SimFleet(extra=0, slots=2)  # no cache: the desktop image's layers must not stay on the disk
    sim.image = args.cua_image  # type: ignore[attr-defined]
    root = Path(tempfile.mkdtemp(prefix="bench-golden-desktop-"))
    out: dict = {"image": args.cua_image}
    try:
        sim.start_registry()
        h1 = start_host_engine(sim, 1, fresh=True)
        sim.start_head()
        os.environ.update(sim.env)
        t0 = time.perf_counter()
        r = sim.shinken("image", "push", args.cua_image, "--registry", sim.registry, "--json", timeout=3600)
        assert r.returncode == 0, r.stderr
        out["push_s"] = round(time.perf_counter() - t0, 1)
        t0 = time.perf_counter()
        sim.preload(h1, args.cua_image)
        out["load_into_h1_s"] = round(time.perf_counter() - t0, 1)
        from fleet_harness import RAY_ARGS

        for eng in (sim.engines[0], h1):  # fixed-size (no) pools: the seeds' own makes only
            j = sim.shinken("fleet", "join", "--address", sim.address, "--name", eng.name, "--slots", "2",
                            "--registry", sim.registry, "--image", args.cua_image, "--num-cpus", "2",
                            "--no-demand-pools", "--json", docker_host=eng.host,
                            env={"SHINKEN_RAY_START_ARGS": RAY_ARGS + " --node-ip-address=127.0.0.1"})
            assert j.returncode == 0, j.stderr
        out["tasks"] = {}
        for src in args.golden_tasks.split(","):
            out["tasks"][src] = golden_copy_vs_rebuild(sim, root, uuid.uuid4().hex[:8], args.pairs, source="h0",
                                                       target="h1", src_task=src, image=args.cua_image)
            print(json.dumps({src: out["tasks"][src]}), file=sys.stderr, flush=True)
        return out
    finally:
        sim.stop()
        remove_cgroups(sim)
        shutil.rmtree(root, ignore_errors=True)


def cgroup_cpu_s(cid: str) -> float | None:
    """CPU seconds a container used so far (cgroup v1 cpuacct under the cgroupfs driver's `docker/`)."""
    for path in (f"/sys/fs/cgroup/cpuacct/docker/{cid}/cpuacct.usage", f"/sys/fs/cgroup/cpu,cpuacct/docker/{cid}/cpuacct.usage"):
        try:
            return int(Path(path).read_text()) / 1e9
        except OSError:
            continue
    return None


def container_costs(client, cid: str) -> dict:
    """Memory (MiB, cgroup usage minus page cache, as `docker stats` shows it) and writable-layer disk (MiB)."""
    st = client.api.stats(cid, stream=False)
    mem = st.get("memory_stats", {})
    usage = mem.get("usage", 0) - mem.get("stats", {}).get("cache", 0)
    found = client.api.containers(all=True, size=True, filters={"id": cid})
    rw = (found[0].get("SizeRw") or 0) if found else 0
    return {"mem_mib": round(usage / 2**20, 1), "rw_mib": round(rw / 2**20, 1)}


TIER_TASKS = {"snapshot": "hello-file", "relaunch": "ced142d7-fb36-55fc-b1c5-2a60c026e7d0",  # Calc
              "reprovision": "2d4740ff-ab49-5d11-9acc-ba0c7687d012"}  # Writer + Find and Replace


def pool_containers(client, task: str) -> list[str]:
    return [c["Id"] for c in client.api.containers(filters={"label": ["shinken.kind=pool", f"shinken.task={task}"]})]


def idle_shrink(engine, client, task: str, idle_s: float) -> dict:
    """After the last rollout of a task ended: what its warm pool holds (computers, memory) and the
    CPU its warm computers use until the pool has shrunk back to none (idle_s after the last seed)."""
    t0 = time.perf_counter()
    cids = pool_containers(client, task)
    held = [container_costs(client, c) for c in cids]
    cpu0 = {c: cgroup_cpu_s(c) for c in cids}
    cpu_last = dict(cpu0)
    while True:
        now = pool_containers(client, task)
        for c in now:
            v = cgroup_cpu_s(c)
            if v is not None:
                cpu_last[c] = v
        warm = engine.pool_targets().get(task, {})
        if not now and not warm.get("size") and not warm.get("making"):  # shrunk: no target, none being made
            break
        if time.perf_counter() - t0 > idle_s + 180:
            break
        time.sleep(2)
    warm = engine.pool_targets().get(task, {})
    return {"warm_at_end": len(cids), "warm_mem_mib": round(sum(h["mem_mib"] for h in held), 1),
            "idle_cpu_s": round(sum((cpu_last[c] or 0) - (cpu0[c] or 0) for c in cids), 3),
            "shrunk_to_zero_s": round(time.perf_counter() - t0, 1), "left": len(pool_containers(client, task)),
            "pool_after": warm, "idle_s_policy": idle_s}


def tier_seeds(image: str, tier: str, *, group: int, steps: int, hold_s: float, slots: int, pools: bool = True,
               idle_s: float | None = None) -> dict:
    """Seed latency at rated load with demand-sized pools, on one host: the host agent's own code
    (HostAgent, in this process, on the machine's Docker engine; the router's added latency is
    measured separately) with `slots` slots. Rated load: GRPO-like steps, each a group of `group`
    seeds of one task at once, each rollout held `hold_s` (the policy's turns), then ended; the
    next step follows. Step 1 meets no history (cold); steps 2.. are the steady state measured."""
    import docker as docker_sdk

    from shinken.bundles.loader import load_bundle
    from shinken.computer.contract import EngineConfig
    from shinken.fleet.agent import HostAgent
    from shinken.fleet.nodes import bundle_payload
    from shinken.fleet.wire import Seeded, SeedRequest

    sys.path.insert(0, str(Path(__file__).resolve().parent.parent / "tests"))
    from desktop_demos import salted_copy

    root = Path(tempfile.mkdtemp(prefix=f"bench-tier-{tier}-"))
    tid = TIER_TASKS[tier]
    salted_copy(root, [tid], Path(__file__).resolve().parent.parent)
    bundle = load_bundle(root / tid)
    agent = HostAgent(f"tier-{tier}", slots, image, demand_pools=pools)
    rollout = EngineConfig(root, image).rollout()  # a server's default config: checked tiers
    engine = agent.engine_for(rollout)  # the engine the seeds below are served by
    if pools and idle_s is not None and engine.demand is not None:  # a shorter idle window, to watch it shrink
        import dataclasses

        engine.demand.policy = dataclasses.replace(engine.demand.policy, idle_s=idle_s)
    client = docker_sdk.from_env()
    agent.add_task(bundle_payload(bundle))
    rows: list[dict] = []
    costs: list[dict] = []
    failures: list[str] = []
    try:
        for step in range(steps):
            lat: list[float] = [0.0] * group
            gens: list[str | None] = [None] * group
            hits0 = engine.stats["pool_hits"]

            def one(i: int) -> None:
                t0 = time.perf_counter()
                for attempt in range(3):  # a golden build whose desktop did not come up (seen at load 40+) is retried
                    a = agent.seed(SeedRequest(f"t{step}-{i}", bundle.id, bundle.path.name, bundle.bundle_hash, rollout,
                                               tier))
                    if isinstance(a, Seeded):
                        break
                    failures.append(f"step {step + 1}: {a}"[:240])
                lat[i] = time.perf_counter() - t0
                assert isinstance(a, Seeded), a
                gens[i] = a.generation

            threads = [threading.Thread(target=one, args=(i,)) for i in range(group)]
            for t in threads:
                t.start()
            for t in threads:
                t.join()
            hits = engine.stats["pool_hits"] - hits0
            # A computer whose start state did not match twice starts its rollout masked (no fork).
            forks = [engine._sessions[f"t{step}-{i}"].fork for i in range(group)]
            masked = sum(1 for f in forks if f is None)
            cids = [f.id for f in forks if f is not None]
            cpu_at_seed = [cgroup_cpu_s(c) for c in cids]
            time.sleep(hold_s / 2)
            if step == 1 or (not costs and step > 1):
                costs = [container_costs(client, c) for c in cids]
            time.sleep(hold_s / 2)
            cpu_at_end = [cgroup_cpu_s(c) for c in cids]
            for i in range(group):
                assert gens[i] is not None
                agent.end(f"t{step}-{i}", gens[i])
            rows.append({"step": step + 1, "seed_s": [round(x, 2) for x in lat], "pool_hits": hits, "masked": masked,
                         "cpu_to_ready_s": [round(c, 2) if c is not None else None for c in cpu_at_seed],
                         "cpu_hold_s": [round(b - a, 2) if a is not None and b is not None else None
                                        for a, b in zip(cpu_at_seed, cpu_at_end)],
                         "warm": engine.pool_targets().get(bundle.id, {}), "load1": os.getloadavg()[0]})
            print(json.dumps({"tier": tier, **rows[-1]}), file=sys.stderr, flush=True)
        idle = idle_shrink(engine, client, bundle.id, idle_s or 300.0) if pools else None
        steady = [x for r in rows[1:] for x in r["seed_s"]]
        cold = rows[0]["seed_s"]
        cpu = [x for r in rows for x in r["cpu_to_ready_s"] if x is not None]
        golden = client.images.list(filters={"label": [f"shinken.task={bundle.id}", "shinken.kind=golden"]})
        base = client.images.get(image).attrs["Size"]
        return {"tier": tier, "task": bundle.id, "group": group, "steps": steps, "hold_s": hold_s, "slots": slots,
                "cold_p50_s": round(pct(cold, 0.5), 2), "cold_max_s": round(max(cold), 2),
                "steady_p50_s": round(pct(steady, 0.5), 2), "steady_p99_s": round(pct(steady, 0.99), 2),
                "steady_seeds": len(steady), "masked_start_state": sum(r["masked"] for r in rows),
                "steady_masked": sum(r["masked"] for r in rows[1:]), "pool_hit_share": round(sum(r["pool_hits"] for r in rows[1:]) / max(1, len(steady)), 2),
                "cpu_per_computer_to_ready_s_p50": round(pct(cpu, 0.5), 2) if cpu else None,
                "desktop_costs": costs,
                "golden_layer_mib": round((golden[0].attrs["Size"] - base) / 2**20, 1) if golden else None,
                "make_s": engine.pool_targets().get(bundle.id, {}).get("make_s"), "seed_failures": failures,
                "pools": pools, "idle": idle, "rows": rows}
    finally:
        agent.close()
        client.close()
        shutil.rmtree(root, ignore_errors=True)


def _summary(lat: list[float]) -> dict:
    return {"seeds": len(lat), "p50_s": round(pct(lat, 0.5), 2) if lat else None,
            "p99_s": round(pct(lat, 0.99), 2) if lat else None, "max_s": round(max(lat), 2) if lat else None}


def tier_rated(image: str, tier: str, *, group: int, groups: int, groups_above: int, utilisation: float = 2 / 3,
               min_period_s: float = 0.8, fill_timeout_s: float = 900.0) -> dict:
    """Seed latency at a tier's rated load with demand-sized pools, and at twice that rate.

    One host agent (HostAgent, in this process, on the machine's Docker engine; the router's added
    latency is measured separately) with demand pools. GRPO-shaped demand: groups of `group` seeds
    of one task at once, open loop (a group every `period` seconds whatever the earlier ones do),
    each rollout held 0.8 x period, then ended. The first group meets no history (the golden's
    build, computers made on demand; its pool then pre-warms `group`); it is reported apart, and the
    pool's make time is measured as it fills.

    Rated load: a pool makes `parallel` computers at once, so it refills a group of N in
    ceil(N / parallel) x make time; the rated period is that divided by `utilisation` (2/3: the
    refills take two thirds of the time between groups), re-read before each group from the
    pool's recent worst make time (the slowest of its last 8: the machine's load moves it). Above:
    half the period on the pool's mean make time (utilisation 4/3 of what the host refills on
    average: the refills cannot keep up, whatever an outlier did to the worst make)."""
    import dataclasses
    import math

    import docker as docker_sdk

    from shinken.bundles.loader import load_bundle
    from shinken.computer.contract import EngineConfig
    from shinken.fleet.agent import HostAgent
    from shinken.fleet.nodes import bundle_payload
    from shinken.fleet.wire import Seeded, SeedRequest

    sys.path.insert(0, str(Path(__file__).resolve().parent.parent / "tests"))
    from desktop_demos import salted_copy

    root = Path(tempfile.mkdtemp(prefix=f"bench-rated-{tier}-"))
    tid = TIER_TASKS[tier]
    salted_copy(root, [tid], Path(__file__).resolve().parent.parent)
    bundle = load_bundle(root / tid)
    # Slots: the live groups (a group's rollouts overlap the next group's seeds for a moment) and the
    # warm computers Little's law asks for at twice the rated rate; the resident count is measured.
    slots = 3 * group + 4
    agent = HostAgent(f"rated-{tier}", slots, image, demand_pools=True)
    rollout = EngineConfig(root, image).rollout()  # a server's default config: checked tiers
    eng = agent.engine_for(rollout)
    assert eng.demand is not None
    # groups here arrive at once: a group gap shorter than the shortest period keeps groups apart
    eng.demand.policy = dataclasses.replace(eng.demand.policy, group_gap_s=0.5)
    parallel = eng.demand.policy.parallel
    client = docker_sdk.from_env()
    agent.add_task(bundle_payload(bundle))
    failures: list[str] = []
    resident_max = [0]
    stop = threading.Event()
    lock = threading.Lock()
    live = [0]

    def watch() -> None:  # desktops resident on the host: live rollouts + ready + being made
        while not stop.wait(0.5):
            w = eng.pool_targets().get(bundle.id, {})
            with lock:
                resident_max[0] = max(resident_max[0], live[0] + w.get("ready", 0) + w.get("making", 0))

    def seed_one(sid: str, lat: list[float], idx: int, hits: list[bool]) -> str | None:
        t0 = time.perf_counter()
        a: object = None
        for _ in range(3):  # a golden build whose desktop did not come up (seen at load 40+) is retried
            a = agent.seed(SeedRequest(sid, bundle.id, bundle.path.name, bundle.bundle_hash, rollout, tier))
            if isinstance(a, Seeded):
                hits[idx] = a.timing.get("computer") == "pool"
                break
            failures.append(f"{sid}: {a}"[:240])
        lat[idx] = time.perf_counter() - t0
        if not isinstance(a, Seeded):
            return None
        with lock:
            live[0] += 1
        return a.generation

    def run_group(name: str, hold_s: float) -> dict:
        w0 = eng.pool_targets().get(bundle.id, {})
        lat = [0.0] * group
        hits = [False] * group
        gens: list[str | None] = [None] * group
        ts = [threading.Thread(target=lambda i=i: gens.__setitem__(i, seed_one(f"{name}-{i}", lat, i, hits)))
              for i in range(group)]
        for t in ts:
            t.start()
        for t in ts:
            t.join()

        def end_later() -> None:
            time.sleep(hold_s)
            for i, g in enumerate(gens):
                if g is not None:
                    agent.end(f"{name}-{i}", g)
                    with lock:
                        live[0] -= 1

        threading.Thread(target=end_later, daemon=True).start()
        row = {"group": name, "seed_s": [round(x, 2) for x in lat], "from_pool": sum(hits), "ready_before": w0.get("ready"),
               "target_before": w0.get("size"), "make_s": w0.get("make_s"), "make_s_max": w0.get("make_s_max"), "load1": round(os.getloadavg()[0], 1),
               "ok": sum(g is not None for g in gens)}
        print(json.dumps({"tier": tier, **row}), file=sys.stderr, flush=True)
        return row

    def phase(name: str, n: int, factor: float) -> dict:
        rows: list[dict] = []
        periods: list[float] = []
        workers: list[threading.Thread] = []
        nxt = time.perf_counter()
        for k in range(n):
            w = eng.pool_targets().get(bundle.id, {})
            # rated: on the recent worst make (the load moves it); above: on the mean make, so that
            # twice the rate is above what the host refills even when the worst make was an outlier
            make_s = (w.get("make_s_max") if factor >= 1 else w.get("make_s")) or w.get("make_s") or 3.0
            period = max(min_period_s, math.ceil(group / parallel) * make_s / utilisation * factor)
            periods.append(round(period, 1))
            delay = nxt - time.perf_counter()
            if delay > 0:
                time.sleep(delay)
            th = threading.Thread(target=lambda k=k, p=period: rows.append(run_group(f"{name}{k}", 0.8 * p)))
            th.start()
            workers.append(th)
            nxt += period
        for th in workers:
            th.join()
        lat = [x for r in rows for x in r["seed_s"]]
        return {**_summary(lat), "from_pool": sum(r["from_pool"] for r in rows),
                "periods_s": periods, "rate_per_min": [round(60 * group / p, 2) for p in periods],
                "make_s": sorted({r["make_s"] for r in rows if r["make_s"]}),
                "load1": [min(r["load1"] for r in rows), max(r["load1"] for r in rows)], "rows": rows}

    watcher = threading.Thread(target=watch, daemon=True)
    watcher.start()
    try:
        t0 = time.perf_counter()
        cold = run_group("cold", 0.0)
        deadline = time.perf_counter() + fill_timeout_s
        while time.perf_counter() < deadline:  # the first group pre-warms its size: the pool's make time
            w = eng.pool_targets().get(bundle.id, {})
            if w.get("ready", 0) >= group and w.get("make_s"):
                break
            time.sleep(1)
        prewarm = eng.pool_targets().get(bundle.id, {})
        prewarm_s = time.perf_counter() - t0
        rated = phase("rated", groups, 1.0)
        time.sleep(2)
        above = phase("above", groups_above, 0.5)
        time.sleep(1)
        costs = []
        for c in client.api.containers(filters={"label": [f"shinken.task={bundle.id}"]}):
            try:  # a pool turns its computers over: one listed a moment ago may be gone (empty stats)
                costs.append(container_costs(client, c["Id"]))
            except (docker_sdk.errors.APIError, ValueError):
                continue
            if len(costs) == 2:
                break
        return {"tier": tier, "task": bundle.id, "group": group, "parallel": parallel, "slots": slots,
                "utilisation_rated": round(utilisation, 2), "cold": cold, "prewarm": prewarm,
                "prewarm_s": round(prewarm_s, 1), "rated": rated, "above": above,
                "resident_max": resident_max[0], "desktop_costs": costs, "seed_failures": failures,
                "final_pool": eng.pool_targets().get(bundle.id, {})}
    finally:
        stop.set()
        agent.close()
        client.close()
        shutil.rmtree(root, ignore_errors=True)


def _images(args: argparse.Namespace) -> None:
    """The images of the current sources (built once, cached by content hash), unless named."""
    from shinken.images.build import build_image

    if not args.image:
        args.image = build_image("linux").tag
    if args.stages & {"tiers", "rated", "golden-desktop"} and not args.cua_image:
        args.cua_image = build_image("cua").tag


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--stages", default="fleet,tiers",
                    help="router (overhead alone, on this machine's engine), fleet (router, scaling, images, goldens), "
                    "golden (only the golden copy vs rebuild, on 2 hosts), tiers")
    ap.add_argument("--pairs", type=int, default=3, help="copy/rebuild pairs of the golden measurement")
    ap.add_argument("--golden-tasks", default="2d4740ff-ab49-5d11-9acc-ba0c7687d012,ced142d7-fb36-55fc-b1c5-2a60c026e7d0",
                    help="stage golden-desktop: demo desktop tasks (default: the Writer dialog task, Calc)")
    ap.add_argument("--image", default="", help="the fleet's task image (default: shinken/sandbox-linux of these sources)")
    ap.add_argument("--cua-image", default="", help="the desktop image of the tier runs (default: shinken/sandbox-cua)")
    ap.add_argument("--calls", type=int, default=400, help="pairs of tool calls per kind in the router overhead")
    ap.add_argument("--seeds", type=int, default=10, help="seeds per host in the scaling runs")
    ap.add_argument("--per-host", type=int, default=2)
    ap.add_argument("--tiers", default="snapshot,relaunch,reprovision")
    ap.add_argument("--group", default="4", help="GRPO group size of the tier runs (stage rated: one per tier, comma-separated)")
    ap.add_argument("--groups", type=int, default=10, help="stage rated: groups at the rated rate")
    ap.add_argument("--groups-above", type=int, default=6, help="stage rated: groups at twice the rated rate")
    ap.add_argument("--steps", type=int, default=5)
    ap.add_argument("--hold", type=float, default=40.0, help="seconds each tier-run rollout is held")
    ap.add_argument("--out", default="", help="also write the results (JSON) here")
    ap.add_argument("--without-pools", action="store_true", help="each tier also without warm pools, right after")
    ap.add_argument("--idle", type=float, default=None, help="demand pools' idle window in the tier runs (default 300 s)")
    args = ap.parse_args()
    args.stages = set(args.stages.split(","))
    _images(args)
    out: dict = {"load_at_start": os.getloadavg(), "image": args.image, "cua_image": args.cua_image}
    if "router" in args.stages:
        out["router"] = router_stage(args)
    if "fleet" in args.stages:
        out["fleet"] = fleet_stage(args)
    elif "golden" in args.stages:
        out["golden"] = golden_stage(args)
    if "golden-desktop" in args.stages:  # the same for desktop tasks on the desktop image
        out["golden_desktop"] = golden_desktop_stage(args)
    if "rated" in args.stages:  # seed latency per tier at its rated load and at twice it
        out["rated"] = {}
        groups = [int(g) for g in str(args.group).split(",")]
        for i, tier in enumerate(args.tiers.split(",")):
            out["rated"][tier] = tier_rated(args.cua_image, tier, group=groups[min(i, len(groups) - 1)],
                                            groups=args.groups, groups_above=args.groups_above)
            print(json.dumps({k: v for k, v in out["rated"][tier].items()}), file=sys.stderr, flush=True)
            if args.out:
                Path(args.out).write_text(json.dumps(out, indent=2))
    if "tiers" in args.stages:
        out["tiers"] = {}
        for tier in args.tiers.split(","):
            out["tiers"][tier] = tier_seeds(args.cua_image, tier, group=int(args.group), steps=args.steps,
                                            hold_s=args.hold, slots=2 * int(args.group), idle_s=args.idle)
            print(json.dumps({k: v for k, v in out["tiers"][tier].items() if k != "rows"}), file=sys.stderr, flush=True)
            if args.without_pools:  # same host, same golden (built above), no warm computers
                key = f"{tier}_without_pools"
                out["tiers"][key] = tier_seeds(args.cua_image, tier, group=int(args.group), steps=args.steps,
                                               hold_s=args.hold, slots=2 * int(args.group), pools=False)
                print(json.dumps({k: v for k, v in out["tiers"][key].items() if k != "rows"}), file=sys.stderr, flush=True)
    out["load_at_end"] = os.getloadavg()
    text = json.dumps(out, indent=2)
    if args.out:
        Path(args.out).write_text(text)
    print(text)


CGROUP = Path("/sys/fs/cgroup/cpuacct")


def start_host_engine(sim: SimFleet, i: int, *, fresh: bool = False) -> Engine:
    """A private dockerd as host h<i>, accounted on its own: in a network namespace of its own with
    its loopback up and a registry process of its own there on the fleet registry's port and
    storage (so the engine pulls from "the registry" as a real host does), the engine (dockerd,
    containerd, shims) in cpuacct cgroup /<cg>/engine and its containers under /<cg>
    (--cgroup-parent). `fresh`: an empty data root (a new host), never the cache."""
    d = sim.base / f"d{i}"
    d.mkdir()
    sock = f"unix://{d}/docker.sock"
    data = d / "data" if fresh or sim.cache is None else sim.cache / f"d{i}-data"
    cg = f"shkf-{sim.base.name}-h{i}"
    (CGROUP / cg / "engine").mkdir(parents=True, exist_ok=True)
    script = (f"echo $$ > {CGROUP / cg / 'engine' / 'cgroup.procs'} && ip link set lo up && "
              f"(docker-registry serve {sim.base / 'registry.yml'} > {d / 'registry.log'} 2>&1 &) && "
              f"exec dockerd --host {sock} --data-root {data} --exec-root {d / 'exec'} --pidfile {d / 'docker.pid'} "
              f"--bridge none --iptables=false --ip-masq=false --storage-driver overlay2 --cgroup-parent /{cg}")
    args = ["unshare", "--net", "--", "sh", "-c", script]
    eng = Engine(f"h{i}", sock, args=args, log=d / "dockerd.log")
    eng.cgroup = cg  # type: ignore[attr-defined]
    from fleet_harness import _start

    eng.proc = _start(args, d / "dockerd.log")
    eng.wait_up()
    sim.engines.append(eng)
    return eng


def host_cpu_s(eng: Engine) -> dict:
    """CPU seconds so far of a host's engine (dockerd, containerd, shims) and of its containers."""
    cg = CGROUP / getattr(eng, "cgroup")
    total = int((cg / "cpuacct.usage").read_text()) / 1e9
    engine = int((cg / "engine" / "cpuacct.usage").read_text()) / 1e9
    return {"engine": engine, "containers": total - engine}


def remove_cgroups(sim: SimFleet) -> None:
    for eng in sim.engines:
        cg = getattr(eng, "cgroup", None)
        if cg is None:
            continue
        for ctl_root in Path("/sys/fs/cgroup").iterdir():
            base = ctl_root / cg
            if not base.is_dir():
                continue
            for sub in sorted(base.glob("*/"), reverse=True):
                try:
                    sub.rmdir()
                except OSError:
                    pass
            try:
                base.rmdir()
            except OSError:
                pass


def router_stage(args: argparse.Namespace) -> dict:
    """Router overhead alone: a Ray head and the machine's own Docker engine joined as host h0 (the
    linux image is there already: no registry, no private engine), then router_overhead."""
    from fleet_harness import RAY_ARGS

    os.environ.setdefault("RAY_AUTH_MODE", "disabled")
    sim = SimFleet(extra=0, slots=2)
    root = Path(tempfile.mkdtemp(prefix="bench-fleet-"))
    try:
        sim.start_head()
        os.environ.update(sim.env)
        tid = make_tasks(root, 1, uuid.uuid4().hex[:8])[0]
        h0 = sim.engines[0]
        r = sim.shinken("fleet", "join", "--address", sim.address, "--name", h0.name, "--slots", "2", "--image", args.image,
                        "--num-cpus", "2", "--json", docker_host=h0.host,
                        env={"SHINKEN_RAY_START_ARGS": RAY_ARGS + " --node-ip-address=127.0.0.1"})
        assert r.returncode == 0, r.stderr
        return router_overhead(sim, h0, root, tid, args.image, args.calls)
    finally:
        sim.stop()
        shutil.rmtree(root, ignore_errors=True)


def fleet_stage(args: argparse.Namespace) -> dict:
    from shinken.runtime import cache_root

    os.environ.setdefault("RAY_AUTH_MODE", "disabled")
    out: dict = {}
    # h1, h2 on the fleet test's cached data roots (they hold the image when a test ran here before);
    # h3 always starts empty: a new host, brought to the image by `fleet join` pulling it.
    sim = SimFleet(extra=0, slots=args.per_host, cache=cache_root() / "fleet-test")
    out["cached"] = sim.cache is not None
    root = Path(tempfile.mkdtemp(prefix="bench-fleet-"))
    salt = uuid.uuid4().hex[:8]
    try:
        sim.start_registry()
        h1 = start_host_engine(sim, 1)
        sim.start_head()
        os.environ.update(sim.env)
        t0 = time.perf_counter()
        r = sim.shinken("image", "push", args.image, "--registry", sim.registry, "--json", timeout=1800)
        assert r.returncode == 0, r.stderr
        out["push_s"] = round(time.perf_counter() - t0, 1)  # layers the registry already held are skipped
        tasks = make_tasks(root, 1, salt)
        t0 = time.perf_counter()
        doc = sim.join(h1, args.image)
        out["join"] = {"h1": {"join_s": round(time.perf_counter() - t0, 1), "pull_s": doc["pulled_s"]}}
        out["router"] = router_overhead(sim, h1, root, tasks[0], args.image, args.calls)
        print(json.dumps(out), file=sys.stderr, flush=True)  # each stage as it is measured
        rates = [seed_rate(sim, root, args.image, 1, args.per_host, args.seeds, salt)]
        print(json.dumps(rates), file=sys.stderr, flush=True)
        for n in (2, 3):
            eng = start_host_engine(sim, n, fresh=n == 3)
            t0 = time.perf_counter()
            doc = sim.join(eng, args.image)
            out["join"][eng.name] = {"join_s": round(time.perf_counter() - t0, 1), "pull_s": doc["pulled_s"],
                                     "fresh_engine": n == 3}
            print(json.dumps(out["join"]), file=sys.stderr, flush=True)
            rates.append(seed_rate(sim, root, args.image, n, args.per_host, args.seeds, salt))
            print(json.dumps(rates[-1]), file=sys.stderr, flush=True)
        out["rates"] = rates
        sim.image = args.image  # type: ignore[attr-defined]
        out["golden"] = golden_copy_vs_rebuild(sim, root, salt, args.pairs)
        print(json.dumps(out["golden"]), file=sys.stderr, flush=True)
    finally:
        sim.stop()
        remove_cgroups(sim)
        shutil.rmtree(root, ignore_errors=True)
    return out


if __name__ == "__main__":
    main()
