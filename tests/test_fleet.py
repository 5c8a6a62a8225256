"""A fleet of Docker hosts on Ray, simulated on this machine (tests/fleet_harness.py): three Docker
engines (the machine's and two private dockerds), a Ray head, a loopback registry, each host joined
with the real `shinken fleet join`. Rollouts of shinken/sandbox-linux tasks (copies of demo/hello-file
under their own ids, so each test picks a task by its home host) go through the real router, agents
and engines. One fleet for the module: starting it costs ~1 min on 2 cores."""

from __future__ import annotations

import json
import shutil
import threading
import time
import uuid
from pathlib import Path

import pytest

from fleet_harness import SimFleet

pytestmark = [pytest.mark.docker, pytest.mark.slow]

DEMO = Path(__file__).resolve().parent.parent / "demo"
SOLVE = "printf 'hello shinken' > /home/user/hello.txt"
GONE = {"provider_unavailable", "session_lost"}  # Gym failure kinds of a rollout whose host died


def _hosts_of(n: int, want: str, names: list[str], salt: str, taken: set[str]) -> list[str]:
    from shinken.fleet.nodes import home_index

    out = []
    i = 0
    while len(out) < n:
        tid = f"fleet-{salt}-{i}"
        i += 1
        if names[home_index(tid, names)] == want and tid not in taken:
            out.append(tid)
    return out


def _task(root: Path, tid: str) -> None:
    dest = root / tid
    shutil.copytree(DEMO / "hello-file", dest)
    cfg = json.loads((dest / "config.json").read_text())
    cfg["id"] = tid
    (dest / "config.json").write_text(json.dumps(cfg))


@pytest.fixture(scope="module")
def fleet(linux_image, hub_image):
    from shinken.runtime import cache_root

    sim = SimFleet(extra=2, slots=2, cache=cache_root() / "fleet-test")
    # Demand pools off: these tests count each host's containers and slots exactly (the chaos tests
    # want none left on a host after gc, and a live agent's warm computers are not leftovers); the
    # pools on a host agent are test_agent_demand_pools_stay_within_free_slots'.
    sim.join_args = ["--no-demand-pools"]
    try:
        sim.start(linux_image, hub=hub_image)  # every host joins with the hub image: one hub per host
        yield sim
    finally:
        sim.stop()


@pytest.fixture(scope="module")
def joined(fleet, linux_image):
    """h0..h2 joined; h2 first refused while it holds another image under the fleet's name."""
    h2 = fleet.engine("h2")
    c = h2.client()
    import io

    other = c.images.build(fileobj=io.BytesIO(b"FROM scratch\nLABEL shinken.test=other\n"), rm=True)[0]
    repo, tag = linux_image.rsplit(":", 1)
    c.api.tag(other.id, repo, tag)
    refused = fleet.shinken("fleet", "join", "--address", fleet.address, "--name", "h2", "--registry",
                            fleet.registry, "--image", linux_image, docker_host=h2.host)
    c.api.remove_image(linux_image)
    c.close()
    fleet.preload(h2, linux_image)
    for eng in fleet.engines:
        fleet.join(eng, linux_image)
    return {"refused": refused}


@pytest.fixture(scope="module")
def router(fleet, joined, linux_image, hub_image, tmp_path_factory):
    from shinken.computer.contract import EngineConfig
    from shinken.fleet.router import FleetEngine

    salt = uuid.uuid4().hex[:8]
    root = tmp_path_factory.mktemp("fleet-tasks")
    names = ["h0", "h1", "h2"]
    taken: set[str] = set()
    tasks: dict[str, list[str]] = {}
    for h in names:
        tasks[h] = _hosts_of(2, h, names, salt, taken)
        taken.update(tasks[h])
        for tid in tasks[h]:
            _task(root, tid)
    from test_mockweb_hub import _web_task

    web = _web_ids(salt)["kept"]  # a mailbox web task homed on h1
    _web_task(root, web, "In the mailbox, delete the message titled 'Invoice 42'.", "not invoice")
    tasks["web"] = [web]
    tasks["copy"] = _hosts_of(2, "h1", names, f"copy-{salt}", taken)  # goldens copied through the registry
    for tid in tasks["copy"]:
        _task(root, tid)
    import os

    os.environ.update(fleet.env)
    # The server's config names the hub its web tasks run against: every host serves with it.
    eng = FleetEngine(fleet.address, EngineConfig(root, linux_image, seed_timeout_s=20, hub_image=hub_image))
    eng.tasks = tasks  # type: ignore[attr-defined]
    yield eng
    eng.close()


