"""A task that declares it needs the network never gets Docker's default bridge unless the operator
names a network (sandbox/task_network.py): without a hub network and without SHINKEN_TASK_NETWORK
it is refused with the reason before any container is made; with a network named, its golden build
and forks run on exactly that network."""

from __future__ import annotations

import json
import shutil
import uuid
from pathlib import Path

import pytest

pytestmark = [pytest.mark.docker]

DEMO = Path(__file__).resolve().parent.parent / "demo"


def _network_task(root: Path) -> Path:
    tid = f"needs-net-{uuid.uuid4().hex[:8]}"
    dest = root / tid
    shutil.copytree(DEMO / "hello-file", dest)
    cfg = json.loads((dest / "config.json").read_text())
    cfg.update(id=tid, shinken_needs=["network"])
    (dest / "config.json").write_text(json.dumps(cfg))
    return dest


def test_a_task_needing_the_network_is_refused_without_a_named_network(linux_image, docker_client, tmp_path,
                                                                        monkeypatch) -> None:
    """On f382b83 this golden was built with NetworkMode `bridge`: the internet, the LAN, the head."""
    from shinken.bundles.loader import load_bundle
    from shinken.sandbox.docker_provider import DockerProvider
    from shinken.sandbox.policy import task_needs
    from shinken.sandbox.task_network import TASK_NETWORK_ENV, NetworkRefused

    monkeypatch.delenv(TASK_NETWORK_ENV, raising=False)
    bundle = load_bundle(_network_task(tmp_path))
    assert task_needs(bundle).network
    run = f"tasknet-{uuid.uuid4().hex[:8]}"
    provider = DockerProvider(docker_client, run_id=run)
    try:
        with pytest.raises(NetworkRefused) as refused:
            provider.ensure_golden(bundle, linux_image)
        assert TASK_NETWORK_ENV in str(refused.value) and "--hub" in str(refused.value)
        # Refused before anything was made.
        assert docker_client.api.containers(all=True, filters={"label": f"shinken.run={run}"}) == []
        assert docker_client.api.images(filters={"label": f"shinken.bundle_hash={bundle.bundle_hash}"}) == []
        for name in ("host", "container:abc", f"shinken-no-such-net-{uuid.uuid4().hex[:6]}"):
            with pytest.raises(NetworkRefused, match=TASK_NETWORK_ENV):
                DockerProvider(docker_client, run_id=run, task_network=name).ensure_golden(bundle, linux_image)
    finally:
        provider.close()


def test_a_named_network_is_the_one_the_task_gets(linux_image, docker_client, tmp_path, monkeypatch) -> None:
    from shinken.bundles.loader import load_bundle
    from shinken.sandbox.docker_provider import DockerProvider
    from shinken.sandbox.ownership import labels_for
    from shinken.sandbox.task_network import TASK_NETWORK_ENV

    net = f"shinken-test-tasknet-{uuid.uuid4().hex[:8]}"
    docker_client.api.create_network(net, driver="bridge", internal=True, labels=labels_for("network", run=net))
    monkeypatch.setenv(TASK_NETWORK_ENV, net)
    bundle = load_bundle(_network_task(tmp_path))
    provider = DockerProvider(docker_client, run_id=net)
    golden = None
    try:
        golden = provider.ensure_golden(bundle, linux_image)
        fork = provider.fork(golden)
        mode = docker_client.api.inspect_container(fork.id)["HostConfig"]["NetworkMode"]
        assert mode == net, mode
        fork.close()
    finally:
        provider.close()
        if golden is not None:
            provider.delete_golden(golden)
        docker_client.api.remove_network(net)
