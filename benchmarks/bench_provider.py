"""The `shinken` NeMo Gym sandbox provider under load, measured in one run on the real engine.

--part ladder (host side, shinken's provider engine: provider/sandboxes.SandboxHost, the calls
  the Gym adapter makes on its thread pool; one provider per --ladder-pools size, side by side at
  each level, a pool refilled untimed between levels): N concurrent rollouts at 1x-4x the host's slots
  (slots = CPU cores). Each rollout takes a fork of a demo task's golden (seed), then replays
  the recorded rollout's steps (the computer_exec commands of a passing rollout of the task
  in tests/data/gym_rollouts/run1, recorded by `gym eval run`) with a think time before each, then closes. Run twice per level, sandboxes paused while
  the policy thinks and never paused: rollouts/hour, seed p50/p99, exec p50/p99 (an exec on a
  paused sandbox follows its resume, timed apart), sandbox memory in use (cgroup memory.usage_in_bytes
  summed over live sandboxes, sampled each second), sandbox CPU-seconds per rollout (cgroup
  cpuacct.usage), errors; with pausing, the resume before each step is timed on its own too.
--part create (inside the NeMo Gym runner, both providers through Gym's own AsyncSandbox, in
  turns): create-to-ready p50/p95 of shinken vs Gym's built-in `docker` provider, for a plain
  image and for a desktop demo task (shinken: a fork of its golden; docker: the same image,
  the task's setup files uploaded and its setup command and desktop start run).

The recorded rollouts carry no step timing, so the think time is --think-s (default 2 s)
jittered +-50% from a fixed seed; the steps themselves are replayed from the recording.

Run: .venv/bin/python benchmarks/bench_provider.py --part ladder [--seconds 60] [--json out.json]
     .venv/bin/python benchmarks/bench_provider.py --part create [--n 8]
"""

from __future__ import annotations

import argparse
import json
import os
import random
import statistics
import subprocess
import sys
import threading
import time
from pathlib import Path
from typing import Any

REPO = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(REPO))
from benchmarks.timing import pct  # noqa: E402

DEMO = REPO / "demo"
CG = Path("/sys/fs/cgroup")


ROLLOUTS = REPO / "tests" / "data" / "gym_rollouts" / "run1" / "rollouts.jsonl"  # recorded by `gym eval run`


def recorded_steps(task_id: str) -> list[str]:
    """The computer_exec commands of the first passing recorded rollout of `task_id`."""
    for line in ROLLOUTS.read_text().splitlines():
        doc = json.loads(line) if line.strip() else {}
        if doc.get("task_id") != task_id or not doc.get("reward"):
            continue
        cmds = [json.loads(item["arguments"]).get("command", "")
                for item in doc["response"]["output"]
                if item.get("type") == "function_call" and item.get("name") == "computer_exec"]
        if cmds:
            return cmds
    raise SystemExit(f"no passing recorded rollout of {task_id} with computer_exec steps in {ROLLOUTS}")


def cgroup_value(kind: str, cid: str, name: str) -> int:
    try:
        return int((CG / kind / "docker" / cid / name).read_text())
    except (OSError, ValueError):
        return 0


def load() -> str:
    return " ".join(Path("/proc/loadavg").read_text().split()[:3])


# ---------------------------------------------------------------- the ladder


