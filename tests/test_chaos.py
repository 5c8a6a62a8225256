"""The chaos matrix, CI size: rollouts of the demo workspace through the real NeMo Gym 0.7.0
(`gym eval run` in the suite's one Gym session, the scripted policy as the model) while faults are
injected one kind per batch at seeded random points (tests/chaos.py). A faulted rollout must be
masked with Gym's failure kind, never scored; nothing may be left behind.

The resources-server SIGKILL row runs the generated server on its own (Gym's server class in the
runner image, driven over HTTP with cookies as Gym's agent drives it): `gym env start` stops all
its servers when one dies, so that row cannot share the suite's Gym session.
benchmarks/bench_chaos.py runs the bigger counts and the slow rows (reward timeout)."""

from __future__ import annotations

import json
import sys
import time
from pathlib import Path

import pytest

sys.path.insert(0, str(Path(__file__).resolve().parent))
import chaos  # noqa: E402
import gym_harness as gh  # noqa: E402

pytestmark = [pytest.mark.docker, pytest.mark.slow]

TASK = "hello-file"  # no desktop: a rollout takes seconds, so a batch measures the faults, not the task
# fault -> (rollouts, faults injected) per CI batch
CI_ROWS = {"kill_tool": (4, 2), "kill_verify": (3, 1), "oom": (3, 1)}
SEED = 21


def _row(ws: Path) -> dict:
    data = ws / "resources_servers" / gh.NAME / "data"
    for f in ("example.jsonl", "train.jsonl", "validation.jsonl"):
        for line in (data / f).read_text().splitlines():
            if line.strip() and json.loads(line)["task_id"] == TASK:
                return json.loads(line)
    raise LookupError(TASK)


def run_batch(gym_env: dict, fault: str, rollouts: int, faults: int, seed: int = SEED) -> chaos.Row:
    ws: Path = gym_env["ws"]
    row = chaos.run_batch(gym_env["container"], ws, gym_env["policy"], _row(ws), fault, rollouts, faults, seed)
    print(f"\n{fault}: {row.to_json()}")
    return row


@pytest.mark.parametrize("fault", list(CI_ROWS))
def test_a_faulted_rollout_is_masked_with_gyms_kind_never_scored(gym_env, fault: str) -> None:
    rollouts, faults = CI_ROWS[fault]
    row = run_batch(gym_env, fault, rollouts, faults)
    assert row.faults_injected == faults, row  # every planned fault landed as planned
    assert row.rollouts == rollouts, row
    assert row.scored_zero_by_fault == 0, row
    assert row.masked_gym_kind == faults and not row.wrong_kind, row
    assert row.scored == rollouts - faults, row  # the others are scored by the task's reward
    assert row.left_after_gc == 0, row


def test_resources_server_sigkill_and_restart(gym_workspace: gh.GymWorkspace, tmp_path: Path) -> None:
    row = chaos.server_sigkill(gym_workspace, tmp_path, _row(gym_workspace.path))
    print(f"\nserver_sigkill: {row.to_json()}")
    assert (row.rollouts, row.faults_injected, row.masked_gym_kind, row.scored) == (3, 1, 2, 1), row
    assert row.scored_zero_by_fault == 0 and row.left_after_gc == 0, row
