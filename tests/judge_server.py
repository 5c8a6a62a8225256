"""A loopback OpenAI-compatible chat-completions server that answers deterministically, for
the judge tests (a real HTTP server on 127.0.0.1, ephemeral port).

Scoring: a text request scores 1.0 when the STATE section of the user prompt contains
`DONE`, else 0.0; a request carrying images scores 0.5 when its first two images differ,
else 0.0. The model `broken` gets HTTP 500. Every request is recorded (path, headers,
body) so tests can check what arrived: the configured model, the host-side key, never
the sandbox's token."""

from __future__ import annotations

import json
import threading
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from typing import Any


class JudgeServer:
    def __init__(self, api_key: str | None = None) -> None:
        self.api_key = api_key
        self.requests: list[dict[str, Any]] = []
        self._lock = threading.Lock()
        server = self

        class Handler(BaseHTTPRequestHandler):
            protocol_version = "HTTP/1.1"

            def log_message(self, *args: object) -> None:
                pass

            def _send(self, status: int, doc: dict) -> None:
                body = json.dumps(doc).encode()
                self.send_response(status)
                self.send_header("Content-Type", "application/json")
                self.send_header("Content-Length", str(len(body)))
                self.end_headers()
                self.wfile.write(body)

            def do_POST(self) -> None:  # noqa: N802
                raw = self.rfile.read(int(self.headers.get("Content-Length") or 0))
                try:
                    body = json.loads(raw)
                except ValueError:
                    body = None
                with server._lock:
                    server.requests.append({"path": self.path, "headers": dict(self.headers), "body": body})
                if server.api_key and self.headers.get("Authorization") != f"Bearer {server.api_key}":
                    return self._send(401, {"error": {"message": "bad key"}})
                if self.path != "/v1/chat/completions" or not isinstance(body, dict):
                    return self._send(404, {"error": {"message": "not found"}})
                if body.get("model") == "broken":
                    return self._send(500, {"error": {"message": "model crashed"}})
                score = server.score(body["messages"])
                content = json.dumps({"score": score, "reasoning": "deterministic test judge"})
                self._send(200, {"id": "chatcmpl-test", "object": "chat.completion", "model": body.get("model"),
                                 "choices": [{"index": 0, "finish_reason": "stop",
                                              "message": {"role": "assistant", "content": content}}]})

        self.httpd = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
        self.httpd.daemon_threads = True
        self.url = f"http://127.0.0.1:{self.httpd.server_address[1]}/v1"
        self._thread = threading.Thread(target=self.httpd.serve_forever, daemon=True)
        self._thread.start()

    @staticmethod
    def score(messages: list[dict]) -> float:
        user = next((m for m in messages if m.get("role") == "user"), {})
        content = user.get("content")
        if isinstance(content, list):
            images = [p["image_url"]["url"] for p in content if p.get("type") == "image_url"]
            return 0.5 if len(images) >= 2 and images[0] != images[1] else 0.0
        text = str(content or "")
        state = text.split("STATE TO EVALUATE:", 1)[-1]
        return 1.0 if "DONE" in state else 0.0

    def close(self) -> None:
        self.httpd.shutdown()
        self.httpd.server_close()

    def __enter__(self) -> "JudgeServer":
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()
