"""Joining and leaving the fleet on this machine: checks (Docker, the registry, the image id),
then a Ray worker node that advertises the host's slots, then the host's agent.

The Ray node runs as `ray start --block` in its own process group, recorded in a state file per
host (fleet_host.schema.json) under the fleet state folder, so `leave` stops exactly that node
(several simulated hosts share one machine; `ray stop` would stop them all)."""

from __future__ import annotations

import json
import os
import shlex
import signal
import subprocess
import sys
import time
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from shinken.errors import EnvironmentProblem, ShinkenError
from shinken.fleet import cluster, ray_auth, registry
from shinken.fleet.head import check_bind
from shinken.fleet.nodes import DOCKER_RESOURCE, HOST_NAME, HOST_RESOURCE_PREFIX
from shinken.fleet.provenance import FleetLedger, Ledger, image_key
from shinken.runtime import cache_root
from shinken.schemas import read_json, write_json

NODE_START_S = 90.0


def state_dir() -> Path:
    return Path(os.environ.get("SHINKEN_FLEET_STATE") or cache_root() / "fleet")


def check_address(address: str) -> str:
    host, _, port = address.strip().rpartition(":")
    if not host or not port.isdigit() or not 0 < int(port) < 65536:
        raise ShinkenError(f"--address {address!r}: give the Ray head as HOST:PORT, e.g. 10.0.0.1:6379")
    return address.strip()


def check_name(name: str) -> str:
    if not HOST_NAME.match(name):
        raise ShinkenError(f"--name {name!r}: use letters, digits, '.', '_' or '-' (at most 63), e.g. gpu-host-3")
    return name


@dataclass
class Joined:
    name: str
    node_id: str
    slots: int
    image: str
    image_id: str
    pid: int
    log: str
    pulled_s: float | None

    def to_json(self) -> dict[str, Any]:
        return {"schema": "shinken.fleet_host/1", "name": self.name, "node_id": self.node_id, "slots": self.slots,
                "image": self.image, "image_id": self.image_id, "pid": self.pid, "log": self.log,
                "pulled_s": self.pulled_s}


def check_image(client: Any, image: str, reg: str | None, ledger: Ledger) -> tuple[str, float | None]:
    """The image id this host will run: the one its pusher recorded in the fleet (fleet/provenance.py),
    pulled by that digest when missing; a host holding a different image under the name is refused."""
    from shinken.sandbox.docker_client import find_image

    local = find_image(client, image)
    pin = ledger.lookup(image_key(*registry.split_ref(image)))
    if reg is None:
        if local is None:
            raise EnvironmentProblem(f"{image} is not on this host; pull it from the fleet's registry "
                                     f"(`shinken image pull {image} --registry HEAD:5000`) or pass --registry")
        if pin is not None and local != pin.image_id:
            raise ShinkenError(f"refused: this host's {image} is {local[7:19]}, the fleet's (pushed by "
                               f"{pin.pushed_by}) is {pin.image_id[7:19]}; every host must run the same image")
        return local, None
    registry.ping(reg)
    pin = registry.pin_for(image, ledger=ledger, digest=None, registry=reg)
    if local is None:
        moved = registry.pull(client, image, reg, pin)
        return moved.image_id, moved.seconds
    if local != pin.image_id:
        raise ShinkenError(f"refused: this host's {image} is {local[7:19]}, the fleet's (pushed by {pin.pushed_by}) is "
                           f"{pin.image_id[7:19]}; every host must run the same image: `docker rmi {image}` here, "
                           "then join again")
    return local, None


def _node_with(ray: Any, resource: str) -> list[dict[str, Any]]:
    return [n for n in ray.nodes() if n.get("Alive") and resource in n.get("Resources", {})]


def _start_node(cmd: list[str], env: dict[str, str], log_path: Path, ray: Any, marker: str, address: str,
                attempts: int) -> tuple[subprocess.Popen[bytes], list[dict[str, Any]]]:
    """`ray start` of this host's node until it is in the cluster (at most `attempts` starts, each
    waited for at most NODE_START_S). Ray 2.60 gives a starting node fixed windows: its raylet
    aborts when the dashboard agent has not written its port file within 15 s, and `ray start`
    when the raylet has not registered within 30 s; a loaded host's Python processes can miss them,
    and a next start usually finds its files in the page cache."""
    for attempt in range(1, attempts + 1):
        with open(log_path, "ab") as log:
            log.write(f"--- shinken fleet join: ray start, attempt {attempt} of {attempts}\n".encode())
            log.flush()
            proc = subprocess.Popen(cmd, stdout=log, stderr=subprocess.STDOUT, stdin=subprocess.DEVNULL, env=env,
                                    start_new_session=True)
        deadline = time.monotonic() + NODE_START_S
        try:
            while not (nodes := _node_with(ray, marker)):
                if proc.poll() is not None or time.monotonic() > deadline:
                    break
                time.sleep(0.5)
        except BaseException:
            _stop(proc.pid)
            raise
        if nodes:
            return proc, nodes
        _stop(proc.pid)
        if attempt == attempts:
            lines = [x for x in log_path.read_text(errors="replace").strip().splitlines() if x.strip()]
            raise EnvironmentProblem(f"the Ray node did not join {address} in {attempts} start(s): "
                                     f"{(lines[-1:] or ['(no output)'])[0][:200]} (log: {log_path})")
    raise AssertionError("unreachable")


