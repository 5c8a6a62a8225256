"""The CUA-Gym-Hub State API: a client, and the two guest commands shinken runs inside a
sandbox to record a golden's hub state and to give a fork its own copy.

Stdlib only and self-contained, because the guest commands run this very file with the
sandbox's python3 (`python3 -I -c <this source> record|restore ...`): the path a task's setup
and reward use to reach the hub (the run network) is the path shinken uses.

The contract (every hub mock): `POST /post?sid=S` with `{"action": "set", "state": ...}` sets
current (and initial on the sid's first set), `set_current` sets current only, `reset` drops
or restores the sid's state (mocks differ); `GET /go?sid=S` -> `{initial_state,
current_state, state_diff}`; `GET /state?sid=S` -> `{stored_state, has_custom_state, sid}`;
`POST /upload?sid=S` (multipart) and `GET /files/<sid>/<name>` for uploads.
"""

from __future__ import annotations

import argparse
import json
import os
import socket
import sys
import time
import urllib.error
import urllib.parse
import urllib.request
import uuid
from typing import Any

TIMEOUT_S = 60.0  # the hub starts an app on first use (a few seconds); then calls take ms
# A name lookup that fails for now (EAI_AGAIN: the resolver did not answer; Docker's embedded DNS of
# a container just started, at load) is tried again for this long before the hub counts as
# unreachable; a name that does not exist fails at once. The request never left, so a POST is
# safe to send again.
DNS_PATIENCE_S = 15.0
RECORD_SCHEMA = "shinken.hub_state/1"
SETTLE_S = 0.5  # the state is settled when two reads this far apart agree ...
SETTLE_MAX_S = 15.0  # ... or after this long (a page that keeps saving)


class StateApiError(Exception):
    """The mock answered something the contract does not allow (kind "contract") or did
    not answer at all (kind "unreachable")."""

    def __init__(self, message: str, kind: str = "contract") -> None:
        super().__init__(message)
        self.kind = kind


def _lookup_failed_for_now(reason: Any) -> bool:
    """True for a name lookup that may succeed when asked again (EAI_AGAIN)."""
    return isinstance(reason, socket.gaierror) and reason.errno == socket.EAI_AGAIN


KEY_ENV = "SHINKEN_STATE_KEY"  # the rollout's key, in the environment of shinken's own guest command only
KEY_HEADER = "X-Shinken-State-Key"  # what shinken's hub asks of writes that reset or replace a rollout's state


