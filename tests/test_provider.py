"""The `shinken` NeMo Gym sandbox provider's engine side (provider/config.py, provider/sandboxes.py)
on the real Docker engine: checked config, image sandboxes with their limits, labels, files,
exec semantics and pause, task forks of a golden, nothing left by a half-failed create, and
`shinken gc` reclaiming sandboxes past their ttl_s. The same provider driven by NeMo Gym's own
registry and Sandbox facade inside the Gym container: tests/test_provider_gym.py."""

from __future__ import annotations

import shlex
import time
import uuid
from pathlib import Path

import pytest

from shinken.provider.config import ConfigProblem, ProviderConfig, TaskOptions
from shinken.provider.sandboxes import REFUSED_RC, CreateFailed, NotReady, Request, SandboxHost, check_request_paths
from shinken import reclaim
from shinken.sandbox.docker_client import create_container
from shinken.sandbox.ownership import (LABEL_EXPIRES, LABEL_KIND, LABEL_MADE_BY, LABEL_MANAGED, LABEL_OWNER, LABEL_RUN,
                                       labels_for)

DEMO = Path(__file__).resolve().parent.parent / "demo"


def req(image: str | None = None, **kw) -> Request:
    base = dict(image=image, task=None, ttl_s=None, ready_timeout_s=60.0, workdir=None, env={}, files={},
                cpus=None, memory_mib=None, disk_gib=None, ports=())
    base.update(kw)
    return Request(**base)


def test_config_refuses_unknown_keys_and_bad_values():
    assert ProviderConfig.parse({}).exec_timeout_s == 180 and ProviderConfig.parse({}).pool_size == 0
    cfg = ProviderConfig.parse({"task_root": "/t", "default_ttl_s": 60, "limits": {"cpus": 1, "memory_mib": 512}})
    assert cfg.limits.cpus == 1.0 and cfg.limits.memory_mib == 512 and cfg.default_ttl_s == 60.0
    for bad, words in [({"bogus": 1}, "unknown key(s) bogus"), ({"network": ""}, "network"),
                       ({"limits": {"gpu": 1}}, "unknown key(s) gpu"), ({"default_ttl_s": -1}, ">= 1"),
                       ({"exec_timeout_s": "fast"}, "expected a number"), ({"accept_filesystem": "yes"}, "true or false"),
                       ({"limits": {"memory_mib": 1.5}}, "integer"), ({"pool_size": -1}, ">= 0"),
                       ({"pool_size": 1.5}, "integer")]:
        with pytest.raises(ConfigProblem, match=words.replace("(", r"\(").replace(")", r"\)")):
            ProviderConfig.parse(bad)
    assert TaskOptions.parse({}, cfg) is None
    opts = TaskOptions.parse({"task_id": "hello-file", "tier": "snapshot"}, cfg)
    assert opts is not None and opts.task_root == "/t" and opts.tier is not None and opts.tier.value == "snapshot"
    for bad, words in [({"task_id": "x", "colour": 1}, "unknown key"), ({"tier": "snapshot"}, "task_id"),
                       ({"task_id": "x", "tier": "fast"}, "tier"), ({"task_id": ""}, "task_id")]:
        with pytest.raises(ConfigProblem, match=words):
            TaskOptions.parse(bad, cfg)
    with pytest.raises(ConfigProblem, match="task_root"):
        TaskOptions.parse({"task_id": "x"}, ProviderConfig.parse({}))
    with pytest.raises(ConfigProblem, match="spec.workdir"):
        check_request_paths(req("x", files={"a.txt": "a"}))
    with pytest.raises(ConfigProblem, match="absolute"):
        check_request_paths(req("x", workdir="rel"))


@pytest.fixture()
def host(docker_client):
    run = f"provider-test-{uuid.uuid4().hex[:8]}"
    # no network: the default bridge of a shared engine can be missing (docker0 deleted by another dockerd)
    h = SandboxHost(ProviderConfig.parse({"run_id": run, "network": "none"}), client=docker_client)
    h.run = run  # type: ignore[attr-defined]
    yield h
    for c in docker_client.api.containers(all=True, filters={"label": f"{LABEL_RUN}={run}"}):
        docker_client.api.remove_container(c["Id"], force=True)


