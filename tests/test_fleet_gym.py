"""The demo workspace served through the real NeMo Gym 0.7.0 with the fleet behind its resources
server: `gym eval run` over the example rows while the server's config names the fleet
(`SHINKEN_FLEET_ADDRESS`, read by the generated config as `shinken_fleet_address`).

Gym's resources server runs in its own Python 3.13 venv (Ray 2.60 from nemo-gym's requirements)
and joins the fleet's Ray cluster as a driver; Ray refuses a driver of another Python minor, so the
fleet's head and host nodes run on the same Python and Ray (tests/fleet_harness.py FleetBox: one
container of the Gym runner image, each host joined with the real `shinken fleet join`). The two
hosts here both own the machine's Docker engine (the demo tasks need the 4 GB desktop image, which
the private engines of tests/test_fleet.py do not hold); each host's agent is a separate Ray
actor on its own node, so where a rollout ran is read from the agents (`fleet status`: seeds and
goldens per host), and every fork the rollouts made was made by an agent's process."""

from __future__ import annotations

import json
import shutil
import sys
import time
from pathlib import Path

import pytest

sys.path.insert(0, str(Path(__file__).resolve().parent))
import gym_harness as gh  # noqa: E402
import scripted_policy as sp  # noqa: E402
from fleet_harness import SHARED_ENGINE, FleetBox  # noqa: E402

pytestmark = [pytest.mark.docker, pytest.mark.slow]


def _host_names(task_ids: set[str]) -> list[str]:
    """Two host names over which the demo tasks' homes split (both hosts get rollouts)."""
    from shinken.fleet.nodes import home_index

    for i in range(1, 50):
        names = ["g0", f"g{i}"]
        if len({names[home_index(t, names)] for t in task_ids}) == 2:
            return names
    raise AssertionError("no pair of host names splits the demo tasks")


def test_gym_eval_run_with_the_fleet_behind_the_server(gym_workspace: gh.GymWorkspace, tmp_path: Path) -> None:
    from shinken.fleet.nodes import home_index

    t0 = time.monotonic()
    ws = tmp_path / "ws"  # a copy: the session's workspace stays as the other Gym tests expect it
    shutil.copytree(gym_workspace.path, ws, symlinks=True, ignore=shutil.ignore_patterns(".venv", "results"))
    rows = [json.loads(x) for x in (ws / "resources_servers" / gh.NAME / "data" / "example.jsonl").read_text().splitlines()
            if x.strip()]
    tasks = {r["task_id"] for r in rows}
    names = _host_names(tasks)
    image = gh.sandbox_image()  # the workspace's shinken_image: the hosts join with it
    box = FleetBox(gh.ensure_gym_image())
    policy = sp.PolicyServer().start()
    try:
        box.start()
        box.join_all({n: SHARED_ENGINE for n in names}, image, slots=3)
        fleet_s = time.monotonic() - t0
        gh.point_at_policy(ws, policy.base_url)
        # The server is a driver of the fleet: it gets the fleet's Ray token as any machine would
        # (the file, named by RAY_AUTH_TOKEN_PATH; docs/fleet.md).
        with gh.gym_session(ws, tmp_path / "venvs", env={"SHINKEN_FLEET_ADDRESS": box.address,
                                                         "RAY_AUTH_TOKEN_PATH": str(box.token)},
                            binds=[(box.ray_dir, str(box.ray_dir)), (box.token.parent, str(box.token.parent))]) as session:
            c = session.container
            log, ready_s = session.start(gym_workspace.command("gym env start "))
            t1 = time.monotonic()
            r = c.exec(gym_workspace.command("gym eval run --no-serve"), timeout=1500)
            eval_s = time.monotonic() - t1
            assert r.returncode == 0, (r.stdout + r.stderr)[-3000:] + "\nserver log:\n" + c.exec(f"cat {log}").stdout[-6000:]
            out = ws / "results" / "example_rollouts.jsonl"
            rollouts = [json.loads(x) for x in out.read_text().splitlines() if x.strip()]
            # Rewards as with the local engine (tests/test_nemo_gym_e2e.py): every scripted rollout solves its task.
            assert len(rollouts) == len(rows) == 5
            for x in rollouts:
                assert (x["reward"], x["mask_sample"]) == (1.0, False), (x["task_id"], x.get("failure_reason"))
                calls = [o["name"] for o in x["response"]["output"] if o.get("type") == "function_call"]
                assert sp.follows_script(x["task_id"], calls), calls
            assert not policy.errors
            # Where they ran: each rollout on its task's home host (3 slots each, at most 2 at once: no spill).
            status = box.status()
            want = {n: sum(1 for x in rollouts if names[home_index(x["task_id"], names)] == n) for n in names}
            assert {n: status[n]["seeds"] for n in names} == want, status
            for n in names:
                homed = {t for t in tasks if names[home_index(t, names)] == n}
                assert homed <= set(status[n]["goldens"]), (n, status[n]["goldens"])
                assert status[n]["used"] == 0 and status[n]["sessions"] == 0, status[n]  # verify released every slot
            # The server process is the fleet's one driver (one worker: Gym 0.7.0 cannot start a
            # workspace server with num_workers > 1, docs/fleet.md).
            drivers = box.drivers()
            assert len(drivers) == 1, drivers
            pids = c.pids()
            session.stop_servers()
        # No fork left behind, neither by the Gym container's processes nor by the agents.
        assert gh.containers_owned_by(pids, ("fork", "pool")) == []
        assert gh.containers_owned_by(box.pids(), ("fork", "pool")) == []
        print(f"\nfleet (head + {len(names)} hosts, py3.13) up in {fleet_s:.0f}s; gym env start ready in {ready_s:.0f}s; "
              f"{len(rollouts)} rollouts through gym eval run in {eval_s:.1f}s; seeds per host {want}")
    finally:
        policy.stop()
        box.stop()
