"""One running sandbox container and what can be done in it: exec with a timeout,
upload/download, launch, setup steps, desktop boot wait, process snapshot. Shared by the
golden build and by forks; creating and removing containers is here too.

Speed: an exec is exec_create + a streamed exec_start, with the exit status read from a
marker line the wrapper prints (guest.OUTER), not from exec_inspect."""

from __future__ import annotations

import io
import json
import os
import re
import secrets
import tarfile
import time
from collections.abc import Callable, Iterable
from dataclasses import dataclass
from typing import Any

import docker.errors

from shinken.bundles.model import Bundle, SetupStep
from shinken.sandbox import guest, steps
from shinken.sandbox.api import DiskFull, ExecResult, ForkLost, InfraError, SessionError, SetupError, tail
from shinken.sandbox.docker_client import create_container
from shinken.sandbox.docker_stream import open_exec_stream, read_frames
from shinken.sandbox.exec_channel import ExecChannel

EXEC_GRACE_S = 10.0  # the API-side guard fires this long after the in-container timeout
DESKTOP_UP_TIMEOUT_S = 60.0
DESKTOP_LATE_EXIT = 3  # shinken-desktop-up: one of its waits ran out
DELETE_RETRIES = 4
KILL_WAIT_S = 10.0  # how long a fallback kill of a failed run's processes is waited for


def infra(what: str, exc: BaseException) -> InfraError:
    """The engine failed `what`; DiskFull when it says its disk is full (ENOSPC on the data root)."""
    text = f"{what}: {type(exc).__name__}: {exc}"
    return DiskFull(text) if "no space left on device" in text.lower() else InfraError(text)


def lost(what: str, exc: BaseException) -> ForkLost:
    return ForkLost(f"{what}: {type(exc).__name__}: {exc}")


def _not_running(exc: docker.errors.APIError) -> bool:
    """The engine refused an exec because the container is not running (409)."""
    return getattr(exc, "status_code", None) == 409 and "not running" in str(exc)


@dataclass
class UserIds:
    """Numeric ids of `user` in the image (uploads are chowned to them)."""

    uid: int = 1000
    gid: int = 1000


def start_container(api: Any, image_id: str, labels: dict[str, str], host_config: dict[str, Any], *,
                    desktop: bool = False, ports: list[int] | None = None, hostname: str | None = None) -> str:
    """Create and start a container (two API calls, no inspect); its id. `labels` must name its
    owner (docker_client.require_owner: UnownedContainer before anything is created). With `desktop`,
    the desktop boots as the container's own command (see guest.DESKTOP_BOOT). `ports`: the
    container's TCP ports the host config's port_bindings publish. `hostname`: the container's
    host name (a fork gets its golden's, see Golden.hostname); else Docker's (the short id)."""
    command = ["bash", "-c", guest.DESKTOP_BOOT] if desktop else ["sleep", "infinity"]
    try:
        cid = create_container(api, image_id, labels=labels, command=command, host_config=host_config, detach=True,
                               ports=list(ports) if ports else None, hostname=hostname)
    except docker.errors.ImageNotFound as exc:
        raise infra(f"image {image_id} is gone", exc) from None
    except docker.errors.APIError as exc:
        raise infra("creating a sandbox container", exc) from None
    try:
        api.start(cid)
    except docker.errors.APIError as exc:
        remove_container(api, cid)
        raise infra("starting a sandbox container", exc) from None
    return cid


def remove_with_retries(remove: Callable[[], object], *, backoff_s: float) -> docker.errors.APIError | None:
    """Call `remove` until it works, the thing is already gone, or DELETE_RETRIES attempts
    failed; the last error then (None when removed)."""
    last: docker.errors.APIError | None = None
    for attempt in range(DELETE_RETRIES):
        try:
            remove()
            return None
        except docker.errors.NotFound:  # ImageNotFound too
            return None
        except docker.errors.APIError as exc:
            if "already in progress" in str(exc):
                return None
            last = exc
            if attempt < DELETE_RETRIES - 1:
                time.sleep(backoff_s * 2 ** attempt)
    return last