def run_containers(docker_client, run: str, leases: bool = False) -> list[dict]:
    """The run's sandboxes (and, with `leases`, its leases on goldens: docs/sandbox.md)."""
    found = docker_client.api.containers(all=True, filters={"label": f"{LABEL_RUN}={run}"})
    return [c for c in found if leases or (c.get("Labels") or {}).get(LABEL_KIND) != "lease"]


@pytest.mark.docker
def test_image_sandbox_limits_labels_exec_files_pause(host, docker_client, linux_image):
    box = host.create(req(linux_image, ttl_s=600, workdir="/work/here", env={"GREETING": "hi"},
                          files={"notes/a.txt": "alpha\n", "/etc/shinken-b.txt": "beta"}, cpus=0.5, memory_mib=256))
    info = docker_client.api.inspect_container(box.id)
    labels = info["Config"]["Labels"]
    assert labels[LABEL_MANAGED] == "1" and labels[LABEL_KIND] == "fork" and labels[LABEL_MADE_BY] == "gym-provider"
    assert labels[LABEL_RUN] == host.run and labels[LABEL_OWNER].split("/")[1].isdigit()
    assert abs(float(labels[LABEL_EXPIRES]) - (time.time() + 600)) < 60
    hc = info["HostConfig"]
    assert hc["Memory"] == 256 * 2**20 and hc["NanoCpus"] == int(0.5e9) and hc["CapDrop"] == ["ALL"]
    # stdout and stderr apart, env and workdir applied, a non-zero exit is a result
    r = host.exec(box, 'echo "out $GREETING $PWD"; echo err >&2; exit 3')
    assert (r.stdout, r.stderr.strip(), r.return_code, r.error_type) == ("out hi /work/here\n", "err", 3, None)
    r = host.exec(box, "cat a.txt /etc/shinken-b.txt; id -u; echo $X", cwd="/work/here/notes", env={"X": "y"})
    assert r.stdout == "alpha\nbeta0\ny\n" and r.return_code == 0
    r = host.exec(box, "sleep 30", timeout_s=1)
    assert r.error_type == "timeout" and r.return_code == 125
    host.upload(box, b"\x00bin\xff", "/tmp/up/x.bin")
    assert host.download(box, "/tmp/up/x.bin") == b"\x00bin\xff"
    with pytest.raises(FileNotFoundError):
        host.download(box, "/tmp/nope")
    host.pause(box)
    assert host.status(box) == "paused"
    box.paused = False  # as if another process paused it: the exec meets a paused container
    assert host.exec(box, "echo back").stdout == "back\n"
    assert host.status(box) == "running"
    host.close(box)
    host.close(box)  # idempotent
    assert host.status(box) == "gone"
    assert run_containers(docker_client, host.run) == []


@pytest.mark.docker
def test_half_failed_create_leaves_nothing(host, docker_client, linux_image):
    with pytest.raises(CreateFailed, match="not on the Docker engine"):
        SandboxHost(ProviderConfig.parse({"pull": "never"}), client=docker_client).create(
            req("shinken/no-such-image:never"))
    with pytest.raises(Exception, match="proc"):  # allocated, then the file cannot be placed
        host.create(req(linux_image, files={"/proc/nope/x": "x"}))
    with pytest.raises(NotReady, match="readiness probe"):  # a workdir that cannot be made
        host.create(req(linux_image, workdir="/proc/nope"))
    assert run_containers(docker_client, host.run) == []


