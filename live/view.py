"""A live, read-only view of a fork's display, made of what Debian ships: `x11vnc -viewonly`
runs in the fork (the task images carry it) on its own display, once per viewer, speaking VNC on
its stdin and stdout (`-inetd`), reached from here through the Docker API (live/exec_bridge.py);
`websockify` serves noVNC's page and carries its WebSocket to that. So the fork's X protocol is
read inside the fork only (the policy controls what its display says), and this machine only
relays VNC bytes to the browser, which decodes them. websockify listens on 127.0.0.1 only; the
VNC password (random) is in the printed URL, so another local user cannot watch by guessing a
port. The view ends when the fork stops (the rollout ended, or its container was removed) or
when the caller stops it; the processes it started are ended then, by their ids."""

from __future__ import annotations

import secrets
import shutil
import socket
import subprocess
import tempfile
import threading
import time
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from shinken.errors import EnvironmentProblem
from shinken.live.exec_bridge import ExecBridge
from shinken.live.forks import Computer, is_running

NOVNC_DIRS = (Path("/usr/share/novnc"),)
PACKAGES_HINT = "install Debian's websockify and novnc (apt-get install websockify novnc)"
START_TIMEOUT_S = 30.0
POLL_S = 1.0


def novnc_dir() -> Path:
    found = next((d for d in NOVNC_DIRS if (d / "vnc.html").is_file()), None)
    missing = [p for p in ("websockify",) if shutil.which(p) is None]
    if missing or found is None:
        raise EnvironmentProblem(f"the live view needs {', '.join(missing + ([] if found else ['novnc']))}: "
                                 f"{PACKAGES_HINT}")
    return found


# In the fork: run argv with one end of a socket pair as its stdin and stdout (x11vnc -inetd needs a
# socket there, and a docker exec gives pipes), and relay the exec's stdin/stdout to the other end.
INETD_PY = r"""
import os, select, socket, subprocess, sys
mine, theirs = socket.socketpair()
proc = subprocess.Popen(sys.argv[1:], stdin=theirs, stdout=theirs, stderr=subprocess.DEVNULL)
theirs.close()
try:
    while True:
        r, _, _ = select.select([0, mine], [], [])
        if 0 in r:
            d = os.read(0, 65536)
            if not d:
                break
            mine.sendall(d)
        if mine in r:
            d = mine.recv(65536)
            if not d:
                break
            while d:
                d = d[os.write(1, d):]
finally:
    proc.terminate()
"""


def vnc_argv(password: str) -> list[str]:
    """x11vnc in the fork for one viewer on stdin/stdout: view-only (input from the viewer is dropped
    by the server, whatever the page asks), its display, quiet (stderr is not read)."""
    return ["python3", "-c", INETD_PY, "x11vnc", "-inetd", "-display", ":0", "-viewonly", "-shared", "-passwd",
            password, "-q", "-noxrecord"]


def _free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        port: int = s.getsockname()[1]
        return port


def _wait_port(port: int, proc: subprocess.Popen[bytes], what: str, log: Path) -> None:
    deadline = time.monotonic() + START_TIMEOUT_S
    while time.monotonic() < deadline:
        if proc.poll() is not None:
            raise EnvironmentProblem(f"{what} ended at start (exit {proc.returncode}): {_tail(log)}")
        try:
            with socket.create_connection(("127.0.0.1", port), timeout=1):
                return
        except OSError:
            time.sleep(0.1)
    raise EnvironmentProblem(f"{what} did not listen on 127.0.0.1:{port} within {START_TIMEOUT_S:.0f} s: {_tail(log)}")


def _tail(log: Path) -> str:
    try:
        return " | ".join(log.read_text(errors="replace").strip().splitlines()[-4:])[-400:]
    except OSError:
        return "(no log)"


@dataclass
class LiveView:
    """A running view of `computer`; `url` opens it. Use as a context manager, or `close()`."""

    api: Any
    computer: Computer
    port: int = 0  # websockify's port on 127.0.0.1 (0: any free one)
    url: str = ""
    folder: Path = field(default_factory=lambda: Path(tempfile.mkdtemp(prefix="shinken-watch-")))
    _procs: list[subprocess.Popen[bytes]] = field(default_factory=list)
    _bridge: ExecBridge | None = None

    def start(self) -> "LiveView":
        web = novnc_dir()
        try:
            password = secrets.token_hex(4)  # VNC authentication reads 8 characters
            self.folder.chmod(0o700)
            self._bridge = ExecBridge(self.api, self.computer.id, vnc_argv(password), self.folder / "vnc.sock")
            self.port = self.port or _free_port()
            ws_log = self.folder / "websockify.log"
            self._spawn(["websockify", "--web", str(web), f"--unix-target={self._bridge.path}", f"127.0.0.1:{self.port}"],
                        ws_log)
            _wait_port(self.port, self._procs[-1], "websockify", ws_log)
        except BaseException:
            self.close()
            raise
        self.url = (f"http://127.0.0.1:{self.port}/vnc.html?autoconnect=1&view_only=1&resize=scale&reconnect=1"
                    f"&password={password}")
        return self

    def _spawn(self, argv: list[str], log: Path) -> None:
        with open(log, "ab") as out:
            self._procs.append(subprocess.Popen(argv, stdin=subprocess.DEVNULL, stdout=out, stderr=subprocess.STDOUT,
                                                start_new_session=True))

    def wait(self, stop: threading.Event | None = None) -> str:
        """Block until the fork stops ("ended"), a process of the view dies ("failed: ...") or
        `stop` is set ("stopped")."""
        while True:
            if stop is not None and stop.wait(POLL_S):
                return "stopped"
            if stop is None:
                time.sleep(POLL_S)
            if not is_running(self.api, self.computer.id):
                return "ended"
            dead = next((p for p in self._procs if p.poll() is not None), None)
            if dead is not None:
                name = dead.args[0] if isinstance(dead.args, list) else dead.args
                return f"failed: {name!s} exited with {dead.returncode}"

    def close(self) -> None:
        """End what the view started (its own processes, by their ids) and remove its files."""
        for p in reversed(self._procs):
            if p.poll() is None:
                p.terminate()
        for p in self._procs:
            try:
                p.wait(timeout=10)
            except subprocess.TimeoutExpired:
                p.kill()
                p.wait()
        self._procs.clear()
        if self._bridge is not None:
            self._bridge.close()
            self._bridge = None
        shutil.rmtree(self.folder, ignore_errors=True)

    def __enter__(self) -> "LiveView":
        return self.start()

    def __exit__(self, *exc: object) -> None:
        self.close()
