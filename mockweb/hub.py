"""Hub containers: start, find, stop, health, and the few management commands shinken runs
inside them (owner leases, removing a sid's state, listing sids).

A hub started for a run (probe, the workspace server) is owned by that process (labels as
every shinken container; `shinken gc` removes it after the owner died) and has no network of
its own: it joins each run's internal network (mockweb.network). `shinken hub up` starts a
detached hub (no owner label: gc leaves it alone) that runs can reuse; with `--publish` its
port 80 and one port per app are published on 127.0.0.1 for use by hand.
"""

from __future__ import annotations

import hashlib
import hmac
import json
import secrets
import shlex
import time
from dataclasses import dataclass
from typing import Any

from shinken.errors import EnvironmentProblem, ShinkenError
from shinken.mockweb.manifest import HubManifest
from shinken.sandbox.api import InfraError
from shinken.sandbox.docker_client import create_container
from shinken.sandbox.ownership import (
    LABEL_CREATED,
    LABEL_CREATOR,
    LABEL_KIND,
    LABEL_MANAGED,
    LABEL_OWNER,
    LABEL_RUN,
    Owner,
    labels_for,
)

LABEL_HUB_IMAGE = "shinken.hub_image"  # on hub containers: the hub image id they run
LABEL_DETACHED = "shinken.detached"  # "1" on hubs started by `shinken hub up` (no owner)
LABEL_PUBLISHED = "shinken.hub_published"  # host port of the first app when published
HUB_PORT = 80
READY_TIMEOUT_S = 60.0
STATE_DIRS_GLOB = "/hub/apps/*/.mock-*"  # .mock-states, .mock-files, .mock-uploads (mocks differ)
OWNERS_DIR = "/hub/.shinken-owners"  # owner key -> owner label, one file per process
SID_PREFIX = "shk-"
SEALED_DIR = "/hub/.shinken-sealed"  # a file per sealed sid that is not a fork's shk- sid (supervisor.mjs)
KEY_ENV = "SHINKEN_HUB_KEY"  # the hub's secret in its own environment: rollout keys derive from it


@dataclass(frozen=True)
class HubLimits:
    mem: str = "6g"  # a vite preview holds ~100-200 MB; many apps of one run share this
    pids: int = 4096
    cpus: float = 2.0


@dataclass
class HubContainer:
    id: str
    name: str
    image_id: str
    detached: bool
    owner: str | None
    published: int | None  # app i answers on 127.0.0.1:<published + i>, when published
    created: float


def _labels(c: dict[str, Any]) -> dict[str, str]:
    return c.get("Labels") or (c.get("Config") or {}).get("Labels") or {}


def _from_api(c: dict[str, Any]) -> HubContainer:
    labels = _labels(c)
    name = (c.get("Names") or [c.get("Name", "")])[0].lstrip("/")
    pub = labels.get(LABEL_PUBLISHED)
    return HubContainer(c["Id"], name, labels.get(LABEL_HUB_IMAGE, ""), labels.get(LABEL_DETACHED) == "1",
                        labels.get(LABEL_OWNER), int(pub) if pub and pub.isdigit() else None,
                        float(labels.get(LABEL_CREATED, "0") or 0))


def find_hubs(client: Any, image_id: str | None = None, *, running_only: bool = True) -> list[HubContainer]:
    """Hub containers (newest first), optionally only those running `image_id`."""
    filters: dict[str, Any] = {"label": [f"{LABEL_MANAGED}=1", f"{LABEL_KIND}=hub"]}
    if image_id:
        filters["label"].append(f"{LABEL_HUB_IMAGE}={image_id}")
    if running_only:
        filters["status"] = "running"
    try:
        found = client.api.containers(all=not running_only, filters=filters)
    except Exception as exc:  # noqa: BLE001 - the engine's failure, told in one line
        raise EnvironmentProblem(f"cannot list hub containers ({exc}); is dockerd running?") from None
    return sorted((_from_api(c) for c in found), key=lambda h: -h.created)