@pytest.mark.docker
def test_task_fork_of_golden_runs_as_user(host, docker_client, linux_image):
    host.config = ProviderConfig.parse({"run_id": host.run, "image": linux_image, "network": "none"})
    opts = TaskOptions.parse({"task_id": "hello-file", "task_root": str(DEMO)}, host.config)
    box = host.create(req(None, task=opts, ttl_s=300))
    assert box.kind == "task" and box.tier == "snapshot" and box.user == "user"
    r = host.exec(box, "id -un; test -f /home/user/initial_setup.sh && echo setup-ran")
    assert r.stdout == "user\nsetup-ran\n", r
    labels = docker_client.api.inspect_container(box.id)["Config"]["Labels"]
    assert labels["shinken.task"] == "hello-file" and labels[LABEL_MADE_BY] == "gym-provider" and LABEL_EXPIRES in labels
    again = host.attach(box.descriptor())  # what connect() does in another process
    assert (again.id, again.user, again.kind) == (box.id, "user", "task")
    with pytest.raises(CreateFailed, match="no owner secret"):  # the container id alone opens nothing
        host.attach({"sandbox_id": box.id})
    host.close(box)
    assert run_containers(docker_client, host.run) == []
    # The provider holds the golden it served from (a lease), so no other process deletes it; until shutdown.
    (lease,) = run_containers(docker_client, host.run, leases=True)
    assert lease["Labels"][LABEL_KIND] == "lease" and lease["Labels"]["shinken.golden"] == lease["ImageID"]
    assert lease["State"] == "created" and lease["ImageID"] == labels["shinken.golden"]
    with pytest.raises(CreateFailed, match="not found"):
        host.create(req(None, task=TaskOptions.parse({"task_id": "nope", "task_root": str(DEMO)}, host.config)))
    host.shutdown()
    assert run_containers(docker_client, host.run, leases=True) == []


@pytest.mark.docker
def test_gc_reclaims_a_live_owners_sandbox_past_its_ttl(host, docker_client, linux_image):
    host.reaper.interval_s = 3600  # gc's rule on its own: the provider's reaper is another test's
    short = host.create(req(linux_image, ttl_s=1))
    kept = host.create(req(linux_image, ttl_s=3600))
    time.sleep(2.2)
    found = {i.id: i for i in reclaim.find_reclaimable(docker_client, label_filter={LABEL_RUN: host.run},
                                                  include_temp_dirs=False)}
    assert short.id in found and "past its ttl_s" in found[short.id].reason
    assert kept.id not in found  # owner alive, not expired
    reclaimed, failed = reclaim.reclaim(docker_client, list(found.values()))
    assert failed == [] and [i.id for i in reclaimed] == [short.id]
    assert [c["Id"] for c in run_containers(docker_client, host.run)] == [kept.id]
    host.close(kept)


@pytest.mark.docker
def test_provider_reaps_its_sandboxes_past_ttl_and_connect_needs_the_owner_secret(docker_client, linux_image):
    """Nobody runs gc: the provider process removes an idle sandbox once its ttl_s passed (on
    f382b83 it ran until a gc), keeps the one whose ttl_s has not, and gives a spec without ttl_s
    the default one. connect opens a sandbox by its descriptor (id and owner secret) only: the bare
    container id (which anyone who can list containers reads) or a wrong secret is refused."""
    run = f"provider-reap-{uuid.uuid4().hex[:8]}"
    h = SandboxHost(ProviderConfig.parse({"run_id": run, "network": "none", "reap_interval_s": 0.5}),
                    client=docker_client)
    try:
        idle = h.create(req(linux_image, ttl_s=3))
        kept = h.create(req(linux_image))
        labels = docker_client.api.inspect_container(kept.id)["Config"]["Labels"]
        assert abs(float(labels[LABEL_EXPIRES]) - (time.time() + 3600)) < 120  # default_ttl_s
        opened = h.attach(idle.descriptor())
        assert opened.id == idle.id and h.exec(opened, "echo in").stdout == "in\n"
        cid, secret = idle.descriptor()["sandbox_id"].split(":")
        idle_labels = docker_client.api.inspect_container(idle.id)["Config"]["Labels"]
        assert cid == idle.id and len(secret) >= 32 and secret not in str(idle_labels)  # only its hash is there
        for bad, words in [({"sandbox_id": idle.id}, "no owner secret"),
                           ({"sandbox_id": f"{idle.id}:{'x' * len(secret)}"}, "does not match"),
                           ({"sandbox_id": f"{idle.id}:{kept.descriptor()['sandbox_id'].split(':')[1]}"},
                            "does not match")]:
            with pytest.raises(CreateFailed, match=words):
                h.attach(bad)
        deadline = time.monotonic() + 120
        while h.status(idle) != "gone" and time.monotonic() < deadline:
            time.sleep(0.2)
        assert h.status(idle) == "gone" and list(h.reaper.reaped) == [idle.id]
        assert h.status(kept) == "running"
        assert [c["Id"] for c in run_containers(docker_client, run)] == [kept.id]
    finally:
        h.shutdown()
        for c in run_containers(docker_client, run):
            docker_client.api.remove_container(c["Id"], force=True)


