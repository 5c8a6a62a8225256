"""The host agent: one per fleet host (a named, detached Ray actor pinned to its node) owning that
node's Docker engine through a local ComputerEngine: goldens, forks, warm pools, sessions, gc.

Every Docker call of a rollout happens here, on the host; callers (the router, a sandbox
provider) reach it only through the methods below, which take and return plain data. Errors come
back as {"error": kind, "detail": text}, never as exceptions, so a caller on another Python can
read them: kinds are "full" (no free slot), "need_task" (send the bundle), "session" (stale or
unknown token), "task" (bad task), "infra" (the engine failed).

Admission is by slots: a host runs at most `slots` live rollouts; a seed past that is answered
"full" at once (the router tries another host) and never queued here."""

from __future__ import annotations

import dataclasses
import os
import secrets
import shutil
import socket
import threading
import time
from pathlib import Path
from typing import Any

from shinken.errors import ShinkenError
from shinken.failure_kinds import kind_of, reason
from shinken.sandbox.api import InfraError, SessionError

NAMESPACE = "shinken"
AGENT_PREFIX = "shinken-agent-"


def agent_name(host: str) -> str:
    return f"{AGENT_PREFIX}{host}"


def _error(kind: str, detail: str) -> dict[str, Any]:
    return {"error": kind, "detail": detail}


