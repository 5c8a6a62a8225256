"""Which Ray nodes are Docker hosts, what each is called, and which one is a task's home.

Shared by the probe's Ray executor and the fleet router, so a probe run leaves each golden on
the host the server will look for it on: the same hosts in the same order, the same hash."""

from __future__ import annotations

import hashlib
import re
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    from shinken.bundles.model import Bundle

# Nodes that may run probes and rollouts advertise this custom resource (`ray start --resources
# '{"shinken_docker": 4}'`, which `shinken fleet join` does); its amount is the host's slots.
DOCKER_RESOURCE = "shinken_docker"
# `shinken fleet join --name H` adds a resource naming the host, so its name (and so every
# task's home) survives a restart of its Ray node, whose node id changes.
HOST_RESOURCE_PREFIX = "shinken_host_"
HOST_NAME = re.compile(r"^[A-Za-z0-9][A-Za-z0-9_.-]{0,62}$")


def host_name(node: dict[str, Any]) -> str:
    """The host's name: from its shinken_host_<name> resource, else its address and node id."""
    for key in node.get("Resources", {}):
        if key.startswith(HOST_RESOURCE_PREFIX):
            return str(key)[len(HOST_RESOURCE_PREFIX):]
    return f"{node.get('NodeManagerAddress', 'node')}-{str(node.get('NodeID', ''))[:8]}"


def docker_nodes(ray: Any) -> tuple[list[dict[str, Any]], bool]:
    """(alive nodes to place work on, whether they advertise DOCKER_RESOURCE), in a stable order:
    named hosts by name, others by address (not the per-start node id alone)."""
    alive = [n for n in ray.nodes() if n.get("Alive")]
    tagged = [n for n in alive if n.get("Resources", {}).get(DOCKER_RESOURCE)]
    nodes = tagged or alive
    return sorted(nodes, key=lambda n: (host_name(n), n.get("NodeManagerAddress", ""), n.get("NodeID", ""))), bool(tagged)


def home_index(task_id: str, hosts: list[str]) -> int:
    """A task's home among the named hosts: rendezvous hashing (the host whose sha256 of
    task id + host name is highest). A host leaving moves only its own tasks, a host coming back
    takes exactly those back, so the other hosts' goldens stay where they were built."""
    if not hosts:
        raise ValueError("no hosts")
    scores = [hashlib.sha256(f"{task_id}\0{h}".encode()).digest()[:8] for h in hosts]
    return max(range(len(hosts)), key=lambda i: (scores[i], hosts[i]))


def bundle_payload(bundle: "Bundle") -> dict[str, Any]:
    """The bundle's files, to travel with a probe or a seed to a host without the task root."""
    files = {name: (bundle.path / name).read_bytes() for name in bundle.files}
    return {"path": str(bundle.path), "name": bundle.path.name, "bundle_hash": bundle.bundle_hash, "files": files}
