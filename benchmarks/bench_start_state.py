"""Desktop start states, measured in one run on the real engine and the CUA image, with the
release-shaped demo tasks (their setups leave LibreOffice / evince running):

- fork-to-ready p50/p95 for Calc, Writer and evince, where "ready" is the document window
  present in the accessibility tree and checked against the golden's record:
  a cold relaunch-tier fork, a re-provision (fresh container + the full setup) and a warm-pool
  acquire; target: cold <= 0.5 x re-provision for every app, pooled acquire p50 < 50 ms
- where a cold fork's time goes: container start, desktop, cleaning, app launch, app start
  (until its first window is accessible) and the wait for the exact recorded windows
- seed latency p50/p99 of the computer engine at concurrency 4, cold and with a warm pool
- probe throughput (tasks/hour, K=2) over the six desktop demos at concurrency 1, 2, 3 and 4,
  each on fresh goldens (a salted copy per configuration), with the CPU-seconds the whole
  machine spent meanwhile (the probe is CPU-bound on 2 cores: that figure says why)

Every golden made here is deleted at the end. Prints JSON (and writes it with --json PATH); each
part carries the load average when it ended (the machine is shared: say the load with a figure).

    .venv/bin/python benchmarks/bench_start_state.py [--n 5] [--image IMAGE] [--skip-probe]
        [--skip-forks] [--concurrency 1 2 3 4]
"""

from __future__ import annotations

import argparse
import json
import os
import statistics
import sys
import tempfile
import threading
import time
from pathlib import Path

from shinken.bundles.loader import load_bundle
from shinken.sandbox.docker_provider import DockerProvider
from shinken.tiers import Tier

REPO = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(REPO))
from benchmarks.timing import pct, timed_acquires  # noqa: E402
from tests.desktop_demos import CALC, DESKTOP_DEMOS, EVINCE, WRITER, salted_copy  # noqa: E402

APPS = {"calc": CALC, "writer": WRITER, "evince": EVINCE}
PHASES = ("container_s", "desktop_s", "clean_s", "launch_s", "first_window_s", "wait_s")


def summary(xs: list[float]) -> dict[str, float]:
    return {"n": len(xs), "p50": round(statistics.median(xs), 4), "p95": round(pct(xs, 0.95), 4),
            "p99": round(pct(xs, 0.99), 4), "max": round(max(xs), 4)}


def fork_to_ready(p: DockerProvider, bundle, golden, n: int) -> dict:
    cold, reprov, phases = [], [], {k: [] for k in PHASES}
    for _ in range(n):
        t0 = time.perf_counter()
        f = p.fork(golden, tier=Tier.RELAUNCH)  # returns once the recorded windows are there and checked
        cold.append(time.perf_counter() - t0)
        for k in PHASES:
            if k in f.start_timings:
                phases[k].append(f.start_timings[k])
        f.close()
    for _ in range(n):
        t0 = time.perf_counter()
        f = p.provision(bundle, golden)
        reprov.append(time.perf_counter() - t0)
        f.close()
    with p.pool(golden, 1, tier=Tier.RELAUNCH) as pool:
        pooled = timed_acquires(pool, n, ready=1, timeout=300, poll=0.05)
    cold_s, reprov_s = summary(cold), summary(reprov)
    return {"cold_fork": cold_s, "reprovision": reprov_s, "pooled_acquire": summary(pooled),
            "cold_over_reprovision_p50": round(cold_s["p50"] / reprov_s["p50"], 3),
            "cold_phases_p50": {k: round(statistics.median(v), 4) for k, v in phases.items() if v}}


def seed_latency(root: Path, image: str, task_id: str, *, pool: int, clients: int, per_client: int) -> dict:
    from shinken.computer.contract import EngineConfig
    from shinken.computer.engine import ComputerEngine

    lat: list[float] = []
    errors: list[str] = []
    lock = threading.Lock()
    with ComputerEngine(EngineConfig(root, image, pool_size=pool), keep_goldens_on_close=True) as eng:
        eng.seed("warmup", task_id, tier="relaunch")  # golden lookup and pool start are not seed latency
        eng.end("warmup")
        if pool:
            deadline = time.monotonic() + 600
            while eng._goldens[task_id].pool.ready < pool and time.monotonic() < deadline:
                time.sleep(0.1)

        def client(i: int) -> None:
            for j in range(per_client):
                t0 = time.perf_counter()
                try:
                    gen = eng.seed(f"c{i}-{j}", task_id, tier="relaunch")
                    took = time.perf_counter() - t0
                    eng.end(f"c{i}-{j}", gen)
                    with lock:
                        lat.append(took)
                except Exception as exc:  # noqa: BLE001 - counted, reported
                    with lock:
                        errors.append(f"{type(exc).__name__}: {exc}")

        threads = [threading.Thread(target=client, args=(i,)) for i in range(clients)]
        for t in threads:
            t.start()
        for t in threads:
            t.join()
    return {"pool": pool, "concurrency": clients, **summary(lat), "errors": errors[:3], "failed": len(errors),
            "loadavg": os.getloadavg()}


