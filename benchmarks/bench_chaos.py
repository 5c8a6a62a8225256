"""The chaos matrix at bench size: rollouts of the demo workspace through the real NeMo Gym 0.7.0
(`gym eval run`, the scripted policy as the model) with one fault kind per batch injected at
seeded random points (tests/chaos.py), plus the resources server killed with SIGKILL and started
again, and one Gym session on a private engine (tests/chaos.py private_engine_gym: the web task's hub
killed, the disk full, the engine restarted, one `gym eval run` per group). Prints the matrix
(docs/reliability.md) and the machine's load.

    .venv/bin/python benchmarks/bench_chaos.py [--rollouts 12] [--faults 4] [--timeout-rollouts 3] [--seed 21]
        [--engine-rollouts 6] [--engine-faults 2]
        [--only mixed,kill_tool,kill_verify,oom,timeout,server_sigkill,engine_http,private_engine]

Run it under the Gym lock (`flock /tmp/shinken-gym.lock ...`): it starts NeMo Gym.

A row's invariants: rollouts scored 0 because of a fault = 0, containers and networks left = 0;
the exit status is 1 when a row breaks one.
"""

from __future__ import annotations

import argparse
import contextlib
import json
import os
import shutil
import sys
import tempfile
import time
from pathlib import Path

REPO = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(REPO / "tests"))
import chaos  # noqa: E402
import gym_harness as gh  # noqa: E402
import scripted_policy as sp  # noqa: E402

TASK = "hello-file"


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--rollouts", type=int, default=12, help="rollouts per batch")
    ap.add_argument("--faults", type=int, default=4, help="faulted rollouts per batch")
    ap.add_argument("--timeout-rollouts", type=int, default=3, help="rollouts of the reward-timeout batch (1 faulted; "
                    "each faulted one waits out the 120 s reward timeout)")
    ap.add_argument("--engine-rollouts", type=int, default=6, help="rollouts per group of the private-engine "
                    "Gym session (hub_killed, disk_full, engine_restart)")
    ap.add_argument("--engine-faults", type=int, default=2, help="faulted rollouts of its disk_full and "
                    "engine_restart groups (the hub is killed once, the last web rollout: it does not come back)")
    ap.add_argument("--only", help="comma-separated rows to run (mixed,kill_tool,kill_verify,oom,timeout,"
                    "server_sigkill,engine_http,private_engine); default all")
    ap.add_argument("--lock", type=Path, default=Path("/tmp/shinken-gym.lock"),
                    help="held (flock) only while a Gym session runs, so making the workspace waits for nobody")
    ap.add_argument("--seed", type=int, default=21)
    ap.add_argument("--json", type=Path, help="also write the rows here")
    ns = ap.parse_args()
    load0 = os.getloadavg()
    t0 = time.monotonic()
    tmp = Path(tempfile.mkdtemp(prefix="shinken-bench-chaos-"))
    try:
        return run(ns, tmp, load0, t0)
    finally:
        shutil.rmtree(tmp, ignore_errors=True)


