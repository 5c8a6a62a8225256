"""Collect rollouts of the demo workspace in the real NeMo Gym 0.7.0, with the seeded chance
policy standing in for a model (tests/chance_policy.py), so the demo pipeline's profile and
report steps have something real to read on a machine without a model.

    python tests/demo_rollouts.py --workspace ~/shinken-demo-workspace --out out/demo/rollouts

It writes env.yaml in the workspace (pointing at the policy, as a user would), starts
`gym env start` in the runner image, runs `gym eval run --num-repeats K` over the
workspace's train and validation rows, and stops everything. One rollout of hello-file has
its fork killed mid-rollout, to show a masked rollout in the profile."""

from __future__ import annotations

import argparse
import json
import sys
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))
import chance_policy as cp  # noqa: E402
import gym_harness as gh  # noqa: E402
import scripted_policy as sp  # noqa: E402

DEMO = Path(__file__).resolve().parent.parent / "demo"
UV_CACHE = Path.home() / ".cache" / "shinken" / "nemo-gym-uv"  # shared with the Gym tests
AGENT = "shinken_cua_simple_agent"
# too_easy, too_hard, and one for the band; tasks without an entry are not rolled out.
CHANCE = {"hello-file": 1.0, "zenity-entry": 0.0, sp.SPREADSHEET: 0.5, "zero-signal": 1.0}
KILLS = {"hello-file": 1}


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--workspace", type=Path, required=True)
    ap.add_argument("--out", type=Path, required=True)
    ap.add_argument("--repeats", type=int, default=8)
    ap.add_argument("--seed", type=int, default=11)
    ns = ap.parse_args()
    from shinken.workspace.writer import SERVER_DIR, commands_for

    ws, out = ns.workspace.expanduser().resolve(), ns.out.resolve()
    data = ws / SERVER_DIR / "data"
    rows = [json.loads(x) for f in ("train.jsonl", "validation.jsonl") for x in (data / f).read_text().splitlines()]
    rows = [r for r in rows if r["task_id"] in CHANCE]
    if not rows:
        print("no demo task of the chance policy in this workspace", file=sys.stderr)
        return 2
    out.mkdir(parents=True, exist_ok=True)
    inputs = out / "inputs.jsonl"
    inputs.write_text("".join(json.dumps(r) + "\n" for r in rows))
    tasks = {r["task_id"] for r in rows}
    plans = cp.seeded_plans({t: p for t, p in CHANCE.items() if t in tasks}, ns.repeats, ns.seed, KILLS)
    policy = sp.PolicyServer(decide=cp.ChancePolicy(plans)).start()
    # Gym's head server binds 127.0.0.1:11000 unless told otherwise: take a free port, so this
    # can run beside another Gym session on the host network.
    (ws / "env.yaml").write_text(f"policy_base_url: {policy.base_url}\npolicy_api_key: EMPTY\n"
                                 f"policy_model_name: scripted\n"
                                 f"head_server: {{host: 127.0.0.1, port: {gh.free_port()}}}\n")
    UV_CACHE.mkdir(parents=True, exist_ok=True)
    start = next(c for c in commands_for(ws) if c.startswith("gym env start "))
    c = gh.GymContainer(mounts=[ws, out, DEMO, UV_CACHE], workdir=str(ws), env={"UV_LINK_MODE": "copy"})
    log = out / "gym-env-start.log"
    c.start(f"exec {start} +uv_cache_dir={UV_CACHE} > {log} 2>&1")
    try:
        t0 = time.monotonic()
        while "servers ready!" not in (log.read_text(errors="replace") if log.exists() else ""):
            if not c.running() or time.monotonic() - t0 > 1800:
                print(f"gym env start failed:\n{log.read_text(errors='replace')[-4000:]}", file=sys.stderr)
                return 1
            time.sleep(2)
        r = c.exec(f"gym eval run --no-serve --agent {AGENT} --input {inputs} --output {out / 'rollouts.jsonl'} "
                   f"--num-repeats {ns.repeats} --concurrency 2", timeout=3600)
        if r.returncode != 0 or policy.errors:
            print((r.stdout + r.stderr)[-4000:], policy.errors, file=sys.stderr)
            return 1
    finally:
        c.stop()
        policy.stop()
    print(f"rollouts: {out / 'rollouts.jsonl'} ({sum(len(p) for p in plans.values())} planned: {plans})")
    return 0


if __name__ == "__main__":
    sys.exit(main())