def _status(fleet) -> dict:
    r = fleet.shinken("fleet", "status", "--address", fleet.address, "--json")
    assert r.returncode == 0, r.stderr[-2000:]
    return {h["host"]: h for h in json.loads(r.stdout)["hosts"]}


def test_join_refuses_a_host_whose_image_id_differs(joined):
    r = joined["refused"]
    assert r.returncode == 2, r.stderr
    lines = r.stderr.strip().splitlines()
    assert len(lines) == 1 and "refused" in lines[0] and "same image" in lines[0], r.stderr


def test_fleet_commands_bad_input_one_line_exit_2(fleet):
    for args in (["fleet", "join", "--address", "nohost", "--name", "x"],
                 ["fleet", "join", "--address", "127.0.0.1:1", "--name", "bad name!"],
                 ["fleet", "status", "--address", "127.0.0.1:notaport"],
                 ["fleet", "leave", "--address", fleet.address, "--name", "never-joined"]):
        r = fleet.shinken(*args)
        assert r.returncode == 2, (args, r.stdout, r.stderr)
        assert len(r.stderr.strip().splitlines()) == 1 and "Traceback" not in r.stderr, r.stderr


def test_status_shows_every_host_with_the_same_image(fleet, joined, linux_image):
    hosts = _status(fleet)
    assert sorted(hosts) == ["h0", "h1", "h2"]
    ids = {h["image_id"] for h in hosts.values()}
    assert all(h["up"] and h["slots"] == 2 for h in hosts.values()), hosts
    assert len(ids) == 1
    assert {h["pools"] for h in hosts.values()} == {"off"}, hosts  # joined with --no-demand-pools (the module's fixture)


def test_rollouts_land_on_home_host_and_a_full_home_spills(fleet, router):
    tid = router.tasks["h1"][0]
    assert router.home(tid) == "h1"
    gens = [router.seed(f"s-spill-{i}", tid) for i in range(3)]  # a GRPO group of 3 on a 2-slot home
    hosts = [g.split("~")[0] for g in gens]
    assert hosts[:2] == ["h1", "h1"] and hosts[2] != "h1", hosts
    st = _status(fleet)
    assert st["h1"]["used"] == 2 and st["h1"]["free"] == 0
    assert st[hosts[2]]["used"] >= 1 and any(tid in st[h]["goldens"] for h in ("h1",)), st
    assert tid in st[hosts[2]]["goldens"]  # the spill host built the golden from the bundle it was sent
    # The calls the workspace server makes (step per tool route, first_observation after a seed)
    assert router.first_observation("s-spill-2", gens[2]) is None  # the a11y profile sends no first screen
    out = router.step("s-spill-2", gens[2], "computer_exec", {"command": SOLVE})
    assert out.text.startswith("exit code 0") and out.screenshot is None, out
    res = router.verify("s-spill-2", gens[2])
    assert (res.reward, res.mask_sample) == (1.0, False), res
    for i, g in enumerate(gens):
        router.end(f"s-spill-{i}", g)
    assert _status(fleet)["h1"]["used"] == 0


