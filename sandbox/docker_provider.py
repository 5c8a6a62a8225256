"""The filesystem-tier sandbox on Docker: golden images built from a bundle's setup,
cheap forks of them, exec/upload/download with timeouts, and the reward run.

Speed: everything goes through one low-level APIClient (keep-alive connection pool);
a fork is exactly create + start (two API calls, no inspect); an exec is exec_create +
exec_start with the exit status read from a marker line, not from exec_inspect."""

from __future__ import annotations

import hashlib
import io
import json
import os
import re
import secrets
import socket
import tarfile
import threading
import time
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Iterable

import docker
import docker.errors

from shinken.bundles.model import Bundle, SetupStep
from shinken.sandbox import guest
from shinken.sandbox.api import (
    ExecResult,
    FidelityError,
    Golden,
    InfraError,
    RewardResult,
    SessionError,
    SetupError,
    tail,
)
from shinken.sandbox.ownership import (
    LABEL_BASE_IMAGE,
    LABEL_BUNDLE_HASH,
    LABEL_KIND,
    Owner,
    labels_for,
)
from shinken.sandbox.policy import Limits, split_setup, task_needs
from shinken.sandbox.reward import classify_reward_run

GOLDEN_FORMAT = "2"  # bump when the build procedure changes: old goldens stop matching
LABEL_GOLDEN_FORMAT = "shinken.golden_format"
LABEL_GOLDEN_META = "shinken.golden_meta"
LABEL_GOLDEN = "shinken.golden"  # on forks: the golden image id they came from
EXEC_GRACE_S = 10.0
MARKER_DRAIN_S = 0.3  # the API-side guard fires this long after the in-container timeout
REPLAY_SLEEP_CAP_S = 2.0  # a config `sleep` replayed after `open` on every fork is capped
DESKTOP_UP_TIMEOUT_S = 60.0
DELETE_RETRIES = 4
DEFAULT_USER = "user"
HOME = "/home/user"


def _now() -> float:
    return time.monotonic()


def _infra(what: str, exc: BaseException) -> InfraError:
    return InfraError(f"{what}: {type(exc).__name__}: {exc}")


def _tag_component(task_id: str) -> str:
    s = re.sub(r"[^a-z0-9._-]+", "-", task_id.lower()).strip("-._") or "task"
    return s[:100]


@dataclass
class _Ids:
    uid: int = 1000
    gid: int = 1000


