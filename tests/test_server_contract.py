"""The generated server (app.py from `shinken make-workspace`) over real HTTP, driven the way
NeMo Gym's simple agent drives a resources server: /seed_session with the row, each tool call
with the cookies of the previous reply, /verify with the row + response.

It runs in the nemo-gym container (python 3.13, nemo-gym 0.7.0) with the shinken wheel from the
workspace installed and the suite's demo workspace (tests/gym_harness.py) mounted where Gym
tests see it; the server reads its own config (configs/shinken_cua.yaml, task root inside the
workspace) and forks sibling containers of the real sandbox image over the Docker socket."""

from __future__ import annotations

import json
import sys
import time
from pathlib import Path

import pytest

sys.path.insert(0, str(Path(__file__).resolve().parent))
import gym_harness as gh  # noqa: E402
import scripted_policy as sp  # noqa: E402

pytestmark = [pytest.mark.docker, pytest.mark.slow]



def _row(ws: Path, task: str) -> dict:
    for line in (ws / "data" / "example.jsonl").read_text().splitlines():
        row = json.loads(line)
        if row["task_id"] == task:
            return row
    raise LookupError(task)


@pytest.fixture(scope="module")
def server(gym_workspace: gh.GymWorkspace, tmp_path_factory):
    tmp = tmp_path_factory.mktemp("contract")
    port = gh.free_port()
    inside = f"{gh.WS_MOUNT}/resources_servers/{gh.NAME}"
    (tmp / "launch.py").write_text(gh.SERVER_LAUNCHER.format(server=inside, port=port, no_head_port=gh.free_port()))
    wheel = next((gym_workspace.server / "vendor").glob("shinken-*.whl")).name
    c = gh.GymContainer(mounts=[tmp], binds=[(gym_workspace.path, gh.WS_MOUNT)], workdir=inside)
    c.start(f"pip install -q --no-cache-dir vendor/{wheel} pytest && exec python {tmp / 'launch.py'}")
    try:
        gh.wait_http(port, container=c, timeout=600)
        yield {"port": port, "ws": gym_workspace.server, "container": c}
    finally:
        c.stop()


def _run_script(port: int, row: dict) -> tuple[dict, list[tuple[str, str]], dict[str, str]]:
    """Seed, replay the task's scripted calls with cookies carried forward, verify."""
    seed = gh.post(port, "/seed_session", row)
    assert seed.status == 200, seed.text
    cookies = dict(seed.cookies)
    assert cookies, "seed_session must set the session cookie"
    handle = seed.json().get("sandbox_handle")  # the rollout's fork, for agents that borrow it as a Gym sandbox
    assert isinstance(handle, str) and len(handle.split(":")[0]) == 64 and len(handle.split(":")[1]) >= 32, seed.text
    items: list[dict] = list(row["responses_create_params"]["input"])
    transcript: list[tuple[str, str]] = []
    while True:
        _, call = sp.next_call(items)
        if call is None:
            break
        name, args = call
        r = gh.post(port, f"/{name}", args, cookies)
        assert r.status == 200, (name, r.status, r.text)
        cookies.update(r.cookies)
        transcript.append((name, r.text))
        items += [{"type": "function_call", "name": name, "arguments": "", "call_id": str(len(items))},
                  {"type": "function_call_output", "output": r.text, "call_id": str(len(items))}]
    response = {"id": "resp_contract", "object": "response", "created_at": int(time.time()), "model": "scripted",
                "output": [], "parallel_tool_calls": False, "tool_choice": "auto", "tools": []}
    v = gh.post(port, "/verify", {**row, "response": response}, cookies)
    assert v.status == 200, v.text
    return v.json(), transcript, cookies