def _fill_h1(router, tid: str, tag: str) -> list[tuple[str, str]]:
    """Both slots of h1 (the task's home) taken by rollouts of `tid`; the first built its golden
    there (the registry had no copy) and h1's agent pushed it: waited for."""
    held = [(f"{tag}-{i}", router.seed(f"{tag}-{i}", tid)) for i in range(2)]
    first = router.seed_timing(f"{tag}-0")
    assert first["host"] == "h1" and first["golden"] == "built", first
    assert first["golden_note"] == "the registry has no copy", first
    assert router.seed_timing(f"{tag}-1")["golden"] == "warm"
    deadline = time.monotonic() + 120
    while tid not in router.view(fresh=True)[1]["h1"].get("pushed", []):
        assert time.monotonic() < deadline, router.view(fresh=True)[1]["h1"]
        time.sleep(0.5)
    return held


def test_a_spilled_seed_copies_the_golden_through_the_registry(fleet, router):
    """A seed spilled off a full home host gets the golden the home host built and pushed: pulled
    from the registry (the same image id on both hosts), not rebuilt, its timing says `copied`, and
    the rollout on it scores 1.0. When the copy in the registry is broken (its own layer deleted),
    the spill host rebuilds and the timing says why."""
    from shinken.bundles.loader import load_bundle
    from shinken.fleet.golden_copy import golden_key

    tid, broken = router.tasks["copy"]
    held = _fill_h1(router, tid, "s-copy")
    try:
        g = router.seed("s-copy-x", tid)
        t = router.seed_timing("s-copy-x")
        assert t["spilled"] and t["host"] != "h1" and t["golden"] == "copied", t
        assert _goldens(fleet.engine("h1"), tid) == _goldens(fleet.engine(t["host"]), tid) != set()
        assert router.step("s-copy-x", g, "computer_exec", {"command": SOLVE}).text.startswith("exit code 0")
        res = router.verify("s-copy-x", g)
        assert (res.reward, res.mask_sample) == (1.0, False), res
        router.end("s-copy-x", g)
        router.view(fresh=True)  # cached with h1 full: the ends below free its slots in it too
    finally:
        for s, g0 in held:
            router.end(s, g0)
    held = _fill_h1(router, broken, "s-broken")  # at once: its first seed must still find h1
    try:
        import urllib.request

        bundle = load_bundle(router.task_root / broken)
        base = router.view()[1]["h1"]["image_id"]
        repo = router.image.rsplit(":", 1)[0]
        url = f"http://{fleet.registry}/v2/{repo}"
        req = urllib.request.Request(f"{url}/manifests/golden-{golden_key(bundle.bundle_hash, base)}",
                                     headers={"Accept": "application/vnd.docker.distribution.manifest.v2+json"})
        layer = json.loads(urllib.request.urlopen(req, timeout=10).read())["layers"][-1]["digest"]
        urllib.request.urlopen(urllib.request.Request(f"{url}/blobs/{layer}", method="DELETE"), timeout=10)
        g = router.seed("s-broken-x", broken)
        t = router.seed_timing("s-broken-x")
        assert t["spilled"] and t["golden"] == "built" and t["golden_note"].startswith("copy failed"), t
        assert _goldens(fleet.engine(t["host"]), broken).isdisjoint(_goldens(fleet.engine("h1"), broken))
        router.end("s-broken-x", g)
    finally:
        for s, g0 in held:
            router.end(s, g0)


def _goldens(eng, task: str, bundle_hash: str | None = None) -> set[str]:
    """The task's goldens on the engine (of that bundle only, when given: h0 is the machine's engine,
    where other runs build goldens of the demo tasks too)."""
    labels = [f"shinken.task={task}", "shinken.kind=golden", *([f"shinken.bundle_hash={bundle_hash}"] if bundle_hash else [])]
    return {i["Id"] for i in _images(eng, labels)}


def _images(eng, labels: list[str]) -> list[dict]:
    """The engine's images carrying all `labels`, as one listing (no inspect per image: on the
    loaded shared engine the high-level list took ~1.5 s a call)."""
    c = eng.client()
    try:
        return list(c.api.images(filters={"label": labels}))
    finally:
        c.close()


