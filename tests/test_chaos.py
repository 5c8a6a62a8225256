"""The chaos matrix, CI size: rollouts of the demo workspace through the real NeMo Gym 0.7.0
(`gym eval run` in the suite's one Gym session, the scripted policy as the model) while faults are
injected at seeded random points (tests/chaos.py). A faulted rollout must be masked with Gym's
failure kind, never scored; nothing may be left behind.

CI runs the `gym eval run` faults as ONE batch in the suite's shared Gym session (gym_env), one
fault kind per rollout group: the fork killed between tool calls and while reward.py runs, the
reward out of memory and past its timeout, plus untouched rollouts that must all score 1.0.
benchmarks/bench_chaos.py runs bigger batches, one fault kind each.

The engine restart, the disk full and a web task's hub killed run through the real Gym too, in
ONE more Gym session whose resources server forks on a private dockerd (a loop-mounted data root,
its own network namespace): one `gym eval run` per fault group (tests/chaos.py private_engine_gym).

The resources-server SIGKILL row runs the generated server on its own (Gym's server class in the
runner image, driven over HTTP with cookies as Gym's agent drives it): `gym env start` stops all
its servers when one dies, so that row cannot share the suite's Gym session."""

from __future__ import annotations

import json
import sys
from pathlib import Path

import pytest

sys.path.insert(0, str(Path(__file__).resolve().parent))
import chaos  # noqa: E402
import gym_harness as gh  # noqa: E402

pytestmark = [pytest.mark.docker, pytest.mark.slow]

TASK = "hello-file"  # no desktop: a rollout takes seconds, so a batch measures the faults, not the task
# One rollout per fault kind, two untouched: the timeout rollout holds one slot for the reward's
# 120 s while the others run in the remaining slots.
GROUPS = {"kill_tool": 1, "kill_verify": 1, "oom": 1, "timeout": 1}
PASSES = 2
SEED = 21


def _row(ws: Path) -> dict:
    data = ws / "resources_servers" / gh.NAME / "data"
    for f in ("example.jsonl", "train.jsonl", "validation.jsonl"):
        for line in (data / f).read_text().splitlines():
            if line.strip() and json.loads(line)["task_id"] == TASK:
                return json.loads(line)
    raise LookupError(TASK)


def test_gym_eval_run_masks_every_fault_kind(gym_env) -> None:
    plan = chaos.mixed_plans(GROUPS, PASSES, SEED)
    rows = chaos.run_plan(gym_env["container"], gym_env["ws"], gym_env["policy"], _row(gym_env["ws"]), plan,
                          f"ci-mixed-{SEED}", concurrency=3)
    print("\n" + chaos.markdown(rows))
    for r in rows:
        print(f"{r.fault}: {r.to_json()}")
    assert check_mixed(rows) == "ok"


def check_mixed(rows: list[chaos.Row]) -> str:
    """The CI batch's invariants (benchmarks/bench_chaos.py checks its `mixed` row with this too):
    every faulted rollout masked with its fault's Gym kind, every untouched one scored 1.0,
    nothing scored 0 because of a fault, nothing left. "ok" or the first broken one."""
    by = {r.fault: r for r in rows}
    checks: list[tuple[bool, str]] = [(set(by) == {*GROUPS, "pass"}, f"rows {sorted(by)}")]
    for fault, n in GROUPS.items():
        r = by.get(fault)
        if r is None:
            continue
        checks += [((r.rollouts, r.faults_injected, r.masked_gym_kind, r.scored) == (n, n, n, 0), f"{fault}: {r}"),
                   (r.wrong_kind == [] and r.kinds == {chaos.EXPECTED[fault][0]: n}, f"{fault} kinds: {r}")]
    control = by.get("pass")
    if control is not None:
        checks.append(((control.rollouts, control.scored, control.masked_gym_kind) == (PASSES, PASSES, 0),
                       f"control: {control}"))
    for r in rows:
        checks.append((r.scored_zero_by_fault == 0 and r.failed_gym_class == 0 and r.left_after_gc == 0, f"{r}"))
    return next((why for ok, why in checks if not ok), "ok")


def test_resources_server_sigkill_and_restart(gym_workspace: gh.GymWorkspace, tmp_path: Path) -> None:
    row = chaos.server_sigkill(gym_workspace, tmp_path, _row(gym_workspace.path))
    print(f"\nserver_sigkill: {row.to_json()}")
    assert (row.rollouts, row.faults_injected, row.masked_gym_kind, row.scored) == (3, 1, 2, 1), row
    assert row.scored_zero_by_fault == 0 and row.left_after_gc == 0, row


# The private-engine batches of CI: hello-file with the disk filled one tool call in (then one
# after the disk was freed), hello-file across an engine restart (two in flight at concurrency 2,
# then one in a batch of its own after it). The web task's hub killed runs in tests/test_mockweb_gym.py's
# web Gym session (its hub already up and warm there); benchmarks/bench_chaos.py runs it here too.
ENGINE_PLANS = chaos.EnginePlans(hub_killed=[], disk_full=["disk_full", "pass"],
                                 engine_restart=["engine_restart", "pass"],
                                 concurrency={"hub_killed": 1, "disk_full": 1, "engine_restart": 2}, after_restart=1)


def test_gym_eval_run_on_a_private_engine(linux_image: str, tmp_path: Path) -> None:
    """ONE more Gym session (`gym env start` + one `gym eval run` per group), its resources server
    forking on a private dockerd with a loop-mounted data root: the disk full and the engine
    restarted mid-batch, through the real Gym."""
    rows, info = chaos.private_engine_gym(tmp_path, linux_image, None, ENGINE_PLANS)
    print("\n" + chaos.markdown(rows))
    print(f"session: {info}")
    for r in rows:
        print(f"{r.fault}: {r.to_json()}")
    assert check_engine(rows, ENGINE_PLANS) == "ok"


def check_engine(rows: list[chaos.Row], plans: chaos.EnginePlans) -> str:
    """The private-engine batches' invariants (bench_chaos checks its bigger batches with this):
    every fault landed and its rollout came back masked with the fault's Gym kind, the untouched
    rollouts after it scored 1.0 (the server recovered), nothing scored 0 because of a fault,
    every planned rollout accounted for, nothing left on the engine after gc. "ok" or the first
    broken one."""
    by = {r.fault: r for r in rows}
    checks: list[tuple[bool, str]] = []
    for fault in ("hub_killed", "disk_full", "engine_restart"):
        plan = getattr(plans, fault)
        r = by.get(fault)
        if not plan:
            continue
        if r is None:
            checks.append((False, f"no {fault} row"))
            continue
        want_kind = chaos.EXPECTED[fault][0]
        faulted = plan.count(fault)
        planned = len(plan) + (plans.after_restart if fault == "engine_restart" else 0)
        checks += [
            (r.rollouts == planned, f"{fault}: {r.rollouts} of {planned} rollouts came back: {r}"),
            (r.faults_injected == faulted, f"{fault}: injected {r.faults_injected} of {faulted}: {r.injections}"),
            (r.masked_gym_kind + r.failed_gym_class >= faulted and r.kinds.get(want_kind, 0) >= 1,
             f"{fault}: not masked as {want_kind}: {r}"),
            (r.scored >= 1, f"{fault}: no untouched rollout scored after the fault: {r}"),
            (r.wrong_kind == [] and r.scored_zero_by_fault == 0 and r.left_after_gc == 0, f"{fault}: {r}"),
        ]
    return next((why for ok, why in checks if not ok), "ok")