class StateClient:
    """One mock app's State API at `base_url` (e.g. http://cua-gym-gmail). `key`: the rollout's key,
    sent with every POST to /post (shinken's hub refuses `set` and `reset` on a rollout's sid
    without it)."""

    def __init__(self, base_url: str, timeout: float = TIMEOUT_S, key: str | None = None) -> None:
        self.base = base_url.rstrip("/")
        self.timeout = timeout
        self.key = key
        # Never through a proxy: the hub is on the sandbox's own network.
        self._opener = urllib.request.build_opener(urllib.request.ProxyHandler({}))

    def _url(self, path: str, sid: str | None) -> str:
        return f"{self.base}{path}" + (f"?sid={urllib.parse.quote(sid)}" if sid else "")

    def _call(self, method: str, path: str, sid: str | None, body: bytes | None = None,
              content_type: str = "application/json") -> tuple[int, bytes]:
        req = urllib.request.Request(self._url(path, sid), data=body, method=method)
        if body is not None:
            req.add_header("Content-Type", content_type)
        if self.key and path == "/post":
            req.add_header(KEY_HEADER, self.key)
        deadline = time.monotonic() + DNS_PATIENCE_S
        pause = 0.25
        while True:
            try:
                with self._opener.open(req, timeout=self.timeout) as resp:
                    return resp.status, resp.read()
            except urllib.error.HTTPError as exc:
                return exc.code, exc.read()
            except (urllib.error.URLError, OSError) as exc:
                reason = getattr(exc, "reason", exc)
                if _lookup_failed_for_now(reason) and time.monotonic() + pause < deadline:
                    time.sleep(pause)
                    pause = min(pause * 2, 2.0)
                    continue
                raise StateApiError(f"{self.base}{path}: {reason}", "unreachable") from None

    def _json(self, method: str, path: str, sid: str | None, body: Any = None) -> tuple[int, Any]:
        status, data = self._call(method, path, sid, None if body is None else json.dumps(body).encode())
        try:
            return status, json.loads(data.decode("utf-8"))
        except (UnicodeDecodeError, ValueError):
            return status, None

    def post(self, sid: str | None, action: str, state: Any = None, **extra: Any) -> Any:
        doc: dict[str, Any] = {"action": action, **extra}
        if state is not None:
            doc["state"] = state
        status, reply = self._json("POST", "/post", sid, doc)
        if status != 200:
            raise StateApiError(f"{self.base}/post ({action}) answered {status}: {str(reply)[:200]}")
        return reply

    def set(self, sid: str | None, state: dict[str, Any]) -> Any:
        return self.post(sid, "set", state)

    def set_current(self, sid: str | None, state: dict[str, Any]) -> Any:
        return self.post(sid, "set_current", state)

    def reset(self, sid: str | None) -> Any:
        return self.post(sid, "reset")

    def go(self, sid: str | None) -> dict[str, Any]:
        status, doc = self._json("GET", "/go", sid)
        if status != 200 or not isinstance(doc, dict) or "current_state" not in doc:
            raise StateApiError(f"{self.base}/go answered {status}: {str(doc)[:200]}")
        return doc

    def state(self, sid: str | None) -> dict[str, Any] | None:
        """`/state`, or None when this mock has no such endpoint (it answers with its page)."""
        status, doc = self._json("GET", "/state", sid)
        if status != 200 or not isinstance(doc, dict) or "has_custom_state" not in doc:
            return None
        return doc

    def upload(self, sid: str | None, name: str, data: bytes, content_type: str = "application/octet-stream") -> Any:
        boundary = uuid.uuid4().hex
        body = (f"--{boundary}\r\nContent-Disposition: form-data; name=\"file\"; filename=\"{name}\"\r\n"
                f"Content-Type: {content_type}\r\n\r\n").encode() + data + f"\r\n--{boundary}--\r\n".encode()
        status, reply = self._call("POST", "/upload", sid, body, f"multipart/form-data; boundary={boundary}")
        if status != 200:
            raise StateApiError(f"{self.base}/upload answered {status}: {reply[:200]!r}")
        return json.loads(reply.decode("utf-8"))

    def file(self, url_path: str) -> tuple[int, bytes]:
        return self._call("GET", url_path, None)


def _canon(doc: Any) -> str:
    return json.dumps(doc, sort_keys=True, separators=(",", ":"))


# ---------------------------------------------------------------- guest commands


def record(apps: dict[str, str], sid_file: str) -> dict[str, Any]:
    """The hub state of the sid the setup wrote: per app that holds state for it, its
    initial and current state (apps without state for the sid are left out)."""
    try:
        with open(sid_file, encoding="utf-8") as fh:
            sid = fh.read().strip()
    except FileNotFoundError:
        sid = ""
    doc: dict[str, Any] = {"schema": RECORD_SCHEMA, "sid": sid or None, "apps": {}}
    if not sid:
        return doc
    for name, url in sorted(apps.items()):
        c = StateClient(url)
        st = c.state(sid)
        if st is not None and not st.get("has_custom_state"):
            continue  # the setup posted nothing to this app for the sid
        go = _settled(c, sid)
        doc["apps"][name] = {"url": url, "initial_state": go.get("initial_state"), "current_state": go.get("current_state")}
    return doc


def _settled(c: StateClient, sid: str) -> dict[str, Any]:
    """`/go` once the state stopped changing: a page the setup opened saves its first state
    a moment after it loads (the hub's mocks write their defaults back), and the golden must
    hold that, not a snapshot taken halfway."""
    deadline = time.monotonic() + SETTLE_MAX_S
    last = c.go(sid)
    while time.monotonic() < deadline:
        time.sleep(SETTLE_S)
        now = c.go(sid)
        if _canon(now) == _canon(last):
            return now
        last = now
    return last


