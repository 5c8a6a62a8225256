"""`shinken gc` against the real Docker engine: processes holding forks are SIGKILLed and
gc must find exactly their leftovers, and nothing a live process (or nobody) owns.

Every resource a test makes carries a per-test label `shinken-gctest=<uuid>` and every gc
call is scoped with `--label` to it, so the shared daemon's other resources are never touched.
"""

from __future__ import annotations

import json
import os
import re
import shutil
import signal
import socket
import subprocess
import sys
import textwrap
import time
import uuid
from pathlib import Path

import docker
import pytest

from tests.cli_runner import CliResult, run_cli
from tests.foreign import remove_foreign, run_foreign

from shinken import reclaim
from shinken.sandbox import gc
from shinken import runtime
from shinken.runtime import Owner, process_start_ticks
from shinken.sandbox.container import remove_with_retries
from shinken.sandbox.docker_client import run_container
from shinken.sandbox.ownership import LABEL_CREATED, labels_for
from shinken.schemas import check_with_jsonschema

pytestmark = pytest.mark.docker

BASE = "shinken/base-bookworm:latest"  # tiny, no python; `sleep infinity` works
TEST_LABEL = "shinken-gctest"
REPO = Path(__file__).resolve().parent.parent

# A stand-in for a probe run / server: makes labelled resources the way shinken's sandbox
# does (labels_for), reports them on stdout, then holds them until it is killed.
# (Plain Docker SDK: the DockerProvider needs a built sandbox image and a bundle for a
# golden, which would cost minutes per test; the labels and ownership are the same.)
HOLDER = textwrap.dedent(
    """
    import json, sys, time
    import docker
    from shinken.sandbox.docker_client import run_container
    from shinken.sandbox.ownership import Owner, labels_for
    from shinken.runtime import make_temp_dir

    cfg = json.loads(sys.argv[1])
    client = docker.from_env()
    extra = {cfg["label_key"]: cfg["label_value"]}
    out = {"owner": Owner.current().label(), "containers": [], "images": [], "tempdirs": []}

    def run(image, kind):
        c = run_container(client, image, ["sleep", "infinity"], detach=True, init=True,
                          network_mode="none", cap_drop=["ALL"],
                          labels=labels_for(kind, task=cfg["task"], extra=extra))
        out["containers"].append(c.id)

    for _ in range(cfg.get("forks", 0)):
        run(cfg["base"], "fork")
    for _ in range(cfg.get("pool", 0)):
        run(cfg["base"], "pool")
    for _ in range(cfg.get("servers", 0)):
        run(cfg["base"], "server")
    if cfg.get("golden"):
        build = run_container(client, cfg["base"], ["true"], create_only=True,
                              labels=labels_for("build", task=cfg["task"], extra=extra))
        image = build.commit(repository="shinken-gctest/golden", tag=cfg["label_value"][:12] + "-" + cfg["task"],
                             conf={"Labels": labels_for("golden", task=cfg["task"], extra=extra)})
        build.remove()
        out["images"].append(image.id)
        for _ in range(cfg.get("golden_forks", 0)):
            run(image.id, "fork")
    if cfg.get("provider"):  # the real sandbox: golden, a fork and a warm pool of one
        from shinken.bundles.loader import load_bundle
        from shinken.sandbox.docker_provider import DockerProvider

        provider = DockerProvider(client, run_id=cfg["label_value"])
        golden = provider.ensure_golden(load_bundle(cfg["bundle"]), cfg["image"])
        out["images"].append(golden.image_id)
        provider.fork(golden)
        pool = provider.pool(golden, 1)
        while pool.ready < 1:
            time.sleep(0.05)
        run_filter = {"label": ["shinken.run=" + cfg["label_value"]]}
        out["containers"] = [c["Id"] for c in client.api.containers(all=True, filters=run_filter)]
    if cfg.get("tempdir"):
        d = make_temp_dir(labels=extra)
        (d / "half-written-receipt.json.tmp").write_text("{" * 1000)
        out["tempdirs"].append(str(d))
    print(json.dumps(out), flush=True)
    while True:
        time.sleep(60)
    """
)


