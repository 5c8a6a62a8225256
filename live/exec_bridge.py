"""A program in the fork, reachable on this machine as a Unix socket: every connection to the
socket (mode 0600, in the view's private folder) runs the program once by `docker exec` with the
connection as its stdin and stdout. Through the Docker API only: the fork needs no network and
no published port, and it works the same against a remote engine.

The exec stream is multiplexed by the engine (an 8-byte header per stdout frame, tty off, so
binary protocols pass untouched); the program's stdin is the connection's other direction,
half-closed when the client hangs up."""

from __future__ import annotations

import os
import socket
import threading
from pathlib import Path
from typing import Any

import docker.errors

from shinken.sandbox.docker_stream import close_exec_stream, exec_socket, open_exec_stream

MAX_FRAME = 16 << 20  # the engine frames the program's output; a larger frame is not a stream it wrote


class ExecBridge:
    """`path` serves `argv` run in the container per connection; `close()` ends every connection."""

    def __init__(self, api: Any, container_id: str, argv: list[str], path: Path, *, user: str = "user") -> None:
        self.api = api
        self.container_id = container_id
        self.argv = argv
        self.user = user
        self.path = Path(path)
        self.connections = 0
        self.errors: list[str] = []
        self._closed = threading.Event()
        self._open: set[Any] = set()
        self._lock = threading.Lock()
        self._listener = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
        old = os.umask(0o177)  # the socket file is 0600 from the start
        try:
            self._listener.bind(str(self.path))
        finally:
            os.umask(old)
        self._listener.listen(8)
        threading.Thread(target=self._accept, daemon=True, name="exec-bridge").start()

    def _accept(self) -> None:
        while not self._closed.is_set():
            try:
                client, _ = self._listener.accept()
            except OSError:
                return
            self.connections += 1
            threading.Thread(target=self._carry, args=(client,), daemon=True, name="exec-bridge-conn").start()

    def _carry(self, client: socket.socket) -> None:
        try:
            ex = self.api.exec_create(self.container_id, self.argv, stdin=True, stdout=True, stderr=False, tty=False,
                                      user=self.user)
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
                upstream.shutdown(socket.SHUT_WR)  # the program's stdin ends
            except OSError:
                pass

        threading.Thread(target=to_fork, daemon=True, name="exec-bridge-up").start()
        try:
            pending = b""
            while True:
                while len(pending) < 8:
                    chunk = stream.read1(65536)
                    if not chunk:
                        return
                    pending += chunk
                size = int.from_bytes(pending[4:8], "big")
                if size > MAX_FRAME:
                    return
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
