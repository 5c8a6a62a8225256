"""The judge relay: how a reward in a `network none` sandbox reaches a judge that lives on
the host or anywhere else.

A small HTTP server on a Unix socket in a host folder; forks get that folder bind-mounted
read-only at /run/shinken-judge (a socket on a read-only mount still accepts connections),
so the only thing a sandbox can reach through it is this server, which:
- accepts only `POST .../chat/completions` (anything else is 404);
- accepts only requests carrying a token granted for one reward run and revoked when the
  run ends (so an agent cannot use the judge as a tool during its turn);
- sets the request's `model` to the configured one and adds the real API key, which
  never enters the sandbox;
- forwards to the configured OpenAI-compatible endpoint and passes the answer back.

One relay per (process, judge config); its folder is registered with `shinken gc`."""

from __future__ import annotations

import atexit
import http.server
import json
import os
import secrets
import shutil
import socketserver
import threading
import urllib.error
import urllib.request
from dataclasses import dataclass, field
from pathlib import Path

from shinken.judge.config import JudgeConfig

SOCKET_NAME = "judge.sock"
MAX_BODY = 32 * 1024 * 1024  # a vision request carries two base64 images
UPSTREAM_TIMEOUT_S = 120.0


@dataclass
class RelayStats:
    forwarded: int = 0
    refused: int = 0  # no/expired token, wrong path, oversized or malformed body
    upstream_errors: int = 0
    requests_by_token: dict[str, int] = field(default_factory=dict)


class _Server(socketserver.ThreadingMixIn, socketserver.UnixStreamServer):
    daemon_threads = True
    relay: "JudgeRelay"


class _Handler(http.server.BaseHTTPRequestHandler):
    server: _Server
    protocol_version = "HTTP/1.1"

    def address_string(self) -> str:  # a Unix socket peer has no address
        return "sandbox"

    def log_message(self, format: str, *args: object) -> None:  # noqa: A002 - stdlib signature
        pass  # counted in RelayStats; a log line per judge call is noise

    def _answer(self, status: int, body: bytes, content_type: str = "application/json") -> None:
        self.send_response(status)
        self.send_header("Content-Type", content_type)
        self.send_header("Content-Length", str(len(body)))
        self.end_headers()
        self.wfile.write(body)

    def _refuse(self, status: int, why: str) -> None:
        with self.server.relay._lock:
            self.server.relay.stats.refused += 1
        self._answer(status, json.dumps({"error": {"message": why, "type": "shinken_relay"}}).encode())

    def do_GET(self) -> None:  # noqa: N802 - stdlib name
        self._refuse(404, "only POST .../chat/completions is relayed")

    def do_POST(self) -> None:  # noqa: N802
        relay = self.server.relay
        if not self.path.rstrip("/").endswith("/chat/completions"):
            return self._refuse(404, "only POST .../chat/completions is relayed")
        token = self.headers.get("Authorization", "").removeprefix("Bearer ").strip()
        if not relay.valid(token):
            return self._refuse(403, "no judge access outside a reward run")
        try:
            length = int(self.headers.get("Content-Length") or 0)
        except ValueError:
            length = -1
        if not 0 < length <= MAX_BODY:
            return self._refuse(413, f"request body must be 1..{MAX_BODY} bytes")
        try:
            doc = json.loads(self.rfile.read(length))
            if not isinstance(doc, dict) or not isinstance(doc.get("messages"), list):
                raise ValueError("no messages")
        except ValueError as exc:
            return self._refuse(400, f"not a chat completion request: {exc}")
        doc["model"] = relay.config.model  # the configured judge, whatever the reward asked for
        status, body = relay.forward(doc)
        with relay._lock:
            relay.stats.requests_by_token[token] = relay.stats.requests_by_token.get(token, 0) + 1
        self._answer(status, body)


class JudgeRelay:
    def __init__(self, config: JudgeConfig) -> None:
        self.config = config
        self.stats = RelayStats()
        self._lock = threading.Lock()
        self._tokens: set[str] = set()
        self._server: _Server | None = None
        self._thread: threading.Thread | None = None
        self.directory: Path | None = None

    @property
    def socket_path(self) -> Path:
        if self.directory is None:
            raise RuntimeError("the judge relay is not started")
        return self.directory / SOCKET_NAME

    def start(self) -> "JudgeRelay":
        from shinken.runtime import make_temp_dir

        self.directory = make_temp_dir(prefix="judge-")
        self.directory.chmod(0o755)  # forks' `user` must traverse it
        server = _Server(str(self.socket_path), _Handler)
        server.relay = self
        self.socket_path.chmod(0o666)  # connect() needs write permission on the socket
        self._server = server
        self._thread = threading.Thread(target=server.serve_forever, kwargs={"poll_interval": 0.2},
                                        name="shinken-judge-relay", daemon=True)
        self._thread.start()
        return self

    # --- access for one reward run ------------------------------------------------
    def grant(self) -> str:
        token = "shinken-judge-" + secrets.token_hex(16)
        with self._lock:
            self._tokens.add(token)
        return token

    def revoke(self, token: str) -> int:
        """End the token's access; returns how many judge calls it made."""
        with self._lock:
            self._tokens.discard(token)
            return self.stats.requests_by_token.pop(token, 0)

    def valid(self, token: str) -> bool:
        with self._lock:
            return bool(token) and token in self._tokens

    # --- upstream -----------------------------------------------------------------
    def forward(self, doc: dict) -> tuple[int, bytes]:
        headers = {"Content-Type": "application/json"}
        key = self.config.api_key()
        if key:
            headers["Authorization"] = f"Bearer {key}"
        req = urllib.request.Request(self.config.url + "/chat/completions", data=json.dumps(doc).encode(),
                                     headers=headers, method="POST")
        try:
            with urllib.request.urlopen(req, timeout=UPSTREAM_TIMEOUT_S) as resp:
                body = resp.read()
                with self._lock:
                    self.stats.forwarded += 1
                return resp.status, body
        except urllib.error.HTTPError as exc:
            body = exc.read()
            status = exc.code
        except (urllib.error.URLError, OSError, ValueError) as exc:
            status = 502
            body = json.dumps({"error": {"message": f"judge endpoint {self.config.url} unreachable: {exc}",
                                         "type": "shinken_relay"}}).encode()
        with self._lock:
            self.stats.upstream_errors += 1
        return status, body

    def close(self) -> None:
        server, self._server = self._server, None
        if server is not None:
            server.shutdown()
            server.server_close()
        if self.directory is not None:
            from shinken.runtime import unregister_temp_dir

            shutil.rmtree(self.directory, ignore_errors=True)
            unregister_temp_dir(self.directory)
            self.directory = None


_SHARED: dict[JudgeConfig, JudgeRelay] = {}
_SHARED_LOCK = threading.Lock()


def shared_relay(config: JudgeConfig) -> JudgeRelay:
    """This process's relay for `config`, started on first use (probe makes a provider per
    task attempt; they all share it). Closed at exit; `shinken gc` reclaims its folder if
    the process is killed."""
    with _SHARED_LOCK:
        relay = _SHARED.get(config)
        if relay is None or relay.directory is None or not os.path.exists(relay.socket_path):
            relay = _SHARED[config] = JudgeRelay(config).start()
        return relay


@atexit.register
def close_shared() -> None:
    """Close every shared relay (at exit; tests call it to end theirs)."""
    with _SHARED_LOCK:
        for relay in _SHARED.values():
            relay.close()
        _SHARED.clear()
