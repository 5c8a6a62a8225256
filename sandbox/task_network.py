"""Which Docker network a task that needs the network gets, or why it gets none.

Docker's default bridge reaches the internet, the host's LAN and every service on the host's
addresses (the fleet's Ray head, the registry). A task's fork never gets it unless the operator
names it: a web task's fork joins the run's internal network with the hub (mockweb/network.py);
any other task that needs the network runs only on the network the operator named in
SHINKEN_TASK_NETWORK (`bridge` is a valid, explicit choice) and is refused otherwise, with the
reason, before a container is made."""

from __future__ import annotations

import os
from typing import Any

from shinken.errors import EnvironmentProblem

TASK_NETWORK_ENV = "SHINKEN_TASK_NETWORK"


class NetworkRefused(EnvironmentProblem):
    """A task needs the network and this run gives it none: no hub network, and no network the
    operator named. Not evidence against the task (another run, with a hub or a named network,
    can serve it); the rollout is masked."""


def opted_network() -> str | None:
    """The Docker network the operator named for tasks that need the network, or None."""
    name = os.environ.get(TASK_NETWORK_ENV, "").strip()
    return name or None


def network_for(isolated: str | None, opted: str | None, api: Any = None) -> str:
    """The network_mode of a fork that needs the network: the run's isolated network when there
    is one, else the one the operator named (checked to exist; never the host's own namespace);
    NetworkRefused otherwise."""
    if isolated:
        return isolated
    if opted is None:
        raise NetworkRefused(
            "this task needs the network and shinken gives forks no default bridge (it reaches the internet, "
            "the LAN and the fleet's head): run web tasks with --hub (an internal network with the mock apps), "
            f"or name the Docker network tasks may use: {TASK_NETWORK_ENV}=bridge (docs/security.md)")
    if opted in ("host", "none") or opted.startswith("container:"):
        raise NetworkRefused(f"{TASK_NETWORK_ENV}={opted}: name a Docker network (e.g. bridge, or one made for "
                             "tasks); the host's own network namespace is never a task's")
    if api is not None and opted != "bridge":
        import docker.errors

        try:
            api.inspect_network(opted)
        except docker.errors.NotFound:
            raise NetworkRefused(f"{TASK_NETWORK_ENV}={opted}: no such Docker network (`docker network ls`)") from None
    return opted
