"""The fleet's Ray runs with token authentication (fleet/ray_auth.py), and a fleet address that does
not answer as a Ray head ends a command in seconds with one line (fleet/head_check.py).

The head is started the way an operator starts it (`shinken fleet head`), with nothing else: a Ray
client without the fleet's token, the attacker of docs/security.md, must be refused by it, and
shinken's own commands must reach it with the token and say what to do without it."""

from __future__ import annotations

import json
import os
import socket
import subprocess
import sys
import tempfile
import time
from pathlib import Path

import pytest

VENV_BIN = Path(sys.executable).parent


def _shinken(*args: str, env: dict[str, str] | None = None, timeout: float = 90) -> subprocess.CompletedProcess:
    base = {k: v for k, v in os.environ.items() if not k.startswith(("RAY_AUTH", "SHINKEN_INSECURE"))}
    return subprocess.run([str(VENV_BIN / "shinken"), *args], capture_output=True, text=True, timeout=timeout,
                          env={**base, "HOME": tempfile.gettempdir() + "/shinken-no-home", **(env or {})})


def _one_line(r: subprocess.CompletedProcess) -> str:
    lines = r.stderr.strip().splitlines()
    assert r.returncode == 2 and len(lines) == 1 and "Traceback" not in r.stderr, (r.returncode, r.stderr[-2000:])
    return lines[0]


def _closed_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


def test_a_fleet_address_with_nothing_behind_it_ends_in_seconds() -> None:
    """A typo in the head's port: one line, exit 2, within seconds (on f382b83 Ray's connection
    warnings ran for over 5 minutes)."""
    for address in ("127.0.0.1:1", f"127.0.0.1:{_closed_port()}"):
        t0 = time.monotonic()
        r = _shinken("fleet", "status", "--address", address, timeout=60)
        took = time.monotonic() - t0
        line = _one_line(r)
        assert f"nothing answers at {address}" in line and "--address" in line, line
        assert took < 30, took  # ~1 s alone; generous for a loaded machine


def test_ray_auth_disabled_in_the_environment_is_refused_unless_named() -> None:
    r = _shinken("fleet", "status", "--address", "127.0.0.1:1", env={"RAY_AUTH_MODE": "disabled"})
    assert "nothing answers" in _one_line(r)  # the address is checked first
    with socket.socket() as listener:
        listener.bind(("127.0.0.1", 0))
        listener.listen()
        address = f"127.0.0.1:{listener.getsockname()[1]}"
        line = _one_line(_shinken("fleet", "status", "--address", address, env={"RAY_AUTH_MODE": "disabled"}))
        assert "RAY_AUTH_MODE=disabled" in line and "--insecure-no-auth" in line, line
        line = _one_line(_shinken("fleet", "status", "--address", address))
        assert "no Ray authentication token here" in line and "RAY_AUTH_TOKEN_PATH" in line, line
    for command in (["fleet", "head"], ["fleet", "join", "--address", "127.0.0.1:1", "--name", "x"]):
        line = _one_line(_shinken(*command, "--bind", "203.0.113.7"))
        assert "not an address of this machine" in line, line


@pytest.mark.slow
def test_a_port_that_is_not_a_ray_head_ends_within_the_bound() -> None:
    from shinken.fleet.head_check import ANSWER_S

    with socket.socket() as listener:  # accepts connections, never speaks Ray
        listener.bind(("127.0.0.1", 0))
        listener.listen()
        address = f"127.0.0.1:{listener.getsockname()[1]}"
        t0 = time.monotonic()
        line = _one_line(_shinken("fleet", "status", "--address", address, env={"RAY_AUTH_TOKEN": "t" * 64},
                                  timeout=ANSWER_S + 60))
        took = time.monotonic() - t0
    assert "no Ray head answered" in line, line
    assert took < ANSWER_S + 30, took


@pytest.fixture(scope="module")
def head():
    """`shinken fleet head` on loopback; its token file made by it, in a folder of this module."""
    from fleet_harness import RAY_ARGS, free_port, stop_group

    base = Path(tempfile.mkdtemp(prefix="shka-", dir="/tmp"))  # short: Ray's socket paths
    token = base / "token" / "auth_token"
    port = free_port()
    env = {"RAY_AUTH_TOKEN_PATH": str(token), "SHINKEN_RAY_START_ARGS": f"{RAY_ARGS} --temp-dir={base / 'r'}"}
    with open(base / "head.log", "wb") as log:
        proc = subprocess.Popen([str(VENV_BIN / "shinken"), "fleet", "head", "--bind", "127.0.0.1", "--port", str(port)],
                                stdout=log, stderr=subprocess.STDOUT, stdin=subprocess.DEVNULL, start_new_session=True,
                                env={**{k: v for k, v in os.environ.items() if not k.startswith("RAY_AUTH")}, **env})
    try:
        deadline = time.monotonic() + 300
        while "Ray runtime started" not in (text := (base / "head.log").read_text(errors="replace")):
            assert proc.poll() is None and time.monotonic() < deadline, text[-3000:]
            time.sleep(0.5)
        yield {"address": f"127.0.0.1:{port}", "token": token, "log": text}
    finally:
        stop_group(proc, wait_s=5)
        import shutil

        shutil.rmtree(base, ignore_errors=True)


@pytest.mark.slow
def test_the_head_has_token_auth_and_refuses_a_client_without_the_token(head) -> None:
    token: Path = head["token"]
    # The head made the token, readable by its owner only, and said where it is and how to hand it over.
    assert token.stat().st_mode & 0o777 == 0o600 and len(token.read_text().strip()) == 64
    assert f"the token: {token}" in head["log"] and "RAY_AUTH_TOKEN_PATH" in head["log"]
    # An attacker's Ray client without the token (authentication off on its side, as the docs of
    # f382b83 told users) is refused by the head.
    probe = ("import ray; ray.init(address=%r, log_to_driver=False, configure_logging=False); "
             "print('CONNECTED', len(ray.nodes()))") % head["address"]
    r = subprocess.run([sys.executable, "-c", probe], capture_output=True, text=True, timeout=180,
                       env={**os.environ, "RAY_AUTH_MODE": "disabled", "RAY_AUTH_TOKEN_PATH": "/nonexistent"})
    assert r.returncode != 0 and "CONNECTED" not in r.stdout, (r.stdout, r.stderr[-2000:])
    assert "InvalidAuthToken" in r.stderr or "Authentication" in r.stderr, r.stderr[-2000:]
    # shinken's commands: a wrong token is one line naming the fix, in seconds; the right one works.
    t0 = time.monotonic()
    line = _one_line(_shinken("fleet", "status", "--address", head["address"], env={"RAY_AUTH_TOKEN": "0" * 64}))
    assert "refused this machine's token" in line and "RAY_AUTH_TOKEN_PATH" in line, line
    assert time.monotonic() - t0 < 60
    r = _shinken("fleet", "status", "--address", head["address"], "--json", env={"RAY_AUTH_TOKEN_PATH": str(token)})
    assert r.returncode == 0, r.stderr[-2000:]
    assert json.loads(r.stdout)["hosts"] == []
