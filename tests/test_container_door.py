"""Every container is created at the Docker door (sandbox/docker_client.py), and only with its owner.

`shinken gc` reclaims a container by the owner label it got at create time. A container created
without one carries only what it inherited from its image (a fork of a golden: the golden's
labels), which gc rightly takes for someone else's `docker run <golden>` and never claims. The door
refuses such a create before anything reaches the engine (UnownedContainer), and the source scan
below fails on any create that does not go through it: the docker SDK's `containers.create/run`,
the low-level `create_container`, the Engine API's `/containers/create`, and `docker run/create`
command lines in Python (argv lists, `docker(...)` helpers) or shell, in the package, its server
templates, scripts, benchmarks and tests."""

from __future__ import annotations

import json
import os
import re
import signal
import subprocess
import sys
import textwrap
import time
import uuid
from pathlib import Path

import docker.errors
import pytest

from shinken.mockweb.hub import detached_labels
from shinken.runtime import Owner
from shinken.sandbox.api import UnownedContainer
from shinken.sandbox.docker_client import docker_run_argv, require_owner, run_container
from shinken.sandbox.ownership import LABEL_OWNER, labels_for
from shinken.sandbox.container import remove_with_retries

REPO = Path(__file__).resolve().parent.parent
if str(REPO) not in sys.path:
    sys.path.insert(0, str(REPO))
from tests.cli_runner import run_cli  # noqa: E402

# Where a container may be created without going through the door's functions, and why.
ALLOWED = {
    "sandbox/docker_client.py": "the door itself",
    "tests/foreign.py": "containers a person makes (no shinken labels, on purpose; each removes itself)",
    "tests/test_container_door.py": "this scan's own samples",
}
SKIP_DIRS = {".git", ".venv", "node_modules", "__pycache__", ".mypy_cache", ".pytest_cache", "shinken.egg-info"}
SUFFIXES = {".py", ".sh", ".bash", ".tmpl"}

CREATES = [
    ("docker SDK, low level", re.compile(r"\.create_container\(")),
    ("docker SDK", re.compile(r"\bcontainers\.(?:create|run)\(")),
    ("Engine API", re.compile(r"containers/create\b")),
    ("docker argv", re.compile(r"""["']docker["']\s*,\s*(?:\*[^,\]]+,\s*)*(?:["'](?:-H|--host)["']\s*,\s*[^,\]]+,\s*)?"""
                               r"""(?:["']container["']\s*,\s*)?["'](?:run|create)["']""")),
    ("docker(...) helper", re.compile(r"""\bdocker\w*\(\s*(?:\*[^,)]+,\s*)*(?:["']container["']\s*,\s*)?"""
                                      r"""["'](?:run|create)["']""")),
    ("docker command line", re.compile(r"""\bdocker\s+(?:(?:-H|--host)[= ]\S+\s+)?(?:container\s+)?(?:run|create)"""
                                       r"""(?:\s+[-"'${\\]|\s*$)""", re.M)),
]
# What each pattern must catch (so the scan cannot pass by matching nothing), and what it must not.
MUST_CATCH = [
    'client.containers.run(image, ["sleep", "infinity"])', "docker_client.containers.create(BASE, ['true'])",
    "api.create_container(image_id, command=cmd)", 'requests.post(f"{base}/containers/create", json=body)',
    'subprocess.run(["docker", "run", "-d", image])', "['docker', 'create', image]",
    'subprocess.run(["docker", *engine, "container", "create", image])', '["docker", "-H", host, "run", "--rm", image]',
    'docker("run", "--rm", image)', 'eng.docker("create", image)', 'docker(*self.engine, "run", image)',
    'docker run -d --name x "$IMAGE" sleep infinity', "docker -H unix:///x.sock create $img",
    "docker container run --rm busybox", "docker run \\\n  --rm img", "cid=$(docker create \"$golden\")",
]
MUST_PASS = [
    'subprocess.run(["docker", "network", "create", name])', 'docker("network", "create", net)',
    'f"docker run failed: {r.stderr}"', "`docker run <golden>` by someone else", 'docker("kill", cid)',
    "docker exec -u root cid sh", 'DOCKER = {"docker": {"create": {"network": "bridge"}}}',
    "run_container(client, image, labels=labels_for('fork'))", "create_container(api, image, labels=owned)",
]


def _offences(text: str) -> list[tuple[int, str]]:
    """(line number, what) of every container create in `text`; whole-line comments are skipped
    (prose about `docker run` lives there), everything else counts, strings included."""
    code = "\n".join("" if ln.lstrip().startswith("#") else ln for ln in text.splitlines())
    found = []
    for what, pattern in CREATES:
        for m in pattern.finditer(code):
            found.append((code.count("\n", 0, m.start()) + 1, what))
    return found