def _goldens_by_task(eng, names: list[str], hashes: dict[str, str | None]) -> dict[str, set[str]]:
    """_goldens of each of `names` on the engine, from one listing of its goldens."""
    out: dict[str, set[str]] = {n: set() for n in names}
    for i in _images(eng, ["shinken.kind=golden"]):
        labels = i.get("Labels") or {}
        n = labels.get("shinken.task")
        if n in out and (hashes[n] is None or labels.get("shinken.bundle_hash") == hashes[n]):
            out[n].add(i["Id"])
    return out


def _web_ids(salt: str) -> dict[str, str]:
    """A web task id homed on h1 (kept) and one on h2 (zero signal): their probes run on private engines."""
    names = ["h0", "h1", "h2"]
    return {"kept": _hosts_of(1, "h1", names, f"web-kept-{salt}", set())[0],
            "zero": _hosts_of(1, "h2", names, f"web-zero-{salt}", set())[0]}


def _hubs(eng) -> list[dict]:
    c = eng.client()
    try:
        return c.api.containers(filters={"label": ["shinken.managed=1", "shinken.kind=hub"], "status": "running"})
    finally:
        c.close()


def test_probe_over_the_fleet_decides_as_local_and_leaves_goldens_on_home_hosts(fleet, router, linux_image,
                                                                               hub_image, tmp_path):
    """`shinken probe --executor ray --hub` against the fleet's head: the decisions the local executor
    gives on these demo tasks (test_probe pins them) and on the two mailbox web tasks (kept with rewards
    [0, 0] on the untouched state, zero signal: test_mockweb_hub pins the same decisions locally), each
    golden left on the task's home host; the web tasks' forks ran on h1 and h2 against the hub each
    host's agent runs there."""
    from shinken.fleet.nodes import home_index
    from test_mockweb_hub import _web_task

    names = ["hello-file", "zero-signal", "broken-reward"]
    root = tmp_path / "tasks"
    salt = uuid.uuid4().hex
    for n in names:
        shutil.copytree(DEMO / n, root / n)
        with open(root / n / "reward.py", "a", encoding="utf-8") as fh:
            fh.write(f"\n# fleet test salt {salt}\n")
    web = _web_ids(salt[:8])
    _web_task(root, web["kept"], "In the mailbox, delete the message titled 'Invoice 42'.", "not invoice")
    _web_task(root, web["zero"], "In the mailbox, keep the message titled 'Invoice 42'.", "bool(invoice)")
    names += list(web.values())
    from shinken.bundles.loader import load_bundle

    hashes = {n: load_bundle(root / n).bundle_hash if n not in web.values() else None for n in names}
    before = {e.name: _goldens_by_task(e, names, hashes) for e in fleet.engines}
    receipt = tmp_path / "receipt.json"
    r = fleet.shinken("probe", str(root), "--image", linux_image, "--hub", hub_image, "--receipt", str(receipt),
                      "--run-dir", str(tmp_path / "run"), "--state-fidelity", "filesystem", "--executor", "ray",
                      "--ray-address", fleet.address, "--concurrency", "3", timeout=900)
    assert r.returncode == 0, r.stderr[-3000:]
    doc = json.loads(receipt.read_text())
    assert doc["summary"]["executor"] == "ray"
    lines = {t["task_id"]: t for t in doc["tasks"]}
    assert {t: (x["reason"] or "kept") for t, x in lines.items()} == {
        "hello-file": "kept", "zero-signal": "zero_signal", "broken-reward": "reward_error",
        web["kept"]: "kept", web["zero"]: "zero_signal"}, {t: x["detail"] for t, x in lines.items()}
    # The rewards read the state the hub holds for each fork's own sid: reached, and as the setup left it.
    assert lines[web["kept"]]["rewards"] == [0.0, 0.0] and lines[web["zero"]]["rewards"] == [1.0, 1.0], lines
    hosts = ["h0", "h1", "h2"]
    after = {e.name: _goldens_by_task(e, names, hashes) for e in fleet.engines}
    for n in names:
        new = {e.name for e in fleet.engines if after[e.name][n] - before[e.name][n]}
        assert new == {hosts[home_index(n, hosts)]}, (n, new)
    for h in ("h1", "h2"):  # each host's one hub, run by its agent, outlives the probe run
        hubs = _hubs(fleet.engine(h))
        assert len(hubs) == 1 and hubs[0]["Labels"].get("shinken.made_by") == "computer-engine", hubs


