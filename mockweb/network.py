"""The per-run network shared by the hub container and the forks of web tasks, and nothing
else.

Docker's `internal` networks have no route out, but the host still holds an address on the
bridge, so a container could reach every host service through it (measured: an internal
network's gateway and docker0's address both answer). `com.docker.network.bridge.inhibit_ipv4`
leaves the bridge without a host address: the only peers a fork can reach are the other
containers on the network, i.e. the hub (and the run's other forks). Everything that is not a
web task stays on `network none`.
"""

from __future__ import annotations

import secrets
from typing import Any

from shinken.sandbox.api import InfraError
from shinken.sandbox.ownership import LABEL_KIND, LABEL_MANAGED, Owner, labels_for

NETWORK_PREFIX = "shinken-web-"
_OPTIONS = {"com.docker.network.bridge.inhibit_ipv4": "true"}


def create_run_network(client: Any, *, run_id: str | None = None, owner: Owner | None = None,
                       labels_extra: dict[str, str] | None = None) -> str:
    """Create an isolated network for one run; returns its name."""
    import docker.errors

    name = f"{NETWORK_PREFIX}{(run_id or 'run')[:12]}-{secrets.token_hex(4)}"
    labels = labels_for("network", run=run_id, owner=owner, extra=labels_extra)
    try:
        client.api.create_network(name, driver="bridge", internal=True, options=_OPTIONS, labels=labels,
                                  check_duplicate=True)
    except docker.errors.APIError as exc:
        hint = ""
        if "address pool" in str(exc) or "non-overlapping" in str(exc):
            hint = "; Docker ran out of address pools: `shinken gc --force` removes networks of dead runs"
        raise InfraError(f"cannot create the run network: {exc.explanation or exc}{hint}") from None
    return name


def connect(client: Any, network: str, container_id: str, aliases: list[str]) -> None:
    import docker.errors

    try:
        client.api.connect_container_to_network(container_id, network, aliases=aliases)
    except docker.errors.APIError as exc:
        if "already exists" in str(exc):
            return
        raise InfraError(f"connecting {container_id[:12]} to {network}: {exc.explanation or exc}") from None


def remove_run_network(client: Any, network: str) -> None:
    """Disconnect whatever is still attached (the hub, leftover forks) and remove it."""
    import docker.errors

    api = client.api
    try:
        info = api.inspect_network(network)
    except docker.errors.NotFound:
        return
    except docker.errors.APIError as exc:
        raise InfraError(f"inspecting {network}: {exc}") from None
    for cid in (info.get("Containers") or {}):
        try:
            api.disconnect_container_from_network(cid, network, force=True)
        except docker.errors.APIError:
            pass  # gone meanwhile
    try:
        api.remove_network(network)
    except docker.errors.NotFound:
        pass
    except docker.errors.APIError as exc:
        raise InfraError(f"removing {network}: {exc.explanation or exc}") from None


def run_networks(client: Any) -> list[dict[str, Any]]:
    """Every network shinken made for a run (for gc)."""
    return [n for n in client.api.networks(filters={"label": [f"{LABEL_MANAGED}=1", f"{LABEL_KIND}=network"]})]
