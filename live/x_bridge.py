"""The fork's X display, reachable on this machine as display `:N`: a Unix socket at
/tmp/.X11-unix/XN (mode 0600, so only this user's processes, x11vnc among them, can connect)
whose every connection is carried into the fork by one `docker exec` running a relay to the
guest's X socket. Through the Docker API only: a fork needs no network or published port for it.

The docker exec stream is multiplexed (an 8-byte header per stdout frame, tty off, so X's binary
protocol passes untouched); the relay's stdin is the connection's other direction, half-closed
when the client hangs up."""

from __future__ import annotations

import os
import socket
import threading
from pathlib import Path
from typing import Any

import docker.errors

from shinken.live.forks import DISPLAY_SOCKET
from shinken.sandbox.docker_stream import close_exec_stream, exec_socket, open_exec_stream

X_DIR = Path("/tmp/.X11-unix")
DISPLAYS = range(40, 400)  # display numbers tried on this machine (low ones are real X servers')

# In the guest: stdin -> the X socket, the X socket -> stdout, until either side ends.
RELAY = r"""
import os, select, socket, sys
s = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
s.connect(sys.argv[1])
while True:
    r, _, _ = select.select([0, s], [], [])
    if 0 in r:
        d = os.read(0, 65536)
        if not d:
            break
        s.sendall(d)
    if s in r:
        d = s.recv(65536)
        if not d:
            break
        while d:
            d = d[os.write(1, d):]
"""


def _free_display() -> tuple[int, socket.socket]:
    """A display number no X server here uses, and a listening socket at its path."""
    if not X_DIR.exists():
        X_DIR.mkdir(exist_ok=True)
        X_DIR.chmod(0o1777)  # what an X server makes it (the mode mkdir gets is cut by the umask)
    for n in DISPLAYS:
        path = X_DIR / f"X{n}"
        if path.exists() or Path(f"/tmp/.X{n}-lock").exists():
            continue
        sock = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
        old = os.umask(0o177)  # the socket file is 0600 from the start
        try:
            sock.bind(str(path))
        except OSError:
            sock.close()
            continue
        finally:
            os.umask(old)
        sock.listen(8)
        return n, sock
    raise OSError(f"no free X display number in {DISPLAYS.start}..{DISPLAYS.stop - 1} under {X_DIR}")


class XBridge:
    """Display `:N` on this machine showing the fork's display; `close()` ends every connection."""

    def __init__(self, api: Any, container_id: str) -> None:
        self.api = api
        self.container_id = container_id
        self.number, self._listener = _free_display()
        self.path = X_DIR / f"X{self.number}"
        self.connections = 0
        self.errors: list[str] = []
        self._closed = threading.Event()
        self._open: set[Any] = set()
        self._lock = threading.Lock()
        threading.Thread(target=self._accept, daemon=True, name="x-bridge").start()

    @property
    def display(self) -> str:
        return f":{self.number}"

    def _accept(self) -> None:
        while not self._closed.is_set():
            try:
                client, _ = self._listener.accept()
            except OSError:
                return
            self.connections += 1
            threading.Thread(target=self._carry, args=(client,), daemon=True, name="x-bridge-conn").start()

    def _carry(self, client: socket.socket) -> None:
        try:
            ex = self.api.exec_create(self.container_id, ["python3", "-c", RELAY, DISPLAY_SOCKET], stdin=True,
                                      stdout=True, stderr=False, tty=False, user="user")
            stream = open_exec_stream(self.api, ex["Id"])
        except (docker.errors.APIError, OSError) as exc:
            self.errors.append(f"{type(exc).__name__}: {exc}")
            client.close()
            return
        with self._lock:
            self._open.add(stream)
        upstream = exec_socket(stream)

        def to_fork() -> None:
            try:
                while True:
                    data = client.recv(65536)
                    if not data:
                        break
                    upstream.sendall(data)
            except OSError:
                pass
            try:
                upstream.shutdown(socket.SHUT_WR)  # the relay's stdin ends, and so does its X connection
            except OSError:
                pass

        threading.Thread(target=to_fork, daemon=True, name="x-bridge-up").start()
        try:
            pending = b""
            while True:
                while len(pending) < 8:
                    chunk = stream.read1(65536)
                    if not chunk:
                        return
                    pending += chunk
                size = int.from_bytes(pending[4:8], "big")
                while len(pending) < 8 + size:
                    chunk = stream.read1(65536)
                    if not chunk:
                        return
                    pending += chunk
                if pending[0] == 1:  # stdout; stderr frames (none asked for) are dropped
                    client.sendall(pending[8:8 + size])
                pending = pending[8 + size:]
        except OSError:
            pass
        finally:
            client.close()
            close_exec_stream(stream)
            with self._lock:
                self._open.discard(stream)

    def close(self) -> None:
        self._closed.set()
        try:
            self._listener.close()
        finally:
            try:
                self.path.unlink()
            except FileNotFoundError:
                pass
            with self._lock:
                streams = list(self._open)
            for s in streams:
                close_exec_stream(s)
