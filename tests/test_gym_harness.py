"""The Gym harness's own parts that decide whether a Gym test can start at all."""

from __future__ import annotations

import sys
import time
from pathlib import Path

import pytest

sys.path.insert(0, str(Path(__file__).resolve().parent))
import gym_harness as gh  # noqa: E402

pytestmark = [pytest.mark.docker, pytest.mark.slow]  # the runner image is built on a new machine


def test_spawn_returns_the_new_process_not_one_an_earlier_spawn_left(tmp_path: Path) -> None:
    """A second `gym env start` in the same workspace writes the same log name: the pid returned
    must be the new process's (a pid file the first one left named a dead process, which the
    readiness wait took for a start that had exited with an empty log)."""
    c = gh.GymContainer(mounts=[tmp_path], workdir=str(tmp_path)).start()
    try:
        log = f"{tmp_path}/start-1.log"
        first = c.spawn("sleep 0.2", log)
        deadline = time.monotonic() + 30
        while Path(f"/proc/{first}").exists() and time.monotonic() < deadline:
            time.sleep(0.1)
        assert not Path(f"/proc/{first}").exists()
        second = c.spawn("sleep 60", log)
        assert second != first and Path(f"/proc/{second}").exists()
        assert b"sleep" in Path(f"/proc/{second}/cmdline").read_bytes()
    finally:
        c.stop()
