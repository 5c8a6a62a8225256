"""A rollout served by a fleet host is the rollout served locally (computer/contract.py, fleet/wire.py).

One fleet host on the machine's Docker engine (a Ray head and one node joined with the real
`shinken fleet join`), and a local ComputerEngine on the same engine, serve the same rollouts from
the same EngineConfig: a snapshot task, a relaunch-tier desktop task (the evince demo, whose first
observation shows its PDF), a screenshot profile, a web task on the mock hub and a judged task.
Each gives the same tier, first observation (text and screenshot), tool outputs and verify result
both ways. Then every exception class of the failure table, raised by a host's engine, reaches
the router as an exception the server answers with the same HTTP status and Gym failure kind as
the same exception raised locally.

The demo tasks keep their ids (their goldens are the machine's shared ones, which leases keep
safe), so the host is stopped without `fleet leave` and what its agent held is reclaimed by owner."""

from __future__ import annotations

import base64
import importlib
import os
import shutil
import sys
import time
from pathlib import Path

import pytest

from fleet_harness import RAY_ARGS, SimFleet
from shinken.computer.contract import EngineConfig

pytestmark = [pytest.mark.docker, pytest.mark.slow]

REPO = Path(__file__).resolve().parent.parent
EVINCE = "20ef0077-ea53-57ed-a5e1-41a934326e1e"
WEB = "parity-web-mailbox"
JUDGED = "parity-judged"
JUDGE_KEY = "parity-judge-key"
HOST = "p0"

# The web rollout: reads the mailbox the setup left for this fork's own sid, empties it, says what it saw.
WEB_SCRIPT = """import json, re, urllib.request as u
base = re.search(r"BASE_URL = '([^']+)'", open('/home/user/initial_setup.py').read()).group(1)
sid = open('/tmp/task_web_sid').read().strip()
page = u.urlopen(base + '/go?sid=' + sid, timeout=30).read().decode()
req = u.Request(base + '/post?sid=' + sid, method='POST', headers={'Content-Type': 'application/json'},
                data=json.dumps({'action': 'set_current', 'state': {'messages': []}}).encode())
print('invoice shown:', 'Invoice 42' in page, '| set:', u.urlopen(req, timeout=30).status)
"""


@pytest.fixture(scope="module")
def task_root(tmp_path_factory, hub_image) -> Path:
    from test_judge import PLAIN_REWARD, _bundle
    from test_mockweb_hub import _web_task

    root = tmp_path_factory.mktemp("parity-tasks")
    for tid in ("hello-file", EVINCE):
        shutil.copytree(REPO / "demo" / tid, root / tid)
    _web_task(root, WEB, "In the mailbox, delete the message titled 'Invoice 42'.", "not invoice")
    _bundle(root, JUDGED, PLAIN_REWARD)
    return root


@pytest.fixture(scope="module")
def judge():
    from judge_server import JudgeServer

    with JudgeServer(api_key=JUDGE_KEY) as srv:
        yield srv


@pytest.fixture(scope="module")
def fleet(cua_image):
    """One host on the machine's engine; no registry (one host copies no goldens)."""
    sim = SimFleet(extra=0, slots=4)
    owner = None
    try:
        sim.start_head()
        r = sim.shinken("fleet", "join", "--address", sim.address, "--name", HOST, "--slots", "4", "--image", cua_image,
                        "--num-cpus", "2", "--no-demand-pools", "--json",
                        env={"SHINKEN_RAY_START_ARGS": RAY_ARGS + " --node-ip-address=127.0.0.1",
                             "SHINKEN_JUDGE_API_KEY": JUDGE_KEY})  # the judge's key is the host's own
        assert r.returncode == 0, r.stderr[-2000:]
        os.environ.update(sim.env)
        from shinken.fleet import cluster
        from shinken.runtime import Owner

        ray = cluster.connect(sim.address)
        pid = int(cluster.infos(ray, cluster.hosts(ray))[HOST]["pid"])
        owner = Owner.parse(f"{Owner.current().host}/{pid}/{_start_ticks(pid)}")
        yield sim
    finally:
        sim.stop(leave=False)
        if owner is not None:
            _reclaim_owned_by(owner.label())


def _start_ticks(pid: int) -> str:
    from shinken.runtime import process_start_ticks

    return str(process_start_ticks(pid))


def _reclaim_owned_by(owner: str) -> None:
    """What the stopped agent held on the machine's engine (leases, hubs, networks): its own only."""
    from shinken import reclaim
    from shinken.sandbox.docker_client import connect

    client = connect()
    try:
        deadline = time.monotonic() + 60
        while True:
            items = reclaim.find_reclaimable(client, label_filter={"shinken.owner": owner}, include_temp_dirs=False)
            if not items or time.monotonic() > deadline:
                break
            reclaim.reclaim(client, items)
    finally:
        client.close()


def _engines(fleet, config: EngineConfig):
    from shinken.computer.engine import ComputerEngine
    from shinken.fleet.router import FleetEngine

    return (ComputerEngine(config, keep_goldens_on_close=True, gc_interval_s=None), FleetEngine(fleet.address, config))