def test_hello_file_scores_one(server) -> None:
    row = _row(server["ws"], "hello-file")
    result, transcript, cookies = _run_script(server["port"], row)
    assert [n for n, _ in transcript] == sp.FINAL_CALLS["hello-file"]
    assert transcript[0][1].startswith("exit code 0")
    assert result["reward"] == 1.0 and result["mask_sample"] is False
    assert result["task_id"] == "hello-file" and result["bundle_hash"] == row["bundle_hash"]
    assert "REWARD: 1.0" in result["reward_output_tail"]
    # close_session is idempotent, also after verify released the rollout
    for _ in range(2):
        r = gh.post(server["port"], "/close_session", {}, cookies)
        assert r.status == 200, r.text


def test_zenity_entry_scores_one_through_the_accessibility_tree(server) -> None:
    row = _row(server["ws"], "zenity-entry")
    result, transcript, _ = _run_script(server["port"], row)
    names = [n for n, _ in transcript]
    assert names[0] == "computer_observe" and sp.follows_script("zenity-entry", names), names
    click = len(names) - 1 - names[::-1].index("computer_click")  # the attempt that landed
    tree = transcript[click - 1][1]  # the observation that showed the dialog's entry
    assert "Shinken" in tree and f"clicked {sp.entry_id([tree])} " in transcript[click][1]  # clicked it by id
    diff = transcript[click + 2][1]
    assert names[click + 2] == "computer_observe"
    assert "Ada Lovelace" in diff and len(diff) < len(tree)  # the diff shows the change, not the tree
    assert 'dialog "Shinken"' in transcript[-2][1]  # the last diff shows the dialog gone
    assert result["reward"] == 1.0, result
    assert result["mask_sample"] is False


def test_stale_generation_is_refused(server) -> None:
    port = server["port"]
    row = _row(server["ws"], "hello-file")
    r = gh.post(port, "/computer_exec", {"command": "true"})
    assert r.status == 409 and r.json()["error"] == "no_session"
    first = gh.post(port, "/seed_session", row)
    assert first.status == 200
    old = dict(first.cookies)
    second = gh.post(port, "/seed_session", row, old)  # same session, new rollout
    assert second.status == 200
    new = {**old, **second.cookies}
    assert new != old
    stale = gh.post(port, "/computer_exec", {"command": "printf 'hello shinken' > /home/user/hello.txt"}, old)
    assert stale.status == 409 and stale.json()["error"] == "stale_session"
    again = gh.post(port, "/seed_session", row, old)  # a stale cookie cannot replace the rollout either
    assert again.status == 409
    assert gh.post(port, "/verify", {**row, "response": _empty_response()}, old).status == 409
    # the newer rollout was not touched by the refused calls: its untouched state scores 0
    v = gh.post(port, "/verify", {**row, "response": _empty_response()}, new)
    assert v.status == 200 and v.json()["reward"] == 0.0, v.text


def _empty_response() -> dict:
    return {"id": "resp_x", "object": "response", "created_at": 0, "model": "scripted", "output": [],
            "parallel_tool_calls": False, "tool_choice": "auto", "tools": []}


def test_generated_app_tests_pass_and_rows_validate_with_gym(server) -> None:
    c: gh.GymContainer = server["container"]
    r = c.exec("python -m pytest -q -p no:cacheprovider tests/test_app.py")
    assert r.returncode == 0, r.stdout + r.stderr
    assert " passed" in r.stdout
    # Every shipped row passes NeMo Gym's own request model (strict responses_create_params).
    check = (
        "import json, glob\n"
        "from nemo_gym.base_resources_server import BaseRunRequest\n"
        "n = 0\n"
        "for f in ['data/train.jsonl', 'data/validation.jsonl', 'data/example.jsonl']:\n"
        "    for line in open(f):\n"
        "        BaseRunRequest.model_validate(json.loads(line)); n += 1\n"
        "print(n)\n"
    )
    r = c.exec(f"python - <<'EOF'\n{check}EOF")
    assert r.returncode == 0, r.stderr
    assert int(r.stdout.strip()) == 5 + len(gh.DEMO_TASKS)