def detached_labels(creator: Owner | None = None) -> dict[str, str]:
    """The labels of a detached hub (`shinken hub up`). No owner: it outlives this process. Its
    creator is named so that one that never started (the process killed, or its start failed,
    between create and start) is still `shinken gc`'s to reclaim."""
    return {LABEL_MANAGED: "1", LABEL_KIND: "hub", LABEL_CREATED: str(int(time.time())), LABEL_DETACHED: "1",
            LABEL_CREATOR: (creator or Owner.current()).label()}


def start_hub(client: Any, manifest: HubManifest, *, detached: bool = False, publish: int | None = None,
              limits: HubLimits | None = None, run_id: str | None = None, owner: Owner | None = None,
              eager: bool = False, network: str | None = None,
              labels_extra: dict[str, str] | None = None) -> HubContainer:
    """Start a hub container for `manifest`'s image, on `network` (a run network, with every
    app's alias) or else on the default bridge. publish=PORT publishes app i (in manifest
    order) on 127.0.0.1:PORT+i, as deploy-all.sh numbers them from its base port. Runs connect a
    running hub to their own network later (mockweb.network.connect)."""
    import docker.errors

    lim = limits or HubLimits()
    api = client.api
    if detached:
        labels = detached_labels(owner)
    else:
        labels = labels_for("hub", run=run_id, owner=owner, extra=labels_extra)
    labels[LABEL_HUB_IMAGE] = manifest.image_id
    port_bindings: dict[int, tuple[str, int]] = {}
    if publish is not None:
        labels[LABEL_PUBLISHED] = str(publish)
        for i, a in enumerate(manifest.apps):
            port_bindings[a.port] = ("127.0.0.1", publish + i)
    hc = api.create_host_config(
        init=True, cap_drop=["ALL"], security_opt=["no-new-privileges"],
        pids_limit=lim.pids, mem_limit=lim.mem, memswap_limit=lim.mem, nano_cpus=int(lim.cpus * 1e9),
        network_mode=network or "bridge",
        port_bindings=port_bindings or None,
        restart_policy={"Name": "unless-stopped"} if detached else None,
        # IPv6 on the hub's loopback (engines disable it in containers of IPv4 networks), so its
        # apps answer on ::1 as well as 127.0.0.1, as clients that resolve localhost either way need.
        sysctls={"net.ipv6.conf.lo.disable_ipv6": "0"},
    )
    name = f"shinken-hub-{manifest.image_id.removeprefix('sha256:')[:8]}-{secrets.token_hex(3)}"
    # The rollout keys' secret (state_key): read back from the container's config by the host, never
    # seen inside a sandbox.
    env = [f"{KEY_ENV}={secrets.token_hex(32)}", *(["SHINKEN_HUB_EAGER=1"] if eager else [])]
    cid: str | None = None
    try:
        netcfg = None
        if network and network != "none":
            netcfg = api.create_networking_config(
                {network: api.create_endpoint_config(aliases=[a.alias for a in manifest.apps])})
        cid = create_container(api, manifest.image_id, labels=labels, name=name, host_config=hc, detach=True,
                               environment=env, ports=list(port_bindings) or None, networking_config=netcfg)
        api.start(cid)
    except BaseException as exc:
        if cid is not None:  # created but not started: removed (a detached one has no owner for gc to go by)
            try:
                stop_hub(client, cid)
            except InfraError:
                pass  # it keeps its labels: gc reclaims it (owner, or a never-started creator) once we are gone
        if not isinstance(exc, docker.errors.APIError):
            raise
        hint = (f"; is a port in 127.0.0.1:{publish}-{publish + len(manifest.apps) - 1} taken?"
                if publish is not None else "")
        raise EnvironmentProblem(f"cannot start the hub container: {exc.explanation or exc}{hint}") from None
    assert cid is not None
    hub = HubContainer(cid, name, manifest.image_id, detached, labels.get(LABEL_OWNER), publish, time.time())
    try:
        wait_ready(client, hub.id)
    except BaseException:
        stop_hub(client, hub.id)
        raise
    return hub


