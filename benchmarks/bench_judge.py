"""What the judge relay costs per call: chat-completion round trips to a loopback
OpenAI-compatible server (tests/judge_server.py, which answers at once), direct over TCP
vs through the relay's Unix socket (the path a sandboxed reward takes), in one run.

    python benchmarks/bench_judge.py [--calls 200]
"""

from __future__ import annotations

import argparse
import http.client
import json
import os
import socket
import statistics
import sys
import tempfile
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

from shinken.judge.config import JudgeConfig  # noqa: E402
from shinken.judge.relay import JudgeRelay  # noqa: E402
from tests.judge_server import JudgeServer  # noqa: E402

BODY = json.dumps({"model": "m", "messages": [{"role": "user", "content": "STATE TO EVALUATE:\nDONE"}]}).encode()


class _Unix(http.client.HTTPConnection):
    def __init__(self, path: str) -> None:
        super().__init__("localhost", timeout=30)
        self._path = path

    def connect(self) -> None:
        self.sock = socket.socket(socket.AF_UNIX)
        self.sock.connect(self._path)


def _timed(make, path: str, token: str | None, n: int) -> list[float]:
    out = []
    headers = {"Content-Type": "application/json", **({"Authorization": f"Bearer {token}"} if token else {})}
    for _ in range(n):
        t0 = time.perf_counter()
        c = make()  # a new connection per call, as reward_judge makes one
        c.request("POST", path, body=BODY, headers=headers)
        r = c.getresponse()
        r.read()
        c.close()
        assert r.status == 200, r.status
        out.append((time.perf_counter() - t0) * 1000)
    return out


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--calls", type=int, default=200)
    a = ap.parse_args()
    os.environ.setdefault("SHINKEN_RUNTIME_DIR", tempfile.mkdtemp(prefix="bench-judge-"))
    with JudgeServer() as srv:
        relay = JudgeRelay(JudgeConfig(srv.url, "m")).start()
        try:
            port = int(srv.url.rsplit(":", 1)[1].split("/")[0])
            token = relay.grant()
            direct = _timed(lambda: http.client.HTTPConnection("127.0.0.1", port, timeout=30),
                            "/v1/chat/completions", None, 10)  # warm-up
            relayed = _timed(lambda: _Unix(str(relay.socket_path)), "/v1/chat/completions", token, 10)
            direct = _timed(lambda: http.client.HTTPConnection("127.0.0.1", port, timeout=30),
                            "/v1/chat/completions", None, a.calls)
            relayed = _timed(lambda: _Unix(str(relay.socket_path)), "/v1/chat/completions", token, a.calls)
        finally:
            relay.close()
    d50, r50 = statistics.median(direct), statistics.median(relayed)
    p95 = lambda xs: sorted(xs)[int(len(xs) * 0.95) - 1]  # noqa: E731
    print(f"load average {os.getloadavg()[0]:.2f}; {a.calls} calls each")
    print(f"direct  p50 {d50:.2f} ms  p95 {p95(direct):.2f} ms")
    print(f"relayed p50 {r50:.2f} ms  p95 {p95(relayed):.2f} ms  (relay adds {r50 - d50:.2f} ms, ratio {r50 / d50:.2f})")


if __name__ == "__main__":
    main()
