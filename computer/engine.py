"""ComputerEngine: one rollout per session, on a fork of the task's cached golden.

Lifecycle (see docs/computer.md):
- `seed` builds or reuses the task's golden, forks it (or takes a warm fork from a pool), replays the
  post-fork steps and returns a generation token. Every later call names the token; a stale or
  unknown token raises SessionError and touches nothing, so a late call from an old rollout can
  never act on a newer one.
- Calls for one session are serialized by a per-session lock; sessions run concurrently.
- Goldens are a cache every process on the engine shares: the engine holds a lease on each it
  serves from (sandbox/goldens.py), and deletes a golden it lets go of only when nobody else holds
  it; a golden forced out from under it is built (or copied) again by the next seed.
- Ownership is bounded: a maintenance thread reaps sessions idle past `idle_ttl_s`, evicts goldens
  by LRU/TTL through the provider, retries failed deletions in bounded batches (new seeds are
  refused while the backlog is at its high-water mark, rather than leaking further), and asks
  shinken.reclaim to reclaim forks of dead owners. `close()` is terminal and waits for calls in
  flight.
"""

from __future__ import annotations

import logging
import functools
import os
import secrets
import threading
import time
from collections import OrderedDict
from dataclasses import dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING, Any, Callable

from shinken.bundles.catalog import BundleCatalog
from shinken.bundles.model import Bundle
from shinken.computer import actions
from shinken.computer.actions import ToolOutput
from shinken.computer.demand import DemandPolicy, DemandSizer
from shinken.computer.contract import EngineConfig, EngineStatus, VerifyResult
from shinken.computer.tools import ToolContext, new_context
from shinken.periodic import Periodic
from shinken.sandbox.api import (DiskFull, Fork, ForkLost, ForkPool, Golden, HubLost, ImageMissing, InfraError, Provider,
                                 QuotaExceeded, SessionError, SetupError, StartStateError)
from shinken.sandbox import connect_secret, disk_quota
from shinken.sandbox.ownership import LABEL_MADE_BY
from shinken.tiers import Tier, parse_tier

if TYPE_CHECKING:
    from shinken.mockweb.runs import WebPlan
    from shinken.mockweb.session import WebSession

log = logging.getLogger("shinken.computer")

DELETE_BATCH = 8  # deletions retried per maintenance tick
DELETE_HIGH_WATER = 32  # backlog at which new seeds are refused
DELETE_MAX_ATTEMPTS = 20  # then the item is left to `shinken gc` (logged), never retried forever
BACKLOG_WAIT_S = 10.0  # a seed facing a full backlog retries deletions this long before refusing
GC_INTERVAL_S = 300.0
# Forks made by an engine's own provider carry this label; its maintenance gc reclaims only
# dead owners' forks that carry it. Another program's leftovers (a killed `shinken probe`)
# are `shinken gc`'s to reclaim, when the user asks: an engine racing the user's own
# `shinken gc --force` over them would only turn its report into failures.
ENGINE_LABELS = {LABEL_MADE_BY: "computer-engine"}


@dataclass
class _GoldenEntry:
    golden: Golden
    bundle: Bundle
    last_used: float
    refs: int = 0  # live forks made from it; an entry in use is never evicted
    pool: ForkPool | None = None
    pool_tier: Tier | None = None  # the tier the pool's computers were made (and checked) at


@dataclass
class _Session:
    name: str
    lock: threading.Lock = field(default_factory=threading.Lock)
    generation: str | None = None
    task_id: str | None = None
    fork: Fork | None = None
    ctx: ToolContext | None = None
    last_used: float = field(default_factory=time.monotonic)
    infra_failure: str | None = None  # an InfraError during a tool call: verify masks the sample
    failure_code: str = "infra"  # failure_kinds.REASONS: "fork_lost", "start_state" (seed), ...
    failure_stage: str = "agent"  # where it happened: "seed" or "agent"
    tier: Tier | None = None  # how the rollout's computer got its start state
    removed: bool = False  # taken out of the registry; a waiter must look the session up again
    timing: dict[str, Any] = field(default_factory=dict)  # the seed's: how its golden came, seconds


@dataclass
class _PendingDelete:
    what: str  # "fork <id>" / "golden <tag>"
    action: Callable[[], None]
    attempts: int = 0
    last_error: str = ""


def _outage(exc: BaseException) -> bool:
    """An exception the failure table answers as the engine's or the machine's (503 infra_error):
    InfraError, and the Docker SDK's own errors no shinken code wrapped (an engine restarted under
    a call raises requests' ConnectionError: its socket is gone)."""
    from shinken.computer.failures import answer_for

    return answer_for(exc).error == "infra_error"


