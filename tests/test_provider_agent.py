"""One of NeMo Gym 0.7.0's own sandbox-using agents runs a demo task end to end on a shinken
sandbox through `gym eval run`: `terminus_2_sandboxed_agent` (Harbor's Terminus 2 loop, driving
a shell through tmux) paired with the workspace's shinken_cua resources server, whose seed
response hands out the rollout's fork as `sandbox_handle`. The agent connects to it with the
`shinken` provider (`sandbox_provider: shinken_sandbox`, the workspace's sandbox block), types
the scripted policy's keystrokes into a tmux shell as the task's `user`, and the reward is the
one /verify computes with the task's own reward.py in that same fork.

The agent is Gym's code unchanged: its folder is copied from the runner's Gym into the
workspace (Gym resolves a server folder under the working directory before its own) only so
that its requirements can name the workspace's shinken wheel (the provider's entry point). The
policy is tests/scripted_policy.py answering Terminus's JSON protocol (terminus_reply).
"""

from __future__ import annotations

import json
import shutil
from pathlib import Path

import pytest

import gym_harness as gh
import scripted_policy as sp

# A cold first run builds four server venvs (Harbor's among them) under the Gym lock: 45 min as test_gym_vision.
pytestmark = [pytest.mark.docker, pytest.mark.slow, pytest.mark.timeout(2700)]

AGENT = "terminus_2_sandboxed_agent"
AGENT_DIR = f"responses_api_agents/{AGENT}"
INSTANCE = f"{gh.NAME}_terminus_agent"
VENV_DIRS = (f"resources_servers/{gh.NAME}", AGENT_DIR, "responses_api_models/openai_model",
             "environment_servers/legacy_agent")
GYM_SITE = "/opt/gym/lib/python3.13/site-packages"  # the runner image's Gym (images/nemo_gym)

AGENT_CONFIG = f"""\
{INSTANCE}:
  responses_api_agents:
    {AGENT}:
      entrypoint: app.py
      resources_server: {{type: resources_servers, name: {gh.NAME}_resources_server}}
      model_server: {{type: responses_api_models, name: policy_model}}
      max_turns: 8
      parser_name: json
      enable_summarize: false
      proactive_summarization_threshold: 8000
      tmux_pane_width: 160
      tmux_pane_height: 40
      dump_trajectory: false
      debug: false
      model_context_limit: 262144
      model_output_limit: null
      llm_request_timeout: 300
      interleaved_thinking: false
      sandbox_provider: shinken_sandbox
      sandbox_timeout: 600
      remote_tmux_binary_path: null
      datasets: []
{gh.NAME}_terminus_environment_server:  # rollouts reach an agent through an environment server (Gym 0.7.0)
  environment_servers:
    legacy_agent:
      entrypoint: app.py
      agent_server: {{type: responses_api_agents, name: {INSTANCE}}}
"""


def _workspace_copy(src: Path, dest: Path) -> Path:
    """The session's workspace copied (its env.yaml is the session stack's to keep)."""
    shutil.copytree(src, dest, ignore=shutil.ignore_patterns(".venv", "results", "outputs", "cache", "__pycache__"))
    rows = [json.loads(x) for x in (dest / "resources_servers" / gh.NAME / "data" / "example.jsonl").read_text()
            .splitlines() if x.strip()]
    row = next(r for r in rows if r["task_id"] == "hello-file")
    row["agent_ref"] = {"type": "responses_api_agents", "name": INSTANCE}
    (dest / "terminus_input.jsonl").write_text(json.dumps(row) + "\n")
    (dest / "terminus_agent.yaml").write_text(AGENT_CONFIG)
    return dest


def test_gym_terminus_agent_solves_hello_file_on_a_shinken_fork(gym_workspace: gh.GymWorkspace, tmp_path: Path) -> None:
    ws = _workspace_copy(gym_workspace.path, tmp_path / "ws")
    policy = sp.PolicyServer(decide=sp.terminus_reply).start()
    gh.point_at_policy(ws, policy.base_url)
    env = {"CUA_GYM_TASKS": f"{gh.WS_MOUNT}/resources_servers/{gh.NAME}/tasks",
           "LITELLM_LOCAL_MODEL_COST_MAP": "true"}  # Harbor imports litellm: no cost map fetch (no internet)
    with gh.gym_session(ws, tmp_path / "venvs", policy, env=env, venv_dirs=VENV_DIRS) as session:
        c = session.container
        # Gym's agent folder beside the workspace's server, its requirements plus the shinken wheel.
        wheel = next((ws / "resources_servers" / gh.NAME / "vendor").glob("shinken-*.whl")).name
        r = c.exec(f"mkdir -p {AGENT_DIR}/vendor && cp -r {GYM_SITE}/{AGENT_DIR}/. {AGENT_DIR}/ "
                   f"&& rm -rf {AGENT_DIR}/__pycache__ "
                   f"&& cp resources_servers/{gh.NAME}/vendor/{wheel} {AGENT_DIR}/vendor/ "
                   f"&& echo ./vendor/{wheel} >> {AGENT_DIR}/requirements.txt")
        assert r.returncode == 0, r.stderr
        cfg = f"resources_servers/{gh.NAME}/configs"
        log, ready_s = session.start(
            f"gym env start --config {cfg}/{gh.NAME}.yaml --config {cfg}/shinken_sandbox.yaml "
            f"--config terminus_agent.yaml --config {gh.MODEL_CONFIG} "
            f"+{gh.NAME}_simple_agent=null +{gh.NAME}_environment_server=null")
        print(f"\nGym stack with {AGENT} ready in {ready_s:.0f}s")
        out = "results/terminus_rollouts.jsonl"
        r = c.exec(f"gym eval run --no-serve --agent {INSTANCE} --input terminus_input.jsonl --output {out} "
                   f"--limit 1 --concurrency 1", timeout=900)
        assert r.returncode == 0, (r.stdout + r.stderr)[-3000:] + "\nserver log:\n" + c.exec(f"cat {log}").stdout[-6000:]
        rollouts = [json.loads(x) for x in (ws / out).read_text().splitlines() if x.strip()]
        assert len(rollouts) == 1
        x = rollouts[0]
        server_log = c.exec(f"cat {log}").stdout[-6000:]
        assert x.get("terminus2_completed") is True and not x.get("error"), (x.get("error"), server_log)
        # The reward is the task's reward.py's, run by /verify in the fork the agent typed into.
        assert x["task_id"] == "hello-file" and x["reward"] == 1.0, (x.get("failure_reason"), x.get("reward_output_tail"))
        assert x["mask_sample"] is False
        assert "found /home/user/hello.txt: 'hello shinken'" in x["reward_output_tail"], x["reward_output_tail"]
        # Terminus's turns: the keystrokes, then task_complete and its confirmation.
        assert [t for t, _ in policy.calls] == ["hello-file"] * 3, policy.calls
        assert not policy.errors, policy.errors
        pids = c.pids()
        session.stop_servers()
        assert gh.containers_owned_by(pids, ("fork", "pool")) == []  # released at /verify