class _Box:
    """One running container and what can be done in it (shared by build and fork)."""

    def __init__(self, provider: "DockerProvider", cid: str, ids: _Ids, network: bool) -> None:
        self._p = provider
        self.id = cid
        self._ids = ids
        self._network = network
        self._closed = False

    # --- exec ---------------------------------------------------------------------
    def _check_open(self) -> None:
        if self._closed:
            raise SessionError(f"container {self.id[:12]} is closed")

    def exec(self, cmd: str | list[str], *, timeout: float = 60, user: str = DEFAULT_USER,
             env: dict[str, str] | None = None, workdir: str | None = None,
             max_output: int = 64_000) -> ExecResult:
        self._check_open()
        argv = ["bash", "-lc", cmd] if isinstance(cmd, str) else [str(a) for a in cmd]
        if not argv:
            raise SessionError("exec of an empty command")
        return self._p._exec(self.id, argv, timeout=timeout, user=user, env=env, workdir=workdir,
                             max_output=max_output)

    def _launch(self, argv: list[str], *, user: str = DEFAULT_USER) -> None:
        """Start argv in its own session and return at once."""
        api = self._p.api
        try:
            ex = api.exec_create(self.id, ["setsid", "bash", "-c", guest.LAUNCH, "shinken-launch", *argv],
                                 stdout=False, stderr=False, user=user, workdir=HOME)
            api.exec_start(ex["Id"], detach=True)
        except docker.errors.APIError as exc:
            raise _infra(f"launch in {self.id[:12]}", exc) from None

    # --- files --------------------------------------------------------------------
    def upload(self, data: bytes, dest: str, mode: int = 0o644, user: str = DEFAULT_USER) -> None:
        self._check_open()
        if not dest.startswith("/"):
            raise SessionError(f"upload destination must be absolute: {dest!r}")
        uid, gid = (0, 0) if user == "root" else (self._ids.uid, self._ids.gid)
        parent, name = os.path.split(dest.rstrip("/"))
        buf = io.BytesIO()
        with tarfile.open(fileobj=buf, mode="w", format=tarfile.PAX_FORMAT) as tar:
            info = tarfile.TarInfo(name)
            info.size, info.mode, info.uid, info.gid, info.mtime = len(data), mode, uid, gid, int(time.time())
            tar.addfile(info, io.BytesIO(data))
        payload = buf.getvalue()
        api = self._p.api
        try:
            api.put_archive(self.id, parent or "/", payload)
            return
        except docker.errors.NotFound:
            pass  # the folder does not exist yet (or the container is gone: mkdir tells)
        except docker.errors.APIError as exc:
            raise _infra(f"upload {dest}", exc) from None
        res = self.exec(["mkdir", "-p", parent], timeout=30, user=user)
        if not res.ok and user != "root":
            res = self.exec(["bash", "-c", 'mkdir -p "$1" && chown "$2" "$1"', "-", parent,
                             f"{uid}:{gid}"], timeout=30, user="root")
        if not res.ok:
            raise SessionError(f"upload {dest}: cannot create {parent}: {res.output.strip()[-300:]}")
        try:
            api.put_archive(self.id, parent, payload)
        except docker.errors.APIError as exc:
            raise _infra(f"upload {dest}", exc) from None

    def download(self, path: str) -> bytes:
        self._check_open()
        try:
            stream, _stat = self._p.api.get_archive(self.id, path)
            raw = b"".join(stream)
        except docker.errors.NotFound:
            raise FileNotFoundError(f"{path} (in sandbox {self.id[:12]})") from None
        except docker.errors.APIError as exc:
            raise _infra(f"download {path}", exc) from None
        with tarfile.open(fileobj=io.BytesIO(raw)) as tar:
            for m in tar:
                if m.isfile():
                    fh = tar.extractfile(m)
                    return fh.read() if fh else b""
        raise IsADirectoryError(f"{path} is not a regular file (in sandbox {self.id[:12]})")

    # --- setup steps --------------------------------------------------------------
    def run_steps(self, steps: Iterable[SetupStep], bundle: Bundle, *, where: str = "config",
                  deadline: float | None = None, sleep_cap: float | None = None) -> None:
        for step in steps:
            remaining = 600.0 if deadline is None else deadline - _now()
            if remaining <= 0:
                raise SetupError(step.index, step.type, "setup time budget exhausted", where=where)
            self._run_step(step, bundle, where, remaining, sleep_cap)

    def _run_step(self, step: SetupStep, bundle: Bundle, where: str, budget: float,
                  sleep_cap: float | None) -> None:
        p = step.parameters
        fail = lambda detail, out="": SetupError(step.index, step.type, detail, tail(out), where=where)  # noqa: E731
        if step.type == "download":
            files = p.get("files")
            if not isinstance(files, list):
                raise fail("parameters.files is not a list")
            for f in files:
                url = f.get("url") if isinstance(f, dict) else None
                dest = f.get("path") if isinstance(f, dict) else None
                if not isinstance(url, str) or not isinstance(dest, str) or not dest.startswith("/"):
                    raise fail(f"bad file entry {f!r}: needs url and an absolute path")
                if url.startswith("./"):
                    name = url[2:]
                    if name not in bundle.files:  # only regular files of the bundle folder, no ../
                        raise fail(f"{url} is not a file of the bundle")
                    try:
                        self.upload(bundle.file_path(name).read_bytes(), dest)
                    except (SessionError, OSError) as exc:
                        raise fail(f"cannot place {url} at {dest}: {exc}") from None
                elif url.startswith(("http://", "https://")):
                    if not self._network:
                        raise fail(f"{url} is remote and this sandbox has no network "
                                   "(only mock-web tasks get one); bundle the file instead")
                    res = self.exec(["python3", "-c", guest.FETCH_URL, url, dest], timeout=min(budget, 300))
                    if not res.ok:
                        raise fail(f"fetching {url} failed (exit {res.exit_code})", res.output)
                else:
                    raise fail(f"unsupported url {url!r}")
        elif step.type == "execute":
            cmd = step.command()
            if cmd is None or (isinstance(cmd, list) and not cmd):
                raise fail("parameters.command is missing")
            res = self.exec(cmd if isinstance(cmd, str) else [str(c) for c in cmd], timeout=budget,
                            workdir=HOME)
            limits = (f" (container limits hit: oom_kills={res.oom_kills}, pids_limit={res.pids_limit_hits})"
                      if res.limit_hit else "")
            if res.timed_out:
                raise fail(f"timed out after {budget:.0f}s{limits}", res.output)
            if res.exit_code != 0:
                raise fail(f"exited with status {res.exit_code}{limits}", res.output)
        elif step.type == "launch":
            cmd = step.command()
            if cmd is None or (isinstance(cmd, list) and not cmd):
                raise fail("parameters.command is missing")
            self._launch(["bash", "-lc", cmd] if isinstance(cmd, str) else [str(c) for c in cmd])
        elif step.type == "open":
            path = p.get("path")
            if not isinstance(path, str) or not path:
                raise fail("parameters.path is missing")
            self._launch(["bash", "-c", guest.OPEN, "shinken-open", path])
        elif step.type == "sleep":
            try:
                secs = float(p.get("seconds", 0))
            except (TypeError, ValueError):
                raise fail(f"bad seconds {p.get('seconds')!r}") from None
            secs = max(0.0, min(secs, budget, sleep_cap if sleep_cap is not None else secs))
            time.sleep(secs)
        else:
            raise fail(f"unknown step type {step.type!r}")

    def desktop_up(self) -> None:
        res = self.exec(["shinken-desktop-up"], timeout=DESKTOP_UP_TIMEOUT_S)
        if not res.ok:
            raise SetupError(-1, "desktop", f"shinken-desktop-up failed (exit {res.exit_code}, "
                             f"timed out: {res.timed_out})", tail(res.output), where="desktop")

    def wait_desktop_boot(self) -> None:
        """Wait for the desktop started by the container command (see guest.DESKTOP_BOOT)."""
        res = self.exec(["bash", "-c", guest.DESKTOP_WAIT], timeout=DESKTOP_UP_TIMEOUT_S)
        if not res.ok:
            raise SetupError(-1, "desktop", f"shinken-desktop-up failed (exit {res.exit_code}, "
                             f"timed out: {res.timed_out})", tail(res.output), where="desktop")

    def snapshot(self, clean: bool) -> dict[str, Any]:
        res = self.exec(["python3", "-c", guest.snapshot_script(clean)], timeout=60, user="root")
        if not res.ok:
            raise InfraError(f"process snapshot failed: {res.output.strip()[-300:]}")
        return json.loads(res.output.strip().splitlines()[-1])