def _scanned_files() -> list[Path]:
    out = []
    for dirpath, dirnames, filenames in os.walk(REPO):
        dirnames[:] = [d for d in dirnames if d not in SKIP_DIRS]
        for name in filenames:
            p = Path(dirpath, name)
            if p.suffix in SUFFIXES:
                out.append(p)
            elif not p.suffix and p.is_file() and p.stat().st_size < 1_000_000:
                with open(p, "rb") as fh:
                    if fh.read(2) == b"#!":  # scripts without an extension (.ci/run, the guest's programs)
                        out.append(p)
    return out


def test_the_scan_catches_every_form_of_create() -> None:
    for sample in MUST_CATCH:
        assert _offences(sample), f"the scan misses {sample!r}"
    for sample in MUST_PASS:
        assert not _offences(sample), f"the scan flags {sample!r}"


def test_no_container_is_created_outside_the_door() -> None:
    files = _scanned_files()
    rel = {p.relative_to(REPO).as_posix() for p in files}
    # the walk reached what it must read (a broken walk would pass vacuously)
    assert {"sandbox/container.py", "mockweb/hub.py", "provider/sandboxes.py", "workspace_templates/server/app.py",
            "tests/gym_harness.py", "benchmarks/bench_provider.py", "scripts/test.sh", ".ci/run"} <= rel
    assert len(files) > 200, len(files)
    outside = [f"{p.relative_to(REPO)}:{line}: {what}" for p in files
               if p.relative_to(REPO).as_posix() not in ALLOWED
               for line, what in _offences(p.read_text(encoding="utf-8", errors="replace"))]
    assert not outside, ("containers created outside the Docker door (use shinken.sandbox.docker_client."
                         "create_container / run_container / docker_run_argv with labels_for(...)):\n"
                         + "\n".join(outside))
    # and the door's own module does create them (the allowance is not for a file that lost its job)
    assert _offences((REPO / "sandbox" / "docker_client.py").read_text())


def test_the_door_refuses_a_create_without_an_owner() -> None:
    golden_like = labels_for("golden", task="hello-file")  # what a fork of a golden inherits
    dead = Owner("vm", 4242, "77")
    refused = {
        "no labels": None,
        "empty": {},
        "the image's labels only": golden_like,
        "not managed": {k: v for k, v in labels_for("fork").items() if k != "shinken.managed"},
        "no owner": {k: v for k, v in labels_for("fork").items() if k != LABEL_OWNER},
        "owner not host/pid/start": {**labels_for("fork"), LABEL_OWNER: "somebody"},
        "no created": {k: v for k, v in labels_for("fork").items() if k != "shinken.created"},
        "a hub with neither owner nor creator": {k: v for k, v in detached_labels().items() if k != "shinken.creator"},
    }
    for why, labels in refused.items():
        with pytest.raises(UnownedContainer, match="shinken gc` could not claim") as info:
            require_owner(labels, "test")
        assert "labels_for" in str(info.value), why
        with pytest.raises(UnownedContainer):
            docker_run_argv(labels or {})
    for kind in ("fork", "pool", "build", "server", "hub"):
        assert require_owner(labels_for(kind, owner=dead), "test")[LABEL_OWNER] == dead.label()
    assert require_owner(detached_labels(dead), "test")["shinken.creator"] == dead.label()
    argv = docker_run_argv(labels_for("build", task="t"))
    assert argv[:2] == ["docker", "run"] and f"{LABEL_OWNER}={Owner.current().label()}" in argv


SCOPE = "shinken-doortest"
BASE = "shinken/base-bookworm:latest"  # tiny; `sleep infinity` works

# A process that does what a resources server does with a non-desktop golden: commits one, forks it
# through the sandbox's create (start_container, the path of DockerProvider.fork), and holds a fork
# it created but never started (what a kill between create and start leaves). Then it asks for a
# fork labelled with its golden's labels only (awesome_cannon's labels): refused, nothing created.
HOLDER = textwrap.dedent(
    """
    import json, sys, time
    import docker
    from shinken.sandbox.api import UnownedContainer
    from shinken.sandbox.container import start_container
    from shinken.sandbox.docker_client import create_container, run_container
    from shinken.sandbox.ownership import labels_for

    scope, base = json.loads(sys.argv[1])
    client = docker.from_env()
    api = client.api
    extra = {"shinken-doortest": scope}
    build = run_container(client, base, ["sleep", "infinity"], create_only=True,
                          labels=labels_for("build", task="door-golden", extra=extra))
    golden = build.commit(repository="shinken-doortest/golden", tag=scope[:12],
                          conf={"Labels": labels_for("golden", task="door-golden", extra=extra)})
    build.remove()
    hc = api.create_host_config(init=True, network_mode="none", cap_drop=["ALL"])
    fork = start_container(api, golden.id, labels_for("fork", task="door-golden", extra=extra), hc)
    never_started = create_container(api, golden.id, labels=labels_for("pool", task="door-golden", extra=extra),
                                     host_config=hc)
    try:
        start_container(api, golden.id, dict(golden.labels), hc)
        refused = ""
    except UnownedContainer as exc:
        refused = str(exc)
    print(json.dumps({"golden": golden.id, "fork": fork, "never_started": never_started, "refused": refused}),
          flush=True)
    while True:
        time.sleep(60)
    """
)


