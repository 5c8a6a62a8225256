"""A workspace made from oracle evidence alone (no recorded rollouts) passes `gym env test` in the
real NeMo Gym 0.7.0 runner: the demo task `oracle-solves` ships a `golden_patch.py`; the probe
runs it through `computer_exec` on a fork and scores 1.0; make-workspace (no `--rollouts`) turns
that run into the `full_reward` verifier case, which Gym replays on a fresh fork of its own.

It reuses the suite's Gym session: the runner container of `gym_runner` sees the session
workspace's host folder, so this workspace is made inside it (a hidden folder, removed after)
and its uv cache is the session's (a symlink), never a second Gym stack; its server venv is its own."""

from __future__ import annotations

import json
import shutil
import subprocess
import sys
from pathlib import Path

import pytest

sys.path.insert(0, str(Path(__file__).resolve().parent))
import gym_harness as gh  # noqa: E402

pytestmark = [pytest.mark.docker, pytest.mark.slow]

TASK = "oracle-solves"
TASKS = (TASK, "hello-file")  # two, so the workspace has a validation split too (hello-file ships no oracle)


def test_workspace_from_oracle_evidence_passes_gym_env_test(gym_runner: gh.GymContainer,
                                                           gym_workspace: gh.GymWorkspace, tmp_path: Path) -> None:
    image = gh.sandbox_image()
    ids = tmp_path / "ids.txt"
    ids.write_text("".join(t + "\n" for t in TASKS))
    receipt = tmp_path / "receipt.json"
    r = gh.shinken("probe", str(gh.DEMO), "--ids", str(ids), "--image", image, "--probes", "noop,oracle", "--receipt", str(receipt),
                   "--run-dir", str(tmp_path / "probe-run"))
    assert r.returncode == 0, r.stdout + r.stderr
    lines = {t["task_id"]: t for t in json.loads(receipt.read_text())["tasks"]}
    assert all(t["outcome"] == "kept" for t in lines.values()), lines
    assert lines[TASK]["oracle"]["outcome"] == "oracle_passes" and lines["hello-file"]["oracle"] is None
    rel = ".oracle-ws"
    ws = gym_workspace.path / rel
    try:
        r = gh.shinken("make-workspace", "--dest", str(ws), "--task-root", str(gh.DEMO), "--ids", str(receipt),
                       "--image", image, "--license", "Apache-2.0", "--json")
        assert r.returncode == 0, r.stderr
        made = json.loads(r.stdout)
        assert made["verifier_cases"]["full_reward"] == 1 and made["verifier_cases"]["zero_reward"] == 2
        assert not any("full_reward" in n for n in made["notes"])
        inside = f"{gh.WS_MOUNT}/{rel}"
        # The session's uv cache (path-independent). Not its server venv: uv would rebuild that venv
        # for this workspace's path, and every script in it would then name a python that is gone
        # once this folder is removed (the session's next `gym env test` died on that). This
        # workspace's server venv is its own, made from the warm cache, and removed with it.
        (ws / "cache").symlink_to(f"{gh.WS_MOUNT}/cache")
        out = gym_runner.exec(f"cd {inside} && gym env test {gh.NAME} --json", timeout=1800)
        assert out.returncode == 0, (out.stdout + out.stderr)[-6000:]
        report = json.loads(out.stdout.strip().splitlines()[-1])
        by_kind: dict[str, list] = {}
        for case in report["cases"]:
            by_kind.setdefault(case["kind"], []).append(case)
        assert [c["observed_rewards"] for c in by_kind["full_reward"]] == [[1.0]]
        assert [c["observed_rewards"] for c in by_kind["zero_reward"]] == [[0.0], [0.0]]
        assert TASK in by_kind["full_reward"][0]["name"]
        assert len(by_kind["malformed"]) == 3
        assert gh.forks_of(gym_runner) == []
    finally:
        shutil.rmtree(ws, ignore_errors=True)
        subprocess.run(["docker", "exec", gym_runner.name, "rm", "-rf", f"{gh.WS_MOUNT}/{rel}"], capture_output=True)
