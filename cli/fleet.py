"""`shinken fleet head|join|status|gc|leave`: the Ray head, Docker hosts as Ray nodes with a host agent each
(docs/fleet.md); Ray runs with token authentication (docs/security.md)."""

from __future__ import annotations

import socket
from typing import Annotated, Any, Optional

import typer
from rich.table import Table

from shinken.cli.common import ImageOpt, JsonFlag, Output, add_command, group
from shinken.computer.settings import FLEET_DEMAND_POOLS

app = group("A fleet of Docker hosts on Ray: start the head, join this machine, see the hosts, leave.")

STATUS_SCHEMA = "shinken.fleet_status/1"
AddressOpt = Annotated[str, typer.Option("--address", help="The fleet's Ray head, HOST:PORT.", envvar="SHINKEN_FLEET_ADDRESS")]
NameOpt = Annotated[Optional[str], typer.Option("--name", help="This host's name in the fleet (default: the machine's host name).")]
InsecureOpt = Annotated[bool, typer.Option("--insecure-no-auth", help="Run Ray WITHOUT token authentication: anyone who reaches the head runs code on every host (same as SHINKEN_INSECURE_RAY_NO_AUTH=1; docs/security.md).")]

HEAD_EXAMPLES = [
    "shinken fleet head --bind 10.0.0.1    # creates ~/.ray/auth_token (mode 600) when missing; copy it to every host",
    "RAY_AUTH_TOKEN_PATH=/etc/shinken/ray-token shinken fleet head --bind 10.0.0.1 --port 6379",
]

JOIN_EXAMPLES = [
    "shinken fleet join --address 10.0.0.1:6379 --registry 10.0.0.1:5000 --slots 8    # pulls the task image if missing",
    "DOCKER_HOST=unix:///run/d2.sock shinken fleet join --address 127.0.0.1:6379 --name h2 --slots 2 --json",
]
STATUS_EXAMPLES = ["shinken fleet status --address 10.0.0.1:6379", "shinken fleet status --address 10.0.0.1:6379 --json"]
GC_EXAMPLES = ["shinken fleet gc --address 10.0.0.1:6379    # on every host: what dead runs left (forks, pools, hubs, networks)",
               "shinken fleet gc --address 10.0.0.1:6379 --include-goldens --json"]
LEAVE_EXAMPLES = ["shinken fleet leave --address 10.0.0.1:6379    # releases this host's rollouts and goldens, stops its node"]


def head(
    bind: Annotated[str, typer.Option("--bind", help="IP address of this machine's interface the fleet reaches the head on (127.0.0.1: a fleet on this machine only).")],
    port: Annotated[int, typer.Option("--port", help="The head's port (Ray's GCS).")] = 6379,
    insecure_no_auth: InsecureOpt = False,
) -> None:
    """Run the fleet's Ray head here, in the foreground, with token authentication (the token file is created when missing; Ctrl-C stops it)."""
    from shinken.fleet.head import run

    run(bind, port, insecure_flag=insecure_no_auth)


def _insecure(flag: bool) -> None:
    """The operator's named choice, for every Ray process this command starts or connects with."""
    import os

    from shinken.fleet.ray_auth import INSECURE_ENV

    if flag:
        os.environ[INSECURE_ENV] = "1"


def join(
    address: AddressOpt,
    slots: Annotated[int, typer.Option("--slots", help="Desktop rollouts this host runs at once (docs/fleet.md: ~1 core and 1 GiB each).")] = 2,
    name: NameOpt = None,
    registry: Annotated[Optional[str], typer.Option("--registry", help="The fleet's registry HOST:PORT: the image id is checked against it, and pulled when missing.", envvar="SHINKEN_REGISTRY")] = None,
    image: ImageOpt = "shinken/sandbox-cua:latest",
    num_cpus: Annotated[Optional[int], typer.Option("--num-cpus", min=0, help="CPUs this Ray node advertises (default: Ray's count).")] = None,
    pool_size: Annotated[int, typer.Option("--pool-size", min=0, help="Warm computers kept per golden on this host (a fixed number; see --demand-pools).")] = 0,
    demand_pools: Annotated[bool, typer.Option("--demand-pools/--no-demand-pools", help="Warm computers per task sized from its observed seeds (groups and rate), within this host's free slots and memory (docs/fleet.md); on by default for fleet hosts (computer/settings.py).")] = FLEET_DEMAND_POOLS,
    start_attempts: Annotated[int, typer.Option("--start-attempts", min=1, max=10, help="Starts of the Ray node before giving up: Ray's startup windows are fixed (docs/fleet.md), a loaded host can miss them.")] = 2,
    hub: Annotated[Optional[str], typer.Option("--hub", help="Mock web hub image this host serves web tasks with (checked against --registry and pulled like the task image; one hub per host, run by its agent).")] = None,
    bind: Annotated[Optional[str], typer.Option("--bind", help="IP address of this machine the node advertises to the fleet (Ray's --node-ip-address; default: Ray's pick).")] = None,
    insecure_no_auth: InsecureOpt = False,
    json_out: JsonFlag = False,
) -> None:
    """Join this machine's Docker engine to the fleet (checks the head and its token, Docker, the registry and the image id, then starts a Ray node and its host agent)."""
    from shinken.fleet.membership import join as do_join

    _insecure(insecure_no_auth)
    output = Output(json_out)
    joined = do_join(address, name=name or socket.gethostname().split(".")[0], slots=slots, image=image,
                     reg=registry, num_cpus=num_cpus, agent_kwargs={"pool_size": pool_size, "demand_pools": demand_pools},
                     start_attempts=start_attempts, hub=hub, bind=bind)
    doc = joined.to_json()
    output.result(doc, lambda: output.line(
        f"joined {address} as host {joined.name}: {joined.slots} slots, {joined.image} {joined.image_id[7:19]}"
        + (f" (pulled in {joined.pulled_s:.1f}s)" if joined.pulled_s is not None else "")))