def restore(rec: dict[str, Any], new_sid: str) -> dict[str, Any]:
    """Give `new_sid` the recorded state in every recorded app, then read it back: the fork
    starts from exactly the golden's hub state or this fails."""
    out: dict[str, Any] = {"sid": new_sid, "apps": []}
    for name, app in sorted((rec.get("apps") or {}).items()):
        c = StateClient(app["url"], key=os.environ.get(KEY_ENV))
        initial, current = app.get("initial_state"), app.get("current_state")
        if isinstance(initial, dict):
            c.set(new_sid, initial)  # a fresh sid: sets initial and current
        if isinstance(current, dict) and _canon(current) != _canon(initial):
            c.set_current(new_sid, current)
        got = c.go(new_sid)
        if _canon(got.get("initial_state")) != _canon(initial) or _canon(got.get("current_state")) != _canon(current):
            raise StateApiError(f"{name}: after restoring sid {new_sid} the hub reports a different state than the "
                                "golden recorded (this mock's /post does not replace state as the contract says)")
        out["apps"].append(name)
    return out


def reset(rec: dict[str, Any], sid: str) -> dict[str, Any]:
    """The State API's `reset` for `sid` in every app the golden recorded state in (the vandal
    probe: the task's web state gone; most mocks then serve their default, a few the initial state)."""
    out: dict[str, Any] = {"sid": sid, "apps": []}
    for name, app in sorted((rec.get("apps") or {}).items()):
        StateClient(app["url"], key=os.environ.get(KEY_ENV)).reset(sid)
        out["apps"].append(name)
    return out


def _write_sid(path: str, sid: str) -> None:
    """Rewrite the sid file in place (keeping its owner and mode), or create it for `user`."""
    exists = os.path.exists(path)
    with open(path, "w", encoding="utf-8") as fh:
        fh.write(sid)
    if not exists:
        os.chmod(path, 0o644)


def main(argv: list[str] | None = None) -> int:
    p = argparse.ArgumentParser(prog="shinken-hub-state")
    sub = p.add_subparsers(dest="cmd", required=True)
    r = sub.add_parser("record")
    r.add_argument("--sid-file", required=True)
    r.add_argument("--out", required=True)
    r.add_argument("--app", action="append", default=[], help="NAME=URL")
    s = sub.add_parser("restore")
    s.add_argument("--record", required=True)
    s.add_argument("--sid", required=True)
    s.add_argument("--sid-file", required=True)
    z = sub.add_parser("reset")
    z.add_argument("--record", required=True)
    z.add_argument("--sid", required=True)
    a = p.parse_args(argv)
    t0 = time.monotonic()
    try:
        if a.cmd == "record":
            apps = dict(x.split("=", 1) for x in a.app)
            doc = record(apps, a.sid_file)
            os.makedirs(os.path.dirname(a.out), mode=0o700, exist_ok=True)
            with open(a.out, "w", encoding="utf-8") as fh:
                json.dump(doc, fh)
            os.chmod(a.out, 0o600)
            summary = {"sid": doc["sid"], "apps": {n: len(_canon(v)) for n, v in doc["apps"].items()}}
        elif a.cmd == "reset":
            with open(a.record, encoding="utf-8") as fh:
                summary = reset(json.load(fh), a.sid)
        else:
            with open(a.record, encoding="utf-8") as fh:
                rec = json.load(fh)
            summary = restore(rec, a.sid) if rec.get("sid") else {"sid": None, "apps": []}
            if rec.get("sid"):
                _write_sid(a.sid_file, a.sid)
    except StateApiError as exc:
        print(json.dumps({"error": str(exc), "kind": exc.kind}))
        return 3
    except (OSError, ValueError) as exc:
        print(json.dumps({"error": f"{type(exc).__name__}: {exc}", "kind": "guest"}))
        return 3
    summary["ms"] = round((time.monotonic() - t0) * 1000, 1)
    print(json.dumps(summary))
    return 0


if __name__ == "__main__":
    sys.exit(main())
