"""Whether a fleet address answers as a Ray head that accepts this machine's token, in seconds.

`ray.init` against an address with nothing behind it retries for minutes, printing Ray's
connection warnings (a typo in the port was seen running over 5 minutes); against a head that
refuses the token it retries for about 20 s and then blames the connection. So every driver
checks first: a TCP connect (bounded), then Ray's own GCS client in a child process (bounded,
killed on time; its warnings stay in the child), which fails at once on a refused token."""

from __future__ import annotations

import json
import os
import socket
import subprocess
import sys
from collections.abc import Mapping

from shinken.errors import EnvironmentProblem, ShinkenError
from shinken.fleet import ray_auth

CONNECT_S = 5.0  # a TCP connect to the head's port
ANSWER_S = 30.0  # the child's Python and Ray start plus the GCS's answer, on a loaded machine

# Ray's GCS client connects and reads the cluster id in its constructor: an authentication
# failure raises AuthenticationError there, a port that is not a GCS makes it retry (the parent
# kills it after ANSWER_S).
_PROBE = r"""
import json, sys
try:
    from ray._raylet import GcsClient
except Exception as exc:
    print(json.dumps({"error": "ray", "detail": f"{type(exc).__name__}: {exc}"[:300]}))
    sys.exit(0)
try:
    GcsClient(address=sys.argv[1])
    print(json.dumps({"ok": True}))
except Exception as exc:
    kind = "auth" if type(exc).__name__ == "AuthenticationError" else "error"
    print(json.dumps({"error": kind, "detail": f"{type(exc).__name__}: {exc}"[:300]}))
"""


def reachable(address: str) -> None:
    """Return when something accepts a TCP connection at `address` (HOST:PORT) within CONNECT_S;
    one-line ShinkenError (exit 2) otherwise."""
    host, _, port = address.rpartition(":")
    try:
        with socket.create_connection((host.strip("[]"), int(port)), timeout=CONNECT_S):
            pass
    except (OSError, ValueError) as exc:
        why = getattr(exc, "strerror", None) or str(exc) or type(exc).__name__
        raise ShinkenError(f"nothing answers at {address} ({why}): check --address (the head's HOST:PORT, which "
                           "`shinken fleet head` prints) or start the head") from None


def answers(address: str, env: Mapping[str, str] | None = None) -> None:
    """Return when `address` is a Ray head that accepts this process's credentials (`env`: the
    environment Ray will run with); one-line ShinkenError (exit 2) when no Ray head answers there
    within ANSWER_S or the head refuses the token."""
    env = dict(os.environ if env is None else env)
    try:
        done = subprocess.run([sys.executable, "-c", _PROBE, address], capture_output=True, text=True,
                              timeout=ANSWER_S, env=env, stdin=subprocess.DEVNULL)
    except subprocess.TimeoutExpired:
        raise ShinkenError(f"{address} accepts connections but no Ray head answered within {ANSWER_S:.0f}s: check "
                           "--address (the port of the head's GCS, 6379 unless `fleet head --port` said otherwise)") from None
    lines = [x for x in done.stdout.splitlines() if x.startswith("{")]
    try:
        doc = json.loads(lines[-1]) if lines else {"error": "error", "detail": (done.stderr.strip()[-300:] or "no answer")}
    except ValueError:
        doc = {"error": "error", "detail": lines[-1][:300]}
    if doc.get("ok"):
        return
    if doc["error"] == "auth":
        if env.get(ray_auth.MODE_ENV) == "disabled":
            raise ShinkenError(f"the Ray head at {address} requires a token and this machine runs without one "
                               f"({ray_auth.INSECURE_ENV}=1): unset it and {ray_auth.HAND_OVER}") from None
        raise ShinkenError(f"the Ray head at {address} refused this machine's token ({ray_auth.token_source(env)}): "
                           f"{ray_auth.HAND_OVER}") from None
    if doc["error"] == "ray":
        raise EnvironmentProblem(f"the fleet needs Ray: pip install 'shinken-cua[ray]' ({doc.get('detail')})")
    raise ShinkenError(f"{address} did not answer as a Ray head ({doc.get('detail')}): check --address") from None
