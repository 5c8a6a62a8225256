"""Containers shinken creates carry their owner from the create call on: a create whose start
fails is removed at once, and one left between create and start (its process killed) is still
`shinken gc`'s to reclaim, detached hubs (no owner: they outlive `shinken hub up`) included."""

from __future__ import annotations

import json
import os
import socket
import sys
import uuid
from pathlib import Path

import pytest

from shinken.errors import EnvironmentProblem
from shinken.mockweb import hub as hubs
from shinken.mockweb.manifest import HubApp, HubManifest
from shinken.sandbox.api import InfraError
from shinken.sandbox.container import start_container
from shinken.sandbox.docker_client import run_container
from shinken.sandbox.ownership import Owner, labels_for

REPO = Path(__file__).resolve().parent.parent
if str(REPO) not in sys.path:
    sys.path.insert(0, str(REPO))
from tests.cli_runner import run_cli  # noqa: E402

BASE = "shinken/base-bookworm:latest"  # tiny; no command of its own (given at create)
SCOPE = "shinken-createtest"


@pytest.fixture()
def taken_port():
    """A loopback port this process holds: a container publishing it is created, then fails to start."""
    s = socket.socket()
    s.bind(("127.0.0.1", 0))
    s.listen()
    yield s.getsockname()[1]
    s.close()


def _left(client, **filters) -> list[str]:
    return [c.id for c in client.containers.list(all=True, filters=filters)]


@pytest.mark.docker
def test_a_create_that_fails_to_start_leaves_nothing(docker_client, taken_port, linux_image) -> None:
    api, value = docker_client.api, uuid.uuid4().hex
    # the sandbox's door (forks, builds, pools, re-provisions): removed when the start fails
    hc = api.create_host_config(network_mode="bridge", port_bindings={8080: ("127.0.0.1", taken_port)})
    with pytest.raises(InfraError, match="starting a sandbox container"):
        start_container(api, BASE, labels_for("fork", task="create-start", extra={SCOPE: value}), hc, ports=[8080])
    assert _left(docker_client, label=f"{SCOPE}={value}") == []
    # a detached hub (`shinken hub up --publish`): removed too, one line naming the port. (An image
    # with a command of its own, as a hub image has; the engine refuses the port only at start.)
    image_id = docker_client.images.get(linux_image).id
    manifest = HubManifest(image_id, "", (HubApp("a", "A", "a.test", 8000, "/hub/apps/a", "0", image_id),))
    with pytest.raises(EnvironmentProblem, match=f"address already in use; is a port in 127.0.0.1:{taken_port}"):
        hubs.start_hub(docker_client, manifest, detached=True, publish=taken_port)
    assert _left(docker_client, name=f"shinken-hub-{image_id.removeprefix('sha256:')[:8]}-") == []


@pytest.mark.docker
def test_a_detached_hub_killed_before_its_start_is_gcs(docker_client, tmp_path) -> None:
    """A detached hub has no owner, so gc leaves it alone; one that never started (its creator
    died between create and start) is gc's: its creator label says whose it was."""
    value = uuid.uuid4().hex
    dead = Owner(socket.gethostname(), os.getpid(), "1")  # our pid with another start time: a dead process
    labels = {**hubs.detached_labels(dead), SCOPE: value}
    never = run_container(docker_client, BASE, ["sleep", "infinity"], create_only=True, network_mode="none",
                          labels=labels)
    ran = run_container(docker_client, BASE, ["sleep", "infinity"], detach=True, network_mode="none", labels=labels)
    mine = run_container(docker_client, BASE, ["sleep", "infinity"], create_only=True, network_mode="none",
                                           labels={**hubs.detached_labels(), SCOPE: value})  # a live creator
    try:
        r = run_cli("gc", "--label", f"{SCOPE}={value}", "--json", timeout=120, subprocess_=True,
                    setenv={"SHINKEN_RUNTIME_DIR": str(tmp_path)})
        assert r.returncode == 0, r.stderr
        found = {i["id"]: i for i in json.loads(r.stdout)["reclaimable"]}
        assert set(found) == {never.id}, found  # not the started one (detached), not a live creator's
        assert found[never.id]["reason"].startswith("never started; its creator: owner pid"), found
    finally:
        for c in (never, ran, mine):
            c.remove(force=True)
