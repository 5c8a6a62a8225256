"""A long-lived exec in a container that answers requests: one `docker exec` with stdin
attached, opened once, then a request line in and one framed reply out per call, on the same
hijacked connection (the Docker API only, so it works the same on a local engine, a remote one,
inside a Gym container and on a fleet host).

The process in the container reads one request line from stdin and writes one reply to stdout
as `SHINKEN-FRAME <n>\\n` followed by n bytes. Docker multiplexes stdout and stderr on the
connection (tty off) in frames with an 8-byte header; stdout is read here, stderr kept as a
short tail for error texts. One request at a time (a lock per channel). A channel that broke
(EOF, a bad frame, the engine's error) or timed out is closed for good: the caller opens
another one (computer/screen.py does, once, then falls back to a fresh exec per request)."""

from __future__ import annotations

import socket
import threading
import time
from typing import Any

import docker.errors

from shinken.sandbox.docker_stream import close_exec_stream, exec_socket, open_exec_stream

FRAME = b"SHINKEN-FRAME "
MAX_REPLY = 64_000_000
STDERR_TAIL = 2_000


class ChannelBroken(Exception):
    """The channel cannot answer (the process died, the container is gone, a bad frame, the
    engine refused the exec); `timed_out` when the reply did not come in time."""

    def __init__(self, message: str, timed_out: bool = False) -> None:
        super().__init__(message)
        self.timed_out = timed_out


class ExecChannel:
    """One exec with stdin attached, serving request lines (see the module's docstring)."""

    def __init__(self, api: Any, container_id: str, argv: list[str], *, user: str,
                 env: dict[str, str] | None = None) -> None:
        self.lock = threading.Lock()
        self.closed = False
        self.stderr = b""
        self._pending = b""  # demultiplexed stdout not yet consumed
        try:
            ex = api.exec_create(container_id, argv, stdin=True, stdout=True, stderr=True, tty=False, user=user,
                                 environment=env)
            self.exec_id: str = ex["Id"]
            self._stream = open_exec_stream(api, self.exec_id)
        except (docker.errors.APIError, OSError) as exc:
            raise ChannelBroken(f"opening the exec: {type(exc).__name__}: {exc}") from None
        self._sock = exec_socket(self._stream)
        self._raw = b""  # multiplexed bytes not yet split into frames
        if not (hasattr(self._sock, "sendall") and hasattr(self._sock, "settimeout")):
            self.close()  # a transport that gives no socket to write to: the caller uses an exec per request
            raise ChannelBroken(f"the engine's connection ({type(self._sock).__name__}) takes no writes")

    def request(self, line: bytes, timeout: float) -> bytes:
        """Send one request line, return the reply's payload. ChannelBroken (and the channel
        closed) when it cannot."""
        with self.lock:
            if self.closed:
                raise ChannelBroken("the channel is closed")
            deadline = time.monotonic() + timeout
            try:
                self._sock.settimeout(timeout)
                self._sock.sendall(line if line.endswith(b"\n") else line + b"\n")
                head = self._read_line(deadline)
                if not head.startswith(FRAME) or not head[len(FRAME):].strip().isdigit():
                    raise ChannelBroken(f"a bad reply: {head[:200]!r}")
                size = int(head[len(FRAME):])
                if size > MAX_REPLY:
                    raise ChannelBroken(f"a reply of {size} bytes")
                return self._read_exact(size, deadline)
            except ChannelBroken:
                self.close()
                raise
            except (TimeoutError, socket.timeout):
                self.close()
                raise ChannelBroken(f"no reply within {timeout:g} s", timed_out=True) from None
            except OSError as exc:
                self.close()
                raise ChannelBroken(f"{type(exc).__name__}: {exc}") from None

    def close(self) -> None:
        """Idempotent; the process in the container sees its stdin end."""
        if not self.closed:
            self.closed = True
            close_exec_stream(self._stream)

    # --- reading the multiplexed stream --------------------------------------------
    def _read_line(self, deadline: float) -> bytes:
        while b"\n" not in self._pending:
            self._more(deadline)
        line, _, self._pending = self._pending.partition(b"\n")
        return line

    def _read_exact(self, size: int, deadline: float) -> bytes:
        while len(self._pending) < size:
            self._more(deadline)
        out, self._pending = self._pending[:size], self._pending[size:]
        return out

    def _more(self, deadline: float) -> None:
        """Read one Docker frame; stdout goes to _pending, stderr to the tail."""
        while len(self._raw) < 8:
            self._recv(deadline)
        kind, size = self._raw[0], int.from_bytes(self._raw[4:8], "big")
        while len(self._raw) < 8 + size:
            self._recv(deadline)
        payload, self._raw = self._raw[8:8 + size], self._raw[8 + size:]
        if kind == 2:
            self.stderr = (self.stderr + payload)[-STDERR_TAIL:]
        else:
            self._pending += payload

    def _recv(self, deadline: float) -> None:
        left = deadline - time.monotonic()
        if left <= 0:
            raise TimeoutError
        self._sock.settimeout(left)
        chunk: bytes = self._stream.read1(1 << 20)
        if not chunk:
            tail = self.stderr.decode("utf-8", "replace").strip()[-300:]
            raise ChannelBroken("the process ended" + (f": {tail}" if tail else ""))
        self._raw += chunk