def run(ns: argparse.Namespace, tmp: Path, load0: tuple[float, float, float], t0: float) -> int:
    only = set(ns.only.split(",")) if ns.only else None

    def wanted(name: str) -> bool:
        return only is None or name in only

    # The demo workspace (probed: minutes) only for the rows that use it; the private-engine session makes its own.
    needs_demo = only is None or bool(only - {"private_engine"})
    ws = gh.make_demo_workspace(tmp) if needs_demo else None
    task_row = next(json.loads(x) for x in (ws.server / "data" / "example.jsonl").read_text().splitlines()
                    if x.strip() and json.loads(x)["task_id"] == TASK) if ws is not None else {}
    rows: list[chaos.Row] = []
    loads: list[float] = [load0[0]]

    def add(row: chaos.Row) -> None:
        rows.append(row)
        loads.append(os.getloadavg()[0])
        print(f"{row.fault}: {row.to_json()}", file=sys.stderr, flush=True)

    import fcntl

    @contextlib.contextmanager
    def gym_lock():
        with open(ns.lock, "a+") as f:
            t = time.monotonic()
            fcntl.flock(f, fcntl.LOCK_EX)
            print(f"Gym lock taken after {time.monotonic() - t:.0f} s", file=sys.stderr, flush=True)
            yield

    batches = [(f, n, k) for f, n, k in [("kill_tool", ns.rollouts, ns.faults), ("kill_verify", ns.rollouts, ns.faults),
                                         ("oom", ns.rollouts, ns.faults), ("timeout", ns.timeout_rollouts, 1)]
               if wanted(f)]
    if batches or wanted("mixed"):
        policy = sp.PolicyServer().start()
        gh.point_at_policy(ws.path, policy.base_url)
        with gym_lock(), gh.gym_session(ws.path, tmp / "venvs", policy) as session:
            _, ready_s = session.start(ws.command("gym env start "))
            print(f"gym env start ready in {ready_s:.0f} s (load {os.getloadavg()[0]:.0f})", file=sys.stderr, flush=True)
            if wanted("mixed"):  # the CI batch of tests/test_chaos.py, checked as the test checks it
                import test_chaos as tc

                plan = chaos.mixed_plans(tc.GROUPS, tc.PASSES, tc.SEED)
                mixed = chaos.run_plan(session.container, ws.path, policy, task_row, plan, f"mixed-{tc.SEED}",
                                       concurrency=3)
                for row in mixed:
                    row.fault = f"{row.fault} (mixed batch)"
                    add(row)
                print(f"mixed batch as tests/test_chaos.py checks it: {tc.check_mixed(mixed)}", file=sys.stderr,
                      flush=True)
            for fault, n, k in batches:
                add(chaos.run_batch(session.container, ws.path, policy, task_row, fault, n, k, ns.seed,
                                    concurrency=3 if fault == "timeout" else 2))
    if wanted("server_sigkill"):
        add(chaos.server_sigkill(ws, tmp / "sigkill", task_row, in_flight=max(2, ns.faults)))
    if wanted("engine_http"):
        for row in chaos.engine_faults(ws, tmp / "engine", task_row, in_flight=max(2, ns.faults)):
            row.fault += " (HTTP)"
            add(row)
    if wanted("private_engine"):
        from shinken.images.build import build_image
        from shinken.mockweb.build import build_hub

        hub = build_hub(REPO / "tests" / "data" / "hub").tag
        n, k = ns.engine_rollouts, ns.engine_faults
        plans = chaos.EnginePlans(hub_killed=["pass"] * (n - 1) + ["hub_killed"],
                                  disk_full=chaos.plans("disk_full", n, k, ns.seed),
                                  engine_restart=chaos.plans("engine_restart", n, k, ns.seed))
        with gym_lock():
            engine_rows, info = chaos.private_engine_gym(tmp / "private", build_image("linux").tag, hub, plans,
                                                         seed_tag=f"bench-{ns.seed}")
        print(f"private-engine Gym session: {info}", file=sys.stderr, flush=True)
        import test_chaos as tc

        print(f"private-engine batches as tests/test_chaos.py checks them: {tc.check_engine(engine_rows, plans)}",
              file=sys.stderr, flush=True)
        for row in engine_rows:
            row.fault += " (gym eval run, private engine)"
            add(row)
    load1 = os.getloadavg()
    print(chaos.markdown(rows))
    print(f"\nload average (1 min) at start {load0[0]:.1f}, after each row {', '.join(f'{x:.0f}' for x in loads[1:])}; "
          f"at end {load1[0]:.1f}/{load1[1]:.1f}/{load1[2]:.1f} (1/5/15 min); {os.cpu_count()} cores; "
          f"{time.monotonic() - t0:.0f} s in all (workspace made, Gym started)")
    for r in rows:
        print(f"{r.fault}: {r.seconds} s; injections: {r.injections}; wrong kinds: {r.wrong_kind}")
    if ns.json:
        ns.json.write_text(json.dumps([r.to_json() for r in rows], indent=1))
    bad = [r.fault for r in rows if r.scored_zero_by_fault or r.left_after_gc or r.wrong_kind]
    if bad:
        print(f"rows breaking an invariant: {bad}", file=sys.stderr)
    return 1 if bad else 0


if __name__ == "__main__":
    sys.exit(main())