def hub_key(client: Any, cid: str) -> str | None:
    """The hub's secret (KEY_ENV in its environment), or None for a hub started without one."""
    import docker.errors

    try:
        env = (client.api.inspect_container(cid).get("Config") or {}).get("Env") or []
    except docker.errors.APIError as exc:
        raise InfraError(f"hub {cid[:12]}: cannot read its key: {exc}") from None
    return next((e.split("=", 1)[1] for e in env if e.startswith(KEY_ENV + "=")), None)


def state_key(secret: str, sid: str) -> str:
    """The key of one rollout's sid: what the hub's front door asks of writes that reset or
    replace that sid's state (supervisor.mjs keyFor)."""
    return hmac.new(secret.encode(), sid.encode(), hashlib.sha256).hexdigest()


def seal_sid(client: Any, cid: str, sid: str) -> None:
    """Seal a sid that is not a fork's own shk- sid (a re-provisioned computer's setup sid)."""
    if not sid or any(ch not in "abcdefghijklmnopqrstuvwxyzABCDEFGHIJKLMNOPQRSTUVWXYZ0123456789_-" for ch in sid):
        raise ShinkenError(f"refusing to seal sid {sid!r}: not a sanitized sid")
    code, out = hub_exec(client, cid, ["bash", "-c", 'mkdir -p "$1" && : > "$1/$2"', "-", SEALED_DIR, sid])
    if code != 0:
        raise InfraError(f"hub {cid[:12]}: cannot seal sid {sid}: {out[-200:]}")


def stop_hub(client: Any, cid: str) -> None:
    import docker.errors

    try:
        client.api.remove_container(cid, force=True, v=True)
    except docker.errors.NotFound:
        pass
    except docker.errors.APIError as exc:
        raise InfraError(f"removing hub container {cid[:12]}: {exc}") from None


def started_at(client: Any, cid: str) -> str | None:
    """When the hub container last started ("" while it is stopped), None when it is gone."""
    import docker.errors

    try:
        state = client.api.inspect_container(cid).get("State") or {}
    except docker.errors.NotFound:
        return None
    except docker.errors.APIError as exc:
        raise InfraError(f"hub {cid[:12]}: {exc.explanation or exc}") from None
    return str(state.get("StartedAt") or "") if state.get("Running") else ""


def hub_exec(client: Any, cid: str, argv: list[str], *, user: str = "hub", timeout: float = 60) -> tuple[int, str]:
    """Run a management command in the hub container; (exit code, output). As `hub`, the
    owner of every app's files: the container holds no capabilities, so root could not."""
    import docker.errors

    api = client.api
    try:
        ex = api.exec_create(cid, ["timeout", str(int(timeout)), *argv], user=user)
        out = api.exec_start(ex["Id"]).decode("utf-8", "replace")
        code = api.exec_inspect(ex["Id"]).get("ExitCode")
    except docker.errors.APIError as exc:
        raise InfraError(f"hub {cid[:12]}: {exc.explanation or exc}") from None
    return (code if code is not None else -1), out


def wait_ready(client: Any, cid: str, timeout: float = READY_TIMEOUT_S) -> float:
    """Seconds until the supervisor accepts connections on port 80 (one exec that polls)."""
    t0 = time.monotonic()
    script = (f"for i in $(seq 1 {int(timeout * 20)}); do (exec 3<>/dev/tcp/127.0.0.1/{HUB_PORT}) 2>/dev/null "
              "&& exit 0; sleep 0.05; done; exit 1")
    code, out = hub_exec(client, cid, ["bash", "-c", script], timeout=timeout + 5)
    if code != 0:
        logs = ""
        try:
            logs = client.api.logs(cid, tail=20).decode("utf-8", "replace")
        except Exception:  # noqa: BLE001 - best effort for the message
            pass
        raise EnvironmentProblem(f"hub container {cid[:12]} did not serve within {timeout:.0f}s:\n{logs[-1500:]}")
    return time.monotonic() - t0