@pytest.mark.docker
def test_task_warm_pool_fills_after_first_create_and_drains(host, docker_client, linux_image):
    host.config = ProviderConfig.parse({"run_id": host.run, "image": linux_image, "network": "none", "pool_size": 1})
    opts = TaskOptions.parse({"task_id": "hello-file", "task_root": str(DEMO)}, host.config)
    first = host.create(req(None, task=opts, ttl_s=300))
    assert first.timings["pooled"] == 0.0  # the first create of a task makes its fork itself
    deadline = time.monotonic() + 120
    while host.pooled() < 1 and time.monotonic() < deadline:
        time.sleep(0.2)
    assert host.pooled() == 1, "the warm pool was not filled in the background"
    waiting = [c for c in run_containers(docker_client, host.run) if c["Id"] != first.id]
    assert len(waiting) == 1
    labels = waiting[0]["Labels"]  # the same ownership labels as a fork: gc reclaims them past owner or ttl_s
    assert labels[LABEL_KIND] == "pool" and labels[LABEL_MADE_BY] == "gym-provider" and labels[LABEL_RUN] == host.run
    assert labels["shinken.task"] == "hello-file" and labels[LABEL_OWNER].split("/")[1].isdigit()
    assert abs(float(labels[LABEL_EXPIRES]) - (time.time() + 300)) < 120
    second = host.create(req(None, task=opts, ttl_s=300))
    assert second.timings["pooled"] == 1.0 and second.id == waiting[0]["Id"]
    assert second.expires == float(labels[LABEL_EXPIRES])
    r = host.exec(second, "id -un; test -f /home/user/initial_setup.sh && echo setup-ran")
    assert r.stdout == "user\nsetup-ran\n", r
    other_ttl = host.create(req(None, task=opts, ttl_s=900))  # another ttl_s: not served from that pool
    assert other_ttl.timings["pooled"] == 0.0
    deadline = time.monotonic() + 120
    while host.pooled() < 2 and time.monotonic() < deadline:  # refilled, and the new ttl_s got its own
        time.sleep(0.2)
    assert host.pooled() == 2
    host.drain()  # the waiting forks are removed, the handed-out sandboxes stay
    assert {c["Id"] for c in run_containers(docker_client, host.run)} == {first.id, second.id, other_ttl.id}
    for b in (first, second, other_ttl):
        host.close(b)
    assert run_containers(docker_client, host.run) == []


WEB = Path(__file__).resolve().parent / "data" / "web_tasks"
STAR = "8b2f7c1e-4a3d-5e6f-9a0b-1c2d3e4f5a6b"  # star a message in the stand-in mailbox mock
STARRED = ("import json, urllib.request; sid = open('/tmp/task_web_sid').read().strip(); "
           "st = json.loads(urllib.request.urlopen('http://cua-gym-mailbox/go?sid=' + sid, timeout=30).read()); "
           "print(sid, [m['starred'] for m in st['current_state']['messages'] if m['id'] == 'm1'])")