def _rollout(engine, session: str, task: str, calls: list[tuple[str, dict]]) -> dict:
    """One rollout: the seed's tier, the first observation, every tool's output, the verify result."""
    g = engine.seed(session, task)
    tier = engine.seed_timing(session)["tier"]  # read before the end: the local engine forgets the session
    try:
        first = engine.first_observation(session, g)
        outs = [engine.step(session, g, name, args) for name, args in calls]
        res = engine.verify(session, g)
    finally:
        engine.end(session, g)
    return {"tier": tier, "first": first, "outs": outs,
            "verify": (res.reward, res.mask_sample, res.failure_kind)}


def _same_screen(a, b) -> None:
    """Two screenshots of the same start state: same size and encoding, nearly every pixel equal."""
    from png import decode_png

    assert (a.mime, a.width, a.height) == (b.mime, b.width, b.height)
    ra, rb = decode_png(a.data), decode_png(b.data)
    differing = sum(1 for y in range(ra.height) for x in range(0, ra.width, 4) if ra.pixel(x, y) != rb.pixel(x, y))
    assert differing <= 0.01 * ra.height * ra.width / 4, differing


def _parity(fleet, config: EngineConfig, task: str, calls: list[tuple[str, dict]], tag: str) -> tuple[dict, dict]:
    local, remote = _engines(fleet, config)
    try:
        here = _rollout(local, f"{tag}-local", task, calls)
        there = _rollout(remote, f"{tag}-fleet", task, calls)
    finally:
        local.close()
        remote.close()
    assert there["tier"] == here["tier"], (here["tier"], there["tier"])
    assert [o.text for o in there["outs"]] == [o.text for o in here["outs"]], (here["outs"], there["outs"])
    assert there["verify"] == here["verify"], (here["verify"], there["verify"])
    assert (there["first"] is None) == (here["first"] is None)
    if here["first"] is not None:
        assert there["first"].text == here["first"].text
        _same_screen(here["first"].screenshot, there["first"].screenshot)
    return here, there


def test_snapshot_task(fleet, task_root, cua_image):
    here, _ = _parity(fleet, EngineConfig(task_root, cua_image), "hello-file",
                      [("computer_exec", {"command": "ls /home/user; cat /home/user/hello.txt"}),
                       ("computer_exec", {"command": "printf 'hello shinken' > /home/user/hello.txt"})], "snap")
    assert here["tier"] == "snapshot" and here["verify"] == (1.0, False, None), here


def test_relaunch_tier_desktop_task_shows_its_app_through_the_fleet(fleet, task_root, cua_image):
    """The evince demo at its probe's tier (relaunch, checked): its PDF is in the first observation
    through the fleet as locally (before, a host served it at the unchecked filesystem tier and the
    fleet's first observation had no accessible elements)."""
    here, there = _parity(fleet, EngineConfig(task_root, cua_image), EVINCE,
                          [("computer_observe", {"mode": "tree"}),
                           ("computer_exec", {"command": "printf 265.40 > /home/user/answer.txt"})], "evince")
    assert here["tier"] == "relaunch" and here["verify"] == (1.0, False, None), here
    assert 'frame "invoice.pdf"' in there["outs"][0].text, there["outs"][0].text


def test_screenshot_profile_through_the_fleet(fleet, task_root, cua_image):
    from shinken.computer.profiles import Profile

    config = EngineConfig(task_root, cua_image, profile=Profile(observation="both", actions="pixel"))
    here, there = _parity(fleet, config, EVINCE, [("computer_exec", {"command": "true"})], "shot")
    first = there["first"]
    assert first.screenshot is not None and first.screenshot.mime == "image/png", first
    assert "invoice.pdf" in first.text  # `both`: the tree beside the screen


def test_web_task_through_the_fleet(fleet, task_root, cua_image, hub_image):
    here, _ = _parity(fleet, EngineConfig(task_root, cua_image, hub_image=hub_image), WEB,
                      [("computer_exec", {"command": f"echo {base64.b64encode(WEB_SCRIPT.encode()).decode()} | "
                                                     "base64 -d | python3"})], "web")
    assert here["outs"][0].text == "exit code 0\ninvoice shown: True | set: 200\n", here["outs"][0].text
    assert here["verify"] == (1.0, False, None), here


def test_judged_task_through_the_fleet(fleet, task_root, cua_image, judge, monkeypatch):
    from shinken.judge.config import JudgeConfig

    monkeypatch.setenv("SHINKEN_JUDGE_API_KEY", JUDGE_KEY)  # the local engine's relay reads this process's
    config = EngineConfig(task_root, cua_image, judge=JudgeConfig(judge.url, "parity-model"))
    here, _ = _parity(fleet, config, JUDGED, [("computer_exec", {"command": "echo DONE > /home/user/state.txt"})],
                      "judge")
    assert here["verify"] == (1.0, False, None), here
    asked = [r for r in judge.requests if r["body"] and r["body"].get("model") == "parity-model"]
    assert len(asked) == 2 and {r["headers"].get("Authorization") for r in asked} == {f"Bearer {JUDGE_KEY}"}