class DockerFork(_Box):
    """A disposable container started from a golden image."""

    def __init__(self, provider: "DockerProvider", cid: str, golden: Golden, ids: _Ids) -> None:
        super().__init__(provider, cid, ids, golden.network)
        self.golden = golden

    def run_reward(self, bundle: Bundle, *, timeout: float = 120) -> RewardResult:
        """evaluator.postconfig, then reward.py from a root-owned folder as `user` with the
        sandbox's python3. A failing postconfig step raises SetupError (where=
        "evaluator.postconfig"); reward failures are typed in the result."""
        self._check_open()
        t0 = _now()
        self.run_steps(bundle.postconfig, bundle, where="evaluator.postconfig", deadline=t0 + max(timeout, 60))
        rp = bundle.reward_path
        if rp is None:
            return RewardResult(None, "crash", None, None, "bundle has no reward.py", 0.0)
        self._put_reward(rp.read_bytes())
        t1 = _now()
        res = self.exec(["python3", f"{guest.REWARD_DIR}/reward.py"], timeout=timeout, workdir=HOME)
        reward, error, deviation = classify_reward_run(res.output, res.exit_code, timed_out=res.timed_out,
                                                       limit_hit=res.limit_hit)
        if res.timed_out or res.limit_hit:
            self._kill_user_processes()
        out = res.output
        if res.limit_hit:
            out += f"\n[shinken: container limits hit: oom_kills={res.oom_kills} pids_limit={res.pids_limit_hits}]"
        return RewardResult(reward, error, deviation, res.exit_code, tail(out), _now() - t1)

    def _kill_user_processes(self) -> None:
        """After a reward that hit its timeout or a limit: kill every process of `user`
        (a bomb that escaped the timeout's process group with setsid included). The fork
        is spent after this (the desktop runs as `user` too). Best effort: with the pids
        limit exhausted even this exec may fail, and close() removes the container anyway."""
        try:
            ex = self._p.api.exec_create(self.id, ["kill", "-KILL", "-1"], user=DEFAULT_USER,
                                         stdout=False, stderr=False)
            self._p.api.exec_start(ex["Id"], detach=True)
        except docker.errors.APIError:
            pass

    def _put_reward(self, data: bytes) -> None:
        buf = io.BytesIO()
        now = int(time.time())
        with tarfile.open(fileobj=buf, mode="w", format=tarfile.PAX_FORMAT) as tar:
            d = tarfile.TarInfo(os.path.basename(guest.REWARD_DIR))
            d.type, d.mode, d.mtime = tarfile.DIRTYPE, 0o755, now
            tar.addfile(d)
            f = tarfile.TarInfo(os.path.basename(guest.REWARD_DIR) + "/reward.py")
            f.size, f.mode, f.mtime = len(data), 0o644, now
            tar.addfile(f, io.BytesIO(data))
        try:
            self._p.api.put_archive(self.id, os.path.dirname(guest.REWARD_DIR), buf.getvalue())
        except docker.errors.APIError as exc:
            raise _infra("placing reward.py", exc) from None

    def close(self) -> None:
        if self._closed:
            return
        self._closed = True
        self._p._remove_container(self.id)
        self._p._forget(self)

    def __enter__(self) -> "DockerFork":
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()


