"""Workspace benchmark: the generated shinken_cua server and the real NeMo Gym loop.

Measures, in one run:
- /seed_session latency (p50, p90) through the server's HTTP route, without and with a warm
  fork pool (SHINKEN_POOL_SIZE), on hello-file;
- bytes the model reads per observation on zenity-entry: the full tree vs each diff;
- rollouts/hour through `gym env start` + `gym eval run --no-serve` with the scripted policy
  (both demo tasks, concurrency 2).

Run: .venv/bin/python benchmarks/bench_workspace.py [--seeds 15] [--rollouts 10]
Needs Docker; builds/reuses the nemo-gym and sandbox images (see docs/workspace.md).
"""

from __future__ import annotations

import argparse
import json
import statistics
import sys
import tempfile
import time
from pathlib import Path

REPO = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(REPO / "tests"))
import gym_harness as gh  # noqa: E402
import scripted_policy as sp  # noqa: E402
import test_server_contract as contract  # noqa: E402

from shinken.workspace.gym_image import ensure_gym_image  # noqa: E402
from shinken.workspace.writer import WorkspaceOptions, make_workspace  # noqa: E402

DEMO = REPO / "demo"
INSIDE = f"{gh.WS_MOUNT}/resources_servers/{gh.NAME}"  # the server folder inside Gym containers


def _pct(xs: list[float], q: float) -> float:
    xs = sorted(xs)
    return xs[min(len(xs) - 1, int(round(q * (len(xs) - 1))))]


def _workspace(tmp: Path, image: str, name: str = "ws") -> Path:
    ids = tmp / "ids.txt"
    ids.write_text("hello-file\nzenity-entry\n")
    ws = tmp / name
    make_workspace(WorkspaceOptions(dest=ws, task_root=DEMO, ids_file=ids, image=image, license="Apache-2.0"))
    return ws


def _server(tmp: Path, ws: Path, pool: int) -> tuple[gh.GymContainer, int]:
    port = gh.free_port()
    launch = tmp / f"launch-{pool}.py"
    launch.write_text(contract.LAUNCHER.format(server=INSIDE, port=port))
    wheel = next((ws / "resources_servers" / gh.NAME / "vendor").glob("shinken-*.whl")).name
    # SHINKEN_POOL_SIZE overrides the config's shinken_pool_size (${oc.env:...} in the YAML).
    c = gh.GymContainer(mounts=[tmp], binds=[(ws, gh.WS_MOUNT)], workdir=INSIDE, env={"SHINKEN_POOL_SIZE": str(pool)})
    c.start(f"pip install -q --no-cache-dir vendor/{wheel} && exec python {launch}")
    gh.wait_http(port, container=c, timeout=600)
    return c, port


def bench_seed(tmp: Path, ws: Path, n: int, pool: int) -> list[float]:
    c, port = _server(tmp, ws, pool)
    row = contract._row(ws / "resources_servers" / gh.NAME, "hello-file")
    times = []
    try:
        # One untimed seed builds or loads the golden (and fills the pool).
        r = gh.post(port, "/seed_session", row)
        assert r.status == 200, r.text
        gh.post(port, "/close_session", {}, r.cookies)
        time.sleep(3.0 if pool else 0.5)
        for _ in range(n):
            t0 = time.perf_counter()
            r = gh.post(port, "/seed_session", row)
            times.append(time.perf_counter() - t0)
            assert r.status == 200, r.text
            assert gh.post(port, "/close_session", {}, r.cookies).status == 200
            time.sleep(1.0)  # a rollout's worth of think time: lets the pool refill
    finally:
        c.stop()
    return times


def bench_diff_bytes(tmp: Path, ws: Path) -> dict[str, float]:
    c, port = _server(tmp, ws, 0)
    try:
        result, transcript, _ = contract._run_script(port, contract._row(ws / "resources_servers" / gh.NAME, "zenity-entry"))
    finally:
        c.stop()
    assert result["reward"] == 1.0, result
    trees = [len(o.encode()) for (n, o) in transcript if n == "computer_observe" and o.lstrip().startswith("[e")]
    diffs = [len(o.encode()) for (n, o) in transcript if n == "computer_observe" and not o.lstrip().startswith("[e")
             and "no accessible" not in o]
    return {"tree_bytes": max(trees), "diff_bytes_mean": statistics.mean(diffs), "diffs": len(diffs)}