def _infra_code(exc: BaseException) -> str:
    """fork_lost when the rollout's own container (or its session) is gone, disk_full and
    hub_lost for those, else infra."""
    if isinstance(exc, QuotaExceeded):
        return "disk_quota"
    if isinstance(exc, DiskFull):
        return "disk_full"
    if isinstance(exc, HubLost):
        return "hub_lost"
    return "fork_lost" if isinstance(exc, (ForkLost, SessionError)) else "infra"


class ComputerEngine:
    """The local engine: rollouts on this machine's Docker engine, as `config` decides them."""

    def __init__(self, config: EngineConfig, *, provider: Provider | None = None,
                 maintenance_interval_s: float | None = None,
                 keep_goldens_on_close: bool = False, delete_high_water: int = DELETE_HIGH_WATER,
                 backlog_wait_s: float = BACKLOG_WAIT_S, gc_interval_s: float | None = GC_INTERVAL_S,
                 demand: DemandPolicy | None = None, warm_budget: Callable[[], int] | None = None,
                 desktop_mib: float = 600.0, golden_source: Callable[[Any, Bundle, str], Golden] | None = None,
                 disk_share_mib: float | None = None) -> None:
        self._config = config
        self.task_root = config.task_root
        # Where a golden this engine lacks comes from: (provider, bundle, base image id) -> Golden;
        # default the provider's ensure_golden (found or built here). A fleet host copies through
        # the fleet's registry first (fleet/golden_copy.py).
        self.golden_source = golden_source
        # What the policy sees and acts with (docs/computer.md, "Profiles"); the default is the
        # accessibility tree and shinken's element tools.
        self.profile = config.profile
        self.image = config.image
        self._image_id: str | None = None  # resolved once, at the first golden: a moved tag changes nothing
        self.accept_filesystem = config.accept_filesystem
        self.pool_size = int(config.pool_size)
        # Demand-sized pools (computer/demand.py) instead of pool_size per golden: sized from the
        # seeds observed, all together within warm_budget() (a fleet host: its free slots) and the
        # memory the machine has for desktops of desktop_mib each. config.demand_pools: with the default
        # policy (the server's shinken_demand_pools / SHINKEN_DEMAND_POOLS). A fixed pool_size > 0 wins.
        if demand is None and config.demand_pools and self.pool_size == 0:
            demand = DemandPolicy()
        self.demand = DemandSizer(demand) if demand is not None else None
        self.warm_budget = warm_budget
        self.desktop_mib = float(desktop_mib)
        self.idle_ttl_s = float(config.idle_ttl_s)
        self.golden_ttl_s = float(config.golden_ttl_s)
        self.max_goldens = max(1, int(config.max_goldens))
        self.keep_goldens_on_close = keep_goldens_on_close
        self.delete_high_water = max(1, int(delete_high_water))
        self.backlog_wait_s = float(backlog_wait_s)
        self.gc_interval_s = gc_interval_s
        web: WebPlan | None = None
        if config.web:
            from shinken.mockweb.runs import web_plan

            web = web_plan(config.hub_image, config.mock_urls)
        # A web task runs on its copy naming this server's mock addresses (web.prepare).
        self.catalog = BundleCatalog(self.task_root, web.prepare if web is not None else None)
        self._owns_provider = provider is None
        share = disk_quota.share_mib(disk_share_mib)  # a served computer's share of the disk (MiB; 0: none)
        # mockweb.runs.WebPlan: web tasks are materialized for its hub and forked with their own
        # sids; the session (hub container + network) lives as long as the engine.
        self.web_plan = web
        self.web_session: WebSession | None = None
        if provider is None:
            from shinken.sandbox.docker_provider import DockerProvider

            if web is not None:
                from shinken.sandbox.docker_client import connect

                self.web_session = web.session(connect(), run_id=f"server-{os.getpid()}", labels=ENGINE_LABELS)
            # judged rewards reach the judge through the relay
            provider = DockerProvider(judge=config.judge, labels=ENGINE_LABELS, web=self.web_session, disk_share_mib=share)
        self.provider = provider
        # Each served computer's share of the engine's disk, where the storage driver does not hold it to it.
        self.disk_watch = disk_quota.DiskWatch(getattr(provider, "api", None), share)
        self._lock = threading.Lock()  # guards the registries below, never held across Docker calls
        self._sessions: dict[str, _Session] = {}
        self._goldens: OrderedDict[str, _GoldenEntry] = OrderedDict()  # LRU order: oldest first
        self._golden_locks: dict[str, threading.Lock] = {}
        self._pending: list[_PendingDelete] = []
        self._pending_lock = threading.Lock()
        self._in_flight = 0
        self._idle = threading.Condition(self._lock)
        self._closed = False
        self._last_gc = 0.0
        self.stats = {"reaped": 0, "evicted": 0, "deleted_retries": 0, "gc_reclaimed": 0, "pool_hits": 0,
                      "pool_misses": 0, "goldens_kept": 0}
        interval = maintenance_interval_s
        if interval is None:
            interval = max(1.0, min(30.0, self.idle_ttl_s / 4, self.golden_ttl_s / 4))
        self.maintenance_interval_s = interval
        self._maintenance = Periodic("shinken-computer-maintenance", interval, self.maintain_once,
                                     "computer engine maintenance", log)
        self._maintenance.start()
        self._sizer: Periodic | None = None
        if self.demand is not None:
            self._sizer = Periodic("shinken-demand-pools", 1.0, self._size_pools, "sizing the warm pools", log)
            self._sizer.start()

    # ------------------------------------------------------------------ construction

    @classmethod
    def from_env(cls, **overrides: Any) -> "ComputerEngine":
        """The engine EngineConfig.from_env() describes; `overrides` are the engine's own keywords."""
        return cls(EngineConfig.from_env(), **overrides)

    @property
    def config(self) -> EngineConfig:
        return self._config

    # ------------------------------------------------------------------ call bookkeeping

    def _enter(self) -> None:
        with self._lock:
            if self._closed:
                raise SessionError("the computer engine is closed")
            self._in_flight += 1

    def _leave(self) -> None:
        with self._lock:
            self._in_flight -= 1
            if self._in_flight == 0:
                self._idle.notify_all()

    def _locked_session(self, session: str, create: bool = False) -> _Session | None:
        """The session with its lock held (the caller releases), or None. Retries if the session
        was removed while we waited for its lock."""
        while True:
            with self._lock:
                sess = self._sessions.get(session)
                if sess is None:
                    if not create:
                        return None
                    sess = self._sessions[session] = _Session(session)
            sess.lock.acquire()
            if not sess.removed:
                return sess
            sess.lock.release()

    @staticmethod
    def _check(sess: _Session | None, session: str, generation: str | None) -> _Session:
        if sess is None or sess.generation is None:
            raise SessionError(f"session {session!r} has no rollout (ended, reaped or never seeded)")
        if not generation or not secrets.compare_digest(str(generation), sess.generation):
            raise SessionError(f"session {session!r}: stale or unknown generation; reseed to start a new rollout")
        return sess

    # ------------------------------------------------------------------ tasks and goldens

    def add_task_folder(self, folder: Path) -> None:
        """Serve the bundle in `folder` too (a fleet host agent receives bundles as rollouts are
        placed on it); a changed folder of the same name replaces the cached bundle."""
        self.catalog.add_folder(folder)

    def bundle(self, task_id: str) -> Bundle:
        """The task's bundle as this engine runs it (a web task prepared for its mock addresses)."""
        return self.catalog.get(task_id)

    def _acquire_golden(self, task_id: str, tier: Tier | None = None,
                        timing: dict[str, Any] | None = None) -> _GoldenEntry:
        """The task's golden with one more reference (build or reuse; one build per task at a time).
        Its warm pool, if any, holds computers made and checked at the first seed's tier. `timing`
        gets how the golden came (warm: this engine held it; else cached / built / copied) and its seconds."""
        bundle = self.bundle(task_id)
        with self._lock:
            glock = self._golden_locks.setdefault(task_id, threading.Lock())
        with glock:
            with self._lock:
                entry = self._goldens.get(task_id)
                if entry is not None:
                    entry.refs += 1
                    entry.last_used = time.monotonic()
                    self._goldens.move_to_end(task_id)
                    if timing is not None:
                        timing["golden"] = "warm"
                    return entry
            t0 = time.perf_counter()
            golden = self._golden(bundle)
            if timing is not None:
                timing.update(golden=golden.origin or "built", golden_s=round(time.perf_counter() - t0, 3),
                              **({"golden_note": golden.origin_note} if golden.origin_note else {}))
            pool, pool_tier = None, None
            if self.demand is not None:  # starts empty; _size_pools grows it as seeds come
                pool_tier = self.serving_tier(golden, tier)
                pool = self.provider.pool(golden, 0, tier=pool_tier, bundle=bundle,
                                          parallel=self.demand.policy.parallel, allow_empty=True)
            elif self.pool_size > 0:
                pool_tier = self.serving_tier(golden, tier)
                pool = self.provider.pool(golden, self.pool_size, tier=pool_tier, bundle=bundle)
            entry = _GoldenEntry(golden=golden, bundle=bundle, last_used=time.monotonic(), refs=1, pool=pool,
                                 pool_tier=pool_tier)
            with self._lock:
                self._goldens[task_id] = entry
                victims = self._lru_victims()
        for tid, victim in victims:
            self._delete_golden(tid, victim)
        return entry

    def _golden(self, bundle: Bundle) -> Golden:
        """The task's golden, found, built or copied, with this engine's lease on it (a shared cache:
        no other process deletes it while this one serves from it). A golden another process
        deleted between the lookup and the lease is built or fetched again, once."""
        for attempt in (1, 2):
            if self.golden_source is not None:
                golden = self.golden_source(self.provider, bundle, self._base_image_id())
            else:
                golden = self.provider.ensure_golden(bundle, self._base_image_id())
                golden.origin = golden.origin or ("cached" if golden.reused else "built")
            try:
                self.provider.hold_golden(golden)
                return golden
            except ImageMissing:
                if attempt == 2:
                    raise
                log.warning("the golden of %s was deleted as it was found; getting it again", bundle.id)
        raise AssertionError("unreachable")

    def _base_image_id(self) -> str:
        with self._lock:
            if self._image_id is not None:
                return self._image_id
        image_id = self.provider.resolve_image(self.image)
        with self._lock:
            self._image_id = self._image_id or image_id
            return self._image_id

    def _lru_victims(self) -> list[tuple[str, _GoldenEntry]]:
        """Unreferenced goldens beyond max_goldens, least recently used first (caller holds _lock)."""
        victims = []
        excess = len(self._goldens) - self.max_goldens
        for tid, entry in list(self._goldens.items()):
            if excess <= 0:
                break
            if entry.refs == 0:
                del self._goldens[tid]
                victims.append((tid, entry))
                excess -= 1
        return victims

    def _release_golden(self, task_id: str | None) -> None:
        if task_id is None:
            return
        with self._lock:
            entry = self._goldens.get(task_id)
            if entry is not None and entry.refs > 0:
                entry.refs -= 1
                entry.last_used = time.monotonic()
            victims = self._lru_victims()
        for tid, victim in victims:
            self._delete_golden(tid, victim)

    def _forget_golden(self, task_id: str, entry: _GoldenEntry) -> None:
        """Drop a golden whose image is gone (its pool and lease with it); the next seed gets it anew.
        The seed that found it gone keeps its reference, moved to the new entry."""
        with self._lock:
            if self._goldens.get(task_id) is entry:
                del self._goldens[task_id]
        if entry.pool is not None:
            self._try_delete(f"pool of {task_id}", entry.pool.close)
        self._try_delete(f"lease on golden {entry.golden.tag}",
                         functools.partial(self.provider.release_golden, entry.golden))

    def _delete_golden(self, task_id: str, entry: _GoldenEntry) -> None:
        self.stats["evicted"] += 1
        if entry.pool is not None:
            self._try_delete(f"pool of {task_id}", entry.pool.close)
        self._try_delete(f"golden {entry.golden.tag}", functools.partial(self._let_go_golden, entry.golden))

    def _let_go_golden(self, golden: Golden) -> None:
        """Delete the golden unless another process holds it (a shared cache: then it stays theirs)."""
        if not self.provider.delete_golden(golden):
            log.info("golden %s stays: another process serves from it", golden.tag)
            self.stats["goldens_kept"] += 1

    def _try_delete(self, what: str, action: Callable[[], None]) -> None:
        """Delete now; on failure queue it for bounded retries (never silently dropped)."""
        try:
            action()
        except Exception as exc:  # noqa: BLE001 - any failure is retried; the reason is kept
            log.warning("deleting %s failed (%s); will retry", what, exc)
            with self._pending_lock:
                self._pending.append(_PendingDelete(what, action, 1, str(exc)))

    def retry_deletions(self, batch: int = DELETE_BATCH) -> int:
        """Retry up to `batch` queued deletions; returns how many are still pending."""
        with self._pending_lock:
            todo, self._pending = self._pending[:batch], self._pending[batch:]
        keep = []
        for item in todo:
            try:
                item.action()
                self.stats["deleted_retries"] += 1
            except Exception as exc:  # noqa: BLE001
                item.attempts += 1
                item.last_error = str(exc)
                if item.attempts >= DELETE_MAX_ATTEMPTS:
                    log.error("giving up deleting %s after %d attempts (%s); `shinken gc` reclaims it once "
                              "this process exits", item.what, item.attempts, exc)
                else:
                    keep.append(item)
        with self._pending_lock:
            self._pending[:0] = keep
            return len(self._pending)

    @property
    def pending_deletions(self) -> list[str]:
        with self._pending_lock:
            return [f"{p.what}: {p.last_error}" for p in self._pending]

    def _wait_backlog(self) -> None:
        deadline = time.monotonic() + self.backlog_wait_s
        while True:
            with self._pending_lock:
                n = len(self._pending)
            if n < self.delete_high_water:
                return
            n = self.retry_deletions()
            if n < self.delete_high_water:
                return
            if time.monotonic() >= deadline:
                raise InfraError(f"{n} deletions are failing (first: {self.pending_deletions[0]}); new rollouts are "
                                 "refused until they succeed (check the Docker engine)")
            time.sleep(0.5)

    def serving_tier(self, golden: Golden, requested: Tier | str | None) -> Tier:
        return self.config.serving_tier(requested, needs_relaunch=golden.needs_relaunch)

    def _computer(self, entry: _GoldenEntry, tier: Tier, *, pooled: bool = True,
                  timing: dict[str, Any] | None = None) -> Fork:
        """A computer showing the start state at `tier` (a pooled one was checked when it was
        made); StartStateError when it does not. `timing["computer"]`: "pool" or "made"."""
        timing = {} if timing is None else timing
        timing["computer"] = "made"
        if pooled and entry.pool is not None and entry.pool_tier is tier:
            if self.demand is None:
                timing["computer"] = "pool"
                return entry.pool.acquire()
            # A demand pool: a ready computer, or one being made now (no longer than a cold start
            # would take), else this seed makes its own.
            ready = entry.pool.take(entry.pool.make_s or 0.0)
            with self._lock:
                self.stats["pool_hits" if ready is not None else "pool_misses"] += 1
            if ready is not None:
                timing["computer"] = "pool"
                return ready
        if tier is Tier.REPROVISION:
            return self.provider.provision(entry.bundle, entry.golden)
        return self.provider.fork(entry.golden, tier=tier)

    # ------------------------------------------------------------------ the session API

    def seed(self, session: str, task_id: str, generation: str | None = None, tier: Tier | str | None = None) -> str:
        """Start (or restart) the session's rollout on a fresh computer of the task made at its
        tier (the probe's `shinken_tier` from the dataset row; see serving_tier); returns its token.
        A computer whose desktop does not match the golden's is retried once, then the rollout
        is started masked: its tools answer an error and verify reports mask_sample with
        failure_kind provider_unavailable (reason "start_state: ..."), so an unchecked start state
        never becomes training data.
        Reseeding a session that has a live rollout requires that rollout's token; once the
        rollout has ended (or was reaped) any token, or none, starts a new one."""
        self._enter()
        try:
            self._wait_backlog()
            sess = self._locked_session(session, create=True)
            assert sess is not None
            try:
                # Only a live rollout needs protecting: a token left over from an ended or reaped
                # rollout (a client's cookie) may start a new one, but never replace a live one.
                if sess.generation is not None:
                    self._check(sess, session, generation)
                self._teardown(sess)
                t_seed = time.perf_counter()
                timing: dict[str, Any] = {}
                entry = self._acquire_golden(task_id, parse_tier(tier), timing)
                if self.demand is not None:
                    with self._lock:
                        self.demand.seen(task_id, time.monotonic())
                    self._size_pools()  # a group arriving grows its pool now, not at the next tick
                use = self.serving_tier(entry.golden, tier)
                mismatch: StartStateError | None = None
                fork: Fork | None
                try:
                    try:
                        fork = self._computer(entry, use, timing=timing)
                    except StartStateError as first:
                        log.warning("task %s: %s; trying a fresh computer", task_id, first)
                        try:
                            fork = self._computer(entry, use, pooled=False, timing=timing)
                        except StartStateError as exc:
                            fork, mismatch = None, exc
                    except InfraError:
                        if self.provider.has_golden(entry.golden):
                            raise
                        # Forced out by a process that held no lease (an older shinken, `docker rmi -f`):
                        # the golden is got again (built, or copied) and the seed goes on.
                        log.warning("task %s: its golden %s is gone; getting it again", task_id, entry.golden.tag)
                        self._forget_golden(task_id, entry)
                        entry = self._acquire_golden(task_id, parse_tier(tier), timing)
                        timing["golden_note"] = "the golden this engine held was gone"
                        fork = self._computer(entry, use, pooled=False, timing=timing)
                except BaseException:
                    self._release_golden(task_id)
                    raise
                sess.task_id, sess.tier = task_id, use
                if fork is None:
                    self._release_golden(task_id)
                    sess.fork = sess.ctx = None
                    sess.infra_failure = f"start state not reproduced: {mismatch}"
                    sess.failure_code, sess.failure_stage = "start_state", "seed"
                else:
                    sess.fork, sess.ctx = fork, new_context(fork)
                    self.disk_watch.watch(fork)
                    sess.infra_failure, sess.failure_code, sess.failure_stage = None, "infra", "agent"
                sess.generation = f"g{secrets.token_hex(12)}"
                sess.last_used = time.monotonic()
                sess.timing = {**timing, "tier": use.value, "seed_s": round(time.perf_counter() - t_seed, 3)}
                return sess.generation
            finally:
                if sess.generation is None:
                    self._remove(sess)
                sess.lock.release()
        finally:
            self._leave()

    def tool(self, session: str, generation: str, name: str, arguments: dict[str, Any]) -> str:
        """The text the policy sees for one tool call (see step() for the screenshot too)."""
        return self.step(session, generation, name, arguments).text

    def step(self, session: str, generation: str, name: str, arguments: Any) -> ToolOutput:
        """One tool call of the engine's profile: its text and, in screenshot profiles, the screen after it."""
        out: ToolOutput = self.in_rollout(session, generation, name,
                                           lambda ctx: actions.run(ctx, self.profile, name, arguments))
        return out

    def first_observation(self, session: str, generation: str) -> ToolOutput | None:
        """The screen a rollout starts from (screenshot profiles; None otherwise), for the seed response."""
        if not self.profile.screenshots:
            return None
        first: ToolOutput | None = self.in_rollout(session, generation, "the first screenshot",
                                                    lambda ctx: actions.first_observation(ctx, self.profile))
        return first

    def sandbox_id(self, session: str, generation: str) -> str | None:
        """The rollout's computer as `<container id>:<owner secret>`, for agents that borrow it as
        a NeMo Gym sandbox (the seed response's `sandbox_handle`; the `shinken` provider's connect
        takes it, and nothing less); None for a rollout started masked (no computer) or a computer
        without a secret. Counts as use: the idle reaper's clock restarts."""
        handle: str | None = self.in_rollout(
            session, generation, "the sandbox handle",
            lambda ctx: connect_secret.handle(ctx.fork.id, ctx.fork.connect_secret) if ctx.fork.connect_secret else None)
        return handle if isinstance(handle, str) else None

    def in_rollout(self, session: str, generation: str, what: str, fn: Callable[[ToolContext], Any]) -> Any:
        """fn(the rollout's tool context) under the session's lock, as a tool call runs (tests and
        benchmarks read the tree and the screen of one moment with it); an InfraError masks the rollout."""
        self._enter()
        try:
            sess = self._locked_session(session)
            try:
                self._check(sess, session, generation)
                assert sess is not None
                if sess.infra_failure:
                    return ToolOutput("error: the computer failed earlier in this rollout; it will not be scored")
                assert sess.ctx is not None
                try:
                    return fn(sess.ctx)
                except Exception as exc:
                    # The fork broke under us (daemon error, container gone, the engine's socket gone
                    # mid-call): not the model's doing.
                    if not isinstance(exc, (InfraError, SessionError)) and not _outage(exc):
                        raise
                    sess.infra_failure = f"{type(exc).__name__} during {what}: {exc}"
                    sess.failure_code = _infra_code(exc)
                    sess.failure_stage = "agent"
                    return ToolOutput("error: the computer failed (infrastructure); this rollout will not be scored")
                finally:
                    sess.last_used = time.monotonic()
            finally:
                if sess is not None:
                    sess.lock.release()
        finally:
            self._leave()

    def verify(self, session: str, generation: str) -> VerifyResult:
        """Run the task's postconfig + reward.py in the fork. Infrastructure failures and broken
        rewards give mask_sample=True with a failure kind, never a made-up 0.0 score."""
        self._enter()
        try:
            sess = self._locked_session(session)
            try:
                self._check(sess, session, generation)
                assert sess is not None  # _check: a live rollout
                if sess.infra_failure:
                    return VerifyResult.masked(sess.failure_code, sess.failure_stage, sess.infra_failure)
                assert sess.fork is not None  # only a masked rollout has none
                bundle = self.bundle(sess.task_id or "")
                try:
                    res = sess.fork.run_reward(bundle)
                except (InfraError, SessionError) as exc:
                    return VerifyResult.masked(_infra_code(exc), "verification", f"{type(exc).__name__}: {exc}")
                except SetupError as exc:  # evaluator.postconfig failed
                    return VerifyResult.masked("postconfig", "verification", f"{type(exc).__name__}: {exc}",
                                               exc.output_tail)
                except Exception as exc:  # noqa: BLE001 - a broken reward run masks the sample, never crashes the server
                    # An engine that went away mid-call (a raw Docker SDK error) is the machine's, not the verifier's.
                    return VerifyResult.masked("infra" if _outage(exc) else "verify_error", "verification",
                                               f"{type(exc).__name__}: {exc}")
                finally:
                    sess.last_used = time.monotonic()
                if res.error is None and res.reward is not None:
                    return VerifyResult(float(res.reward), False, None, None, res.output_tail)
                why = f"reward.py: {res.error or 'no reward'} (exit {res.exit_code})"
                return VerifyResult.masked(f"reward_{res.error or 'missing'}", "verification", why, res.output_tail)
            finally:
                if sess is not None:
                    sess.lock.release()
        finally:
            self._leave()

    def end(self, session: str, generation: str | None = None) -> None:
        """Release the session's fork. Idempotent; with a generation, only that rollout is ended
        (a stale token raises SessionError and leaves the newer rollout running)."""
        self._enter()
        try:
            sess = self._locked_session(session)
            if sess is None:
                return
            try:
                if generation is not None:
                    self._check(sess, session, generation)
                self._teardown(sess)
                self._remove(sess)
            finally:
                sess.lock.release()
        finally:
            self._leave()

    def seed_timing(self, session: str) -> dict[str, Any]:
        """How the session's last seed went: its golden (warm / cached / built / copied, seconds,
        why not copied), the tier its computer was made at and the seed's seconds; {} for an
        unknown session."""
        with self._lock:
            sess = self._sessions.get(session)
            return dict(sess.timing) if sess is not None else {}

    def sessions(self) -> dict[str, str | None]:
        """session -> task id of its live rollout (for health pages and tests)."""
        with self._lock:
            return {k: s.task_id for k, s in self._sessions.items() if s.generation}

    def goldens(self) -> list[str]:
        """Cached golden task ids, least recently used first."""
        with self._lock:
            return list(self._goldens)

    def status(self) -> EngineStatus:
        with self._lock:
            live = sum(1 for s in self._sessions.values() if s.generation)
            return EngineStatus(sessions={"local": live}, goldens={"local": list(self._goldens)})

    # ------------------------------------------------------------------ teardown

    def _teardown(self, sess: _Session) -> None:
        """Close the session's fork and drop its rollout (caller holds the session lock)."""
        fork, task_id = sess.fork, sess.task_id
        if sess.ctx is not None:
            sess.ctx.close()  # the capture channel: before its fork goes
        sess.fork = sess.ctx = sess.generation = sess.task_id = None
        sess.infra_failure = None
        if fork is not None:
            self.disk_watch.forget(fork.id)
            self._try_delete(f"fork {fork.id[:12]}", fork.close)
            self._release_golden(task_id)

    def _remove(self, sess: _Session) -> None:
        with self._lock:
            if self._sessions.get(sess.name) is sess:
                del self._sessions[sess.name]
            sess.removed = True

    # ------------------------------------------------------------------ maintenance

    def _memory_budget(self, ready: int) -> int:
        """Desktops the machine's available memory still holds (1 GiB kept back), plus those ready now."""
        try:
            with open("/proc/meminfo", encoding="ascii") as fh:
                avail_kib = next(int(line.split()[1]) for line in fh if line.startswith("MemAvailable:"))
        except (OSError, StopIteration, ValueError):
            return 1 << 30
        return ready + max(0, int((avail_kib / 1024 - 1024) // self.desktop_mib))

    def pool_targets(self) -> dict[str, dict[str, Any]]:
        """Per task with a demand pool: its target, ready and being-made computers, rate and group size."""
        if self.demand is None:
            return {}
        now = time.monotonic()
        with self._lock:
            pools = {t: e.pool for t, e in self._goldens.items() if e.pool is not None}
            demand = self.demand.snapshot(now)
        return {t: {"size": p.size, "ready": p.ready, "making": p.making,
                    "make_s": round(p.make_s, 2) if p.make_s else None,
                    "make_s_max": round(p.make_s_max, 2) if p.make_s_max else None, **demand.get(t, {})}
                for t, p in pools.items()}

    def _size_pools(self) -> None:
        """Resize every demand pool to its task's target, within the host's budget."""
        if self.demand is None:
            return
        now = time.monotonic()
        with self._lock:
            pools = {t: e.pool for t, e in self._goldens.items() if e.pool is not None}
            for t, e in self._goldens.items():
                if e.refs > 0:  # live rollouts of the task: not idle, however long ago its seeds came
                    self.demand.in_use(t, now)
        if not pools:
            return
        ready = sum(p.ready + p.making for p in pools.values())
        budget = self._memory_budget(ready)
        if self.warm_budget is not None:
            budget = min(budget, max(0, int(self.warm_budget())))
        with self._lock:
            # Little's law on the recent worst make time: the load moves it, and a pool sized on its
            # mean falls behind whenever a make is slower than the mean.
            targets = self.demand.targets({t: p.make_s_max for t, p in pools.items()}, now, budget)
        for t, p in pools.items():
            p.resize(targets.get(t, 0))

    def maintain_once(self) -> None:
        """One maintenance pass: reap idle sessions, expire goldens, retry deletions, gc."""
        now = time.monotonic()
        with self._lock:
            idle = [s for s in self._sessions.values() if now - s.last_used > self.idle_ttl_s]
        for sess in idle:
            if not sess.lock.acquire(blocking=False):
                continue  # a call is in flight: not idle
            try:
                if sess.removed or time.monotonic() - sess.last_used <= self.idle_ttl_s:
                    continue
                log.info("reaping idle session %s (task %s)", sess.name, sess.task_id)
                self.stats["reaped"] += 1
                self._teardown(sess)
                self._remove(sess)
            finally:
                sess.lock.release()
        with self._lock:
            expired = [(tid, e) for tid, e in self._goldens.items()
                       if e.refs == 0 and now - e.last_used > self.golden_ttl_s]
            for tid, _ in expired:
                del self._goldens[tid]
        for tid, entry in expired:
            self._delete_golden(tid, entry)
        self.retry_deletions()
        if self.gc_interval_s is not None and now - self._last_gc > self.gc_interval_s:
            self._last_gc = now
            self._gc_dead_owners()

    def _gc_dead_owners(self) -> None:
        """Reclaim what dead engines (earlier servers) left behind: forks, and the hub and run
        network of their web session (Gym kills a server 1 s after its SIGINT, before its engine
        can close). Only what is labelled ENGINE_LABELS: a provider passed in by the caller makes
        forks this leaves alone."""
        from shinken import reclaim
        from shinken.sandbox.docker_provider import DockerProvider

        if not isinstance(self.provider, DockerProvider):
            return  # gc reads Docker labels; another provider reclaims its own way
        client = self.provider.client
        try:
            items = reclaim.find_reclaimable(client, include_goldens=False, include_temp_dirs=False,
                                             label_filter=ENGINE_LABELS)
            items = [i for i in items if i.kind in ("fork", "pool", "lease", "hub", "network")]
            if items:
                reclaimed, failed = reclaim.reclaim(client, items)
                self.stats["gc_reclaimed"] += len(reclaimed)
                for f in failed:
                    log.warning("gc could not reclaim %s: %s", f.id, f.error)
        except Exception:  # noqa: BLE001
            log.exception("gc of dead owners' forks failed")

    def close(self) -> None:
        """Terminal: refuse new calls, wait for calls in flight, release every fork, pool and
        (unless keep_goldens_on_close) golden, then the provider if the engine made it."""
        with self._lock:
            if self._closed:
                return
            self._closed = True
            while self._in_flight:
                self._idle.wait()
            sessions = list(self._sessions.values())
        self._maintenance.stop(timeout=60)
        if self._sizer is not None:
            self._sizer.stop(timeout=60)
        self.disk_watch.close()
        for sess in sessions:
            with sess.lock:
                self._teardown(sess)
                self._remove(sess)
        with self._lock:
            goldens = list(self._goldens.items())
            self._goldens.clear()
        for tid, entry in goldens:
            if entry.pool is not None:
                self._try_delete(f"pool of {tid}", entry.pool.close)
        # The hub and run network next (their forks are gone): a server stopped with a short
        # grace period (docker stop) may not live through the golden deletions below.
        self._close_web()
        for tid, entry in goldens:
            if not self.keep_goldens_on_close:
                self._try_delete(f"golden {entry.golden.tag}", functools.partial(self._let_go_golden, entry.golden))
        for _ in range(3):
            if not self.retry_deletions(batch=len(self._pending) or 1):
                break
            time.sleep(0.5)
        if self._owns_provider:
            try:
                self.provider.close()
            except Exception:  # noqa: BLE001
                log.exception("closing the sandbox provider failed")

    def _close_web(self) -> None:
        if self.web_session is not None:
            try:
                self.web_session.close()
            except Exception:  # noqa: BLE001
                log.exception("closing the mock web session failed")

    def __enter__(self) -> "ComputerEngine":
        return self

    def __exit__(self, *exc: Any) -> None:
        self.close()
