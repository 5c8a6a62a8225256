"""A live, read-only view of a fork's display, made of what Debian ships: the fork's X display
brought here (live/x_bridge.py), `x11vnc -viewonly` serving it as VNC, and `websockify` serving
noVNC's page and carrying its WebSocket to x11vnc. Everything listens on 127.0.0.1 only; the VNC
password (random, in a 0600 file) is in the printed URL, so another local user cannot watch by
guessing a port. The view ends when the fork stops (the rollout ended, or its container was
removed) or when the caller stops it; the processes it started are ended then, by their ids."""

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
from shinken.live.forks import Computer, is_running
from shinken.live.x_bridge import XBridge

NOVNC_DIRS = (Path("/usr/share/novnc"),)
PACKAGES_HINT = "install Debian's x11vnc, websockify and novnc (apt-get install x11vnc websockify novnc)"
START_TIMEOUT_S = 30.0
POLL_S = 1.0


def novnc_dir() -> Path:
    found = next((d for d in NOVNC_DIRS if (d / "vnc.html").is_file()), None)
    missing = [p for p in ("x11vnc", "websockify") if shutil.which(p) is None]
    if missing or found is None:
        raise EnvironmentProblem(f"the live view needs {', '.join(missing + ([] if found else ['novnc']))}: "
                                 f"{PACKAGES_HINT}")
    return found


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
    _bridge: XBridge | None = None

    def start(self) -> "LiveView":
        web = novnc_dir()
        try:
            self._bridge = XBridge(self.api, self.computer.id)
            password = secrets.token_hex(4)  # VNC authentication reads 8 characters
            pwfile = self.folder / "passwd"
            pwfile.touch(mode=0o600)
            pwfile.write_text(password + "\n")
            vnc_port, self.port = _free_port(), self.port or _free_port()
            vnc_log, ws_log = self.folder / "x11vnc.log", self.folder / "websockify.log"
            # -viewonly: input from viewers is dropped; -noshm/-noxrecord: the display is reached
            # over a socket, not shared memory; -localhost: VNC on 127.0.0.1 only.
            self._spawn(["x11vnc", "-display", self._bridge.display, "-rfbport", str(vnc_port), "-localhost",
                         "-viewonly", "-shared", "-forever", "-passwdfile", str(pwfile), "-noshm", "-noxrecord",
                         "-quiet", "-o", str(vnc_log)], vnc_log)
            _wait_port(vnc_port, self._procs[-1], "x11vnc", vnc_log)
            self._spawn(["websockify", "--web", str(web), f"127.0.0.1:{self.port}", f"127.0.0.1:{vnc_port}"], ws_log)
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