class ForkPool:
    """K ready forks of one golden, refilled by a background thread, so a rollout
    starts without waiting for create/start/desktop."""

    def __init__(self, provider: "DockerProvider", golden: Golden, size: int) -> None:
        if size < 1:
            raise SessionError("pool size must be >= 1")
        self._p, self.golden, self.size = provider, golden, size
        self._ready: list[DockerFork] = []
        self._cv = threading.Condition()
        self._closed = False
        self._error: BaseException | None = None
        self._thread = threading.Thread(target=self._refill, name=f"shinken-pool-{golden.tag}", daemon=True)
        self._thread.start()

    def _refill(self) -> None:
        failures = 0
        while True:
            with self._cv:
                while not self._closed and len(self._ready) >= self.size:
                    self._cv.wait()
                if self._closed:
                    return
            try:
                fork = self._p.fork(self.golden, kind="pool")
                failures = 0
            except BaseException as exc:  # kept and re-raised to acquire(): never silent
                failures += 1
                with self._cv:
                    self._error = exc
                    self._cv.notify_all()
                time.sleep(min(5.0, 0.2 * 2 ** failures))
                continue
            with self._cv:
                if self._closed:
                    fork.close()
                    return
                self._ready.append(fork)
                self._error = None
                self._cv.notify_all()

    def acquire(self, timeout: float | None = 120) -> DockerFork:
        deadline = None if timeout is None else _now() + timeout
        with self._cv:
            while not self._ready:
                if self._closed:
                    raise SessionError("pool is closed")
                if self._error is not None and isinstance(self._error, (SetupError, SessionError)):
                    raise self._error  # the golden cannot be forked; waiting will not help
                left = None if deadline is None else deadline - _now()
                if left is not None and left <= 0:
                    err = self._error
                    raise InfraError(f"no fork ready within {timeout}s" + (f" (last error: {err})" if err else ""))
                self._cv.wait(left)
            fork = self._ready.pop(0)
            self._cv.notify_all()
            return fork

    @property
    def ready(self) -> int:
        with self._cv:
            return len(self._ready)

    def close(self) -> None:
        with self._cv:
            if self._closed:
                return
            self._closed = True
            forks, self._ready = self._ready, []
            self._cv.notify_all()
        self._thread.join(timeout=120)
        for f in forks:
            f.close()
        self._p._pools.discard(self)

    def __enter__(self) -> "ForkPool":
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()