@pytest.fixture()
def scope(docker_client, tmp_path, monkeypatch):
    """A private label value and runtime root; removes everything carrying the label afterwards."""
    value = uuid.uuid4().hex
    runtime = tmp_path / "runtime"
    monkeypatch.setenv("SHINKEN_RUNTIME_DIR", str(runtime))
    procs: list[subprocess.Popen] = []
    s = {"value": value, "label": f"{TEST_LABEL}={value}", "runtime": runtime, "procs": procs,
         "script": tmp_path / "holder.py"}
    s["script"].write_text(HOLDER)
    yield s
    for p in procs:
        if p.poll() is None:
            p.kill()
        p.wait()
    api = docker_client.api
    for flt in ({"label": [f"{TEST_LABEL}={value}"]}, {"label": [f"shinken.run={value}"]}):
        # another gc may be removing the same thing: gone or going counts as removed
        for c in api.containers(all=True, filters=flt):
            assert remove_with_retries(lambda c=c: api.remove_container(c["Id"], force=True), backoff_s=0.2) is None
        for i in api.images(filters=flt):
            assert remove_with_retries(lambda i=i: api.remove_image(i["Id"], force=True), backoff_s=0.2) is None


def start_holder(scope, task: str, **cfg) -> tuple[subprocess.Popen, dict]:
    cfg = {"label_key": TEST_LABEL, "label_value": scope["value"], "task": task, "base": BASE, **cfg}
    p = subprocess.Popen([sys.executable, str(scope["script"]), json.dumps(cfg)], stdout=subprocess.PIPE,
                         text=True, env={**os.environ, "SHINKEN_RUNTIME_DIR": str(scope["runtime"])})
    scope["procs"].append(p)
    line = p.stdout.readline()
    assert line, f"holder for {task} exited with {p.wait()}"
    return p, json.loads(line)


def kill9(p: subprocess.Popen) -> None:
    p.send_signal(signal.SIGKILL)
    p.wait(timeout=10)


def shinken_gc(scope, *args: str, input: str | None = None, label: str | None = None) -> CliResult:
    # Its own process, always: gc tells dead owners from live ones by process.
    return run_cli("gc", "--label", label or scope["label"], *args, stdin=input or "", timeout=120, subprocess_=True,
                   setenv={"SHINKEN_RUNTIME_DIR": str(scope["runtime"])})


def gc_json(scope, *args: str, expect_rc: int = 0, label: str | None = None) -> dict:
    r = shinken_gc(scope, "--json", *args, label=label)
    assert r.returncode == expect_rc, r.stderr
    doc = json.loads(r.stdout)
    assert check_with_jsonschema("gc", doc) == []
    return doc


def ids(items: list[dict]) -> set[str]:
    return {i["id"] for i in items}


def exists(client, container_id: str) -> bool:
    try:
        client.api.inspect_container(container_id)
        return True
    except docker.errors.NotFound:
        return False


def image_exists(client, image_id: str) -> bool:
    try:
        client.api.inspect_image(image_id)
        return True
    except docker.errors.ImageNotFound:
        return False


def dead_owner() -> Owner:
    """The owner label of a process that really ran on this host and has exited."""
    p = subprocess.Popen(["sleep", "30"])
    ticks = process_start_ticks(p.pid)
    p.kill()
    p.wait()
    return Owner(socket.gethostname(), p.pid, ticks)


def found_or_reaped(client, found: set[str], expected: set[str], reapable: set[str]) -> set[str]:
    """Check what a gc call reported (`found`) against `expected`. Dead owners' forks and pools
    (`reapable`) may have been removed first by another session's ComputerEngine on code from
    before 5840161, whose maintenance gc reaped every dead owner's fork on the shared daemon:
    each of those must really be gone, never just missed. Returns the ones gone that way."""
    assert found <= expected, f"reported, not expected: {found - expected}"
    gone = expected - found
    assert gone <= reapable, f"missed (not a fork/pool another gc may take): {gone - reapable}"
    assert not [c for c in gone if exists(client, c)], f"missed although still there: {gone}"
    return gone


def make_container(client, scope, labels: dict[str, str] | None, image: str = BASE) -> str:
    """A container with shinken's `labels` (through the Docker door), or None: one a person made
    (no shinken labels; it removes itself, tests/foreign.py). Either carries the test's scope label."""
    if labels is None:
        return run_foreign(client, image, {TEST_LABEL: scope["value"]}).id
    c = run_container(client, image, ["sleep", "infinity"], detach=True, init=True, network_mode="none",
                      labels={TEST_LABEL: scope["value"], **labels})
    return c.id