_NODE_GET = ("const u=process.argv[1];fetch(u).then(async r=>{process.stdout.write(await r.text());"
             "process.exit(r.ok?0:2)}).catch(e=>{process.stdout.write(JSON.stringify({error:String(e)}));process.exit(3)})")


def hub_get(client: Any, cid: str, path: str, timeout: float = 150) -> Any:
    """GET a supervisor path (/__shinken/...) from inside the hub; parsed JSON."""
    code, out = hub_exec(client, cid, ["node", "-e", _NODE_GET, f"http://127.0.0.1:{HUB_PORT}{path}"],
                         timeout=timeout)
    try:
        doc = json.loads(out)
    except ValueError:
        raise InfraError(f"hub {cid[:12]} {path}: not JSON (exit {code}): {out[-300:]}") from None
    if code != 0:
        raise InfraError(f"hub {cid[:12]} {path}: {doc.get('error', doc) if isinstance(doc, dict) else doc}")
    return doc


def health(client: Any, cid: str) -> dict[str, Any]:
    doc: dict[str, Any] = hub_get(client, cid, "/__shinken/health")
    return doc


# What a hub's front door must hold of its rollouts' state (its health lists them; docs/integrity.md):
# whole-state writes need the rollout key, and the apps' own servers answer only the hub's loopback.
GUARDS = ("rollout_key", "apps_loopback_only")


def require_guards(client: Any, cid: str, image: str) -> None:
    """EnvironmentProblem when the hub's supervisor lacks one of GUARDS (an image built before
    them): a policy could write its rollout's state past the app, so no run uses it."""
    have = health(client, cid).get("guards") or []
    missing = [g for g in GUARDS if g not in have]
    if missing:
        raise EnvironmentProblem(
            f"the hub image {image} was built before shinken guarded its rollouts' state ({', '.join(missing)} "
            "missing), so a policy could write the state its reward reads: rebuild it with `shinken hub build` "
            "(the apps come from the build cache)")


def start_app(client: Any, cid: str, app: str) -> float:
    """Start one app's vite preview now (instead of on its first request); seconds it took."""
    doc = hub_get(client, cid, f"/__shinken/start?app={app}")
    return float(doc.get("ready_ms", 0)) / 1000


# ---------------------------------------------------------------- sids and their owners


def owner_key(owner: Owner, run_id: str | None) -> str:
    return hashlib.sha256(f"{owner.label()}\0{run_id or ''}".encode()).hexdigest()[:8]


def new_sid(owner: Owner, run_id: str | None) -> str:
    """`shk-<owner key>-<random>`: unguessable (a fork cannot reach another fork's state by
    guessing), fixed length (a prefix glob matches one sid), and names its owner for gc."""
    return f"{SID_PREFIX}{owner_key(owner, run_id)}-{secrets.token_hex(10)}"


def write_owner_lease(client: Any, cid: str, owner: Owner, run_id: str | None) -> None:
    """Record which process (and run) the sids `shk-<key>-*` belong to: once per run and hub."""
    key = owner_key(owner, run_id)
    lease = json.dumps({LABEL_OWNER: owner.label(), LABEL_RUN: run_id or ""})
    code, out = hub_exec(client, cid, ["bash", "-c", 'mkdir -p "$1" && printf %s "$2" > "$1/$3"', "-", OWNERS_DIR, lease, key])
    if code != 0:
        raise InfraError(f"hub {cid[:12]}: cannot write the owner lease: {out[-200:]}")


