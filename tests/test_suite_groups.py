"""scripts/test.sh runs the NeMo Gym modules (marker `gym`, set in conftest.py) beside the rest:
every module that starts Gym must land in the Gym group, and nothing else, or the two runs would
either miss a test or start a second Gym stack beside the first."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

TESTS = Path(__file__).resolve().parent


def _collected(marker: str) -> set[str]:
    res = subprocess.run([sys.executable, "-m", "pytest", "--collect-only", "-q", "-m", marker, str(TESTS)],
                         capture_output=True, text=True, cwd=TESTS.parent, timeout=300)
    assert res.returncode == 0, res.stdout[-2000:] + res.stderr[-2000:]
    return {line.split("::")[0] for line in res.stdout.splitlines() if "::" in line}


def test_gym_group_holds_exactly_the_modules_that_run_gym() -> None:
    gym = _collected("gym")  # "not gym" is its complement by pytest's marker semantics
    uses_harness = {f"tests/{p.name}" for p in TESTS.glob("test_*.py") if "gym_harness" in p.read_text()}
    assert uses_harness and uses_harness == gym, uses_harness ^ gym
    assert "tests/test_nemo_gym_e2e.py" in gym and "tests/test_probe.py" not in gym
