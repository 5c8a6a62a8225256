"""The sandboxes behind the `shinken` NeMo Gym provider, in plain blocking Python (no Gym import):
a fork of a task's golden made and checked at its tier (shinken.sandbox.docker_provider), or a
container of any image with shinken's isolation, limits and ownership labels. Every container
goes through shinken's Docker door (sandbox/docker_client.py, sandbox/container.py) and carries
the labels `shinken gc` reads: owner, kind, and the expiry that enforces ttl_s.

A later fleet backend can stand in for this class: the Gym adapter (provider/gym.py) only calls
the methods below and keeps nothing but a Box, whose descriptor names the sandbox by id."""

from __future__ import annotations

import json
import logging
import posixpath
import secrets
import shlex
import threading
import time
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import docker.errors

from shinken.bundles.catalog import BundleCatalog
from shinken.bundles.model import Bundle
from shinken.errors import ShinkenError
from shinken.provider.config import ConfigProblem, ProviderConfig, TaskOptions
from shinken.provider.reaper import Reaper
from shinken.sandbox import connect_secret, goldens, guest
from shinken.sandbox.api import Golden, InfraError, SessionError, StartStateError
from shinken.sandbox.container import Container, UserIds, infra, remove_container, start_container
from shinken.sandbox.docker_client import connect, find_image
from shinken.sandbox.forks import DockerFork, ForkPool
from shinken.sandbox.ownership import LABEL_EXPIRES, LABEL_KIND, LABEL_MADE_BY, LABEL_MANAGED, labels_for
from shinken.sandbox.policy import Limits, task_needs
from shinken.tiers import Tier, serving_tier

log = logging.getLogger("shinken.provider")

MADE_BY = "gym-provider"  # LABEL_MADE_BY of every provider sandbox
LABEL_SANDBOX = "shinken.gym_sandbox"  # "task" (a golden's fork) or "image"
LABEL_EXEC_USER = "shinken.exec_user"  # the default exec user ("" = the image's own)
LABEL_IDS = "shinken.exec_ids"  # "<uid>:<gid>" uploads are owned by
LABEL_DISK = "shinken.disk_limit"  # "enforced" | "unenforced" when disk_gib was asked for
READY = "shinken-sandbox-ready"
MAX_OUTPUT = 1 << 20  # bytes of an exec's output kept (the tail)
FREEZE_TRIES = 6  # pause/unpause attempts (0.1 s doubling waits: ~3 s in all)
RUNTIME_RC = 125  # return code of an exec the sandbox could not run (Gym's docker provider uses it too)
REFUSED_RC = 126  # an exec refused by the provider (a task sandbox runs commands as its user only)
# stdout, a marker line, then stderr, from one exec (the exec wrapper merges the two streams).
SPLIT = ('e=$(mktemp 2>/dev/null || echo /tmp/.shinken-err-$$); bash -c "$1" 2>"$e"; rc=$?; '
         'printf "\\n%s\\n" "$2"; cat "$e" 2>/dev/null; rm -f "$e"; exit $rc')


class CreateFailed(ShinkenError):
    """No sandbox could be allocated (bad request, missing image or task, engine error)."""


class NotReady(CreateFailed):
    """A sandbox was allocated but failed its readiness or start-state check (it is removed)."""


@dataclass
class Box:
    """One provider sandbox, by container id; what an exec needs besides the id."""

    id: str
    kind: str  # "task" | "image"
    user: str  # default exec user; "" = the image's own
    uid: int
    gid: int
    network: bool
    workdir: str | None = None
    env: dict[str, str] = field(default_factory=dict)
    ports: tuple[int, ...] = ()
    task_id: str | None = None
    tier: str | None = None
    expires: float | None = None
    paused: bool = False
    timings: dict[str, float] = field(default_factory=dict)
    secret: str | None = None  # the owner secret connect asks for (sandbox/connect_secret.py)

    def descriptor(self) -> dict[str, Any]:
        """What connect takes in another process; its sandbox_id carries the owner secret."""
        sid = connect_secret.handle(self.id, self.secret) if self.secret else self.id
        return {"sandbox_id": sid, "provider": "shinken", "kind": self.kind, "workdir": self.workdir,
                "env": dict(self.env), "ports": list(self.ports), "task_id": self.task_id, "tier": self.tier}