def ladder_level(host: Any, task: Any, steps: list[str], n: int, seconds: float, think_s: float,
                 pause: bool, seed: int) -> dict[str, Any]:
    from shinken.provider.sandboxes import Request

    req = Request(image=None, task=task, ttl_s=900, ready_timeout_s=60, workdir=None, env={}, files={}, cpus=None,
                  memory_mib=None, disk_gib=None, ports=())
    seeds: list[float] = []
    execs: list[float] = []
    resumes: list[float] = []
    cpu: list[float] = []
    errors: list[str] = []
    done = [0]
    hits = [0]  # creates served from the warm pool (pool_size > 0)
    live: set[str] = set()
    lock = threading.Lock()
    stop_at = time.monotonic() + seconds
    mem_samples: list[int] = []
    sampling = threading.Event()

    def sampler() -> None:
        while not sampling.wait(1.0):
            with lock:
                ids = list(live)
            mem_samples.append(sum(cgroup_value("memory", c, "memory.usage_in_bytes") for c in ids))

    def worker(k: int) -> None:
        rnd = random.Random(seed * 1000 + k)
        while time.monotonic() < stop_at:
            box = None
            try:
                t0 = time.perf_counter()
                box = host.create(req)
                with lock:
                    seeds.append(time.perf_counter() - t0)
                    hits[0] += 1 if box.timings.get("pooled") else 0
                    live.add(box.id)
                for cmd in steps:
                    if pause:
                        host.pause(box)
                    time.sleep(think_s * rnd.uniform(0.5, 1.5))
                    if pause:  # what the exec would do first, timed on its own
                        t1 = time.perf_counter()
                        host.resume(box)
                        with lock:
                            resumes.append(time.perf_counter() - t1)
                    t1 = time.perf_counter()
                    r = host.exec(box, cmd, timeout_s=60)
                    with lock:
                        execs.append(time.perf_counter() - t1)
                    if r.error_type:
                        raise RuntimeError(f"exec {r.error_type}: {r.stderr}")
                with lock:
                    cpu.append(cgroup_value("cpuacct", box.id, "cpuacct.usage") / 1e9)
                    done[0] += 1
            except Exception as exc:  # noqa: BLE001 - counted, the level goes on
                with lock:
                    errors.append(f"{type(exc).__name__}: {exc}"[-300:])
            finally:
                if box is not None:
                    with lock:
                        live.discard(box.id)
                    try:
                        host.close(box)
                    except Exception as exc:  # noqa: BLE001
                        errors.append(f"close: {exc}"[:200])

    t_start = time.monotonic()
    threads = [threading.Thread(target=worker, args=(k,)) for k in range(n)]
    samp = threading.Thread(target=sampler, daemon=True)
    samp.start()
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    sampling.set()
    wall = time.monotonic() - t_start
    return {
        "concurrent": n, "paused_while_thinking": pause, "pool_size": host.config.pool_size,
        "seeds": len(seeds), "pool_hits": hits[0], "wall_s": round(wall, 1), "rollouts": done[0],
        "rollouts_per_hour": round(done[0] * 3600 / wall, 1),
        "seed_p50_s": round(pct(seeds, 0.5), 3) if seeds else None,
        "seed_p99_s": round(pct(seeds, 0.99), 3) if seeds else None,
        "exec_p50_s": round(pct(execs, 0.5), 3) if execs else None,
        "exec_p99_s": round(pct(execs, 0.99), 3) if execs else None,
        "resume_p50_s": round(pct(resumes, 0.5), 3) if resumes else None,
        "resume_p99_s": round(pct(resumes, 0.99), 3) if resumes else None,
        "mem_mean_mib": round(statistics.mean(mem_samples) / 2**20, 1) if mem_samples else None,
        "mem_peak_mib": round(max(mem_samples) / 2**20, 1) if mem_samples else None,
        "cpu_s_per_rollout": round(statistics.mean(cpu), 3) if cpu else None,
        "errors": len(errors), "error_examples": errors[:3], "load": load(),
    }