WEB_ROLLOUT = """import json, re, urllib.request as u
base = re.search(r"BASE_URL = '([^']+)'", open('/home/user/initial_setup.py').read()).group(1)
sid = open('/tmp/task_web_sid').read().strip()
print(u.urlopen(base + '/go?sid=' + sid, timeout=30).read().decode()[:400])
req = u.Request(base + '/post?sid=' + sid, method='POST', headers={'Content-Type': 'application/json'},
                data=json.dumps({'action': 'set_current', 'state': {'messages': []}}).encode())
print('set', u.urlopen(req, timeout=30).status)
"""


def test_a_web_rollout_on_a_fleet_host_reaches_that_hosts_hub(fleet, router):
    """A web task homed on h1 (a private engine) served through the router: its fork is on h1, on the
    run network of the hub h1's agent runs, reads the state the setup left for its own sid from that
    hub, changes it there, and verify scores what the hub then holds (1.0)."""
    import base64

    tid = router.tasks["web"][0]
    g = router.seed("s-web", tid)
    try:
        assert g.startswith("h1~"), g
        script = base64.b64encode(WEB_ROLLOUT.encode()).decode()
        out = router.step("s-web", g, "computer_exec", {"command": f"echo {script} | base64 -d | python3"}).text
        assert "Invoice 42" in out and "set 200" in out, out
        h1 = fleet.engine("h1")
        c = h1.client()
        try:
            forks = c.api.containers(filters={"label": ["shinken.kind=fork", f"shinken.task={tid}"]})
            assert len(forks) == 1, forks
            nets = set(forks[0]["NetworkSettings"]["Networks"])
            hubs = _hubs(h1)
            assert len(hubs) == 1 and nets and nets <= set(hubs[0]["NetworkSettings"]["Networks"]), (nets, hubs)
            assert all(n.startswith("shinken-web-") for n in nets), nets
        finally:
            c.close()
        res = router.verify("s-web", g)
        assert (res.reward, res.mask_sample) == (1.0, False), res
    finally:
        router.end("s-web", g)


def test_a_seed_no_host_can_take_is_an_infra_failure(fleet, router):
    from shinken.sandbox.api import InfraError

    tid = router.tasks["h0"][1]
    gens = []
    try:
        for i in range(6):  # every slot of the fleet
            gens.append((f"s-full-{i}", router.seed(f"s-full-{i}", tid)))
        router.seed_timeout_s = 2
        started = time.monotonic()
        with pytest.raises(InfraError, match="no fleet host could start"):
            router.seed("s-full-x", tid)
        assert time.monotonic() - started < 30
    finally:
        router.seed_timeout_s = 20
        for s, g in gens:
            router.end(s, g)


def _batch(router, tasks: list[str], tag: str, hold: threading.Event) -> list[dict]:
    """Rollouts that solve their task, wait for `hold`, then verify; results per rollout."""
    results: list[dict] = [{} for _ in tasks]

    def run(i: int, tid: str) -> None:
        s = f"{tag}-{i}"
        try:
            g = router.seed(s, tid)
            results[i]["host"] = g.split("~")[0]
            results[i]["exec"] = router.tool(s, g, "computer_exec", {"command": SOLVE})
            hold.wait(120)
            r = router.verify(s, g)
            results[i].update(reward=r.reward, masked=r.mask_sample, kind=r.failure_kind)
            router.end(s, g)
        except Exception as exc:  # noqa: BLE001
            results[i]["error"] = f"{type(exc).__name__}: {exc}"

    threads = [threading.Thread(target=run, args=(i, t)) for i, t in enumerate(tasks)]
    for t in threads:
        t.start()
    results.append({"threads": threads})  # type: ignore[dict-item]
    return results