def join(address: str, *, name: str, slots: int, image: str, reg: str | None, num_cpus: int | None = None,
         agent_kwargs: dict[str, Any] | None = None, start_attempts: int = 2, hub: str | None = None,
         bind: str | None = None) -> Joined:
    """`hub`: the mock web hub image this host serves web tasks with (checked against the registry
    and pulled like the task image); its agent runs one hub for the host's web rollouts and probes.
    `bind`: the address of this machine the node advertises to the fleet (Ray's own pick otherwise)."""
    from shinken.sandbox.docker_client import connect

    address, name = check_address(address), check_name(name)
    bind = check_bind(bind) if bind is not None else None
    if slots < 1:
        raise ShinkenError(f"--slots {slots}: a host needs at least 1 slot")
    if reg is not None:
        reg = registry.check_registry(reg)
    state = state_dir() / f"{name}.json"
    if state.exists():
        raise ShinkenError(f"host {name} already joined from this machine ({state}); `shinken fleet leave --name {name}` first")
    ray = cluster.connect(address)  # token authentication on (fleet/ray_auth.py); this node runs with it too
    ledger = FleetLedger()
    client = connect()
    image_id, pulled = check_image(client, image, reg, ledger)
    if hub is not None:
        check_image(client, hub, reg, ledger)
    client.close()
    # The agent copies goldens through the fleet's registry (fleet/golden_copy.py) and serves web
    # tasks with its own hub.
    agent_kwargs = {**(agent_kwargs or {}), **({"registry": reg} if reg else {}), **({"hub_image": hub} if hub else {})}

    state.parent.mkdir(parents=True, exist_ok=True)
    log_path = state.parent / f"{name}.log"
    marker = f"{HOST_RESOURCE_PREFIX}{name}"
    ray_bin = str(Path(sys.executable).parent / "ray")
    cmd = [ray_bin, "start", "--address", address, "--block", "--disable-usage-stats",
           "--resources", json.dumps({DOCKER_RESOURCE: slots, marker: 1})]
    if num_cpus is not None:
        cmd += ["--num-cpus", str(num_cpus)]
    if bind is not None:
        cmd += ["--node-ip-address", bind]
    # More `ray start` options for this node (e.g. --node-ip-address, --object-store-memory).
    cmd += shlex.split(os.environ.get("SHINKEN_RAY_START_ARGS", ""))
    env = {**os.environ, **ray_auth.auth_env(), "PYTHONUNBUFFERED": "1"}
    proc, nodes = _start_node(cmd, env, log_path, ray, marker, address, max(1, start_attempts))
    try:
        if len(nodes) > 1:
            raise ShinkenError(f"a host named {name} is already in the fleet; pick another --name")
        host = cluster.Host(name, nodes[0]["NodeID"], nodes[0].get("NodeManagerAddress", ""), slots)
        # Every host must run the same image: the agents already there say which.
        others = [i for h, i in cluster.infos(ray, [h for h in cluster.hosts(ray) if h.name != name]).items()
                  if i.get("image_id") and i.get("image") == image]
        for other in others:
            if other["image_id"] != image_id:
                raise ShinkenError(f"refused: this host's {image} is {image_id[7:19]}, host {other['host']}'s is "
                                   f"{other['image_id'][7:19]}; every host must run the same image (use --registry)")
        agent = cluster.start_agent(ray, host, image, slots=slots, **(agent_kwargs or {}))
        info = ray.get(agent.info.remote(), timeout=cluster.AGENT_CALL_S)
        if not info.get("docker_ok") or info.get("image_id") != image_id:
            raise EnvironmentProblem(f"the agent of {name} sees {info.get('image_id')} ({info.get('docker_error')}); "
                                     f"is DOCKER_HOST the same for the Ray node?")
    except BaseException:
        _stop(proc.pid)
        raise
    joined = Joined(name, host.node_id, slots, image, image_id, proc.pid, str(log_path), pulled)
    write_json(state, joined.to_json(), "fleet_host")
    return joined


def joined_here() -> list[dict[str, Any]]:
    folder = state_dir()
    return [read_json(p, "fleet host state", f"remove {p} if its host left", "fleet_host")
            for p in sorted(folder.glob("*.json"))] if folder.is_dir() else []


def _stop(pid: int, grace_s: float = 20.0) -> None:
    """Stop the node's process group: SIGTERM (ray start --block stops its processes), then SIGKILL."""
    try:
        os.killpg(pid, signal.SIGTERM)
    except ProcessLookupError:
        return
    deadline = time.monotonic() + grace_s
    while time.monotonic() < deadline:
        try:
            os.killpg(pid, 0)
        except ProcessLookupError:
            break
        try:
            if os.waitpid(pid, os.WNOHANG)[0] == pid:
                pass
        except ChildProcessError:
            pass
        time.sleep(0.2)
    else:
        try:
            os.killpg(pid, signal.SIGKILL)
        except ProcessLookupError:
            pass


def leave(address: str, name: str | None) -> dict[str, Any]:
    """Release the host's rollouts and goldens (its agent closes its engine), then stop its node."""
    here = joined_here()
    if name is None:
        if len(here) != 1:
            names = ", ".join(h["name"] for h in here) or "none"
            raise ShinkenError(f"name the host to leave with --name (joined from this machine: {names})")
        name = here[0]["name"]
    check_name(name)
    doc = next((h for h in here if h["name"] == name), None)
    if doc is None:
        raise ShinkenError(f"host {name} was not joined from this machine (state folder {state_dir()})")
    closed: dict[str, Any] = {"ok": False}
    try:
        ray = cluster.connect(check_address(address))
        agent = cluster.find_agent(ray, name)
        if agent is not None:
            closed = ray.get(agent.close.remote(), timeout=120)
            ray.kill(agent)
    except ShinkenError:
        pass  # the head is gone: stopping the node is all that is left
    _stop(int(doc["pid"]))
    (state_dir() / f"{name}.json").unlink(missing_ok=True)
    return {"name": name, "agent_closed": bool(closed.get("ok")), "node_stopped": True}