def run_ladder(args: argparse.Namespace) -> dict[str, Any]:
    from shinken.images.build import build_image
    from shinken.provider.config import ProviderConfig, TaskOptions
    from shinken.provider.sandboxes import Request, SandboxHost
    from shinken.sandbox.ownership import LABEL_RUN

    image = build_image(args.image).tag
    run = f"bench-provider-{os.getpid()}"
    # One provider per pool size (pool_size is provider config), as a Gym server keeps one.
    hosts = {k: SandboxHost(ProviderConfig.parse({"image": image, "run_id": run, "max_workers": 64, "pool_size": k}))
             for k in args.ladder_pools}
    task = TaskOptions.parse({"task_id": args.task, "task_root": str(DEMO)}, ProviderConfig.parse({}))
    steps = recorded_steps(args.task)
    warm_req = Request(image=None, task=task, ttl_s=900, ready_timeout_s=60, workdir=None, env={}, files={},
                       cpus=None, memory_mib=None, disk_gib=None, ports=())
    for host in hosts.values():  # the golden is built once, outside the timed levels; pools are made
        for attempt in range(3):  # a desktop that failed to come up under load is tried again
            try:
                host.close(host.create(warm_req))
                break
            except Exception as exc:  # noqa: BLE001
                print(f"warm-up create failed ({exc}); again", flush=True)
                if attempt == 2:
                    raise
    slots = os.cpu_count() or 1
    rows = []
    try:
        for mult in args.levels:
            n = slots * mult
            for k, host in hosts.items():
                for pause in (False, True):  # side by side at each level
                    deadline = time.monotonic() + 300
                    while host.pooled() < k and time.monotonic() < deadline:  # full again, untimed
                        time.sleep(0.2)
                    row = ladder_level(host, task, steps, n, args.seconds, args.think_s, pause, seed=mult)
                    row["x_slots"] = mult
                    rows.append(row)
                    print(json.dumps(row), flush=True)
    finally:
        for host in hosts.values():
            host.shutdown()
        api = next(iter(hosts.values())).client.api
        for c in api.containers(all=True, filters={"label": f"{LABEL_RUN}={run}"}):
            api.remove_container(c["Id"], force=True)
    return {"part": "ladder", "task": args.task, "image": image, "slots": slots, "steps": steps,
            "think_s": args.think_s, "seconds_per_level": args.seconds, "rows": rows}


# ---------------------------------------------------------------- create-to-ready vs Gym's docker provider

INNER = r'''
import asyncio, json, statistics, sys, time, tempfile
from pathlib import Path
from nemo_gym.sandbox import AsyncSandbox, SandboxSpec, create_provider
a = json.loads(sys.argv[1])
SETUP = a["setup"]

DOCKER = {"docker": {"create": {"network": a["network"]}}}

async def shinken_plain():
    sb = await AsyncSandbox({"shinken": {"run_id": a["run"], "network": a["network"]}}).start(SandboxSpec(image=a["image"]))
    return sb

async def docker_plain():
    return await AsyncSandbox(DOCKER).start(SandboxSpec(image=a["image"]))

async def shinken_task():
    cfg = {"shinken": {"run_id": a["run"], "image": a["base"], "task_root": a["task_root"], "network": a["network"]}}
    return await AsyncSandbox(cfg).start(SandboxSpec(provider_options={"task_id": a["task"]}))

POOLED = []  # one provider instance whose warm pool serves the pooled creates

async def shinken_pooled():
    if not POOLED:
        POOLED.append(create_provider({"shinken": {"run_id": a["run"], "image": a["base"], "task_root": a["task_root"],
                                                   "network": a["network"], "pool_size": a["pool_size"]}}))
    return await AsyncSandbox(POOLED[0], owns_provider=False).start(SandboxSpec(provider_options={"task_id": a["task"]}))

async def refilled(limit_s=600):
    """Untimed: wait until the warm pool is full again (what a rollout's length gives it in use)."""
    t0 = time.perf_counter()
    while POOLED and POOLED[0].host.pooled() < a["pool_size"] and time.perf_counter() - t0 < limit_s:
        await asyncio.sleep(0.2)
    return POOLED[0].host.pooled() if POOLED else 0

async def docker_task():
    sb = await AsyncSandbox(DOCKER).start(SandboxSpec(image=a["base"]))
    for path, local in SETUP["files"]:
        await sb.upload(local, path)
    r = await sb.exec("chown -R user:user /home/user", user="root")  # docker cp leaves root-owned files
    assert r.return_code == 0, r.stderr
    for cmd in SETUP["commands"]:
        r = await sb.exec(cmd, user=SETUP["user"], timeout_s=600)
        assert r.return_code == 0, (cmd, r.stdout, r.stderr)
    if SETUP["desktop"]:
        r = await sb.exec("shinken-desktop-up", timeout_s=120)
        assert r.return_code == 0, ("desktop", r.stdout, r.stderr)
    return sb

async def main():
    kinds = {"plain": [("shinken", shinken_plain), ("docker", docker_plain)],
             "task": [("shinken", shinken_task), ("shinken_pooled", shinken_pooled), ("docker", docker_task)]}
    out = {}
    for name, makers in kinds.items():
        for _, make in makers:  # warm: the golden exists, the images are in the page cache, the pool is filling
            sb = await make(); await sb.stop()
        times = {label: [] for label, _ in makers}
        for i in range(a["n"]):
            k = i % len(makers)
            for label, make in makers[k:] + makers[:k]:  # the order turns each round
                if label == "shinken_pooled":
                    if await refilled() < a["pool_size"]:
                        times.setdefault("pool_not_refilled", []).append(float(i))
                    before = POOLED[0].host.pooled()
                t0 = time.perf_counter()
                sb = await make()
                times[label].append(time.perf_counter() - t0)
                if label == "shinken_pooled" and POOLED[0].host.pooled() >= before:
                    times.setdefault("pool_misses", []).append(float(i))
                await sb.stop()
        out[name] = times
    if POOLED:
        await POOLED[0].aclose()  # drains the pool
    print(json.dumps(out))

asyncio.run(main())
'''