def test_killed_holder_is_reclaimed_live_one_and_unlabeled_untouched(docker_client, scope):
    live_proc, live = start_holder(scope, "task-live", forks=2, tempdir=True)
    dead_proc, dead = start_holder(scope, "task-dead", forks=2, pool=1, tempdir=True)
    unlabeled = make_container(docker_client, scope, None)  # only the test's own label
    untouched_total = run_foreign(docker_client, BASE, {TEST_LABEL: scope["value"] + "-x"})
    try:
        # while both live, nothing is reclaimable
        assert gc_json(scope)["reclaimable"] == []
        kill9(dead_proc)

        doc = gc_json(scope)
        expected = set(dead["containers"]) | set(dead["tempdirs"])
        reapable = set(dead["containers"])
        found_or_reaped(docker_client, ids(doc["reclaimable"]), expected, reapable)
        assert doc["dry_run"] is True and doc["reclaimed"] == [] and doc["failed"] == []
        by_id = {i["id"]: i for i in doc["reclaimable"]}
        kinds = dict(zip(dead["containers"], ["fork", "fork", "pool"], strict=True))
        for cid in set(by_id) & reapable:
            assert by_id[cid]["resource"] == "container" and by_id[cid]["kind"] == kinds[cid]
            assert by_id[cid]["task"] == "task-dead" and by_id[cid]["owner"] == dead["owner"]
            assert "has exited" in by_id[cid]["reason"]
        assert by_id[dead["tempdirs"][0]]["kind"] == "tempdir" and by_id[dead["tempdirs"][0]]["bytes"] >= 1000
        assert Path(dead["tempdirs"][0]).exists()  # dry run removed nothing (no engine takes folders)

        table = shinken_gc(scope)
        assert table.returncode == 0, table.stderr
        still_there = {c for c in dead["containers"] if exists(docker_client, c)}
        for cid in still_there:  # there after the table, so there while it was made
            assert cid[:12] in table.stdout
        assert not any(cid[:12] in table.stdout for cid in live["containers"] + [unlabeled])
        assert f"pid {dead_proc.pid}" in table.stdout
        listed = int(re.search(r"(\d+) reclaimable", table.stderr).group(1))
        assert len(still_there) + 1 <= listed <= len(expected), table.stderr

        # unscoped dry run on the shared daemon: never lists unlabelled containers
        r = run_cli("gc", "--json", subprocess_=True, timeout=120)
        assert r.returncode == 0, r.stderr
        assert not ids(json.loads(r.stdout)["reclaimable"]) & {unlabeled, untouched_total.id}

        done = gc_json(scope, "--force")
        assert dead["tempdirs"][0] in ids(done["reclaimed"])
        found_or_reaped(docker_client, ids(done["reclaimed"]), expected, reapable)
        assert done["failed"] == [] and done["dry_run"] is False
        assert not any(exists(docker_client, c) for c in dead["containers"])
        assert not Path(dead["tempdirs"][0]).exists()
        assert list((scope["runtime"] / "tempdirs").glob("*.json")) != []  # the live holder's entry stays
        assert all(docker_client.api.inspect_container(c)["State"]["Running"] for c in live["containers"])
        assert Path(live["tempdirs"][0], ".shinken-owner").read_text().strip() == live["owner"]
        assert docker_client.api.inspect_container(unlabeled)["State"]["Running"]
        assert live_proc.poll() is None

        assert gc_json(scope)["reclaimable"] == []  # idempotent: nothing left to do
    finally:
        remove_foreign(untouched_total)


