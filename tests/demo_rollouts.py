"""Collect rollouts of the demo workspace in the real NeMo Gym 0.7.0, with the seeded chance
policy standing in for a model (tests/chance_policy.py), so the demo pipeline's profile and
report steps have something real to read on a machine without a model.

    python tests/demo_rollouts.py --workspace ~/shinken-demo-workspace --out out/demo/rollouts

It points the workspace's env.yaml at the policy (as a user would), starts `gym env start` in
the runner image (tests/gym_harness.py: the workspace mounted as the Gym tests mount it),
runs `gym eval run --num-repeats K` over the workspace's train and validation rows, stops
everything and copies the rollout files to --out. One rollout of hello-file has its fork
killed mid-rollout, to show a masked rollout in the profile."""

from __future__ import annotations

import argparse
import json
import shutil
import sys
import tempfile
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))
import chance_policy as cp  # noqa: E402
import gym_harness as gh  # noqa: E402
import scripted_policy as sp  # noqa: E402

# too_easy, too_hard, and one for the band; tasks without an entry are not rolled out.
CHANCE = {"hello-file": 1.0, "zenity-entry": 0.0, sp.SPREADSHEET: 0.5, "zero-signal": 1.0}
KILLS = {"hello-file": 1}
RESULTS = "results/demo-rollouts"  # inside the workspace, where the runner can write


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
    results = ws / RESULTS
    shutil.rmtree(results, ignore_errors=True)
    results.mkdir(parents=True)
    (results / "inputs.jsonl").write_text("".join(json.dumps(r) + "\n" for r in rows))
    tasks = {r["task_id"] for r in rows}
    plans = cp.seeded_plans({t: p for t, p in CHANCE.items() if t in tasks}, ns.repeats, ns.seed, KILLS)
    policy = sp.PolicyServer(decide=cp.ChancePolicy(plans)).start()
    gh.point_at_policy(ws, policy.base_url)
    private = Path(tempfile.mkdtemp(prefix="shinken-demo-venvs-"))  # used only when the shared venvs are busy
    c, venvs = gh.runner(ws, private)
    try:
        pid, _, _ = gh.start_servers(c, next(x for x in commands_for(ws) if x.startswith("gym env start ")))
        try:
            r = c.exec(f"gym eval run --no-serve --agent {gh.AGENT} --input {RESULTS}/inputs.jsonl "
                       f"--output {RESULTS}/rollouts.jsonl --num-repeats {ns.repeats} --concurrency 2", timeout=3600)
        finally:
            gh.interrupt(pid)
    finally:
        c.stop()
        venvs.release()
        policy.stop()
        shutil.rmtree(private, ignore_errors=True)
    if r.returncode != 0 or policy.errors:
        print((r.stdout + r.stderr)[-4000:], policy.errors, file=sys.stderr)
        return 1
    out.mkdir(parents=True, exist_ok=True)
    for f in results.iterdir():
        shutil.copy2(f, out / f.name)
    print(f"rollouts: {out / 'rollouts.jsonl'} ({sum(len(p) for p in plans.values())} planned: {plans})")
    return 0


if __name__ == "__main__":
    sys.exit(main())
