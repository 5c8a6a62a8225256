"""A web task served by the workspace's resources server through the real NeMo Gym 0.7.0:
`make-workspace --hub` writes the hub into the server config, `gym env start` runs the server
(which starts its own hub container and run network), `gym eval run` drives five rollouts of
the one web task, two at a time, with a scripted policy that toggles the message's star
through the mock's State API. Only rollouts that each start from their own copy of the
golden hub state can all score 1.0: two rollouts sharing a sid would toggle it back."""

from __future__ import annotations

import json
import shlex
import subprocess
import sys
import textwrap
import time
from pathlib import Path
from typing import Any

import pytest

sys.path.insert(0, str(Path(__file__).resolve().parent))
import gym_harness as gh  # noqa: E402
import scripted_policy as sp  # noqa: E402

from shinken.workspace.gym_image import ensure_gym_image  # noqa: E402

pytestmark = [pytest.mark.docker, pytest.mark.slow]

WEB = Path(__file__).resolve().parent / "data" / "web_tasks"
STAR = "8b2f7c1e-4a3d-5e6f-9a0b-1c2d3e4f5a6b"
UV_CACHE = Path.home() / ".cache" / "shinken" / "nemo-gym-uv"
AGENT = "shinken_cua_simple_agent"

TOGGLE = textwrap.dedent("""
    import json, urllib.request
    sid = open('/tmp/task_web_sid').read().strip()
    base = 'http://cua-gym-mailbox'
    st = json.loads(urllib.request.urlopen(base + '/go?sid=' + sid, timeout=30).read())['current_state']
    for m in st['messages']:
        if m['subject'] == 'Quarterly report':
            m['starred'] = not m['starred']
    req = urllib.request.Request(base + '/post?sid=' + sid, method='POST', headers={'Content-Type': 'application/json'},
                                 data=json.dumps({'action': 'set_current', 'state': st}).encode())
    print(urllib.request.urlopen(req, timeout=30).status, sid)
""")


def star_by_toggle(input_items: list[dict[str, Any]]) -> tuple[str, sp.Call | None]:
    steps: list[sp.Call] = [("computer_exec", {"command": f"python3 -c {shlex.quote(TOGGLE)}"}), ("computer_done", {})]
    done = sp.history(input_items)
    return STAR, (steps[len(done)] if len(done) < len(steps) else None)


def _wait_ready(log: Path, c: gh.GymContainer, timeout: float) -> None:
    t0 = time.monotonic()
    while time.monotonic() - t0 < timeout:
        text = log.read_text(errors="replace") if log.exists() else ""
        if "servers ready!" in text:
            return
        if not c.running():
            raise AssertionError(f"gym env start exited:\n{text[-6000:]}")
        time.sleep(2)
    raise AssertionError(f"gym env start not ready after {timeout:.0f}s:\n{log.read_text(errors='replace')[-6000:]}")


def test_gym_serves_a_web_task_with_one_sid_per_rollout(tmp_path: Path, hub_image: str, cua_image: str,
                                                        docker_client) -> None:
    ensure_gym_image()
    ids = tmp_path / "ids.txt"
    ids.write_text(f"{STAR}\n")
    ws = tmp_path / "ws"
    r = subprocess.run([sys.executable, "-m", "shinken.cli.main", "make-workspace", "--dest", str(ws),
                        "--task-root", str(WEB), "--ids", str(ids), "--image", cua_image, "--hub", hub_image,
                        "--license", "Apache 2.0", "--json"], capture_output=True, text=True)
    assert r.returncode == 0, r.stderr
    commands = json.loads(r.stdout)["commands"]
    assert f"shinken_hub_image: \"{hub_image}\"" in (ws / "resources_servers/shinken_cua/configs/shinken_cua.yaml").read_text()
    row = json.loads((ws / "resources_servers/shinken_cua/data/example.jsonl").read_text().splitlines()[0])
    assert row["task_id"] == STAR and "__CUA_GYM_" not in json.dumps(row)
    sp.MATCH.setdefault(STAR, "'Quarterly report'")  # how the policy server names the task it serves
    policy = sp.PolicyServer(decide=star_by_toggle).start()
    (ws / "env.yaml").write_text(f"policy_base_url: {policy.base_url}\npolicy_api_key: EMPTY\npolicy_model_name: scripted\n"
                                 f"head_server:\n  host: 127.0.0.1\n  port: {gh.free_port()}\n")
    UV_CACHE.mkdir(parents=True, exist_ok=True)
    start = next(cmd for cmd in commands if cmd.startswith("gym env start "))
    c = gh.GymContainer(mounts=[tmp_path, WEB, UV_CACHE], workdir=str(ws), env={"UV_LINK_MODE": "copy"})
    log = tmp_path / "start.log"
    c.start(f"exec {start} +uv_cache_dir={UV_CACHE} > {log} 2>&1")
    leftovers: list[str] = []
    try:
        _wait_ready(log, c, timeout=1500)
        out = tmp_path / "rollouts.jsonl"
        cmd = next(x for x in commands if x.startswith("gym eval run --no-serve"))
        cmd = cmd.replace("results/shinken_cua_example.jsonl", str(out))
        assert "--limit 5 --concurrency 2" in cmd
        r = c.exec(cmd, timeout=1500)
        assert r.returncode == 0, (r.stdout + r.stderr)[-3000:] + "\nserver log:\n" + log.read_text(errors="replace")[-6000:]
        rollouts = [json.loads(x) for x in out.read_text().splitlines() if x.strip()]
        assert len(rollouts) == 5
        for x in rollouts:
            assert x["task_id"] == STAR
            assert x["reward"] == 1.0, (x.get("failure_reason"), x.get("reward_output_tail"))
            assert x["mask_sample"] is False
        sids = {o["output"].split()[-1] for x in rollouts for o in x["response"]["output"]
                if o.get("type") == "function_call_output" and "200 shk-" in str(o.get("output"))}
        assert len(sids) == 5, sids  # every rollout toggled its own sid
        assert not policy.errors
        pids = c.pids()
    finally:
        leftovers = c.stop()
        policy.stop()
    assert leftovers == []
    # The server's hub container and run network went with it.
    for kind in ("hub", "network"):
        objs = (docker_client.api.containers(all=True, filters={"label": "shinken.kind=hub"}) if kind == "hub"
                else docker_client.api.networks(filters={"label": "shinken.kind=network"}))
        owners = [(o.get("Labels") or {}).get("shinken.owner", "") for o in objs]
        assert not [o for o in owners if o.count("/") == 2 and o.split("/")[1].isdigit() and int(o.split("/")[1]) in pids]