def test_a_config_the_host_cannot_serve_is_refused_naming_the_difference(fleet, task_root):
    from shinken.computer.failures import answer_for
    from shinken.fleet.router import FleetEngine
    from shinken.sandbox.api import InfraError

    remote = FleetEngine(fleet.address, EngineConfig(task_root, "shinken/sandbox-other:latest", seed_timeout_s=600))
    started = time.monotonic()
    with pytest.raises(InfraError, match="serves image .* the server's config names shinken/sandbox-other:latest") as e:
        remote.seed("refused", "hello-file")
    assert answer_for(e.value).status == 503
    assert time.monotonic() - started < 300  # at once: no host serves it, so waiting for a slot changes nothing


# ---------------------------------------------------------------- the failure table across the wire


def make_exception(name: str) -> BaseException:
    """An instance of the exception class `name` (qualified), as an engine would raise it."""
    module, _, qual = name.rpartition(".")
    cls = getattr(importlib.import_module(module), qual)
    if qual == "SetupError":
        return cls(0, "execute", "exit 1")
    if qual == "StartStateError":
        return cls("relaunch", ["window 'invoice.pdf' missing"])
    if qual == "UnsettledDesktop":
        return cls("some-task", [], (90.0,))
    if qual == "RaisedElsewhere":
        from shinken.computer.failures import LOST

        return cls(LOST, "shinken.sandbox.api.ForkLost", "raised on another host")
    return cls(f"raised on the host: {qual}")


class RaisingEngine:
    """A host's engine whose calls raise the exception class their task id (seed), tool name (step)
    or session (verify) names: what the agent sends back for each is what a real engine's would be."""

    def __init__(self, config, **_):
        self.config = config
        self.web_session = None

    def seed(self, session, task_id, generation=None, tier=None):
        raise make_exception(task_id)

    def step(self, session, generation, name, arguments):
        raise make_exception(name)

    def verify(self, session, generation):
        raise make_exception(session)

    def sessions(self):
        return {}

    def goldens(self):
        return []

    def add_task_folder(self, folder):
        pass

    def close(self):
        pass


def _table_classes() -> list[str]:
    from shinken.computer.failures import ANSWERS, ANSWERS_BY_NAME, qualified_name

    return sorted({qualified_name(c) for c in ANSWERS} | set(ANSWERS_BY_NAME) | {"builtins.KeyError"})


def test_every_exception_of_the_failure_table_raised_on_a_host_is_answered_as_locally(fleet, task_root, cua_image):
    import ray
    import ray.cloudpickle
    from ray.util.scheduling_strategies import NodeAffinitySchedulingStrategy

    from shinken.bundles.loader import load_bundle
    from shinken.computer.failures import answer_for
    from shinken.fleet import cluster, wire
    from shinken.fleet.agent import HostAgent, config_key
    from shinken.fleet.nodes import bundle_payload

    ray.cloudpickle.register_pickle_by_value(sys.modules[__name__])  # the host imports no test module
    rc = cluster.connect(fleet.address)
    (host,) = [h for h in cluster.hosts(rc) if h.name == HOST]
    agent = rc.remote(HostAgent).options(
        num_cpus=0, max_concurrency=4,
        scheduling_strategy=NodeAffinitySchedulingStrategy(node_id=host.node_id, soft=False),
    ).remote("walk", 1, cua_image, engine_factory=RaisingEngine)
    bundle = load_bundle(task_root / "hello-file")
    rc.get(agent.add_task.remote(bundle_payload(bundle)), timeout=120)
    rollout = EngineConfig(task_root, cua_image).rollout()
    token = f"{config_key(rollout)}.g0"  # names the host's engine for this config
    names = _table_classes()
    assert len(names) >= 20, names
    try:
        for name in names:
            local = answer_for(make_exception(name))
            calls = {"seed": lambda: agent.seed.remote(wire.SeedRequest("s", name, bundle.path.name,
                                                                        bundle.bundle_hash, rollout)),
                     "step": lambda: agent.step.remote("s", token, name, {}),
                     "verify": lambda: agent.verify.remote(name, token)}
            for call, send in calls.items():  # in turn: the first seed makes the engine the token names
                failed = rc.get(send(), timeout=120)
                assert isinstance(failed, wire.Failed), (name, call, failed)
                assert failed.exc_class == name and failed.host == "walk", failed
                raised = failed.exception()  # what the router raises
                assert (answer_for(raised).status, answer_for(raised).failure_kind) == (local.status, local.failure_kind), \
                    (name, call, answer_for(raised), local)
                assert answer_for(raised) == local and str(raised) == str(make_exception(name)), (name, call)
    finally:
        rc.get(agent.close.remote(), timeout=120)
        rc.kill(agent)
