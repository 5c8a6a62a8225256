"""A web task served by the workspace's resources server through the real NeMo Gym 0.7.0:
`make-workspace --hub` writes the hub into the server config, `gym env start` runs the server
(which starts its own hub container and run network), `gym eval run` drives five rollouts of
the one web task, two at a time, with a scripted policy that toggles the message's star
through the mock's State API. Only rollouts that each start from their own copy of the
golden hub state can all score 1.0: two rollouts sharing a sid would toggle it back.

Then, in the same Gym session, the chaos matrix's `hub_killed` row (tests/chaos.py): one more
`gym eval run` rollout whose star is toggled (solved), after which the server's hub container is
killed (`docker kill`) before /verify: the rollout must come back masked with Gym's
`provider_unavailable` (`hub_lost: ...`), never scored."""

from __future__ import annotations

import json
import re
import shlex
import sys
import time
from pathlib import Path
from typing import Any

import pytest

sys.path.insert(0, str(Path(__file__).resolve().parent))
import chaos  # noqa: E402
import gym_harness as gh  # noqa: E402
from tests.cli_runner import run_cli  # noqa: E402
import scripted_policy as sp  # noqa: E402

from shinken.workspace.gym_image import ensure_gym_image  # noqa: E402

pytestmark = [pytest.mark.docker, pytest.mark.slow]

WEB = Path(__file__).resolve().parent / "data" / "web_tasks"
# the web task and its State API script are the chaos module's (one copy, used by its hub_killed row too)
STAR = chaos.WEB_TASK
TOGGLE = chaos.TOGGLE


def star_by_toggle(input_items: list[dict[str, Any]]) -> tuple[str, sp.Call | None]:
    steps: list[sp.Call] = [("computer_exec", {"command": f"python3 -c {shlex.quote(TOGGLE)}"}), ("computer_done", {})]
    done = sp.history(input_items)
    return STAR, (steps[len(done)] if len(done) < len(steps) else None)


def test_gym_serves_a_web_task_with_one_sid_per_rollout(tmp_path: Path, hub_image: str, cua_image: str,
                                                        docker_client) -> None:
    ensure_gym_image()
    ids = tmp_path / "ids.txt"
    ids.write_text(f"{STAR}\n")
    ws = tmp_path / "ws"
    r = run_cli("make-workspace", "--dest", ws, "--task-root", WEB, "--ids", ids, "--image", cua_image, "--hub", hub_image,
                "--license", "Apache-2.0", "--json")
    assert r.returncode == 0, r.stderr
    made = json.loads(r.stdout)
    config = (ws / "resources_servers/shinken_cua/configs/shinken_cua.yaml").read_text()
    assert f"SHINKEN_HUB_IMAGE,'{hub_image}'" in config
    row = json.loads((ws / "resources_servers/shinken_cua/data/example.jsonl").read_text().splitlines()[0])
    assert row["task_id"] == STAR and "__CUA_GYM_" not in json.dumps(row)
    sp.MATCH.setdefault(STAR, "'Quarterly report'")  # how the policy server names the task it serves
    policy = sp.PolicyServer(decide=star_by_toggle).start()
    gh.point_at_policy(ws, policy.base_url)
    with gh.gym_session(ws, tmp_path / "venvs", policy) as session:
        c = session.container
        log, _ = session.start(next(x for x in made["commands"] if x.startswith("gym env start ")))
        cmd = next(x for x in made["commands"] if x.startswith("gym eval run --no-serve"))
        assert "--limit 5 --concurrency 2" in cmd
        out = "results/web_rollouts.jsonl"
        r = c.exec(re.sub(r"--output \S+", f"--output {out}", cmd), timeout=1500)
        assert r.returncode == 0, (r.stdout + r.stderr)[-3000:] + "\nserver log:\n" + c.exec(f"cat {log}").stdout[-6000:]
        rollouts = [json.loads(x) for x in (ws / out).read_text().splitlines() if x.strip()]
        assert len(rollouts) == 5
        for x in rollouts:
            assert x["task_id"] == STAR
            assert x["reward"] == 1.0, (x.get("failure_reason"), x.get("reward_output_tail"))
            assert x["mask_sample"] is False
        sids = {o["output"].split()[-1] for x in rollouts for o in x["response"]["output"]
                if o.get("type") == "function_call_output" and "200 shk-" in str(o.get("output"))}
        assert len(sids) == 5, sids  # every rollout toggled its own sid
        assert not policy.errors
        # The hub killed mid-batch (the last rollout: this server's hub does not come back).
        chaos.register_web_task()
        (hub,) = chaos.run_plan(c, ws, policy, row, ["hub_killed"], "hub-killed", fault="hub_killed", concurrency=1,
                                hub_pids=c.pids(), count_networks=False)
        print(f"\nhub_killed: {hub.to_json()}")
        assert (hub.rollouts, hub.faults_injected, hub.masked_gym_kind, hub.scored) == (1, 1, 1, 0), hub
        assert hub.kinds == {"provider_unavailable": 1} and hub.wrong_kind == [], hub  # hub_lost: ...
        assert hub.scored_zero_by_fault == 0 and hub.left_after_gc == 0, hub
        pids = c.pids()
        session.stop_servers()  # Ctrl-C: Gym stops its servers
        assert gh.containers_owned_by(pids, ("fork", "pool")) == []  # released at /verify
    # Gym gives a server 1 s after Ctrl-C (an orphaned one dies with the container): too little for
    # its engine to close. Its hub and run network are then a dead owner's, which gc reclaims.
    for server_pid in {int(o.split("/")[1]) for o in _hub_owners(docker_client)} & pids:
        deadline = time.monotonic() + 60
        while Path(f"/proc/{server_pid}").exists() and time.monotonic() < deadline:
            time.sleep(0.2)
        label = f"shinken.run=server-{server_pid}"
        r = run_cli("gc", "--force", "--json", "--label", label)
        assert r.returncode == 0, r.stderr
        reclaimed = {(i["resource"], i["kind"]) for i in json.loads(r.stdout)["reclaimed"]}
        assert {("container", "hub"), ("network", "network")} <= reclaimed, r.stdout
        assert not docker_client.api.networks(filters={"label": label})
    assert not [o for o in _hub_owners(docker_client) if int(o.split("/")[1]) in pids]


def _hub_owners(client) -> list[str]:
    owners = [(c.get("Labels") or {}).get("shinken.owner", "")
              for c in client.api.containers(all=True, filters={"label": "shinken.kind=hub"})]
    return [o for o in owners if o.count("/") == 2 and o.split("/")[1].isdigit()]