@dataclass(frozen=True)
class ExecOutcome:
    stdout: str | None
    stderr: str | None
    return_code: int
    error_type: str | None = None  # "timeout" | "sandbox"


@dataclass(frozen=True)
class Request:
    """What a create asks for, already checked (provider/gym.py builds it from a SandboxSpec)."""

    image: str | None
    task: TaskOptions | None
    ttl_s: float | None
    ready_timeout_s: float
    workdir: str | None
    env: dict[str, str]
    files: dict[str, str]
    cpus: float | None
    memory_mib: int | None
    disk_gib: int | None
    ports: tuple[int, ...]


class SandboxHost:
    """Creates and drives provider sandboxes on one Docker engine (thread-safe)."""

    def __init__(self, config: ProviderConfig, client: Any = None) -> None:
        self.config = config
        self._client = client
        self._lock = threading.Lock()
        self._providers: dict[tuple[Limits, bool], Any] = {}  # shinken DockerProviders by limits and web
        self._web_lock = threading.Lock()
        self._web: Any = None  # mockweb.runs.WebPlan of hub_image / mock_urls, read at the first web task
        self._web_run: Any = None  # its WebSession (hub container + run network)
        self._catalogs: dict[str, BundleCatalog] = {}  # provider_options.task_root -> its bundles
        self._goldens: dict[tuple[str, str, str], Golden] = {}
        self._golden_locks: dict[tuple[str, str, str], threading.Lock] = {}
        self._forks: dict[str, DockerFork] = {}
        self._base_ids: dict[str, str] = {}
        # Warm pools of checked forks (config.pool_size), one per task, tier, ttl_s and limits.
        self._pools: dict[tuple[Any, ...], ForkPool] = {}
        self._pool_expiry: dict[str, float | None] = {}  # a pooled fork's expiry label, by container id
        self._closed = False
        # Every sandbox this process made (handed out or pooled) goes once its ttl_s passed.
        self.reaper = Reaper(config.reap_interval_s, self._remove_expired)

    # ------------------------------------------------------------------ engine

    @property
    def client(self) -> Any:
        with self._lock:
            if self._client is None:
                self._client = connect()  # EngineUnreachable names the fix
            return self._client

    @property
    def api(self) -> Any:
        return self.client.api

    def _limits(self, req: Request) -> Limits:
        d = self.config.limits
        return Limits(mem=f"{req.memory_mib or d.memory_mib}m", pids=d.pids, cpus=req.cpus or d.cpus)

    def _ttl(self, req: Request) -> float | None:
        return req.ttl_s if req.ttl_s is not None else self.config.default_ttl_s

    def _labels(self, req: Request | float | None, kind: str, user: str, ids: UserIds) -> dict[str, str]:
        """Ownership labels of a sandbox; `req` is the request or the ttl_s (None: no expiry)."""
        out = {LABEL_MADE_BY: MADE_BY, LABEL_SANDBOX: kind, LABEL_EXEC_USER: user, LABEL_IDS: f"{ids.uid}:{ids.gid}"}
        ttl = self._ttl(req) if isinstance(req, Request) else req
        if ttl is not None:
            out[LABEL_EXPIRES] = str(int(time.time() + ttl + 0.999))
        return out

    # ------------------------------------------------------------------ create

    def create(self, req: Request) -> Box:
        """A ready sandbox: started, probed, workdir made and files placed (NotReady when a check
        fails, CreateFailed when nothing could be allocated); nothing is left behind on failure."""
        t0 = time.monotonic()
        box = self._create_task(req) if req.task is not None else self._create_image(req)
        try:
            self._make_ready(box, req)
        except BaseException:
            self.close(box)
            raise
        box.timings["ready_s"] = round(time.monotonic() - t0, 4)
        self.reaper.track(box.id, box.expires)
        return box

    def _bundle(self, opts: TaskOptions) -> Bundle:
        root = Path(opts.task_root)
        if not root.is_dir():
            raise CreateFailed(f"provider_options.task_root {root}: no such folder; point it at a folder of task bundles")
        with self._lock:
            catalog = self._catalogs.get(opts.task_root)
            if catalog is None:
                catalog = self._catalogs[opts.task_root] = BundleCatalog(root, self._prepare_web)
        try:
            return catalog.get(opts.task_id)
        except ShinkenError as exc:  # unknown, defective, or a web task this provider cannot serve
            raise CreateFailed(str(exc)) from None

    def _prepare_web(self, bundle: Bundle) -> tuple[Bundle, str | None]:
        """A web task runs on its copy naming this provider's mock addresses; any other as it is."""
        if not task_needs(bundle).network:
            return bundle, None
        plan = self._web_plan()
        if plan is None:
            return bundle, ("this is a web task: set hub_image (an image from `shinken hub build`) or mock_urls in the "
                            "provider's sandbox block (docs/mock-web.md)")
        prepared: tuple[Bundle, str | None] = plan.prepare(bundle)
        return prepared

    def _web_plan(self) -> Any:
        """The mock-web plan of hub_image / mock_urls (mockweb.runs.WebPlan, read once), or None."""
        from shinken.mockweb.runs import web_plan

        if self.config.hub_image is None and self.config.mock_urls is None:
            return None
        with self._web_lock:
            if self._web is None:
                try:
                    self._web = web_plan(self.config.hub_image,
                                         Path(self.config.mock_urls).expanduser() if self.config.mock_urls else None,
                                         client=self.client)
                except ShinkenError as exc:
                    raise CreateFailed(f"sandbox.shinken.hub_image/mock_urls: {exc}") from None
            return self._web

    def _web_session(self) -> Any:
        """The hub container and run network web-task forks join (started at the first web task,
        owned by this process, labelled like its sandboxes; closed by shutdown)."""
        plan = self._web_plan()
        assert plan is not None
        with self._web_lock:
            if self._web_run is None:
                try:
                    self._web_run = plan.session(self.client, run_id=self.config.run_id,
                                                 labels={LABEL_MADE_BY: MADE_BY})
                except (InfraError, ShinkenError) as exc:
                    raise CreateFailed(f"starting the mock web hub: {exc}") from None
            return self._web_run

    def _provider(self, limits: Limits, web: bool = False) -> Any:
        from shinken.sandbox.docker_provider import DockerProvider

        session = self._web_session() if web else None
        with self._lock:
            p = self._providers.get((limits, web))
            if p is None:
                p = self._providers[(limits, web)] = DockerProvider(
                    self._client or connect(), run_id=self.config.run_id, limits=limits, web=session,
                    labels={LABEL_MADE_BY: MADE_BY})
            return p

    def _golden(self, provider: Any, bundle: Bundle, opts: TaskOptions, image: str, fresh: bool = False) -> Golden:
        """The task's golden on `image`, built once (the provider holds a lease on it: no other
        process deletes it while this one serves from it); `fresh`: the cached one is gone."""
        base = self._base_ids.get(image) or provider.resolve_image(image)
        self._base_ids[image] = base
        key = (opts.task_root, bundle.id, base)
        with self._lock:
            g = self._goldens.pop(key, None) if fresh else self._goldens.get(key)
            glock = self._golden_locks.setdefault(key, threading.Lock())
        if fresh and g is not None:
            provider.release_golden(g)
            g = None
        if g is not None:
            return g
        with glock:  # one build per task at a time; the others wait and reuse it
            with self._lock:
                g = self._goldens.get(key)
            if g is None:
                g = provider.ensure_golden(bundle, base, setup_timeout=self.config.setup_timeout_s)
                with self._lock:
                    self._goldens[key] = g
        return g

    def _create_task(self, req: Request) -> Box:
        from shinken.images.build import DEFAULT_IMAGE

        opts = req.task
        assert opts is not None
        if req.ports:
            raise CreateFailed("spec.ports: a task fork publishes no ports (task sandboxes follow the task's "
                               "network); use an image sandbox for services")
        self.client  # noqa: B018 - connect first: EngineUnreachable before any work
        bundle = self._bundle(opts)
        provider = self._provider(self._limits(req), web=task_needs(bundle).network)
        try:
            golden = self._golden(provider, bundle, opts, req.image or self.config.image or DEFAULT_IMAGE)
        except InfraError as exc:
            raise CreateFailed(f"task {opts.task_id!r}: {exc}") from None
        except ShinkenError as exc:  # the setup failed: the task cannot be served
            raise CreateFailed(f"task {opts.task_id!r}: its golden could not be built: {exc}") from None
        tier = serving_tier(opts.tier, needs_relaunch=golden.needs_relaunch,
                            accept_filesystem=self.config.accept_filesystem)
        ids = UserIds(golden.user_uid, golden.user_gid)
        labels = self._labels(req, "task", guest.USER, ids)
        t0 = time.monotonic()
        pool_key = (opts.task_root, bundle.id, golden.image_id, tier.value, self._ttl(req), self._limits(req))
        fork = self._take_pooled(pool_key)
        pooled = fork is not None
        if fork is not None:
            with self._lock:
                expires = self._pool_expiry.pop(fork.id, None)
            if expires is not None:
                labels[LABEL_EXPIRES] = str(int(expires))
        for attempt in (1, 2):
            if fork is not None:
                break  # a start state that differs is tried once more on a fresh computer
            try:
                if tier is Tier.REPROVISION:
                    fork = provider.provision(bundle, golden, setup_timeout=self.config.setup_timeout_s,
                                              extra_labels=labels)
                else:
                    fork = provider.fork(golden, tier=tier, extra_labels=labels)
                break
            except StartStateError as exc:
                if attempt == 2:
                    raise NotReady(f"task {opts.task_id!r}: the start state was not reproduced at tier "
                                   f"{tier.value}: {exc}") from None
            except (InfraError, SessionError) as exc:
                if attempt == 1 and isinstance(exc, InfraError) and not provider.has_golden(golden):
                    # Forced out by a process that held no lease: built (or found) again, once.
                    log.warning("task %s: its golden %s is gone; getting it again", opts.task_id, golden.tag)
                    golden = self._golden(provider, bundle, opts, req.image or self.config.image or DEFAULT_IMAGE,
                                          fresh=True)
                    continue
                raise CreateFailed(f"task {opts.task_id!r}: {exc}") from None
            except ShinkenError as exc:  # a post-fork step failed on the fork (it was removed)
                raise NotReady(f"task {opts.task_id!r}: {exc}") from None
        assert fork is not None
        with self._lock:
            self._forks[fork.id] = fork
        box = Box(fork.id, "task", guest.USER, ids.uid, ids.gid, fork.network, req.workdir, dict(req.env),
                  task_id=opts.task_id, tier=tier.value, expires=_expiry(labels), secret=fork.connect_secret)
        box.timings = {"fork_s": round(time.monotonic() - t0, 4), **({} if pooled else fork.start_timings),
                       "pooled": 1.0 if pooled else 0.0}
        if self.config.pool_size > 0:  # filled in the background once the task has been served once
            self._ensure_pool(pool_key, provider, bundle, golden, tier, self._ttl(req), ids)
        return box

    # ------------------------------------------------------------------ warm pools

    def _take_pooled(self, key: tuple[Any, ...]) -> DockerFork | None:
        """A ready fork of the task's warm pool, or None (no pool, none ready yet, or the pool's
        last make failed: the caller makes a fork itself and reports its error)."""
        with self._lock:
            pool = self._pools.get(key)
        if pool is None or pool.ready == 0:
            return None
        try:
            fork = pool.acquire(timeout=0)
        except ShinkenError:
            return None
        if self.reaper.expired(fork.id):  # waited in the pool past its ttl_s: not handed out
            self._remove_expired(fork.id, fork)
            return None
        return fork

    def _ensure_pool(self, key: tuple[Any, ...], provider: Any, bundle: Bundle, golden: Golden, tier: Tier,
                     ttl: float | None, ids: UserIds) -> None:
        with self._lock:
            if self._closed or key in self._pools:
                return

            def make() -> DockerFork:
                # Labels made per fork: its expiry counts from when it was made (ttl_s is never exceeded).
                labels = self._labels(ttl, "task", guest.USER, ids)
                if tier is Tier.REPROVISION:
                    f = provider.provision(bundle, golden, kind="pool", setup_timeout=self.config.setup_timeout_s,
                                           extra_labels=labels)
                else:
                    f = provider.fork(golden, kind="pool", tier=tier, extra_labels=labels)
                with self._lock:
                    self._pool_expiry[f.id] = _expiry(labels)
                self.reaper.track(f.id, _expiry(labels))
                return f  # type: ignore[no-any-return]

            self._pools[key] = ForkPool(provider, golden, self.config.pool_size, make=make)

    def pooled(self) -> int:
        """Forks ready in all warm pools."""
        with self._lock:
            pools = list(self._pools.values())
        return sum(p.ready for p in pools)

    def drain(self) -> None:
        """Close every warm pool and remove the forks still in it (sandboxes handed out stay)."""
        with self._lock:
            pools, self._pools = list(self._pools.values()), {}
        for p in pools:
            try:
                p.close()
            except ShinkenError as exc:
                log.warning("closing a warm pool: %s", exc)
        with self._lock:
            self._pool_expiry.clear()

    def _image_id(self, ref: str) -> str:
        ref = ref.removeprefix("docker://")
        image_id = find_image(self.client, ref)
        if image_id is not None:
            return image_id
        if self.config.pull == "never":
            raise CreateFailed(f"image {ref!r} is not on the Docker engine and sandbox.shinken.pull is never; "
                               f"build or load it first")
        try:
            self.client.images.pull(ref)
        except docker.errors.DockerException as exc:
            raise CreateFailed(f"image {ref!r} is not on the Docker engine and pulling it failed: {exc}") from None
        pulled = find_image(self.client, ref)
        if pulled is None:
            raise CreateFailed(f"image {ref!r}: pulled, but the engine does not show it")
        return pulled

    def _create_image(self, req: Request) -> Box:
        if not req.image:
            raise CreateFailed("spec.image or provider_options.task_id is required by the shinken provider")
        image_id = self._image_id(req.image)
        limits = self._limits(req)
        ids = UserIds(0, 0)
        secret, secret_labels = connect_secret.new()
        labels = labels_for("fork", run=self.config.run_id, extra={**self._labels(req, "image", "", ids), **secret_labels})
        network = self.config.network != "none"
        if req.ports and not network:
            raise CreateFailed("spec.ports: sandbox.shinken.network is none, so nothing can be published; "
                               "set network: bridge (or a Docker network's name)")

        def host_config(disk: bool) -> dict[str, Any]:
            return self.api.create_host_config(  # type: ignore[no-any-return]
                init=True, cap_drop=["ALL"], cap_add=list(limits.cap_add), security_opt=["no-new-privileges"],
                pids_limit=limits.pids, mem_limit=limits.mem, memswap_limit=limits.mem,
                nano_cpus=int(limits.cpus * 1e9), shm_size=limits.shm_size,
                network_mode=self.config.network,
                port_bindings={p: (self.config.publish_host, None) for p in req.ports} or None,
                storage_opt={"size": f"{req.disk_gib}G"} if disk and req.disk_gib else None)

        t0 = time.monotonic()
        try:
            if req.disk_gib:
                labels[LABEL_DISK] = "enforced"
            cid = start_container(self.api, image_id, labels, host_config(True), ports=list(req.ports))
        except InfraError as exc:
            if not (req.disk_gib and "storage" in str(exc).lower()):
                raise CreateFailed(f"image {req.image!r}: {exc}") from None
            if self.config.disk_limit == "strict":
                raise CreateFailed(f"spec.resources.disk_gib: this Docker engine cannot limit disk ({exc}); "
                                   f"drop disk_gib or set sandbox.shinken.disk_limit: best_effort") from None
            log.warning("disk_gib=%s not enforced: the engine's storage driver cannot limit it", req.disk_gib)
            labels[LABEL_DISK] = "unenforced"
            try:
                cid = start_container(self.api, image_id, labels, host_config(False), ports=list(req.ports))
            except InfraError as exc2:
                raise CreateFailed(f"image {req.image!r}: {exc2}") from None
        box = Box(cid, "image", "", 0, 0, network, req.workdir, dict(req.env), ports=tuple(req.ports),
                  expires=_expiry(labels), secret=secret)
        box.timings = {"container_s": round(time.monotonic() - t0, 4)}
        return box

    def _make_ready(self, box: Box, req: Request) -> None:
        """One probe exec as root (workdir made and handed to the exec user), then the files."""
        probe = f"printf {READY}"
        if req.workdir:
            wd = shlex.quote(req.workdir)
            own = f" && chown {box.uid}:{box.gid} {wd}" if box.user else ""
            probe = f"mkdir -p {wd}{own} && {probe}"
        res = self._exec_as(box, probe, "root", timeout_s=req.ready_timeout_s, cwd="/")
        if res.return_code != 0 or READY not in (res.stdout or ""):
            said = ((res.stderr or "") + (res.stdout or "")).strip()
            hint = "; the image needs bash and coreutils' timeout" if res.return_code in (126, 127) else ""
            raise NotReady(f"sandbox {box.id[:12]} failed its readiness probe (rc {res.return_code}, "
                           f"{res.error_type or 'no error type'}): {said[-300:]}{hint}")
        for path, text in req.files.items():
            self.upload(box, text.encode("utf-8"), path)

    # ------------------------------------------------------------------ use

    def _container(self, box: Box) -> Container:
        return Container(self.api, box.id, UserIds(box.uid, box.gid), box.network)

    def _path(self, box: Box, path: str) -> str:
        if path.startswith("/"):
            return path
        if not box.workdir:
            raise SessionError(f"{path!r}: a relative path needs the sandbox's workdir, and it has none")
        return posixpath.join(box.workdir, path)

    def exec(self, box: Box, command: str, *, cwd: str | None = None, env: dict[str, str] | None = None,
             timeout_s: float | None = None, user: str | int | None = None) -> ExecOutcome:
        """`bash -c command`; a non-zero exit is a result, a sandbox that is gone or broken is
        error_type "sandbox", a timeout error_type "timeout". A paused sandbox is resumed first.
        In a task sandbox (a rollout's computer, borrowed or made here) only the task's user runs
        commands: root there could reach what verify reads (docs/integrity.md)."""
        who = box.user if user is None else ("root" if user in ("root", 0) else str(user))
        if box.kind == "task" and who not in (guest.USER, str(box.uid)):
            return ExecOutcome(None, f"shinken: refused: a task sandbox runs commands as {guest.USER!r} only, "
                               f"not {who!r} (the rollout's reward is read in it)", REFUSED_RC)
        return self._exec_as(box, command, who, cwd=cwd, env=env, timeout_s=timeout_s)

    def _exec_as(self, box: Box, command: str, who: str, *, cwd: str | None = None, env: dict[str, str] | None = None,
                 timeout_s: float | None = None) -> ExecOutcome:
        if box.paused:
            self.resume(box)
        nonce = "__shinken_split_" + secrets.token_hex(8)
        timeout = self.config.exec_timeout_s if timeout_s is None else float(timeout_s)
        argv = ["bash", "-c", SPLIT, "shinken-exec", command, nonce]
        workdir = self._path(box, cwd) if cwd else box.workdir
        merged = {**box.env, **(env or {})} or None
        c = self._container(box)
        try:
            try:
                res = c.exec(argv, timeout=timeout, user=who, env=merged, workdir=workdir, max_output=MAX_OUTPUT)
            except InfraError as exc:
                if "is paused" not in str(exc):
                    raise
                self.resume(box)  # paused by another process of the run
                res = c.exec(argv, timeout=timeout, user=who, env=merged, workdir=workdir, max_output=MAX_OUTPUT)
        except InfraError as exc:
            return ExecOutcome(None, str(exc), RUNTIME_RC, "sandbox")
        out, sep, err = res.output.rpartition(f"\n{nonce}\n")
        if not sep:
            out, err = res.output, ""
        if res.timed_out:
            return ExecOutcome(out, err + f"\n[shinken: timed out after {timeout:g}s]", RUNTIME_RC, "timeout")
        if res.exit_code is None:
            return ExecOutcome(out, err, RUNTIME_RC, "sandbox")
        if res.limit_hit:
            err += f"\n[shinken: container limits hit: oom_kills={res.oom_kills} pids_limit={res.pids_limit_hits}]"
        return ExecOutcome(out, err, res.exit_code)

    def upload(self, box: Box, data: bytes, path: str) -> None:
        if box.paused:
            self.resume(box)
        self._container(box).upload(data, self._path(box, path), user=box.user or "root")

    def download(self, box: Box, path: str) -> bytes:
        if box.paused:
            self.resume(box)
        return self._container(box).download(self._path(box, path))

    def status(self, box: Box) -> str:
        """The engine's state (created, running, paused, exited, ..., or gone), without waking it."""
        try:
            state: str = self.api.inspect_container(box.id)["State"]["Status"]
        except docker.errors.NotFound:
            return "gone"
        except docker.errors.APIError:
            return "unknown"
        return state

    def _freezer(self, box: Box, call: Any, done_words: str, what: str) -> None:
        """pause/unpause; the freezer can refuse under load (a process not frozen in time): retried."""
        for attempt in range(FREEZE_TRIES):
            try:
                call(box.id)
                return
            except docker.errors.NotFound as exc:
                raise infra(f"{what} sandbox {box.id[:12]}", exc) from None
            except docker.errors.APIError as exc:
                if done_words in str(exc).lower():
                    return
                if attempt == FREEZE_TRIES - 1:
                    raise infra(f"{what} sandbox {box.id[:12]}", exc) from None
                time.sleep(0.1 * 2 ** attempt)

    def pause(self, box: Box) -> None:
        self._freezer(box, self.api.pause, "already paused", "pausing")
        box.paused = True

    def resume(self, box: Box) -> None:
        self._freezer(box, self.api.unpause, "not paused", "resuming")
        box.paused = False

    def endpoint(self, box: Box, port: int) -> tuple[str, int]:
        if port not in box.ports:
            raise ValueError(f"sandbox port {port} was not declared in SandboxSpec.ports; declared: {list(box.ports)}")
        try:
            ports = self.api.inspect_container(box.id)["NetworkSettings"]["Ports"] or {}
        except docker.errors.APIError as exc:
            raise infra(f"inspecting sandbox {box.id[:12]}", exc) from None
        bindings = ports.get(f"{port}/tcp") or []
        if not bindings:
            raise RuntimeError(f"Docker shows no host binding for sandbox port {port}")
        host = bindings[0].get("HostIp") or self.config.publish_host
        if host in ("0.0.0.0", "::"):
            host = self.config.publish_host
        return host, int(bindings[0]["HostPort"])

    def close(self, box: Box) -> None:
        """Remove the sandbox (gone already counts as removed; safe to call again)."""
        self._remove(box.id)
        self.reaper.forget(box.id)

    def _remove(self, cid: str, fork: DockerFork | None = None) -> None:
        with self._lock:
            fork = self._forks.pop(cid, None) or fork
        if fork is not None:
            fork.close()
        else:
            remove_container(self.api, cid)

    def _remove_expired(self, cid: str, fork: DockerFork | None = None) -> None:
        """The reaper's removal: a sandbox (handed out or waiting in a pool) past its ttl_s."""
        self._remove(cid, fork)
        with self._lock:
            self._pool_expiry.pop(cid, None)

    def attach(self, descriptor: dict[str, Any]) -> Box:
        """The Box of a running (or paused) provider sandbox another process of the run made,
        opened by its owner secret: the descriptor's sandbox_id is `<container id>:<secret>`
        (serialize_handle's, or a resources server's seed `sandbox_handle`); a bare id is refused."""
        sid = descriptor.get("sandbox_id")
        if not isinstance(sid, str) or not sid:
            raise CreateFailed("connect: the descriptor has no sandbox_id")
        cid, secret = connect_secret.split(sid)
        try:
            info = self.api.inspect_container(cid)
        except docker.errors.NotFound:
            raise CreateFailed(f"connect: sandbox {cid[:12]} is gone") from None
        except docker.errors.APIError as exc:
            raise CreateFailed(f"connect: inspecting sandbox {cid[:12]}: {exc}") from None
        labels = (info.get("Config") or {}).get("Labels") or {}
        ours = labels.get(LABEL_MADE_BY) == MADE_BY
        # A rollout's computer that shinken's resources server made (its seed response's
        # sandbox_handle): a task fork, borrowed by an agent that drives it as a Gym sandbox.
        server_fork = labels.get(LABEL_KIND) == "fork" and bool(labels.get(goldens.LABEL_GOLDEN))
        if labels.get(LABEL_MANAGED) != "1" or not (ours or server_fork):
            raise CreateFailed(f"connect: container {cid[:12]} is not a shinken provider sandbox or task fork")
        refused = connect_secret.check(labels, secret)
        if refused:
            raise CreateFailed(f"connect: sandbox {cid[:12]} refused: {refused}")
        state = (info.get("State") or {}).get("Status")
        if state not in ("running", "paused"):
            raise CreateFailed(f"connect: sandbox {cid[:12]} is {state}, not running")
        if not ours:
            labels = {**labels, LABEL_SANDBOX: "task", LABEL_EXEC_USER: guest.USER,
                      LABEL_IDS: self._golden_ids(labels[goldens.LABEL_GOLDEN])}
        uid, _, gid = labels.get(LABEL_IDS, "0:0").partition(":")
        env = descriptor.get("env") or {}
        workdir = descriptor.get("workdir")
        return Box(info["Id"], labels.get(LABEL_SANDBOX, "image"), labels.get(LABEL_EXEC_USER, ""), int(uid or 0),
                   int(gid or 0), (info.get("HostConfig") or {}).get("NetworkMode") != "none",
                   workdir if isinstance(workdir, str) else None,
                   {str(k): str(v) for k, v in env.items()} if isinstance(env, dict) else {},
                   ports=tuple(int(p) for p in descriptor.get("ports") or ()),
                   task_id=labels.get("shinken.task"), tier=descriptor.get("tier"),
                   expires=_expiry(labels), paused=state == "paused", secret=secret)

    def _golden_ids(self, golden_id: str) -> str:
        """"<uid>:<gid>" of the task user recorded in a golden image's labels (1000:1000 when unread)."""
        try:
            img_labels = (self.api.inspect_image(golden_id).get("Config") or {}).get("Labels") or {}
            meta = json.loads(img_labels.get(goldens.LABEL_GOLDEN_META) or "{}")
            return f"{int(meta.get('uid', 1000))}:{int(meta.get('gid', 1000))}"
        except (docker.errors.APIError, ValueError, TypeError):
            return "1000:1000"

    def shutdown(self) -> None:
        """Drain the warm pools, then close the engine connection (sandboxes handed out stay: each
        is closed by its own close(); gc reclaims them past their owner or ttl_s)."""
        with self._lock:
            self._closed = True
        self.reaper.stop()
        self.drain()
        with self._web_lock:
            web, self._web_run = self._web_run, None
        if web is not None:
            try:
                web.close()  # the hub it started and the run network (forks handed out lose the hub)
            except (InfraError, ShinkenError) as exc:
                log.warning("closing the mock web hub: %s", exc)
        with self._lock:
            providers = list(self._providers.values())
        for p in providers:  # their leases on goldens: the goldens stay, for this engine's other users
            try:
                p.let_go_of_goldens()
            except InfraError as exc:
                log.warning("releasing the goldens: %s", exc)
        with self._lock:
            client, self._client = self._client, None
            self._providers.clear()  # they hold the client; made again on the next create
            self._goldens.clear()  # their leases are gone: held again at the next create
        if client is not None:
            client.close()


def _expiry(labels: dict[str, str]) -> float | None:
    try:
        return float(labels[LABEL_EXPIRES])
    except (KeyError, ValueError):
        return None


def check_request_paths(req: Request) -> None:
    """Paths of spec.files must be absolute or have a workdir to be relative to."""
    for path in req.files:
        if not path.startswith("/") and not req.workdir:
            raise ConfigProblem(f"spec.files[{path!r}]: a relative path needs spec.workdir")
    if req.workdir is not None and not req.workdir.startswith("/"):
        raise ConfigProblem(f"spec.workdir {req.workdir!r}: must be an absolute path")


__all__ = ["Box", "CreateFailed", "ExecOutcome", "NotReady", "Request", "SandboxHost", "check_request_paths",
           "MADE_BY"]