def remove_sids(client: Any, cid: str, sids: list[str], *, keep_uploads: bool = False) -> None:
    """Delete every stored state and upload of these sids in every app of the hub (the
    files each mock keeps under its .mock-* folders; in-memory mocks keep theirs until the
    hub stops). keep_uploads: only the state files (.mock-states)."""
    if not sids:
        return
    for s in sids:
        if not s or any(ch not in "abcdefghijklmnopqrstuvwxyzABCDEFGHIJKLMNOPQRSTUVWXYZ0123456789_-" for ch in s):
            raise ShinkenError(f"refusing to remove sid {s!r}: not a sanitized sid")
    names = " ".join(shlex.quote(s) for s in sids)
    dirs = STATE_DIRS_GLOB.replace(".mock-*", ".mock-states") if keep_uploads else STATE_DIRS_GLOB
    script = (f"for s in {names}; do rm -f {SEALED_DIR}/\"$s\"; for d in {dirs}; do [ -d \"$d\" ] || continue; "
              "find \"$d\" -maxdepth 1 -name \"$s*\" -exec rm -rf {} +; done; done")
    code, out = hub_exec(client, cid, ["bash", "-c", script])
    if code != 0:
        raise InfraError(f"hub {cid[:12]}: removing sid state failed: {out[-200:]}")


@dataclass(frozen=True)
class StoredSid:
    sid: str
    app: str
    mtime: float
    bytes: int
    owner: str | None  # the owner label leased for a shk- sid, else None
    run: str | None  # the run id leased with it


def list_sids(client: Any, cid: str) -> list[StoredSid]:
    """Every sid with stored state or uploads in the hub, per app (newest change, size)."""
    script = (f"for d in {STATE_DIRS_GLOB}; do [ -d \"$d\" ] || continue; "
              "app=$(basename \"$(dirname \"$d\")\"); "
              "find \"$d\" -mindepth 1 -maxdepth 1 -printf \"$app\\t%f\\t%T@\\t%s\\n\"; done; "
              f"echo '--owners--'; for f in {OWNERS_DIR}/*; do [ -f \"$f\" ] && printf '%s\\t%s\\n' \"$(basename \"$f\")\" \"$(cat \"$f\")\"; done; true")
    code, out = hub_exec(client, cid, ["bash", "-c", script])
    if code != 0:
        raise InfraError(f"hub {cid[:12]}: listing sids failed: {out[-200:]}")
    files, _, owners_part = out.partition("--owners--\n")
    owners: dict[str, dict[str, str]] = {}
    for line in owners_part.splitlines():
        key, _, raw = line.partition("\t")
        try:
            owners[key] = json.loads(raw)
        except ValueError:
            continue  # half-written lease: its sids count as unleased
    merged: dict[tuple[str, str], StoredSid] = {}
    for line in files.splitlines():
        parts = line.split("\t")
        if len(parts) != 4:
            continue
        app, fname, mtime, size = parts
        sid = _sid_of(fname)
        if sid is None:
            continue
        lease = owners.get(sid[len(SID_PREFIX):].split("-", 1)[0], {}) if sid.startswith(SID_PREFIX) else {}
        prev = merged.get((app, sid))
        m, b = float(mtime), int(size)
        if prev is not None:
            m, b = max(m, prev.mtime), b + prev.bytes
        merged[(app, sid)] = StoredSid(sid, app, m, b, lease.get(LABEL_OWNER), lease.get(LABEL_RUN) or None)
    return sorted(merged.values(), key=lambda s: (s.app, s.sid))


def _sid_of(fname: str) -> str | None:
    """The sid a state file or upload folder belongs to: `<sid>.json`, `<sid>.initial.json`,
    `<sid>_initial.json`, `<sid>/` (uploads). Shared-default files have none."""
    if fname.startswith(".") or fname == "_default":
        return None
    if fname.startswith(SID_PREFIX):
        return fname[: len(SID_PREFIX) + 8 + 1 + 20]
    base = fname.split(".", 1)[0]
    return base.removesuffix("_initial") or None