class DockerProvider:
    tier = "filesystem"

    def __init__(self, client: docker.DockerClient | None = None, *, run_id: str | None = None,
                 owner: Owner | None = None, limits: Limits | None = None) -> None:
        try:
            self.client = client or docker.from_env()  # honours DOCKER_HOST / DOCKER_TLS_*
        except docker.errors.DockerException as exc:
            raise _infra("cannot reach the Docker engine (is dockerd running? DOCKER_HOST?)", exc) from None
        self.api = self.client.api
        self.run_id = run_id
        self.owner = owner or Owner.current()
        self.limits = limits or Limits()
        self._forks: set[DockerFork] = set()
        self._pools: set[ForkPool] = set()
        self._lock = threading.Lock()
        self._host_configs: dict[bool, dict[str, Any]] = {}

    # --- container plumbing ---------------------------------------------------------
    def _host_config(self, network: bool) -> dict[str, Any]:
        hc = self._host_configs.get(network)
        if hc is None:
            lim = self.limits
            hc = self.api.create_host_config(
                init=True,
                cap_drop=["ALL"],
                cap_add=list(lim.cap_add),
                security_opt=["no-new-privileges"],
                pids_limit=lim.pids,
                mem_limit=lim.mem,
                memswap_limit=lim.mem,  # no swap: a hog is OOM-killed, not slowed to a crawl
                nano_cpus=int(lim.cpus * 1e9),
                shm_size=lim.shm_size,
                network_mode="bridge" if network else "none",
            )
            self._host_configs[network] = hc
        return hc

    def _start(self, image_id: str, labels: dict[str, str], network: bool, *, desktop: bool = False) -> str:
        command = ["bash", "-c", guest.DESKTOP_BOOT] if desktop else ["sleep", "infinity"]
        try:
            c = self.api.create_container(image_id, command=command, labels=labels,
                                          host_config=self._host_config(network), detach=True)
        except docker.errors.ImageNotFound as exc:
            raise _infra(f"image {image_id} is gone", exc) from None
        except docker.errors.APIError as exc:
            raise _infra("creating a sandbox container", exc) from None
        cid = c["Id"]
        try:
            self.api.start(cid)
        except docker.errors.APIError as exc:
            self._remove_container(cid)
            raise _infra("starting a sandbox container", exc) from None
        return cid

    def _remove_container(self, cid: str) -> None:
        for attempt in range(DELETE_RETRIES):
            try:
                self.api.remove_container(cid, force=True, v=True)
                return
            except docker.errors.NotFound:
                return
            except docker.errors.APIError as exc:
                if "already in progress" in str(exc):
                    return
                if attempt == DELETE_RETRIES - 1:
                    raise _infra(f"removing container {cid[:12]} (it keeps its labels; `shinken gc` finds it)", exc) from None
                time.sleep(0.2 * 2 ** attempt)

    def _exec(self, cid: str, argv: list[str], *, timeout: float, user: str, env: dict[str, str] | None,
              workdir: str | None, max_output: int) -> ExecResult:
        nonce = "__shinken_" + secrets.token_hex(8)
        t_in = max(0.001, float(timeout))
        full = ["bash", "-c", guest.OUTER, "shinken", f"{t_in:.3f}", nonce, *argv]
        t0 = _now()
        try:
            ex = self.api.exec_create(cid, full, stdout=True, stderr=True, user=user, environment=env,
                                      workdir=workdir)
            sock = self._exec_stream(ex["Id"])
        except docker.errors.NotFound as exc:
            raise _infra(f"container {cid[:12]} vanished", exc) from None
        except docker.errors.APIError as exc:
            raise _infra(f"exec in {cid[:12]}", exc) from None
        data, guard_hit, total = _read_frames(sock, t0 + t_in + EXEC_GRACE_S, max_output + 256, nonce.encode())
        duration = _now() - t0
        text = data.decode("utf-8", "replace")
        exit_code: int | None
        oom = pids = 0
        # The wrapper sends the command's stdout to stderr, so its output precedes the
        # marker; a background process it left may still write after it: cut the marker
        # line out and keep what follows.
        m = re.search(rf"\n?{nonce} (-?\d+) (-?\d+) (-?\d+)\n", text)
        if m:
            exit_code, oom, pids = int(m.group(1)), int(m.group(2)), int(m.group(3))
            text = text[: m.start()] + text[m.end():]
        elif guard_hit:
            exit_code = None
        else:
            # The wrapper itself died (killed by the command, OOM, container stopped).
            exit_code = self._exec_exit(cid, ex["Id"])
        timed_out = guard_hit or (exit_code == 137 and duration >= t_in * 0.98)
        if timed_out:
            exit_code = None
        truncated = len(text) > max_output or total > len(data)
        if len(text) > max_output:
            text = text[-max_output:]
        return ExecResult(exit_code, text, timed_out, duration, truncated, oom, pids)

    def _exec_stream(self, exec_id: str) -> Any:
        """Start an exec and return the buffered reader of its hijacked connection.
        Reading the raw socket under it (what exec_start(socket=True) returns) loses
        whatever the HTTP parser already buffered past the response headers: the
        first output frames of fast commands."""
        api = self.api
        res = api._post_json(api._url("/exec/{0}/start", exec_id), headers={"Connection": "Upgrade", "Upgrade": "tcp"},
                             data={"Tty": False, "Detach": False}, stream=True)
        api._raise_for_status(res)
        fp = res.raw._fp.fp  # BufferedReader over the socket; holds any over-read bytes
        fp._shinken_response = res  # keep the response (and its connection) alive
        return fp

    def _exec_exit(self, cid: str, exec_id: str) -> int | None:
        for _ in range(20):
            try:
                info = self.api.exec_inspect(exec_id)
            except docker.errors.APIError as exc:
                raise _infra(f"container {cid[:12]} vanished during exec", exc) from None
            if not info.get("Running"):
                code = info.get("ExitCode")
                if code is None:
                    break
                return int(code)
            time.sleep(0.05)
        try:
            state = self.api.inspect_container(cid)["State"]
        except docker.errors.APIError as exc:
            raise _infra(f"container {cid[:12]} vanished during exec", exc) from None
        if not state.get("Running"):
            raise InfraError(f"container {cid[:12]} stopped during exec (OOMKilled={state.get('OOMKilled')})")
        return None

    def _forget(self, fork: DockerFork) -> None:
        with self._lock:
            self._forks.discard(fork)

    # --- images -----------------------------------------------------------------
    def image_id(self, image: str) -> str:
        try:
            return self.api.inspect_image(image)["Id"]
        except docker.errors.ImageNotFound:
            raise InfraError(f"image {image} not found; build it with `shinken image build`") from None
        except docker.errors.APIError as exc:
            raise _infra(f"inspecting image {image}", exc) from None

    def _find_golden(self, bundle: Bundle, base_id: str) -> Golden | None:
        filters = {"label": [f"{LABEL_KIND}=golden", f"{LABEL_BUNDLE_HASH}={bundle.bundle_hash}",
                             f"{LABEL_BASE_IMAGE}={base_id}", f"{LABEL_GOLDEN_FORMAT}={GOLDEN_FORMAT}"]}
        try:
            found = self.api.images(filters=filters)
        except docker.errors.APIError as exc:
            raise _infra("listing golden images", exc) from None
        if not found:
            return None
        img = max(found, key=lambda i: i.get("Created", 0))
        labels = img.get("Labels") or {}
        try:
            meta = json.loads(labels.get(LABEL_GOLDEN_META, "{}"))
        except json.JSONDecodeError:
            return None
        g = self._golden_from(bundle, img["Id"], base_id, meta)
        g.tag = next((t for t in img.get("RepoTags") or [] if t.startswith("shinken-golden/")), g.tag)
        g.reused = True
        return g

    def _golden_from(self, bundle: Bundle, image_id: str, base_id: str, meta: dict[str, Any]) -> Golden:
        needs = task_needs(bundle)
        _, replay = split_setup(bundle.setup)
        g = Golden(
            image_id=image_id,
            tag=self._golden_tag(bundle, base_id),
            task_id=bundle.id,
            bundle_hash=bundle.bundle_hash,
            base_image_id=base_id,
            needs_desktop=needs.desktop,
            post_fork=[*replay, *bundle.post_fork],
            lost_processes=list(meta.get("lost_processes", [])),
            network=needs.network,
            build_seconds=float(meta.get("build_seconds", 0.0)),
            reused=False,
            state_fidelity="filesystem",
        )
        g.user_uid, g.user_gid = int(meta.get("uid", 1000)), int(meta.get("gid", 1000))
        return g

    @staticmethod
    def _golden_tag(bundle: Bundle, base_id: str) -> str:
        h = hashlib.sha256(f"{bundle.bundle_hash}\0{base_id}".encode()).hexdigest()[:12]
        return f"shinken-golden/{_tag_component(bundle.id)}:{h}"

    def ensure_golden(self, bundle: Bundle, image: str, *, accept_filesystem: bool = False,
                      setup_timeout: float = 600) -> Golden:
        """The committed post-setup image of `bundle` on `image`, built once and then
        found again by its labels (bundle hash + base image id)."""
        if not bundle.ok:
            bad = "; ".join(f"{d.code}: {d.detail}" for d in bundle.defects if d.fatal)
            raise SetupError(-1, "bundle", f"{bundle.id}: defective bundle ({bad})", where="bundle")
        if bundle.state_fidelity == "process_memory" and not accept_filesystem:
            raise FidelityError(
                f"{bundle.id}: the task needs process_memory state fidelity (imported bundles default to it) "
                "but the Docker tier keeps only the filesystem across a fork; pass accept_filesystem=True "
                "(or declare shinken_state_fidelity: filesystem) if replaying launch/open steps is enough")
        base_id = self.image_id(image)
        found = self._find_golden(bundle, base_id)
        if found is not None:
            return found
        return self._build_golden(bundle, base_id, setup_timeout)

    def _build_golden(self, bundle: Bundle, base_id: str, setup_timeout: float) -> Golden:
        t0 = _now()
        needs = task_needs(bundle)
        build_steps, _ = split_setup(bundle.setup)
        extra = {LABEL_BUNDLE_HASH: bundle.bundle_hash, LABEL_BASE_IMAGE: base_id}
        labels = labels_for("build", task=bundle.id, run=self.run_id, owner=self.owner, extra=extra)
        cid = self._start(base_id, labels, needs.network, desktop=needs.desktop)
        box = _Box(self, cid, _Ids(), needs.network)
        try:
            ids = box.exec(["bash", "-c", "id -u user; id -g user"], timeout=30, user="root")
            if not ids.ok:
                raise SetupError(-1, "image", "the image has no user `user`", tail(ids.output), where="image")
            uid, gid = (int(x) for x in ids.output.split()[:2])
            box._ids = _Ids(uid, gid)
            if needs.desktop:  # setup may drive the GUI; its processes join the baseline
                box.wait_desktop_boot()
            baseline = {p["pid"] for p in box.snapshot(clean=False)["procs"]}
            box.run_steps(build_steps, bundle, where="config", deadline=t0 + setup_timeout)
            snap = box.snapshot(clean=True)
            launched = set(snap["launched"])
            lost = [p["args"] for p in snap["procs"]
                    if p["pid"] not in baseline and p["sid"] not in launched and p["pid"] != 1]
            build_seconds = _now() - t0
            meta = {"uid": uid, "gid": gid, "lost_processes": lost, "build_seconds": round(build_seconds, 3),
                    "needs_desktop": needs.desktop, "network": needs.network,
                    "replay": [s.to_json() for s in split_setup(bundle.setup)[1] + bundle.post_fork]}
            glabels = labels_for("golden", task=bundle.id, run=self.run_id, owner=self.owner,
                                 extra={**extra, LABEL_GOLDEN_FORMAT: GOLDEN_FORMAT,
                                        LABEL_GOLDEN_META: json.dumps(meta, separators=(",", ":"))})
            golden = self._golden_from(bundle, "", base_id, meta)
            repo, tag = golden.tag.split(":")
            try:
                res = self.api.commit(cid, repository=repo, tag=tag, conf={"Labels": glabels})
            except docker.errors.APIError as exc:
                raise _infra(f"committing the golden of {bundle.id}", exc) from None
            golden.image_id = res["Id"]
            golden.build_seconds = _now() - t0
            return golden
        finally:
            self._remove_container(cid)

    def delete_golden(self, golden_or_image_id: Golden | str) -> None:
        """Remove a golden image (explicit; goldens are never removed implicitly). This
        provider's forks of it are closed first; failures are retried, then raised."""
        image_id = golden_or_image_id.image_id if isinstance(golden_or_image_id, Golden) else golden_or_image_id
        with self._lock:
            mine = [f for f in self._forks if f.golden.image_id == image_id]
        for f in mine:
            f.close()
        try:
            info = self.api.inspect_image(image_id)
        except docker.errors.ImageNotFound:
            return
        except docker.errors.APIError as exc:
            raise _infra(f"inspecting golden {image_id}", exc) from None
        if (info.get("Config") or {}).get("Labels", {}).get(LABEL_KIND) != "golden":
            raise SessionError(f"{image_id} is not a shinken golden image; refusing to delete it")
        last: BaseException | None = None
        for attempt in range(DELETE_RETRIES):
            try:
                self.api.remove_image(image_id, force=True, noprune=False)
                return
            except docker.errors.ImageNotFound:
                return
            except docker.errors.APIError as exc:
                last = exc
                time.sleep(0.25 * 2 ** attempt)
        raise InfraError(f"could not delete golden {image_id} after {DELETE_RETRIES} attempts: {last}; it keeps "
                         "its labels, so `shinken gc --include-goldens` finds it later")

    # --- forks --------------------------------------------------------------------
    def fork(self, golden: Golden, *, replay: bool = True, network: bool | None = None,
             kind: str = "fork") -> DockerFork:
        """A running container from the golden, desktop up when the task needs it and the
        process-starting steps replayed (unless replay=False)."""
        net = golden.network if network is None else network
        labels = labels_for(kind, task=golden.task_id, run=self.run_id, owner=self.owner,
                            extra={LABEL_BUNDLE_HASH: golden.bundle_hash, LABEL_GOLDEN: golden.image_id})
        cid = self._start(golden.image_id, labels, net, desktop=golden.needs_desktop)
        fork = DockerFork(self, cid, golden, _Ids(golden.user_uid, golden.user_gid))
        fork._network = net
        with self._lock:
            self._forks.add(fork)
        try:
            if golden.needs_desktop:
                fork.wait_desktop_boot()
            if replay and golden.post_fork:
                fork.run_steps(golden.post_fork, _NO_FILES, where="post_fork", sleep_cap=REPLAY_SLEEP_CAP_S)
        except BaseException:
            fork.close()
            raise
        return fork

    def pool(self, golden: Golden, size: int) -> ForkPool:
        p = ForkPool(self, golden, size)
        with self._lock:
            self._pools.add(p)
        return p

    def close(self) -> None:
        """Remove every fork and pool this provider made (goldens stay: they are a cache)."""
        with self._lock:
            pools, self._pools = list(self._pools), set()
        for p in pools:
            p.close()
        with self._lock:
            forks = list(self._forks)
        errors = []
        for f in forks:
            try:
                f.close()
            except InfraError as exc:
                errors.append(str(exc))
        if errors:
            raise InfraError("; ".join(errors))

    def __enter__(self) -> "DockerProvider":
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()