@pytest.mark.docker
@pytest.mark.slow  # the stand-in hub image (built once, cached by content hash)
def test_web_task_forks_join_the_providers_hub_each_with_its_own_sid(docker_client, cua_image, hub_image):
    import textwrap

    run = f"provider-web-{uuid.uuid4().hex[:8]}"
    # the task's setup (requests, a browser) runs on the CUA image
    bare = SandboxHost(ProviderConfig.parse({"run_id": run, "image": cua_image}), client=docker_client)
    opts = TaskOptions.parse({"task_id": STAR, "task_root": str(WEB)}, bare.config)
    with pytest.raises(CreateFailed, match="is a web task: set hub_image"):  # refused before anything is made
        bare.create(req(None, task=opts))
    assert run_containers(docker_client, run) == []
    h = SandboxHost(ProviderConfig.parse({"run_id": run, "image": cua_image, "hub_image": hub_image}),
                    client=docker_client)
    try:
        a = h.create(req(None, task=opts, ttl_s=600))
        b = h.create(req(None, task=opts, ttl_s=600))
        hubs = docker_client.api.containers(filters={"label": [f"{LABEL_RUN}={run}", f"{LABEL_KIND}=hub"]})
        assert len(hubs) == 1 and hubs[0]["Labels"][LABEL_MADE_BY] == "gym-provider"
        before = [h.exec(x, "python3 -c " + shlex.quote(STARRED)).stdout.split() for x in (a, b)]
        assert before[0][0] != before[1][0] and before[0][1:] == before[1][1:] == ["[False]"], before
        toggle = textwrap.dedent("""
            import json, urllib.request
            sid = open('/tmp/task_web_sid').read().strip(); base = 'http://cua-gym-mailbox'
            st = json.loads(urllib.request.urlopen(base + '/go?sid=' + sid, timeout=30).read())['current_state']
            for m in st['messages']:
                m['starred'] = m['starred'] or m['id'] == 'm1'
            req = urllib.request.Request(base + '/post?sid=' + sid, method='POST', data=json.dumps(
                {'action': 'set_current', 'state': st}).encode(), headers={'Content-Type': 'application/json'})
            print(urllib.request.urlopen(req, timeout=30).status)""")
        h.upload(a, toggle.encode(), "/tmp/toggle.py")
        assert h.exec(a, "python3 /tmp/toggle.py").stdout.strip() == "200"
        after = [h.exec(x, "python3 -c " + shlex.quote(STARRED)).stdout.split()[1:] for x in (a, b)]
        assert after == [["[True]"], ["[False]"]], after  # each fork its own copy of the golden's hub state
        h.close(a)
        h.close(b)
    finally:
        h.shutdown()  # stops the hub it started and removes the run network
    assert run_containers(docker_client, run) == []
    assert docker_client.api.networks(filters={"label": f"{LABEL_RUN}={run}"}) == []


@pytest.mark.docker
def test_connect_takes_a_resources_server_fork_and_verify_scores_it(host, docker_client, linux_image):
    """What a sandbox-borrowing Gym agent does with shinken_cua's seed response (sandbox_handle):
    connect to the rollout's fork, work in it as the task's user; /verify's reward sees the work."""
    from shinken.computer.contract import EngineConfig
    from shinken.computer.engine import ComputerEngine

    engine = ComputerEngine(EngineConfig(DEMO, linux_image, accept_filesystem=True), keep_goldens_on_close=True)
    try:
        gen = engine.seed("borrowed", "hello-file")
        handle = engine.sandbox_id("borrowed", gen)
        assert handle is not None
        cid = handle.split(":")[0]
        assert len(cid) == 64 and docker_client.api.inspect_container(cid)["State"]["Running"]
        with pytest.raises(CreateFailed, match="no owner secret"):  # another rollout's id is not enough
            host.attach({"sandbox_id": cid})
        box = host.attach({"sandbox_id": handle})
        assert (box.kind, box.user, box.uid, box.gid) == ("task", "user", 1000, 1000)
        r = host.exec(box, "id -un; printf 'hello shinken' > /home/user/hello.txt")
        assert (r.stdout, r.return_code) == ("user\n", 0), r
        # a borrowed fork refuses root, by name and by uid: root could reach what verify reads
        for who in ("root", 0, "shinken-verifier"):
            refused = host.exec(box, "id -un > /tmp/ran-as-root", user=who)
            assert refused.return_code == REFUSED_RC and "refused" in (refused.stderr or ""), refused
        assert host.exec(box, "test ! -e /tmp/ran-as-root && id -u", user=1000).stdout == "1000\n"
        result = engine.verify("borrowed", gen)
        assert result.reward == 1.0 and "'hello shinken'" in result.reward_output_tail, result
    finally:
        engine.end("borrowed")
        engine.close()
    # owned (gc's once this process is gone), but neither a provider sandbox nor a task fork
    stranger = create_container(docker_client.api, linux_image, command="sleep 60",
                                labels=labels_for("build", task="test-stranger"))
    try:
        with pytest.raises(CreateFailed, match="not a shinken provider sandbox or task fork"):
            host.attach({"sandbox_id": stranger})
    finally:
        docker_client.api.remove_container(stranger, force=True)
