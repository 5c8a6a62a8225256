"""The host agent: one per fleet host (a named, detached Ray actor pinned to its node) owning that
node's Docker engine: goldens, forks, warm pools, sessions, gc.

Every Docker call of a rollout happens here, on the host; callers (the router, a sandbox
provider) reach it only through the methods below, which take and return the data classes of
fleet/wire.py. A rollout is served with the config its server sent along with the seed
(`SeedRequest.rollout`, EngineConfig.rollout()): one local engine per distinct config, made at its
first seed, never the host's own defaults. What the host spends of its own (slots, warm pools,
the golden cache's bounds, the registry goldens are copied through) is set at `fleet join`. A
config the host cannot serve (another task image, a hub image it lacks, a wire of another
version) is refused, naming the difference. An engine call that raises comes back as the failure
table's answer (wire.Failed), never as a string of the agent's making.

Admission is by slots: a host runs at most `slots` live rollouts; a seed past that is refused
"full" at once (the router tries another host) and never queued here."""

from __future__ import annotations

import hashlib
import json
import os
import secrets
import shutil
import socket
import threading
import time
from typing import Any, Callable

from shinken.computer.contract import EngineConfig
from shinken.errors import ShinkenError
from shinken.failure_kinds import kind_of, reason
from shinken.fleet.wire import (WIRE_VERSION, EndAnswer, Ended, Failed, ObserveAnswer, Observed, Refused,
                                SeedAnswer, Seeded, SeedRequest, VerifyAnswer, Verified)
from shinken.sandbox.api import InfraError, SessionError

NAMESPACE = "shinken"
AGENT_PREFIX = "shinken-agent-"
ENGINE_SEP = "."  # an engine token is "<config key>.<the engine's generation>"


def agent_name(host: str) -> str:
    return f"{AGENT_PREFIX}{host}"


def config_key(rollout: dict[str, Any]) -> str:
    """A short name of a rollout config (EngineConfig.rollout()): equal configs, equal keys."""
    return hashlib.sha256(json.dumps(rollout, sort_keys=True).encode()).hexdigest()[:12]