def status(address: AddressOpt, json_out: JsonFlag = False) -> None:
    """The fleet's hosts in placement order: free/used slots, live sessions, goldens, load, engine health."""
    from shinken.fleet import cluster, membership
    from shinken.schemas import check_own

    output = Output(json_out)
    ray = cluster.connect(membership.check_address(address))
    found = cluster.hosts(ray)
    info = cluster.infos(ray, found)
    rows: list[dict[str, Any]] = []
    for h in found:
        i = info.get(h.name, {})
        up = "error" not in i and bool(i.get("docker_ok"))
        row: dict[str, Any] = {"host": h.name, "node_id": h.node_id, "address": h.address, "up": up,
                               "error": i.get("error") or (i.get("docker_error") or None)}
        if "error" not in i:
            row.update({k: i[k] for k in ("slots", "used", "free", "sessions", "goldens", "image", "image_id",
                                          "load1", "seeds", "refused_full")})
            if i.get("pools"):
                row["pools"] = i["pools"]
            if i.get("warm"):
                row["warm"] = i["warm"]
        rows.append(row)
    doc = {"schema": STATUS_SCHEMA, "address": address, "hosts": rows}
    check_own("fleet_status", doc, "fleet status")

    def render() -> None:
        table = Table("host", "up", "slots used/free", "sessions", "goldens", "pools", "warm ready/target", "load", "image",
                      "problem")
        for r in rows:
            warm = r.get("warm") or {}
            table.add_row(r["host"], "yes" if r["up"] else "NO",
                          f"{r.get('used', '-')}/{r.get('free', '-')}", str(r.get("sessions", "-")),
                          str(len(r.get("goldens", []))), r.get("pools", "-"),
                          f"{sum(w.get('ready', 0) for w in warm.values())}/{sum(w.get('size', 0) for w in warm.values())}"
                          if warm else "-", str(r.get("load1", "-")),
                          (r.get("image_id") or "-")[7:19], r["error"] or "")
        output.table(table)
        if not rows:
            output.note(f"no Docker hosts in the fleet at {address}; join one with `shinken fleet join`")

    output.result(doc, render)


def gc(
    address: AddressOpt,
    include_goldens: Annotated[bool, typer.Option("--include-goldens", help="Also golden images no live engine holds.")] = False,
    json_out: JsonFlag = False,
) -> None:
    """Reclaim on every fleet host what dead owners left there (each host's agent runs shinken's gc on its own engine)."""
    from shinken.errors import WorkFailed
    from shinken.fleet import cluster, membership
    from shinken.schemas import check_own

    output = Output(json_out)
    ray = cluster.connect(membership.check_address(address))
    rows: list[dict[str, Any]] = []
    for h in cluster.hosts(ray):
        agent = cluster.find_agent(ray, h.name)
        if agent is None:
            rows.append({"host": h.name, "reclaimed": [], "failed": ["no agent: join the host with `shinken fleet join`"]})
            continue
        try:
            rows.append(ray.get(agent.gc.remote(include_goldens), timeout=600))
        except Exception as exc:  # noqa: BLE001 - a host that died meanwhile is reported, the rest still run
            rows.append({"host": h.name, "reclaimed": [], "failed": [f"agent not answering ({type(exc).__name__})"]})

    def render() -> None:
        table = Table("host", "reclaimed", "failed")
        for r in rows:
            table.add_row(r["host"], str(len(r["reclaimed"])), "; ".join(r["failed"])[:200] or "-")
        output.table(table)

    doc = {"schema": "shinken.fleet_gc/1", "address": address, "hosts": rows}
    check_own("fleet_gc", doc, "fleet gc")
    output.result(doc, render)
    if any(r["failed"] for r in rows):
        raise WorkFailed(f"gc failed on {sum(1 for r in rows if r['failed'])} host(s); see the table")


def leave(address: AddressOpt, name: NameOpt = None, json_out: JsonFlag = False) -> None:
    """Leave the fleet: this host's agent releases its rollouts and goldens, then its Ray node stops."""
    from shinken.fleet.membership import leave as do_leave

    output = Output(json_out)
    doc = do_leave(address, name)
    output.result(doc, lambda: output.line(f"host {doc['name']} left the fleet"))


add_command(app, "head", head, HEAD_EXAMPLES)
add_command(app, "join", join, JOIN_EXAMPLES)
add_command(app, "status", status, STATUS_EXAMPLES)
add_command(app, "gc", gc, GC_EXAMPLES)
add_command(app, "leave", leave, LEAVE_EXAMPLES)
