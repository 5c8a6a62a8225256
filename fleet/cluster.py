"""The fleet as Ray sees it: connect to the head, list the Docker hosts, get (or start) each
host's agent. Nothing here talks to Docker."""

from __future__ import annotations

import time
from dataclasses import dataclass
from typing import Any

from shinken.errors import EnvironmentProblem
from shinken.fleet import head_check, ray_auth
from shinken.fleet.agent import NAMESPACE, HostAgent, agent_name
from shinken.fleet.nodes import DOCKER_RESOURCE, docker_nodes, host_name

AGENT_CALL_S = 10.0  # an agent that does not answer info() within this is treated as down
# One actor thread per slot for rollout calls, plus room for info/ping/gc while all are busy.
EXTRA_AGENT_THREADS = 8


@dataclass
class Host:
    name: str
    node_id: str
    address: str
    slots: int
    agent: Any = None  # the actor handle, once found or started


def import_ray() -> Any:
    try:
        import ray
    except ImportError:
        raise EnvironmentProblem("the fleet needs Ray: pip install 'shinken-cua[ray]'") from None
    return ray


def check_head(address: str) -> None:
    """Before a driver's `ray.init(address)`: the head answers there (in seconds, not Ray's
    minutes of retries) and accepts this machine's token, and token mode is set for the init."""
    head_check.reachable(address)
    ray_auth.apply(ray_auth.auth_env())
    head_check.answers(address)


def connect(address: str) -> Any:
    """ray, initialised against the fleet's head (`address` host:port) with token authentication
    (fleet/ray_auth.py); one-line errors, in seconds when nothing or no Ray head answers there."""
    ray = import_ray()
    if ray.is_initialized():
        return ray
    check_head(address)
    try:
        ray.init(address=address, namespace=NAMESPACE, ignore_reinit_error=True, log_to_driver=False,
                 include_dashboard=False, configure_logging=False)
    except Exception as exc:  # noqa: BLE001 - connection problems are environment problems
        raise EnvironmentProblem(f"cannot reach the fleet's Ray head at {address} ({type(exc).__name__}: "
                                 f"{str(exc)[:200]}); start it (docs/fleet.md) or fix the address") from None
    return ray


def hosts(ray: Any) -> list[Host]:
    """Alive nodes advertising DOCKER_RESOURCE, in the fleet's stable order."""
    nodes, tagged = docker_nodes(ray)
    if not tagged:
        return []
    return [Host(host_name(n), n["NodeID"], n.get("NodeManagerAddress", ""),
                 int(n.get("Resources", {}).get(DOCKER_RESOURCE, 1))) for n in nodes]


def find_agent(ray: Any, host: str) -> Any | None:
    try:
        return ray.get_actor(agent_name(host), namespace=NAMESPACE)
    except ValueError:
        return None


def start_agent(ray: Any, host: Host, image: str, *, slots: int | None = None, **agent_kwargs: Any) -> Any:
    """The host's agent: found by name, else started pinned to its node, detached (it outlives
    the caller) with one thread per slot; waits until it answers."""
    from ray.util.scheduling_strategies import NodeAffinitySchedulingStrategy

    n = slots or host.slots
    actor = ray.remote(HostAgent).options(
        name=agent_name(host.name), namespace=NAMESPACE, lifetime="detached", get_if_exists=True,
        num_cpus=0, max_concurrency=n + EXTRA_AGENT_THREADS, max_restarts=0,
        scheduling_strategy=NodeAffinitySchedulingStrategy(node_id=host.node_id, soft=False),
    ).remote(host.name, n, image, **agent_kwargs)
    deadline = time.monotonic() + 120
    while True:
        try:
            ray.get(actor.ping.remote(), timeout=AGENT_CALL_S)
            return actor
        except Exception as exc:  # noqa: BLE001
            if time.monotonic() > deadline:
                raise EnvironmentProblem(f"the agent of host {host.name} did not start: {type(exc).__name__}: "
                                         f"{str(exc)[:200]}") from None
            time.sleep(0.5)


def infos(ray: Any, found: list[Host], timeout: float = AGENT_CALL_S) -> dict[str, dict[str, Any]]:
    """host -> its agent's info(); a host whose agent is missing or silent gets {"error": ...}."""
    refs = {}
    out: dict[str, dict[str, Any]] = {}
    for h in found:
        h.agent = h.agent or find_agent(ray, h.name)
        if h.agent is None:
            out[h.name] = {"error": "no agent (join it with `shinken fleet join`)"}
        else:
            refs[h.name] = h.agent.info.remote()
    deadline = time.monotonic() + timeout
    for name, ref in refs.items():
        try:
            out[name] = ray.get(ref, timeout=max(0.1, deadline - time.monotonic()))
        except Exception as exc:  # noqa: BLE001 - a dead or hung agent is a host that is down
            out[name] = {"error": f"agent not answering ({type(exc).__name__})"}
    return out