def remove_container(api: Any, cid: str) -> None:
    err = remove_with_retries(lambda: api.remove_container(cid, force=True, v=True), backoff_s=0.2)
    if err is not None:
        raise infra(f"removing container {cid[:12]} (it keeps its labels; `shinken gc` finds it)", err)


class Container:
    """A running container (by id) on the engine behind `api`."""

    def __init__(self, api: Any, cid: str, ids: UserIds, network: bool) -> None:
        self.api = api
        self.id = cid
        self.ids = ids
        self.network = network
        self._closed = False

    def _check_open(self) -> None:
        if self._closed:
            raise SessionError(f"container {self.id[:12]} is closed")

    # --- exec ---------------------------------------------------------------------
    def exec_env(self, env: dict[str, str] | None = None) -> dict[str, str]:
        """An exec's environment: the fixed PATH and the desktop session's settings (constants,
        guest.session_env), then `env`. Docker adds the image's own ENV under it."""
        return {**guest.session_env(self.ids.uid), "PATH": guest.PATH, **(env or {})}

    def exec(self, cmd: str | list[str], *, timeout: float = 60, user: str = guest.USER,
             env: dict[str, str] | None = None, workdir: str | None = None,
             max_output: int = 64_000, kill_user_on_failure: bool = False,
             prefix: tuple[str, ...] = (), replace_env: bool = False) -> ExecResult:
        """Run `cmd` under the in-container timeout. kill_user_on_failure: when the run is
        killed at its timeout or hits a container limit, every process of the run's user is
        killed before the exec returns (see guest.OUTER; when the wrapper never reported, by one
        more exec that is waited for), so nothing of the run is left to kill the next exec.
        `prefix`: argv the wrapper itself runs under (the verifier's uid drop, guest.VERIFY_AS);
        the fallback kill then runs as guest.VERIFIER_UID. `replace_env`: `env` is the whole
        environment shinken sets (no session settings added)."""
        self._check_open()
        argv = ["bash", "-lc", cmd] if isinstance(cmd, str) else [str(a) for a in cmd]
        if not argv:
            raise SessionError("exec of an empty command")
        nonce = "__shinken_" + secrets.token_hex(8)
        t_in = max(0.001, float(timeout))
        full = [*prefix, "/bin/bash", "-c", guest.OUTER, "shinken", f"{t_in:.3f}", nonce,
                "1" if kill_user_on_failure else "0", *argv]
        if user == "root" and workdir is None:
            workdir = "/"  # never a folder the policy owns: `python3 -c` puts the working folder on sys.path
        t0 = time.monotonic()
        try:
            ex = self.api.exec_create(self.id, full, stdout=True, stderr=True, user=user,
                                      environment=env if replace_env else self.exec_env(env), workdir=workdir)
            stream = open_exec_stream(self.api, ex["Id"])
        except docker.errors.NotFound as exc:
            raise lost(f"container {self.id[:12]} vanished", exc) from None
        except docker.errors.APIError as exc:
            if _not_running(exc):
                raise lost(f"container {self.id[:12]} stopped", exc) from None
            raise infra(f"exec in {self.id[:12]}", exc) from None
        data, guard_hit, total = read_frames(stream, t0 + t_in + EXEC_GRACE_S, max_output + 256, nonce.encode())
        duration = time.monotonic() - t0
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
            exit_code = self._exec_exit(ex["Id"])
            # A container killed under the exec is a lost fork, not the command's exit; the engine
            # may report the container running for a moment after the kill that ended the exec.
            self._check_running(settle_s=1.0 if exit_code in (None, 137) else 0.0)
        if kill_user_on_failure and not m:
            # the wrapper's own kill may never have run
            self._kill_user_processes(f"{guest.VERIFIER_UID}:{guest.VERIFIER_UID}" if prefix else user)
        timed_out = guard_hit or (exit_code == 137 and duration >= t_in * 0.98)
        if timed_out:
            exit_code = None
        truncated = len(text) > max_output or total > len(data)
        if len(text) > max_output:
            text = text[-max_output:]
        return ExecResult(exit_code, text, timed_out, duration, truncated, oom, pids)

    def open_channel(self, argv: list[str], *, user: str = guest.USER) -> ExecChannel:
        """A long-lived exec serving request lines on its stdin (sandbox.exec_channel); no
        timeout wrapper: the caller bounds each request, and the process dies with the container.
        ChannelBroken when the engine refuses it."""
        self._check_open()
        return ExecChannel(self.api, self.id, [str(a) for a in argv], user=user, env=self.exec_env())

    def _kill_user_processes(self, user: str) -> None:
        """`kill -KILL -1` as `user`, waited for: the wrapper (same user) dies with the rest,
        so no kill of this run can land on a later exec. Best effort and bounded: a bomb
        holding the pids limit may deny the exec its process (then no kill can land later
        either), and the container's removal ends everything anyway."""
        try:
            ex = self.api.exec_create(self.id, ["kill", "-KILL", "-1"], user=user, stdout=False, stderr=False)
            self.api.exec_start(ex["Id"], detach=True)
            deadline = time.monotonic() + KILL_WAIT_S
            while self.api.exec_inspect(ex["Id"]).get("Running") and time.monotonic() < deadline:
                time.sleep(0.05)
        except docker.errors.APIError:
            pass

    def _exec_exit(self, exec_id: str) -> int | None:
        for _ in range(20):
            try:
                info = self.api.exec_inspect(exec_id)
            except docker.errors.NotFound as exc:
                raise lost(f"container {self.id[:12]} vanished during exec", exc) from None
            except docker.errors.APIError as exc:
                raise infra(f"container {self.id[:12]} vanished during exec", exc) from None
            if not info.get("Running"):
                code = info.get("ExitCode")
                if code is None:
                    break
                return int(code)
            time.sleep(0.05)
        self._require_running(f"container {self.id[:12]} vanished during exec")
        return None

    def _require_running(self, api_failure: str) -> None:
        """ForkLost when the container is gone or stopped; InfraError (saying `api_failure`) when
        the engine cannot answer."""
        try:
            state = self.api.inspect_container(self.id)["State"]
        except docker.errors.NotFound as exc:
            raise lost(f"container {self.id[:12]} vanished during exec", exc) from None
        except docker.errors.APIError as exc:
            raise infra(api_failure, exc) from None
        if not state.get("Running"):
            raise ForkLost(f"container {self.id[:12]} stopped during exec (OOMKilled={state.get('OOMKilled')})")

    def _check_running(self, settle_s: float = 0.0) -> None:
        """ForkLost when the container is gone or no longer running (watched for `settle_s`)."""
        end = time.monotonic() + settle_s
        while True:
            self._require_running(f"inspecting {self.id[:12]} after exec")
            if time.monotonic() >= end:
                return
            time.sleep(0.1)

    def launch(self, argv: list[str], *, user: str = guest.USER) -> None:
        """Start argv in its own session and return at once."""
        try:
            ex = self.api.exec_create(self.id, ["setsid", "bash", "-c", guest.LAUNCH, "shinken-launch", *argv],
                                      stdout=False, stderr=False, user=user, workdir=guest.HOME,
                                      environment=self.exec_env())
            self.api.exec_start(ex["Id"], detach=True)
        except docker.errors.APIError as exc:
            raise infra(f"launch in {self.id[:12]}", exc) from None

    # --- files --------------------------------------------------------------------
    def upload(self, data: bytes, dest: str, mode: int = 0o644, user: str = guest.USER) -> None:
        self._check_open()
        if not dest.startswith("/"):
            raise SessionError(f"upload destination must be absolute: {dest!r}")
        uid, gid = (0, 0) if user == "root" else (self.ids.uid, self.ids.gid)
        parent, name = os.path.split(dest.rstrip("/"))
        buf = io.BytesIO()
        with tarfile.open(fileobj=buf, mode="w", format=tarfile.PAX_FORMAT) as tar:
            info = tarfile.TarInfo(name)
            info.size, info.mode, info.uid, info.gid, info.mtime = len(data), mode, uid, gid, int(time.time())
            tar.addfile(info, io.BytesIO(data))
        payload = buf.getvalue()
        try:
            self.api.put_archive(self.id, parent or "/", payload)
            return
        except docker.errors.NotFound:
            pass  # the folder does not exist yet (or the container is gone: mkdir tells)
        except docker.errors.APIError as exc:
            raise infra(f"upload {dest}", exc) from None
        res = self.exec(["mkdir", "-p", parent], timeout=30, user=user)
        if not res.ok and user != "root":
            res = self.exec(["bash", "-c", 'mkdir -p "$1" && chown "$2" "$1"', "-", parent,
                             f"{uid}:{gid}"], timeout=30, user="root")
        if not res.ok:
            raise SessionError(f"upload {dest}: cannot create {parent}: {res.output.strip()[-300:]}")
        try:
            self.api.put_archive(self.id, parent, payload)
        except docker.errors.APIError as exc:
            raise infra(f"upload {dest}", exc) from None

    def download(self, path: str) -> bytes:
        self._check_open()
        try:
            stream, _stat = self.api.get_archive(self.id, path)
            raw = b"".join(stream)
        except docker.errors.NotFound:
            raise FileNotFoundError(f"{path} (in sandbox {self.id[:12]})") from None
        except docker.errors.APIError as exc:
            raise infra(f"download {path}", exc) from None
        with tarfile.open(fileobj=io.BytesIO(raw)) as tar:
            for m in tar:
                if m.isfile():
                    fh = tar.extractfile(m)
                    return fh.read() if fh else b""
        raise IsADirectoryError(f"{path} is not a regular file (in sandbox {self.id[:12]})")

    # --- setup, desktop, processes -------------------------------------------------
    def run_steps(self, setup: Iterable[SetupStep], bundle: Bundle, *, where: str = "config",
                  deadline: float | None = None, sleep_cap: float | None = None) -> None:
        steps.run_steps(self, setup, bundle, where=where, deadline=deadline, sleep_cap=sleep_cap)

    def wait_desktop_boot(self) -> None:
        """Wait for the desktop started by the container command (see guest.DESKTOP_BOOT)."""
        res = self.exec(["bash", "-c", guest.DESKTOP_WAIT], timeout=DESKTOP_UP_TIMEOUT_S)
        if res.ok:
            return
        if res.timed_out or res.exit_code == DESKTOP_LATE_EXIT:
            # a wait that ran out is the machine's load: retried, never held against the task
            raise InfraError(f"the desktop did not come up in time (load?): {tail(res.output).strip()[-300:]}")
        raise SetupError(-1, "desktop", f"shinken-desktop-up failed (exit {res.exit_code})", tail(res.output),
                         where="desktop")

    def snapshot(self, clean: str | None) -> dict[str, Any]:
        """The live processes; with clean="delete" or "hide" the build session's files are taken
        away for a commit (guest.SNAPSHOT); "hide" keeps them for unhide()."""
        res = self.exec(["python3", "-c", guest.snapshot_script(clean)], timeout=60, user="root")
        if not res.ok:
            raise InfraError(f"process snapshot failed: {res.output.strip()[-300:]}")
        doc: dict[str, Any] = json.loads(res.output.strip().splitlines()[-1])
        return doc

    def unhide(self, moved: list[list[str]]) -> None:
        """Put back the files a snapshot(clean="hide") moved aside."""
        res = self.exec(["python3", "-c", guest.UNHIDE, json.dumps(moved), guest.HIDDEN], timeout=60, user="root")
        if not res.ok:
            raise InfraError(f"putting back the build session's files failed: {res.output.strip()[-300:]}")