def _wait_placed(results: list[dict], n: int) -> None:
    deadline = time.monotonic() + 180
    while sum(1 for r in results[:n] if "exec" in r or "error" in r) < n:
        assert time.monotonic() < deadline, results
        time.sleep(0.2)


def _finish(results: list[dict]) -> list[dict]:
    for t in results[-1]["threads"]:
        t.join(300)
    return results[:-1]


def _shinken_containers(eng, but: tuple[str, ...] = ("hub",)) -> list[str]:
    """The engine's shinken containers but those of the kinds `but` (a live agent's hub and, while
    it serves, its leases on goldens)."""
    c = eng.client()
    try:
        return [b.name for b in c.containers.list(all=True, filters={"label": "shinken.managed=1"})
                if b.labels.get("shinken.kind") not in but]
    finally:
        c.close()


def test_chaos_docker_engine_dies_mid_batch(fleet, router):
    h2 = fleet.engine("h2")
    hold = threading.Event()
    tasks = [router.tasks["h2"][0], router.tasks["h2"][0], router.tasks["h0"][0]]
    results = _batch(router, tasks, "chaos-d", hold)
    _wait_placed(results, 3)
    h2.kill()
    hold.set()
    done = _finish(results)
    on_h2 = [r for r in done if r.get("host") == "h2"]
    others = [r for r in done if r.get("host") != "h2"]
    assert on_h2 and others, done
    # masked in Gym's words (the engine gone: provider_unavailable; the fork with it: session_lost), never scored 0
    assert all(r.get("masked") and r.get("kind") in GONE for r in on_h2), done
    assert all(r.get("reward") == 1.0 and not r.get("masked") for r in others), done
    # New seeds avoid the host while its engine is down ...
    g = router.seed("chaos-d-new", router.tasks["h2"][1])
    assert not g.startswith("h2~")
    router.end("chaos-d-new", g)
    # ... and use it again once it is back.
    h2.restart()
    deadline = time.monotonic() + 60
    while not _status(fleet)["h2"]["up"]:
        assert time.monotonic() < deadline
        time.sleep(1)
    time.sleep(2.5)  # the router's view of the hosts is reused for 2 s
    g = router.seed("chaos-d-back", router.tasks["h2"][1])
    assert g.startswith("h2~"), g
    router.end("chaos-d-back", g)
    r = fleet.shinken("gc", "--force", docker_host=h2.host)
    assert r.returncode == 0, r.stderr
    deadline = time.monotonic() + 60
    live = ("hub", "lease")  # the agent lives on: its hub and its leases on the goldens it holds stay
    while _shinken_containers(h2, live):  # the agent retries the forks it could not delete while the engine was down
        assert time.monotonic() < deadline, _shinken_containers(h2, live)
        fleet.shinken("gc", "--force", docker_host=h2.host)
        time.sleep(2)


def test_chaos_ray_node_dies_mid_batch(fleet, router, linux_image):
    h1 = fleet.engine("h1")
    hold = threading.Event()
    tasks = [router.tasks["h1"][0], router.tasks["h1"][1], router.tasks["h0"][0]]
    results = _batch(router, tasks, "chaos-r", hold)
    _wait_placed(results, 3)
    fleet.kill_node("h1", router.view(fresh=True)[1]["h1"]["pid"])
    hold.set()
    done = _finish(results)
    on_h1 = [r for r in done if r.get("host") == "h1"]
    others = [r for r in done if r.get("host") != "h1"]
    assert on_h1 and others, done
    assert all(r.get("masked") and r.get("kind") in GONE for r in on_h1), done
    assert all(r.get("reward") == 1.0 and not r.get("masked") for r in others), done
    g = router.seed("chaos-r-new", router.tasks["h1"][0])
    assert not g.startswith("h1~")
    router.end("chaos-r-new", g)
    # The dead agent's forks are a dead owner's: `shinken gc` on that host reclaims them.
    assert _shinken_containers(h1)
    r = fleet.shinken("gc", "--force", docker_host=h1.host)
    assert r.returncode == 0, r.stderr
    assert _shinken_containers(h1) == []
    # The host comes back (a new node and agent under the same name) and is used again. Ray's head
    # may still be taking the dead node's detached agent down when the new node asks for its name:
    # the join is what a user re-runs then, so it is retried once after the head caught up.
    try:
        fleet.join(h1, linux_image)
    except RuntimeError as exc:
        assert "did not start" in str(exc), exc
        time.sleep(10)
        fleet.join(h1, linux_image)
    time.sleep(2.5)
    g = router.seed("chaos-r-back", router.tasks["h1"][0])
    assert g.startswith("h1~"), g
    router.end("chaos-r-back", g)