# Post-fork replay only has launch/open/sleep steps, which read no bundle files.
_NO_FILES = Bundle(id="", path=Path("/nonexistent"), layout="demo", task_file=None,
                   raw={}, files={}, bundle_hash="")


def _read_frames(sock: Any, deadline: float, cap: int, marker: bytes = b"") -> tuple[bytes, bool, int]:
    """Read the multiplexed exec stream until EOF or `deadline`. Keeps the last `cap`
    bytes (stdout and stderr interleaved in arrival order). Returns (data, guard_hit,
    total bytes received).

    Once the wrapper's marker line has arrived the command is over; a background process
    it left behind may still hold the output pipe open (EOF never comes), so reading stops
    MARKER_DRAIN_S later (late stdout frames still arrive in that window)."""
    raw = sock.raw  # SocketIO
    raw = getattr(raw, "_sock", raw)
    buf = bytearray()
    pending = b""
    total = 0
    marker_seen = False

    def recv(n: int) -> bytes:
        left = deadline - _now()
        if left <= 0:
            raise TimeoutError
        raw.settimeout(left)
        return sock.read1(n)

    try:
        while True:
            while len(pending) < 8:
                chunk = recv(65536)
                if not chunk:
                    return bytes(buf[-cap:]), False, total
                pending += chunk
            size = int.from_bytes(pending[4:8], "big")
            pending = pending[8:]
            while len(pending) < size:
                chunk = recv(max(65536, size - len(pending)))
                if not chunk:
                    buf += pending
                    return bytes(buf[-cap:]), False, total + len(pending)
                pending += chunk
            frame = pending[:size]
            buf += frame
            total += size
            pending = pending[size:]
            if marker and marker in frame and not marker_seen:
                marker_seen = True
                deadline = min(deadline, _now() + MARKER_DRAIN_S)
            if len(buf) > 2 * cap:
                del buf[: len(buf) - cap]
    except (TimeoutError, socket.timeout):
        return bytes(buf[-cap:]), not marker_seen, total
    except OSError:
        return bytes(buf[-cap:]), False, total
    finally:
        try:
            sock._shinken_response.close()
        except (OSError, AttributeError):
            pass