def bench_gym(tmp: Path, image: str, rollouts: int) -> dict[str, float]:
    ws = _workspace(tmp, image, "gymws")
    data = f"resources_servers/{gh.NAME}/data"
    policy = sp.PolicyServer().start()
    gh.point_at_policy(ws, policy.base_url)
    with gh.gym_session(ws, tmp / "venvs", policy) as session:
        c = session.container
        _, start_s = session.start(f"gym env start --environment {gh.NAME} --config {gh.MODEL_CONFIG}")
        # Warm the goldens once so the figure is the steady-state loop, not the first build.
        warm = c.exec(f"gym eval run --no-serve --agent {gh.AGENT} --input {data}/example.jsonl "
                      "--output results/warm.jsonl --limit 2 --concurrency 2")
        assert warm.returncode == 0, warm.stdout[-3000:] + warm.stderr[-3000:]
        repeats = max(1, rollouts // 5)
        t1 = time.monotonic()
        r = c.exec(f"gym eval run --no-serve --agent {gh.AGENT} --input {data}/example.jsonl "
                   f"--output results/bench.jsonl --limit 5 --num-repeats {repeats} --concurrency 2")
        elapsed = time.monotonic() - t1
        assert r.returncode == 0, r.stdout[-3000:] + r.stderr[-3000:]
        rows = [json.loads(x) for x in (ws / "results" / "bench.jsonl").read_text().splitlines() if x.strip()]
    rewards = [x["reward"] for x in rows]
    for x in rows:
        if x["reward"] < 1.0:  # show why, with the calls the policy made
            calls = [(o["name"], o["arguments"]) for o in x["response"]["output"] if o.get("type") == "function_call"]
            outs = [o["output"][:200] for o in x["response"]["output"] if o.get("type") == "function_call_output"]
            print(f"  reward {x['reward']} on {x['task_id']}: {x.get('reward_output_tail', '').strip()[-200:]}\n"
                  f"    calls {calls}\n    outputs {outs}")
    return {"rollouts": len(rows), "seconds": elapsed, "rollouts_per_hour": len(rows) * 3600 / elapsed,
            "mean_reward": statistics.mean(rewards), "gym_env_start_s": start_s}


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--seeds", type=int, default=15)
    ap.add_argument("--rollouts", type=int, default=10)
    ap.add_argument("--skip-gym", action="store_true")
    ns = ap.parse_args()
    image = gh.sandbox_image()
    ensure_gym_image()
    with tempfile.TemporaryDirectory(prefix="shinken-bench-ws-") as d:
        tmp = Path(d)
        ws = _workspace(tmp, image)
        cold = bench_seed(tmp, ws, ns.seeds, pool=0)
        warm = bench_seed(tmp, ws, ns.seeds, pool=2)
        print(f"seed_session, no pool:   p50 {statistics.median(cold) * 1000:6.0f} ms  p90 {_pct(cold, 0.9) * 1000:6.0f} ms"
              f"  (n={len(cold)})")
        print(f"seed_session, pool of 2: p50 {statistics.median(warm) * 1000:6.0f} ms  p90 {_pct(warm, 0.9) * 1000:6.0f} ms"
              f"  (n={len(warm)})")
        print(f"  ratio p50 no-pool / pool: {statistics.median(cold) / statistics.median(warm):.1f}x")
        d = bench_diff_bytes(tmp, ws)
        print(f"zenity observation: full tree {d['tree_bytes']} B, diff mean {d['diff_bytes_mean']:.0f} B "
              f"over {d['diffs']} diffs ({d['tree_bytes'] / d['diff_bytes_mean']:.1f}x smaller)")
        if not ns.skip_gym:
            g = bench_gym(tmp, image, ns.rollouts)
            print(f"NeMo Gym loop: {g['rollouts']} rollouts in {g['seconds']:.1f} s = {g['rollouts_per_hour']:.0f} "
                  f"rollouts/hour (concurrency 2, mean reward {g['mean_reward']:.2f}); "
                  f"gym env start ready in {g['gym_env_start_s']:.0f} s")


if __name__ == "__main__":
    main()
