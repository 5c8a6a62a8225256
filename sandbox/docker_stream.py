"""Reading an exec's output stream through docker-py internals.

The one place shinken touches private docker-py attributes (`APIClient._post_json`,
`_url`, `_raise_for_status`, `response.raw._fp.fp`): a docker-py upgrade that changes them
breaks this file and nothing else (tests/test_sandbox.py exercises it on every exec).
"""

from __future__ import annotations

import socket
import time
from typing import Any

MARKER_DRAIN_S = 0.3  # after the exec wrapper's marker, late frames still arrive this long


def open_exec_stream(api: Any, exec_id: str) -> Any:
    """Start an exec and return the buffered reader of its hijacked connection.

    Reading the raw socket under it (what exec_start(socket=True) returns) loses whatever
    the HTTP parser already buffered past the response headers: the first output frames of
    fast commands."""
    res = api._post_json(api._url("/exec/{0}/start", exec_id), headers={"Connection": "Upgrade", "Upgrade": "tcp"},
                         data={"Tty": False, "Detach": False}, stream=True)
    api._raise_for_status(res)
    fp = res.raw._fp.fp  # BufferedReader over the socket; holds any over-read bytes
    fp._shinken_response = res  # keep the response (and its connection) alive
    return fp


def read_frames(stream: Any, deadline: float, cap: int, marker: bytes = b"") -> tuple[bytes, bool, int]:
    """Read the multiplexed exec stream until EOF or `deadline` (time.monotonic()). Keeps
    the last `cap` bytes (stdout and stderr interleaved in arrival order). Returns (data,
    guard_hit, total bytes received), and closes the stream.

    Once the wrapper's marker line has arrived the command is over; a background process
    it left behind may still hold the output pipe open (EOF never comes), so reading stops
    MARKER_DRAIN_S later (late stdout frames still arrive in that window)."""
    raw = stream.raw  # SocketIO
    raw = getattr(raw, "_sock", raw)
    buf = bytearray()
    pending = b""
    total = 0
    marker_seen = False

    def recv(n: int) -> bytes:
        left = deadline - time.monotonic()
        if left <= 0:
            raise TimeoutError
        raw.settimeout(left)
        chunk: bytes = stream.read1(n)
        return chunk

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
                deadline = min(deadline, time.monotonic() + MARKER_DRAIN_S)
            if len(buf) > 2 * cap:
                del buf[: len(buf) - cap]
    except (TimeoutError, socket.timeout):
        return bytes(buf[-cap:]), not marker_seen, total
    except OSError:
        return bytes(buf[-cap:]), False, total
    finally:
        try:
            stream._shinken_response.close()
        except (OSError, AttributeError):
            pass


def exec_socket(stream: Any) -> socket.socket:
    """The socket under an open_exec_stream() reader (for writing to the exec's stdin)."""
    raw = stream.raw  # SocketIO
    sock: socket.socket = getattr(raw, "_sock", raw)
    return sock


def close_exec_stream(stream: Any) -> None:
    """Close the exec's connection (the engine then closes the process's stdin)."""
    try:
        sock = exec_socket(stream)
    except AttributeError:
        sock = None
    try:
        stream._shinken_response.close()
    except (OSError, AttributeError):
        pass
    try:
        if sock is not None:
            sock.close()
    except OSError:
        pass