def test_killed_docker_provider_leaves_fork_pool_and_golden(docker_client, scope, tmp_path):
    """The same recovery for what the real DockerProvider made (its labels, its golden)."""
    from shinken.images.build import ensure_image

    image = ensure_image("linux", client=docker_client)
    bundle = tmp_path / "tasks" / "zero-signal"
    shutil.copytree(REPO / "demo" / "zero-signal", bundle)
    with open(bundle / "reward.py", "a", encoding="utf-8") as fh:
        fh.write(f"\n# gc test salt {scope['value']}\n")  # a private golden, not a shared cached one
    proc, made = start_holder(scope, "zero-signal", provider=True, bundle=str(bundle), image=image)
    run_label = f"shinken.run={scope['value']}"
    # a fork, a pool fork and the provider's lease on the golden (docs/sandbox.md)
    assert len(made["containers"]) == 3 and len(made["images"]) == 1
    made_kinds = sorted(docker_client.api.inspect_container(c)["Config"]["Labels"]["shinken.kind"]
                        for c in made["containers"])
    assert made_kinds == ["fork", "lease", "pool"], made_kinds
    # all live: the golden is held (by the lease, and by a live owner), whatever --older-than says
    assert gc_json(scope, "--include-goldens", label=run_label)["reclaimable"] == []
    aged = gc_json(scope, "--include-goldens", "--older-than", "0s", label=run_label)["reclaimable"]
    assert {i["kind"] for i in aged} == {"fork", "pool"}, aged  # a live owner's lease, and its golden, are never aged out
    kill9(proc)

    forks = set(made["containers"])
    doc = gc_json(scope, label=run_label)
    found_or_reaped(docker_client, ids(doc["reclaimable"]), forks, forks)
    kinds = {c: docker_client.api.inspect_container(c)["Config"]["Labels"]["shinken.kind"]
             for c in forks if exists(docker_client, c)}
    assert set(kinds.values()) <= {"fork", "pool", "lease"}
    assert all(i["kind"] == kinds.get(i["id"], i["kind"]) for i in doc["reclaimable"])
    assert {i["task"] for i in doc["reclaimable"]} <= {"zero-signal"}

    done = gc_json(scope, "--force", "--include-goldens", label=run_label)
    assert set(made["images"]) <= ids(done["reclaimed"])  # no engine takes goldens
    found_or_reaped(docker_client, ids(done["reclaimed"]), forks | set(made["images"]), forks)
    assert done["failed"] == []
    assert not any(exists(docker_client, c) for c in made["containers"])
    assert not image_exists(docker_client, made["images"][0])
    assert image_exists(docker_client, image)  # the base sandbox image is never a candidate


def test_reused_pid_and_zombie_are_dead_current_owner_alive(docker_client, scope):
    me = Owner.current()
    reused = Owner(me.host, me.pid, str(int(me.start) + 1))  # this pid, another start time
    gone = dead_owner()
    # server containers: liveness is the same for every kind, and no engine reaps servers
    # (a fork of a dead owner may be reaped by another session's engine meanwhile)
    c_reused = make_container(docker_client, scope, labels_for("server", task="t", owner=reused))
    c_gone = make_container(docker_client, scope, labels_for("server", task="t", owner=gone))
    c_live = make_container(docker_client, scope, labels_for("server", task="t", owner=me))
    # killed but not yet reaped: /proc still shows the same pid and start time
    zombie_proc = subprocess.Popen(["sleep", "30"])
    zombie = Owner(me.host, zombie_proc.pid, process_start_ticks(zombie_proc.pid))
    c_zombie = make_container(docker_client, scope, labels_for("server", task="t", owner=zombie))
    zombie_proc.kill()
    try:
        for _ in range(100):  # until the kernel has turned it into a zombie
            if Path(f"/proc/{zombie_proc.pid}/stat").read_text().split(") ")[1].startswith("Z"):
                break
            time.sleep(0.02)
        assert zombie.is_alive()  # the pid+start check alone would keep its forks

        doc = gc_json(scope)
    finally:
        zombie_proc.wait()
    by_id = {i["id"]: i for i in doc["reclaimable"]}
    assert set(by_id) == {c_reused, c_gone, c_zombie}
    assert "another process" in by_id[c_reused]["reason"]
    assert "has exited" in by_id[c_gone]["reason"]
    assert "zombie" in by_id[c_zombie]["reason"]
    assert c_live not in by_id


def test_remote_owner_is_kept_unless_old(docker_client, scope):
    # An owner on another host cannot be checked from here: kept, unless --older-than says so.
    remote = Owner("some-other-host.example", 4242, "77")
    old = make_container(docker_client, scope, labels_for("fork", owner=remote,
                                                          extra={LABEL_CREATED: str(int(time.time()) - 7200)}))
    assert gc_json(scope)["reclaimable"] == []
    by_id = {i["id"]: i for i in gc_json(scope, "--older-than", "1h")["reclaimable"]}
    assert set(by_id) == {old} and "some-other-host.example" in by_id[old]["reason"]