class HostAgent:
    """Owns this node's engine (DOCKER_HOST of the Ray node it runs on)."""

    def __init__(self, host: str, slots: int, image: str, *, pool_size: int = 0, golden_ttl_s: float = 3600,
                 max_goldens: int = 64, hub_image: str | None = None, engine_factory: Callable[..., Any] | None = None,
                 demand_pools: bool | None = None, desktop_mib: float = 600.0, registry: str | None = None) -> None:
        from shinken.runtime import make_temp_dir
        from shinken.sandbox.docker_client import connect

        self.host = host
        self.slots = max(1, int(slots))
        self.image = image
        self.registry = registry  # the fleet's registry: goldens are copied through it (fleet/golden_copy.py)
        self.hub_image = hub_image  # checked at join; the hub probes on this host attach to (web_endpoint)
        self.incarnation = secrets.token_hex(4)  # a token from an earlier agent of this host is stale
        self.started = time.time()
        self._lock = threading.RLock()  # _used() reads the engines under it
        self._placing = 0  # seeds admitted and still starting
        self._live: set[str] = set()  # sessions holding a slot
        self.tasks_dir = make_temp_dir(prefix=f"fleet-agent-{host}-")
        self.stats = {"seeds": 0, "refused_full": 0, "refused_config": 0, "infra_errors": 0}
        self._webs: dict[str, Any] = {}  # hub image id -> the WebSession probe tasks on this host attach to
        self._web_lock = threading.Lock()
        self.client = connect()  # this node's engine: health, image id, gc (EngineUnreachable names the fix)
        # The host's part of every engine's config: where its bundles are, what it spends.
        self.base = EngineConfig(self.tasks_dir, image, pool_size=pool_size, demand_pools=False,
                                 golden_ttl_s=golden_ttl_s, max_goldens=max_goldens)
        self._factory = engine_factory
        # Warm computers per task sized from its seeds, within this host's free slots (on by default
        # for a fleet host, computer/settings.py); a fixed pool_size > 0 instead wins.
        if demand_pools is None:
            from shinken.computer.settings import FLEET_DEMAND_POOLS

            demand_pools = FLEET_DEMAND_POOLS
        self.demand_pools = bool(demand_pools) and pool_size == 0
        self.desktop_mib = float(desktop_mib)
        self.copier = None
        if registry:  # goldens this host lacks come from the registry when another host pushed them
            from shinken.fleet.golden_copy import GoldenCopier
            from shinken.fleet.provenance import FleetLedger
            from shinken.fleet.registry import split_ref

            self.copier = GoldenCopier(registry, split_ref(image)[0], FleetLedger(), host)
        self._engines: dict[str, Any] = {}  # config key -> its ComputerEngine
        self._engine_locks: dict[str, threading.Lock] = {}
        self._folders: list[Any] = []  # bundles received: every engine made later serves them too

    # ------------------------------------------------------------------ engines

    def engines(self) -> list[Any]:
        with self._lock:
            return list(self._engines.values())

    def engine_for(self, rollout: dict[str, Any]) -> Any:
        """The engine serving `rollout` (EngineConfig.rollout()), made at its first seed; Refused
        when this host cannot serve it. Raises what making it raised otherwise (an engine down)."""
        key = config_key(rollout)
        with self._lock:
            found = self._engines.get(key)
            lock = self._engine_locks.setdefault(key, threading.Lock())
        if found is not None:
            return found
        with lock:
            with self._lock:
                found = self._engines.get(key)
            if found is not None:
                return found
            refused = self._cannot_serve(rollout)
            if refused is not None:
                return refused
            config = self.base.with_rollout(rollout)
            extra: dict[str, Any] = {}
            if self.demand_pools:
                from shinken.computer.demand import DemandPolicy

                extra = {"demand": DemandPolicy(), "warm_budget": self._free_slots, "desktop_mib": self.desktop_mib}
            if self.copier is not None:
                extra["golden_source"] = self.copier.ensure
            if self._factory is None:
                from shinken.computer.engine import ComputerEngine

                factory: Callable[..., Any] = ComputerEngine
            else:
                factory = self._factory
            try:
                engine = factory(config, **extra)
            except InfraError:
                raise
            except ShinkenError as exc:  # the config names something this host lacks (a hub image, a file)
                return Refused("config", f"host {self.host} cannot serve this config: {exc}")
            with self._lock:
                for folder in self._folders:
                    engine.add_task_folder(folder)
                self._engines[key] = engine
            return engine

    def _cannot_serve(self, rollout: dict[str, Any]) -> Refused | None:
        if rollout.get("image") != self.image:
            return Refused("config", f"host {self.host} serves image {self.image} (its `fleet join --image`); the "
                                     f"server's config names {rollout.get('image')}: make them the same")
        mock_urls = rollout.get("mock_urls")
        if mock_urls and not os.path.isfile(mock_urls):
            return Refused("config", f"host {self.host} has no mock URL map at {mock_urls} (the server's "
                                     "shinken_mock_urls): put the file there on every host, or serve web tasks "
                                     "from a hub image (shinken_hub_image)")
        return None

    def _engine_of(self, generation: str | None) -> tuple[Any, str | None]:
        """(the engine a token names, the engine's own token); SessionError for a token of no engine here."""
        key, sep, gen = str(generation or "").partition(ENGINE_SEP)
        with self._lock:
            engine = self._engines.get(key) if sep else None
        if engine is None:
            raise SessionError("stale or unknown generation; reseed to start a new rollout")
        return engine, gen

    # ------------------------------------------------------------------ state

    def _sessions(self) -> set[str]:
        out: set[str] = set()
        for e in self.engines():
            out |= set(e.sessions())
        return out

    def _used(self) -> int:
        self._live &= self._sessions()  # reaped sessions give their slot back
        return len(self._live) + self._placing

    def _free_slots(self) -> int:
        """Slots no rollout holds: what warm computers may take (a warm one becomes a rollout's)."""
        with self._lock:
            return max(0, self.slots - self._used())

    def info(self) -> dict[str, Any]:
        """What `fleet status` and the router read: slots, sessions, goldens, load, engine health."""
        from shinken.sandbox.docker_client import resolve_image

        image_id = None
        detail = self._engine_down() or ""
        if not detail:
            try:
                image_id = resolve_image(self.client, self.image)
            except Exception as exc:  # noqa: BLE001 - any failure means the engine is not usable now
                detail = f"{type(exc).__name__}: {exc}"[:300]
        docker_ok = not detail
        engines = self.engines()
        with self._lock:
            used = self._used()
        load = os.getloadavg()[0] if hasattr(os, "getloadavg") else 0.0
        goldens = sorted({t for e in engines for t in e.goldens()})
        return {"host": self.host, "incarnation": self.incarnation, "node": socket.gethostname(), "pid": os.getpid(),
                "docker_host": os.environ.get("DOCKER_HOST", "unix:///var/run/docker.sock"),
                "slots": self.slots, "used": used, "free": max(0, self.slots - used),
                "sessions": sum(len(e.sessions()) for e in engines), "goldens": goldens,
                "image": self.image, "image_id": image_id, "docker_ok": docker_ok, "docker_error": detail,
                "load1": round(load, 2), "uptime_s": round(time.time() - self.started, 1), "wire": WIRE_VERSION,
                "configs": [e.config.profile.name + (" filesystem" if e.config.accept_filesystem else "")
                            for e in engines],
                "pools": self._pool_mode(), "warm": self._warm(engines), **self.stats, **self._copies()}

    def _pool_mode(self) -> str:
        """How this host keeps warm computers: demand (sized from the seeds), fixed K per golden, or off."""
        if self.demand_pools:
            return "demand"
        return f"fixed {self.base.pool_size}" if self.base.pool_size else "off"

    def _copies(self) -> dict[str, Any]:
        """Goldens copied through the registry, built here, pushed (fleet/golden_copy.py); {} without a registry."""
        if self.copier is None:
            return {}
        return {**self.copier.stats, "pushed": list(self.copier.pushed), "registry": self.registry}

    def _warm(self, engines: list[Any]) -> dict[str, Any]:
        """The warm pools: per task target size, ready, being made (demand pools; {} otherwise)."""
        out: dict[str, Any] = {}
        for e in engines:
            targets = getattr(e, "pool_targets", None)
            out.update(targets() if callable(targets) else {})
        return out

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
        except ShinkenError as exc:  # nothing written; the seed that follows answers the unknown task
            return {"error": "task", "detail": str(exc)}
        dest = self.tasks_dir / name
        tmp = self.tasks_dir / f".{name}.{secrets.token_hex(4)}"
        tmp.mkdir()
        wire.write_files(tmp, files)
        with self._lock:
            if dest.exists():
                shutil.rmtree(dest)
            tmp.rename(dest)
            if dest not in self._folders:
                self._folders.append(dest)
            engines = list(self._engines.values())
        for engine in engines:
            engine.add_task_folder(dest)
        return {"ok": True}

    # ------------------------------------------------------------------ the session API

    def seed(self, req: SeedRequest) -> SeedAnswer:
        if req.wire != WIRE_VERSION:
            return Refused("config", f"host {self.host} speaks fleet wire {WIRE_VERSION}, the server {req.wire}: "
                                     "run the same shinken on the server and the hosts")
        if not self.has_task(req.folder, req.bundle_hash):
            return Refused("need_task", f"{req.task_id}: bundle {req.bundle_hash[:12]} not on host {self.host}")
        with self._lock:
            holds = req.session in self._live
            if not holds and self._used() >= self.slots:
                self.stats["refused_full"] += 1
                return Refused("full", f"host {self.host}: all {self.slots} slots in use")
            if not holds:
                self._placing += 1
        try:
            engine = self.engine_for(req.rollout)
            if isinstance(engine, Refused):
                self.stats["refused_config"] += 1
                return engine
            _, old = self._engine_of(req.generation) if req.generation else (None, None)
            gen = engine.seed(req.session, req.task_id, old, req.tier)
            with self._lock:
                self._live.add(req.session)
                self.stats["seeds"] += 1
            return Seeded(f"{config_key(req.rollout)}{ENGINE_SEP}{gen}", self.host, self.incarnation,
                          engine.seed_timing(req.session))
        except Exception as exc:  # noqa: BLE001 - every failure crosses as the table's answer
            failed = Failed.of(exc, self.host)
            if failed.infra:
                self.stats["infra_errors"] += 1
            return failed
        finally:
            with self._lock:
                if not holds:
                    self._placing -= 1

    def _engine_down(self) -> str | None:
        """Why this host's Docker engine does not answer now, or None."""
        try:
            self.client.ping()
            return None
        except Exception as exc:  # noqa: BLE001 - any failure: the engine is not usable
            return f"{type(exc).__name__}: {exc}"[:300]

    def step(self, session: str, generation: str, name: str, arguments: Any) -> ObserveAnswer:
        """One tool call (the engine's step): its text and, in screenshot profiles, the screen after it."""
        try:
            engine, gen = self._engine_of(generation)
            return Observed(engine.step(session, gen, name, arguments))
        except Exception as exc:  # noqa: BLE001 - every failure crosses as the table's answer
            return Failed.of(exc, self.host)

    def first_observation(self, session: str, generation: str) -> ObserveAnswer:
        """The screen a rollout starts from (screenshot profiles; Observed(None) otherwise)."""
        try:
            engine, gen = self._engine_of(generation)
            return Observed(engine.first_observation(session, gen))
        except Exception as exc:  # noqa: BLE001 - every failure crosses as the table's answer
            return Failed.of(exc, self.host)

    def verify(self, session: str, generation: str) -> VerifyAnswer:
        try:
            engine, gen = self._engine_of(generation)
            result = engine.verify(session, gen)
        except Exception as exc:  # noqa: BLE001 - every failure crosses as the table's answer
            return Failed.of(exc, self.host)
        if result.mask_sample and result.failure_kind != kind_of("infra"):
            down = self._engine_down()  # a reward run that failed because the engine died is infrastructure
            if down is not None:
                self.stats["infra_errors"] += 1
                result.failure_kind, result.failure_stage = kind_of("infra"), "verification"
                result.failure_reason = reason("infra", f"host {self.host}: Docker engine down ({down}); "
                                                        f"was: {result.failure_reason}")
        return Verified(result)

    def end(self, session: str, generation: str | None = None) -> EndAnswer:
        try:
            if generation is None:  # every engine's rollout of the session (a close without a token)
                for engine in self.engines():
                    engine.end(session, None)
            else:
                engine, gen = self._engine_of(generation)
                engine.end(session, gen)
        except Exception as exc:  # noqa: BLE001 - every failure crosses as the table's answer
            if not isinstance(exc, SessionError):
                with self._lock:
                    self._live.discard(session)
            return Failed.of(exc, self.host)
        with self._lock:
            freed = session in self._live
            self._live.discard(session)
        return Ended(freed)

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
                    own = next((e.web_session for e in self.engines() if e.web_session is not None
                                and e.web_session.manifest is not None and e.web_session.manifest.image_id == image_id),
                               None)
                    if own is not None:
                        session = own
                    else:
                        session = plan.session(connect(), run_id=f"agent-{self.host}", labels=ENGINE_LABELS)
                    self._webs[image_id] = session
                lost = session.lost()
                if lost is not None:  # the hub died or restarted: a fresh one for new probes
                    if not self._engine_owns(session):
                        try:
                            session.close()
                        except Exception:  # noqa: BLE001 - gc reclaims what is left
                            pass
                    session = plan.session(connect(), run_id=f"agent-{self.host}", labels=ENGINE_LABELS)
                    self._webs[image_id] = session
                endpoint = session.endpoint()
        except ShinkenError as exc:
            return {"error": "task", "detail": f"host {self.host}: {exc}"}
        except Exception as exc:  # noqa: BLE001 - the engine's own errors
            return {"error": "infra", "detail": f"host {self.host}: {type(exc).__name__}: {exc}"[:400]}
        return dict(endpoint or {})

    def _close_webs(self) -> None:
        with self._web_lock:
            webs, self._webs = list(self._webs.values()), {}
        for session in webs:
            if not self._engine_owns(session):
                try:
                    session.close()
                except Exception:  # noqa: BLE001 - `shinken gc` reclaims a hub or network left
                    pass

    def _engine_owns(self, session: Any) -> bool:
        """Whether one of the engines started this web session (it closes it itself)."""
        return any(e.web_session is session for e in self.engines())

    # ------------------------------------------------------------------ housekeeping

    def gc(self, include_goldens: bool = False) -> dict[str, Any]:
        """Reclaim on this host what dead owners left (forks, pools, hubs, networks, and with
        include_goldens the goldens no live engine holds)."""
        from shinken import reclaim

        client = self.client
        items = reclaim.find_reclaimable(client, include_goldens=include_goldens, include_temp_dirs=False)
        reclaimed, failed = reclaim.reclaim(client, items)
        return {"host": self.host, "reclaimed": [i.id for i in reclaimed],
                "failed": [f"{f.id}: {f.error}" for f in failed]}

    def ping(self) -> str:
        return self.incarnation

    def close(self) -> dict[str, Any]:
        """Release every fork, pool and golden of this host (before the node leaves)."""
        for engine in self.engines():
            engine.close()
        self._close_webs()
        self.client.close()
        shutil.rmtree(self.tasks_dir, ignore_errors=True)
        return {"ok": True}