def task_setup(task_id: str, mount: str) -> dict[str, Any]:
    """The demo task's setup as Gym's docker provider has to run it: files to upload, commands."""
    from shinken.bundles.loader import load_bundle
    from shinken.sandbox.policy import task_needs

    b = load_bundle(DEMO / task_id)
    files, commands = [], []
    for step in b.setup:
        p = step.parameters
        if step.type == "download":
            for f in p["files"]:
                files.append([f["path"], f"{mount}/{task_id}/{f['url'].removeprefix('./')}"])
        elif step.type == "execute":
            cmd = p["command"]
            commands.append(cmd if isinstance(cmd, str) else " ".join(cmd))
    return {"files": files, "commands": commands, "user": "user", "desktop": task_needs(b).desktop}


def run_create(args: argparse.Namespace) -> dict[str, Any]:
    sys.path.insert(0, str(REPO / "tests"))
    from gym_harness import GymContainer, sandbox_image  # the suite's runner container

    from shinken.workspace.wheel import build_wheel

    tmp = Path(os.environ.get("TMPDIR", "/tmp")) / f"bench-provider-{os.getpid()}"
    wheel = build_wheel(tmp, [])
    docker_cli = subprocess.run(["which", "docker"], capture_output=True, text=True).stdout.strip()
    c = GymContainer(mounts=[tmp, DEMO], binds=[(Path(docker_cli), "/usr/local/bin/docker")])
    run = f"bench-provider-{os.getpid()}"
    # both providers' sandboxes on a network of this run (a shared engine's docker0 can be missing)
    from shinken.sandbox.ownership import labels_for

    subprocess.run(["docker", "network", "create", *[x for k, v in labels_for("network", run=run).items()
                                                      for x in ("--label", f"{k}={v}")], run],
                   check=True, capture_output=True)
    c.start()
    try:
        r = c.exec(f"/opt/gym/bin/pip install -q {wheel}", timeout=900)
        assert r.returncode == 0, r.stdout + r.stderr
        (tmp / "inner.py").write_text(INNER)
        a = {"image": sandbox_image("linux"), "base": sandbox_image("cua"), "task_root": str(DEMO), "network": run,
             "task": args.desktop_task, "n": args.n, "run": run, "pool_size": args.pool_size, "setup": task_setup(args.desktop_task, str(DEMO))}
        load_before = load()
        r = c.exec(f"/opt/gym/bin/python {tmp}/inner.py '{json.dumps(a)}'", timeout=3600)
        assert r.returncode == 0, (r.stdout + r.stderr)[-6000:]
        times = json.loads(r.stdout.strip().splitlines()[-1])
    finally:
        c.stop()
        subprocess.run(["bash", "-c", f"docker rm -f $(docker ps -aq --filter label=shinken.run={run}) "
                                      f"$(docker ps -aq --filter label=nemo-gym.sandbox=1 --filter network={run}) "
                                      f"2>/dev/null; docker network rm {run}"], capture_output=True)
    out: dict[str, Any] = {"part": "create", "n": args.n, "desktop_task": args.desktop_task, "pool_size": args.pool_size,
                           "load": f"{load_before} -> {load()}"}
    for kind, t in times.items():
        row: dict[str, Any] = {"pool_misses": len(t.pop("pool_misses", [])),
                               "pool_not_refilled": len(t.pop("pool_not_refilled", []))}
        for p, v in t.items():
            row[p] = {"p50_s": round(pct(v, 0.5), 3), "p95_s": round(pct(v, 0.95), 3),
                      "ratio_p50": round(pct(v, 0.5) / pct(t["docker"], 0.5), 3),
                      "ratio_p95": round(pct(v, 0.95) / pct(t["docker"], 0.95), 3)}
        out[kind] = row
    print(json.dumps(out, indent=1))
    return out