@pytest.mark.docker
def test_a_fork_of_a_golden_carries_its_owner_and_gc_reclaims_it_after_its_owner_dies(docker_client, tmp_path) -> None:
    api, value = docker_client.api, uuid.uuid4().hex
    script = tmp_path / "holder.py"
    script.write_text(HOLDER)
    runtime = tmp_path / "runtime"
    proc = subprocess.Popen([sys.executable, str(script), json.dumps([value, BASE])], stdout=subprocess.PIPE,
                            text=True, env={**os.environ, "SHINKEN_RUNTIME_DIR": str(runtime)})
    scope = {"label": [f"{SCOPE}={value}"]}
    try:
        line = proc.stdout.readline()
        assert line, f"the holder exited with {proc.wait()}"
        made = json.loads(line)
        golden, fork, never = made["golden"], made["fork"], made["never_started"]
        assert "shinken.kind='golden'" in made["refused"], made["refused"]  # the image's labels are not an owner's
        # nothing but the two forks was created from the golden: the refused create reached no engine
        assert {c["Id"] for c in api.containers(all=True, filters={"ancestor": golden})} == {fork, never}
        image_labels = api.inspect_image(golden)["Config"]["Labels"]
        for cid, kind, state in ((fork, "fork", "running"), (never, "pool", "created")):
            info = api.inspect_container(cid)
            labels = info["Config"]["Labels"]
            assert info["State"]["Status"] == state
            assert labels["shinken.kind"] == kind and labels[LABEL_OWNER] == image_labels[LABEL_OWNER]
            assert Owner.parse(labels[LABEL_OWNER]).pid == proc.pid  # its maker, from the create call on
            assert {k: v for k, v in labels.items() if k.startswith("shinken.")} != \
                {k: v for k, v in image_labels.items() if k.startswith("shinken.")}  # its own, not inherited

        def gc(*args: str) -> dict:
            r = run_cli("gc", "--label", f"{SCOPE}={value}", "--json", *args, subprocess_=True, timeout=120,
                        setenv={"SHINKEN_RUNTIME_DIR": str(runtime)})
            assert r.returncode == 0, r.stderr
            return json.loads(r.stdout)

        assert gc()["reclaimable"] == []  # its owner lives
        proc.send_signal(signal.SIGKILL)
        proc.wait(timeout=10)
        found = {i["id"]: i for i in gc()["reclaimable"]}
        assert set(found) == {fork, never}, found
        assert all("has exited" in i["reason"] and i["owner"] == image_labels[LABEL_OWNER] for i in found.values())
        done = gc("--force")
        assert {i["id"] for i in done["reclaimed"]} == {fork, never} and done["failed"] == []
        assert api.containers(all=True, filters={"ancestor": golden}) == []
    finally:
        if proc.poll() is None:
            proc.kill()
        proc.wait()
        for c in api.containers(all=True, filters=scope):
            assert remove_with_retries(lambda c=c: api.remove_container(c["Id"], force=True), backoff_s=0.2) is None
        for i in api.images(filters=scope):
            assert remove_with_retries(lambda i=i: api.remove_image(i["Id"], force=True), backoff_s=0.2) is None


@pytest.mark.docker
def test_one_shot_containers_of_the_door_are_refused_before_the_engine_sees_them(docker_client) -> None:
    """docker-py's run through the door: refused without an owner (no container of the image
    appears), created with one."""
    value = uuid.uuid4().hex
    before = time.time()
    with pytest.raises(UnownedContainer):
        run_container(docker_client, BASE, ["true"], remove=True, network_mode="none", labels={SCOPE: value})
    out = run_container(docker_client, BASE, ["echo", "owned"], remove=True, network_mode="none",
                        labels=labels_for("build", task="door-one-shot", extra={SCOPE: value}))
    assert out == b"owned\n"
    events = docker_client.events(since=int(before) - 1, until=int(time.time()) + 1, decode=True,
                                  filters={"type": "container", "event": "create", "label": f"{SCOPE}={value}"})
    created = list(events)
    assert len(created) == 1 and created[0]["Actor"]["Attributes"][LABEL_OWNER] == Owner.current().label(), created
    try:
        docker_client.api.inspect_container(created[0]["id"])
        raise AssertionError("the one-shot container was not removed")
    except docker.errors.NotFound:
        pass