def test_leave_releases_the_host(fleet, router):
    r = fleet.leave("h2")
    assert r.returncode == 0, r.stderr
    deadline = time.monotonic() + 30  # until the head has its node gone (was a fixed 3 s)
    while any(h.name == "h2" for h in router.view(fresh=True)[0]) and time.monotonic() < deadline:
        time.sleep(0.5)
    assert "h2" not in _status(fleet)
    assert _shinken_containers(fleet.engine("h2")) == []
    assert _hubs(fleet.engine("h2")) == []  # the hub its agent ran went with it


def test_agent_demand_pools_stay_within_free_slots(linux_image, tmp_path):
    """A host agent with its default pools (demand pools: a fleet host keeps them unless joined
    with --no-demand-pools; in this process, on the machine's engine: no Ray needed for the agent's
    own bookkeeping): a group of 2 seeds wants 2 warm computers, but with 3 slots and 2 rollouts
    live only 1 slot is free, so 1 is kept; once the rollouts end, 2. Pooled computers serve the
    next group."""
    from shinken.bundles.loader import load_bundle
    from shinken.computer.contract import EngineConfig
    from shinken.fleet.agent import HostAgent
    from shinken.fleet.nodes import bundle_payload
    from shinken.fleet.wire import Seeded, SeedRequest

    tid = f"fleet-demand-{uuid.uuid4().hex[:8]}"
    _task(tmp_path, tid)
    bundle = load_bundle(tmp_path / tid)
    agent = HostAgent("demand", 3, linux_image)
    rollout = EngineConfig(tmp_path, linux_image).rollout()  # what a server sends with each seed
    try:
        assert agent.info()["pools"] == "demand"
        agent.add_task(bundle_payload(bundle))

        def group(tag: str) -> list[tuple[str, str]]:
            out: list[tuple[str, str]] = []

            def one(i: int) -> None:
                a = agent.seed(SeedRequest(f"{tag}{i}", tid, bundle.path.name, bundle.bundle_hash, rollout))
                assert isinstance(a, Seeded), a
                out.append((f"{tag}{i}", a.generation))

            threads = [threading.Thread(target=one, args=(i,)) for i in range(2)]
            for t in threads:
                t.start()
            for t in threads:
                t.join(120)
            assert len(out) == 2
            return out

        def warm_until(size: int, ready: int) -> None:
            deadline = time.monotonic() + 60
            while True:
                w = agent.info()["warm"].get(tid, {})
                if w.get("size") == size and w.get("ready") == ready:
                    return
                assert time.monotonic() < deadline, agent.info()["warm"]
                time.sleep(0.3)

        first = group("a")
        warm_until(1, 1)  # 3 slots - 2 live rollouts: 1 warm computer
        for s, g in first:
            agent.end(s, g)
        warm_until(2, 2)  # the group's size, now that the slots are free
        (engine,) = agent.engines()  # one config served: one engine
        hits = engine.stats["pool_hits"]
        second = group("b")
        assert engine.stats["pool_hits"] - hits == 2
        for s, g in second:
            agent.end(s, g)
    finally:
        agent.close()