def markdown(res: dict[str, Any]) -> str:
    """The tables docs/provider.md shows."""
    if res["part"] == "ladder":
        lines = ["| rollouts (x slots) | pool_size (hits/seeds) | paused while thinking | rollouts/hour | seed p50 / p99 s "
                 "| exec p50 / p99 s | resume p50 / p99 s | sandbox memory mean / peak MiB | sandbox CPU-s per rollout "
                 "| errors | load |",
                 "|---|---|---|---|---|---|---|---|---|---|---|"]
        for r in res["rows"]:
            pool = f"{r.get('pool_size', 0)} ({r.get('pool_hits', 0)}/{r.get('seeds', '-')})"
            lines.append(f"| {r['concurrent']} ({r['x_slots']}x) | {pool} | {'yes' if r['paused_while_thinking'] else 'no'} "
                         f"| {r['rollouts_per_hour']} | {r['seed_p50_s']} / {r['seed_p99_s']} "
                         f"| {r['exec_p50_s']} / {r['exec_p99_s']} | {r.get('resume_p50_s') or '-'} / {r.get('resume_p99_s') or '-'} "
                         f"| {r['mem_mean_mib']} / {r['mem_peak_mib']} "
                         f"| {r['cpu_s_per_rollout']} | {r['errors']} | {r['load']} |")
        return "\n".join(lines)
    lines = ["| sandbox | shinken p50 / p95 s | Gym docker p50 / p95 s | ratio p50 / p95 |", "|---|---|---|---|"]
    names = {"shinken": "", "shinken_pooled": f", warm pool of {res.get('pool_size')}"}
    for kind in ("plain", "task"):
        r = res[kind]
        for p in ("shinken", "shinken_pooled"):
            if p not in r:
                continue
            miss = f" ({r['pool_misses']} of {res['n']} missed the pool)" if p == "shinken_pooled" else ""
            lines.append(f"| {kind}{names[p]}{miss} | {r[p]['p50_s']} / {r[p]['p95_s']} | {r['docker']['p50_s']} / "
                         f"{r['docker']['p95_s']} | {r[p]['ratio_p50']} / {r[p]['ratio_p95']} |")
    return "\n".join(lines)


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--part", choices=("ladder", "create"), required=True)
    ap.add_argument("--task", default="9a1f6c2e-5b3d-4e8a-9c71-2f0d4b6a8e13",
                    help="ladder: the demo task forked per rollout (default: the spreadsheet, a desktop task)")
    ap.add_argument("--image", default="cua", help="ladder: the base image of the task's golden (cua or linux)")
    ap.add_argument("--levels", type=int, nargs="+", default=[1, 2, 3, 4], help="ladder: multiples of the slots")
    ap.add_argument("--seconds", type=float, default=60.0, help="ladder: how long each level runs")
    ap.add_argument("--think-s", type=float, default=2.0, help="ladder: mean think time before each step")
    ap.add_argument("--ladder-pools", type=int, nargs="+", default=[0, 2],
                    help="ladder: the provider's pool_size, each run side by side at every level (0: no pool)")
    ap.add_argument("--n", type=int, default=8, help="create: samples per provider and kind")
    ap.add_argument("--desktop-task", default="9a1f6c2e-5b3d-4e8a-9c71-2f0d4b6a8e13",
                    help="create: the demo task with a desktop and a setup")
    ap.add_argument("--pool-size", type=int, default=2, help="create: the shinken provider's pool_size (pooled row)")
    ap.add_argument("--json", type=Path, help="write the results here")
    args = ap.parse_args()
    print(f"load before: {load()}", flush=True)
    res = run_ladder(args) if args.part == "ladder" else run_create(args)
    print(markdown(res))
    if args.json:
        args.json.write_text(json.dumps(res, indent=1))


if __name__ == "__main__":
    main()