class HostAgent:
    """Owns this node's engine (DOCKER_HOST of the Ray node it runs on)."""

    def __init__(self, host: str, slots: int, image: str, *, pool_size: int = 0, accept_filesystem: bool = True,
                 idle_ttl_s: float = 900, golden_ttl_s: float = 3600, max_goldens: int = 64,
                 hub_image: str | None = None, engine_factory: Any = None, demand_pools: bool | None = None,
                 desktop_mib: float = 600.0, registry: str | None = None) -> None:
        from shinken.computer.engine import ComputerEngine
        from shinken.runtime import make_temp_dir

        self.host = host
        self.slots = max(1, int(slots))
        self.registry = registry  # the fleet's registry: goldens are copied through it (fleet/golden_copy.py)
        self.incarnation = secrets.token_hex(4)  # a token from an earlier agent of this host is stale
        self.started = time.time()
        self._lock = threading.Lock()
        self._placing = 0  # seeds admitted and still starting
        self._live: set[str] = set()  # sessions holding a slot
        self.tasks_dir = make_temp_dir(prefix=f"fleet-agent-{host}-")
        self.stats = {"seeds": 0, "refused_full": 0, "infra_errors": 0}
        self._webs: dict[str, Any] = {}  # hub image id -> the WebSession probe tasks on this host attach to
        self._web_lock = threading.Lock()
        web = None
        if hub_image:
            from shinken.mockweb.runs import web_plan

            web = web_plan(hub_image, None)
        factory = engine_factory or ComputerEngine
        # Warm computers per task sized from its seeds, within this host's free slots (on by default
        # for a fleet host, computer/settings.py); a fixed pool_size > 0 instead wins.
        if demand_pools is None:
            from shinken.computer.settings import FLEET_DEMAND_POOLS

            demand_pools = FLEET_DEMAND_POOLS
        extra: dict[str, Any] = {"demand_pools": False}
        if demand_pools and pool_size == 0:
            from shinken.computer.demand import DemandPolicy

            extra = {"demand": DemandPolicy(), "warm_budget": self._free_slots, "desktop_mib": desktop_mib}
        self.copier = None
        if registry:  # goldens this host lacks come from the registry when another host pushed them
            from shinken.fleet.golden_copy import GoldenCopier
            from shinken.fleet.provenance import FleetLedger
            from shinken.fleet.registry import split_ref

            self.copier = GoldenCopier(registry, split_ref(image)[0], FleetLedger(), host)
            extra["golden_source"] = self.copier.ensure
        self.engine = factory(self.tasks_dir, image, accept_filesystem=accept_filesystem, pool_size=pool_size,
                              idle_ttl_s=idle_ttl_s, golden_ttl_s=golden_ttl_s, max_goldens=max_goldens, web=web,
                              **extra)

    # ------------------------------------------------------------------ state

    def _used(self) -> int:
        live = set(self.engine.sessions())
        self._live &= live  # reaped sessions give their slot back
        return len(self._live) + self._placing

    def _free_slots(self) -> int:
        """Slots no rollout holds: what warm computers may take (a warm one becomes a rollout's)."""
        with self._lock:
            return max(0, self.slots - self._used())

    def info(self) -> dict[str, Any]:
        """What `fleet status` and the router read: slots, sessions, goldens, load, engine health."""
        image_id = None
        detail = self._engine_down() or ""
        if not detail:
            try:
                provider: Any = self.engine.provider  # a DockerProvider: the agent made the engine
                image_id = provider.resolve_image(self.engine.image)
            except Exception as exc:  # noqa: BLE001 - any failure means the engine is not usable now
                detail = f"{type(exc).__name__}: {exc}"[:300]
        docker_ok = not detail
        with self._lock:
            used = self._used()
        load = os.getloadavg()[0] if hasattr(os, "getloadavg") else 0.0
        return {"host": self.host, "incarnation": self.incarnation, "node": socket.gethostname(), "pid": os.getpid(),
                "docker_host": os.environ.get("DOCKER_HOST", "unix:///var/run/docker.sock"),
                "slots": self.slots, "used": used, "free": max(0, self.slots - used),
                "sessions": len(self.engine.sessions()), "goldens": self.engine.goldens(),
                "image": self.engine.image, "image_id": image_id, "docker_ok": docker_ok, "docker_error": detail,
                "load1": round(load, 2), "uptime_s": round(time.time() - self.started, 1),
                "pools": self._pool_mode(), "warm": self._warm(), **self.stats, **self._copies()}

    def _pool_mode(self) -> str:
        """How this host keeps warm computers: demand (sized from the seeds), fixed K per golden, or off."""
        if getattr(self.engine, "demand", None) is not None:
            return "demand"
        size = int(getattr(self.engine, "pool_size", 0) or 0)
        return f"fixed {size}" if size else "off"

    def _copies(self) -> dict[str, Any]:
        """Goldens copied through the registry, built here, pushed (fleet/golden_copy.py); {} without a registry."""
        if self.copier is None:
            return {}
        return {**self.copier.stats, "pushed": list(self.copier.pushed), "registry": self.registry}

    def _warm(self) -> dict[str, Any]:
        """The warm pools: per task target size, ready, being made (demand pools; {} otherwise)."""
        targets = getattr(self.engine, "pool_targets", None)
        return targets() if callable(targets) else {}

    # ------------------------------------------------------------------ tasks

    def has_task(self, name: str, bundle_hash: str) -> bool:
        from shinken.bundles import wire
        from shinken.bundles.loader import load_bundle

        try:
            folder = self.tasks_dir / wire.component(name, "task folder name")
        except ShinkenError:
            return False
        return folder.is_dir() and load_bundle(folder).bundle_hash == bundle_hash

    def add_task(self, payload: dict[str, Any]) -> dict[str, Any]:
        """Write a bundle sent by the router (probes.executors' payload) under this agent's task
        root: its folder and file names must be single path components (bundles/wire.py)."""
        from shinken.bundles import wire

        try:
            name, files = wire.checked(payload)
        except ShinkenError as exc:
            return _error("task", str(exc))
        dest = self.tasks_dir / name
        tmp = self.tasks_dir / f".{name}.{secrets.token_hex(4)}"
        tmp.mkdir()
        wire.write_files(tmp, files)
        with self._lock:
            if dest.exists():
                shutil.rmtree(dest)
            tmp.rename(dest)
        self.engine.add_task_folder(dest)
        return {"ok": True}

    # ------------------------------------------------------------------ the session API

    def seed(self, session: str, task_id: str, name: str, bundle_hash: str, tier: str | None = None,
             generation: str | None = None) -> dict[str, Any]:
        if not self.has_task(name, bundle_hash):
            return _error("need_task", f"{task_id}: bundle {bundle_hash[:12]} not on host {self.host}")
        with self._lock:
            holds = session in self._live
            if not holds and self._used() >= self.slots:
                self.stats["refused_full"] += 1
                return _error("full", f"host {self.host}: all {self.slots} slots in use")
            if not holds:
                self._placing += 1
        try:
            gen = self.engine.seed(session, task_id, generation, tier)
            with self._lock:
                self._live.add(session)
                self.stats["seeds"] += 1
            return {"generation": gen, "host": self.host, "incarnation": self.incarnation,
                    "timing": self.engine.seed_timing(session)}
        except SessionError as exc:
            return _error("session", str(exc))
        except InfraError as exc:
            self.stats["infra_errors"] += 1
            return _error("infra", f"host {self.host}: {exc}")
        except ShinkenError as exc:
            return _error("task", str(exc))
        except Exception as exc:  # noqa: BLE001 - the Docker client's own errors when the engine died
            self.stats["infra_errors"] += 1
            return _error("infra", f"host {self.host}: {type(exc).__name__}: {exc}"[:400])
        finally:
            with self._lock:
                if not holds:
                    self._placing -= 1

    def _engine_down(self) -> str | None:
        """Why this host's Docker engine does not answer now, or None."""
        try:
            provider: Any = self.engine.provider
            provider.client.ping()
            return None
        except Exception as exc:  # noqa: BLE001 - any failure: the engine is not usable
            return f"{type(exc).__name__}: {exc}"[:300]

    def tool(self, session: str, generation: str, name: str, arguments: dict[str, Any]) -> dict[str, Any]:
        answer = self.step(session, generation, name, arguments)
        answer.pop("screenshot", None)
        return answer

    def step(self, session: str, generation: str, name: str, arguments: Any) -> dict[str, Any]:
        """One tool call (the engine's step): {"output": text, "screenshot": its fields or None}."""
        return self._observed(lambda: self.engine.step(session, generation, name, arguments))

    def first_observation(self, session: str, generation: str) -> dict[str, Any]:
        """The screen a rollout starts from (screenshot profiles; {"output": None} otherwise)."""
        return self._observed(lambda: self.engine.first_observation(session, generation))

    def _observed(self, call: Any) -> dict[str, Any]:
        try:
            out = call()
            if out is None:
                return {"output": None, "screenshot": None}
            shot = dataclasses.asdict(out.screenshot) if out.screenshot is not None else None
            return {"output": out.text, "screenshot": shot}
        except SessionError as exc:
            return _error("session", str(exc))
        except ShinkenError as exc:
            return _error("task", str(exc))
        except Exception as exc:  # noqa: BLE001 - the Docker client's own errors when the engine died
            self.stats["infra_errors"] += 1
            return {"output": "error: the computer failed (infrastructure); this rollout will not be scored",
                    "infra": f"{type(exc).__name__}: {exc}"[:300]}

    def verify(self, session: str, generation: str) -> dict[str, Any]:
        try:
            result = self.engine.verify(session, generation).to_json()
        except SessionError as exc:
            return _error("session", str(exc))
        except ShinkenError as exc:
            return _error("task", str(exc))
        if result["mask_sample"] and result["failure_kind"] != kind_of("infra"):
            down = self._engine_down()  # a reward run that failed because the engine died is infrastructure
            if down is not None:
                self.stats["infra_errors"] += 1
                result.update(failure_kind=kind_of("infra"), failure_stage="verification",
                              failure_reason=reason("infra", f"host {self.host}: Docker engine down ({down}); "
                                                             f"was: {result['failure_reason']}"))
        return result

    def end(self, session: str, generation: str | None = None) -> dict[str, Any]:
        try:
            self.engine.end(session, generation)
        except SessionError as exc:
            return _error("session", str(exc))
        except Exception as exc:  # noqa: BLE001 - InfraError or the Docker client's own errors
            with self._lock:
                self._live.discard(session)
            return _error("infra", f"{type(exc).__name__}: {exc}"[:400])
        with self._lock:
            freed = session in self._live
            self._live.discard(session)
        return {"ok": True, "freed": freed}

    # ------------------------------------------------------------------ web tasks

    def web_endpoint(self, hub: str) -> dict[str, Any]:
        """This host's hub and run network for the hub image `hub` (a WebSession.endpoint()): one
        hub per host and hub image, owned by this agent (its engine's own when it serves that image),
        stopped when the agent closes and reclaimed by `shinken gc` once the agent died. The probe's
        Ray tasks on this host attach to it (probes/executors.py)."""
        from shinken.computer.engine import ENGINE_LABELS
        from shinken.mockweb.runs import web_plan
        from shinken.sandbox.docker_client import connect

        try:
            with self._web_lock:
                plan = web_plan(hub, None)  # the manifest as this host's engine holds the image
                assert plan is not None and plan.manifest is not None
                image_id = plan.manifest.image_id
                session = self._webs.get(image_id)
                if session is None:
                    own = self.engine.web_session
                    if own is not None and own.manifest is not None and own.manifest.image_id == image_id:
                        session = own
                    else:
                        session = plan.session(connect(), run_id=f"agent-{self.host}", labels=ENGINE_LABELS)
                    self._webs[image_id] = session
                lost = session.lost()
                if lost is not None:  # the hub died or restarted: a fresh one for new probes
                    if session is not self.engine.web_session:
                        try:
                            session.close()
                        except Exception:  # noqa: BLE001 - gc reclaims what is left
                            pass
                    session = plan.session(connect(), run_id=f"agent-{self.host}", labels=ENGINE_LABELS)
                    self._webs[image_id] = session
                endpoint = session.endpoint()
        except ShinkenError as exc:
            return _error("task", f"host {self.host}: {exc}")
        except Exception as exc:  # noqa: BLE001 - the engine's own errors
            return _error("infra", f"host {self.host}: {type(exc).__name__}: {exc}"[:400])
        return dict(endpoint or {})

    def _close_webs(self) -> None:
        with self._web_lock:
            webs, self._webs = list(self._webs.values()), {}
        for session in webs:
            if session is not self.engine.web_session:
                try:
                    session.close()
                except Exception:  # noqa: BLE001 - `shinken gc` reclaims a hub or network left
                    pass

    # ------------------------------------------------------------------ housekeeping

    def gc(self, include_goldens: bool = False) -> dict[str, Any]:
        """Reclaim on this host what dead owners left (forks, pools, hubs, networks, and with
        include_goldens the goldens no live engine holds)."""
        from shinken import reclaim

        provider: Any = self.engine.provider
        client = provider.client
        items = reclaim.find_reclaimable(client, include_goldens=include_goldens, include_temp_dirs=False)
        reclaimed, failed = reclaim.reclaim(client, items)
        return {"host": self.host, "reclaimed": [i.id for i in reclaimed],
                "failed": [f"{f.id}: {f.error}" for f in failed]}

    def ping(self) -> str:
        return self.incarnation

    def close(self) -> dict[str, Any]:
        """Release every fork, pool and golden of this host (before the node leaves)."""
        self.engine.close()
        self._close_webs()
        shutil.rmtree(self.tasks_dir, ignore_errors=True)
        return {"ok": True}