def test_goldens_only_with_include_goldens_and_never_while_held(docker_client, scope):
    dead_proc, dead = start_holder(scope, "gold", golden=True, golden_forks=1)
    kill9(dead_proc)
    golden = dead["images"][0]
    # a second golden of the same dead owner, still used by a live process's fork
    build = run_container(docker_client, BASE, ["true"], create_only=True,
                          labels=labels_for("build", extra={TEST_LABEL: scope["value"]}))
    held = build.commit(repository="shinken-gctest/held", tag=scope["value"][:12],
                        conf={"Labels": labels_for("golden", task="held", owner=Owner.parse(dead["owner"]),
                                                   extra={TEST_LABEL: scope["value"]})})
    build.remove()
    live_fork = make_container(docker_client, scope, labels_for("fork", task="held"), image=held.id)

    dead_forks = set(dead["containers"])
    without = gc_json(scope)
    found_or_reaped(docker_client, ids(without["reclaimable"]), dead_forks, dead_forks)  # the fork, not the image

    with_goldens = gc_json(scope, "--include-goldens")
    by_id = {i["id"]: i for i in with_goldens["reclaimable"]}
    assert golden in by_id
    found_or_reaped(docker_client, set(by_id), dead_forks | {golden}, dead_forks)
    assert by_id[golden]["resource"] == "image" and by_id[golden]["kind"] == "golden"
    assert by_id[golden]["bytes"] is not None
    assert held.id not in by_id  # a live fork uses it

    done = gc_json(scope, "--force", "--include-goldens")
    assert golden in ids(done["reclaimed"]) and done["failed"] == []
    found_or_reaped(docker_client, ids(done["reclaimed"]), dead_forks | {golden}, dead_forks)
    assert not image_exists(docker_client, golden)
    assert image_exists(docker_client, held.id)
    assert docker_client.api.inspect_container(live_fork)["State"]["Running"]


def test_removal_failure_is_reported_with_nonzero_exit(docker_client, scope):
    owner = dead_owner()
    golden = run_container(docker_client, BASE, ["true"], create_only=True,
                           labels=labels_for("build", extra={TEST_LABEL: scope["value"]}))
    image = golden.commit(repository="shinken-gctest/busy", tag=scope["value"][:12],
                          conf={"Labels": labels_for("golden", task="busy", owner=owner,
                                                     extra={TEST_LABEL: scope["value"]})})
    golden.remove()
    # `docker run <golden>` by someone else: inherits the golden's labels, adds none of its own
    user_container = run_foreign(docker_client, image.id)

    # default mode: the image is held by a container gc will not remove, so it is not offered
    assert gc_json(scope, "--include-goldens")["reclaimable"] == []

    # --all ignores liveness, but Docker still refuses: reported, exit 1, nothing forced
    r = shinken_gc(scope, "--all", "--force", "--include-goldens", "--json")
    assert r.returncode == 1, r.stderr
    doc = json.loads(r.stdout)
    assert ids(doc["reclaimable"]) == {image.id}  # the user's container is never a candidate
    assert doc["reclaimed"] == []
    assert [f["id"] for f in doc["failed"]] == [image.id]
    assert "in use" in doc["failed"][0]["error"]
    assert image.id[:19] in r.stderr or image.id in r.stderr
    assert image_exists(docker_client, image.id)
    assert docker_client.api.inspect_container(user_container.id)["State"]["Running"]
    remove_foreign(user_container)

    # the python API reports an item it cannot handle rather than raising
    bogus = gc.Reclaimable(resource="volume", kind="fork", id="0" * 64, task=None, owner=None,
                           reason="test", bytes=None)
    reclaimed, failed = reclaim.reclaim(docker_client, [bogus])
    assert reclaimed == [] and [f.id for f in failed] == ["0" * 64]
    assert "unknown resource type 'volume'" in failed[0].error


def test_resources_removed_by_someone_else_meanwhile_are_not_failures(docker_client, scope):
    """Another gc (an engine's maintenance pass, a second terminal) removes a dead owner's fork
    and golden between the scan and --force: they are gone, which is what was asked."""
    # servers: no engine reaps them, so the only race here is the one this test makes
    dead_proc, dead = start_holder(scope, "raced", servers=2, golden=True)
    kill9(dead_proc)
    items = reclaim.find_reclaimable(docker_client, include_goldens=True, label_filter={TEST_LABEL: scope["value"]},
                                temp_root=scope["runtime"])
    assert {i.id for i in items} == set(dead["containers"]) | set(dead["images"])
    raced = dead["containers"][0]
    docker_client.api.remove_container(raced, force=True)  # the other gc wins the race for these two
    docker_client.api.remove_image(dead["images"][0], force=True)
    reclaimed, failed = reclaim.reclaim(docker_client, items)
    assert failed == [] and {i.id for i in reclaimed} == {i.id for i in items}
    by_id = {i.id: i for i in reclaimed}
    assert reclaim.ALREADY_GONE in by_id[raced].reason and reclaim.ALREADY_GONE in by_id[dead["images"][0]].reason
    assert reclaim.ALREADY_GONE not in by_id[dead["containers"][1]].reason  # this one gc removed itself
    assert not exists(docker_client, dead["containers"][1])