def busy_cpu_s() -> float:
    """CPU-seconds the whole machine has spent busy (every process, the engine and containers)."""
    f = [int(x) for x in open("/proc/stat", encoding="ascii").readline().split()[1:]]
    return (sum(f) - f[3] - f[4]) / os.sysconf("SC_CLK_TCK")


def probe_rate(image: str, concurrency: int, tmp: Path) -> dict:
    from shinken.probes.pipeline import ProbeRequest, run_probe

    root = salted_copy(tmp / f"probe-c{concurrency}", DESKTOP_DEMOS, REPO)
    cpu0, t0 = busy_cpu_s(), time.perf_counter()
    doc = run_probe(ProbeRequest(task_root=root, image=image, run_dir=tmp / f"run-c{concurrency}", repeats=2,
                                 concurrency=concurrency))
    wall = time.perf_counter() - t0
    machine_cpu = busy_cpu_s() - cpu0
    s = doc["summary"]
    goldens = [t["golden"] for t in doc["tasks"] if t.get("golden")]
    cost = {k: round(sum(sum(t["timings"][k]) if isinstance(t["timings"][k], list) else t["timings"][k]
                         for t in doc["tasks"]), 2) for k in ("golden_build_s", "fork_s", "start_s", "reward_s")}
    return {"concurrency": concurrency, "tasks": s["total"], "kept": s["kept"], "by_tier": s.get("by_tier"),
            "wall_s": round(wall, 2), "tasks_per_hour": round(s["total"] / wall * 3600, 1),
            "cost_split_s": cost, "machine_cpu_s": round(machine_cpu, 1),
            "machine_busy": round(machine_cpu / (wall * (os.cpu_count() or 1)), 3),
            "loadavg": os.getloadavg(), "_goldens": goldens}


def main() -> int:
    ap = argparse.ArgumentParser()
    ap.add_argument("--image", default="shinken/sandbox-cua:latest")
    ap.add_argument("--n", type=int, default=5, help="samples per app and way of making a computer")
    ap.add_argument("--seeds", type=int, default=3, help="seeds per client at concurrency 4")
    ap.add_argument("--skip-probe", action="store_true")
    ap.add_argument("--skip-forks", action="store_true", help="only the probe throughput part")
    ap.add_argument("--concurrency", type=int, nargs="+", default=[1, 2, 3, 4], help="probe concurrencies to measure")
    ap.add_argument("--json", type=Path)
    args = ap.parse_args()
    res: dict = {"image": args.image, "loadavg_start": os.getloadavg(), "cpus": os.cpu_count()}
    p = DockerProvider(run_id="bench-start-state")
    goldens: list = []
    try:
        with tempfile.TemporaryDirectory() as tmp_s:
            tmp = Path(tmp_s)
            root = salted_copy(tmp / "tasks", APPS.values(), REPO)
            res["fork_to_ready"] = {}
            for app, tid in ({} if args.skip_forks else APPS).items():
                bundle = load_bundle(root / tid)
                golden = p.ensure_golden(bundle, args.image)
                goldens.append(golden)
                res["fork_to_ready"][app] = {**fork_to_ready(p, bundle, golden, args.n), "loadavg": os.getloadavg()}
                print(app, json.dumps(res["fork_to_ready"][app]), file=sys.stderr, flush=True)
            if not args.skip_forks:
                res["seed_latency"] = [seed_latency(root, args.image, CALC, pool=pool, clients=4,
                                                    per_client=args.seeds) for pool in (0, 4)]
                print("seeds", json.dumps(res["seed_latency"]), file=sys.stderr, flush=True)
            if not args.skip_probe:
                res["probe"] = []
                for c in args.concurrency:
                    r = probe_rate(args.image, c, tmp)
                    for tag in r.pop("_goldens"):
                        try:
                            p.delete_golden(p.api.inspect_image(tag)["Id"])
                        except Exception:  # noqa: BLE001 - gone already
                            pass
                    res["probe"].append(r)
                    print("probe", json.dumps(r), file=sys.stderr, flush=True)
    finally:
        for g in goldens:
            p.delete_golden(g)
        p.close()
    ratios = [v["cold_over_reprovision_p50"] for v in res["fork_to_ready"].values()]
    res["targets"] = {
        "cold_fork_at_most_half_of_reprovision": all(r <= 0.5 for r in ratios) if ratios else None,
        "pooled_acquire_p50_under_50ms": all(v["pooled_acquire"]["p50"] < 0.05 for v in res["fork_to_ready"].values())
        if ratios else None,
        "probe_at_least_600_tasks_per_hour": any(r["tasks_per_hour"] >= 600 for r in res.get("probe", [])),
    }
    res["loadavg_end"] = os.getloadavg()
    text = json.dumps(res, indent=1)
    print(text)
    if args.json:
        args.json.write_text(text + "\n")
    return 0


if __name__ == "__main__":
    sys.exit(main())
