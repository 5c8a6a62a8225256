"""The chaos matrix, CI size: rollouts of the demo workspace through the real NeMo Gym 0.7.0
(`gym eval run` in the suite's one Gym session, the scripted policy as the model) while faults are
injected one kind per batch at seeded random points (tests/chaos.py). A faulted rollout must be
masked with Gym's failure kind, never scored; nothing may be left behind.

The resources-server SIGKILL row runs the generated server on its own (Gym's server class in the
runner image, driven over HTTP with cookies as Gym's agent drives it): `gym env start` stops all
its servers when one dies, so that row cannot share the suite's Gym session.
benchmarks/bench_chaos.py runs the `gym eval run` batches (fork killed between tool calls or during
verify, reward OOM and timeout, engine restart); they are not in CI until they have passed here
(docs/reliability.md says which rows are measured)."""

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


def _row(ws: Path) -> dict:
    data = ws / "resources_servers" / gh.NAME / "data"
    for f in ("example.jsonl", "train.jsonl", "validation.jsonl"):
        for line in (data / f).read_text().splitlines():
            if line.strip() and json.loads(line)["task_id"] == TASK:
                return json.loads(line)
    raise LookupError(TASK)


def test_resources_server_sigkill_and_restart(gym_workspace: gh.GymWorkspace, tmp_path: Path) -> None:
    row = chaos.server_sigkill(gym_workspace, tmp_path, _row(gym_workspace.path))
    print(f"\nserver_sigkill: {row.to_json()}")
    assert (row.rollouts, row.faults_injected, row.masked_gym_kind, row.scored) == (3, 1, 2, 1), row
    assert row.scored_zero_by_fault == 0 and row.left_after_gc == 0, row