def test_inherited_labels_do_not_make_a_container_shinkens(docker_client, scope):
    # `docker commit` of a dead owner's container, then `docker run` of that image by a person:
    # the new container carries its labels verbatim but shinken never made it. (A server: no
    # engine reaps it before the commit, as another session's could a dead owner's fork.)
    fork = make_container(docker_client, scope, labels_for("server", owner=dead_owner()))
    snap = docker_client.containers.get(fork).commit(repository="shinken-gctest/snap", tag=scope["value"][:12])
    docker_client.api.remove_container(fork, force=True)
    person = run_foreign(docker_client, snap.id)
    try:
        assert person.id not in ids(gc_json(scope, "--force")["reclaimable"])
        assert exists(docker_client, person.id)
    finally:
        remove_foreign(person)
        docker_client.api.remove_image(snap.id, force=True)


def test_older_than_and_all_prompt(docker_client, scope):
    labels = labels_for("server", task="old")
    labels[LABEL_CREATED] = str(int(time.time()) - 7200)
    old_live = make_container(docker_client, scope, labels)  # owned by this (live) test process
    new_live = make_container(docker_client, scope, labels_for("fork", task="new"))

    assert gc_json(scope)["reclaimable"] == []
    by_id = {i["id"]: i for i in gc_json(scope, "--older-than", "1h")["reclaimable"]}
    assert set(by_id) == {old_live}
    assert by_id[old_live]["reason"].startswith("older than 1h")
    assert gc_json(scope, "--older-than", "3h")["reclaimable"] == []

    declined = shinken_gc(scope, "--all", input="n\n")
    assert declined.returncode == 0, declined.stderr
    assert "Reclaim these 2" in declined.stderr and "nothing reclaimed" in declined.stderr
    assert exists(docker_client, old_live) and exists(docker_client, new_live)

    accepted = shinken_gc(scope, "--all", "--json", input="y\n")
    assert accepted.returncode == 0, accepted.stderr
    assert ids(json.loads(accepted.stdout)["reclaimed"]) == {old_live, new_live}
    assert not exists(docker_client, old_live) and not exists(docker_client, new_live)


def test_bad_options_are_usage_errors(scope):
    r = shinken_gc(scope, "--older-than", "soon")
    assert r.returncode == 2 and "--older-than" in r.stderr and "Traceback" not in r.stderr
    r = run_cli("gc", "--label", "novalue", subprocess_=True, timeout=60)
    assert r.returncode == 2 and "KEY=VALUE" in r.stderr


def test_temp_dir_registry_only_removes_folders_still_marked(tmp_path):
    root = tmp_path / "rt"
    gone = dead_owner()
    kept = tmp_path / "kept"
    kept.mkdir()
    runtime.register_temp_dir(kept, owner=gone, root=root, labels={"k": "v"})
    replaced = tmp_path / "replaced"
    replaced.mkdir()
    runtime.register_temp_dir(replaced, owner=gone, root=root)
    (replaced / runtime.OWNER_MARKER).write_text(Owner.current().label())  # someone else's folder now
    live = runtime.make_temp_dir(root=root)
    (live / "data").write_bytes(b"x" * 10)

    items = reclaim.find_reclaimable(None, temp_root=root)
    by_id = {i.id: i for i in items}
    assert set(by_id) == {str(kept.resolve()), str(replaced.resolve())}
    assert by_id[str(replaced.resolve())].entry_only
    assert [i.id for i in reclaim.find_reclaimable(None, temp_root=root, label_filter={"k": "v"})] == [str(kept.resolve())]

    reclaimed, failed = reclaim.reclaim(None, items)
    assert failed == [] and len(reclaimed) == 2
    assert not kept.exists()
    assert replaced.is_dir()  # not ours any more: only the registry entry went
    assert live.is_dir() and len(list((root / "tempdirs").glob("*.json"))) == 1
    runtime.unregister_temp_dir(live, root=root)
    assert list((root / "tempdirs").glob("*.json")) == []


def test_parse_duration():
    assert gc.parse_duration("90") == 90
    assert gc.parse_duration("1h30m") == 5400
    assert gc.parse_duration("2d") == 172800
    for bad in ("", "h", "1x", "1h 30m", "-5m"):
        with pytest.raises(ValueError):
            gc.parse_duration(bad)
