"""`shinken fleet head`: the fleet's Ray head, with token authentication, advertised on the
address the operator names.

The head runs in the foreground (`ray start --head --block`, the process replaced by it), so a
service manager or the operator's shell owns it and stops it with a signal. What it prints first
says where the token is and how to hand it to the hosts and the workspace server's machine."""

from __future__ import annotations

import ipaddress
import os
import shlex
import socket
import sys
from pathlib import Path

from shinken.errors import ShinkenError
from shinken.fleet import ray_auth

DEFAULT_PORT = 6379


def check_bind(bind: str) -> str:
    """`bind` as an IP address of this machine; ShinkenError otherwise."""
    try:
        ip = ipaddress.ip_address(bind.strip().strip("[]"))
    except ValueError:
        raise ShinkenError(f"--bind {bind!r}: give the IP address of this machine's interface the fleet reaches, "
                           "e.g. 10.0.0.1 (127.0.0.1 for a fleet on this machine only)") from None
    family = socket.AF_INET6 if ip.version == 6 else socket.AF_INET
    with socket.socket(family, socket.SOCK_STREAM) as s:
        try:
            s.bind((str(ip), 0))
        except OSError:
            raise ShinkenError(f"--bind {bind}: not an address of this machine (`ip -brief address` lists them)") from None
    return str(ip)


def command(bind: str, port: int) -> list[str]:
    """The `ray start` of the head: no CPUs of its own (it places nothing), no dashboard (its HTTP
    API submits jobs), more options from SHINKEN_RAY_START_ARGS."""
    if not 0 < port < 65536:
        raise ShinkenError(f"--port {port}: give a TCP port, 6379 by default")
    ray_bin = str(Path(sys.executable).parent / "ray")
    return [ray_bin, "start", "--head", "--block", f"--port={port}", f"--node-ip-address={bind}", "--num-cpus=0",
            "--include-dashboard=false", "--disable-usage-stats",
            *shlex.split(os.environ.get("SHINKEN_RAY_START_ARGS", ""))]


def notes(bind: str, port: int, token: str | None) -> list[str]:
    """What the operator reads before Ray's own output."""
    if token is None:
        return [f"WARNING: Ray head WITHOUT authentication ({ray_auth.INSECURE_FLAG}): anyone who reaches {bind}:{port} "
                "runs code on every fleet host as the owner of its Docker engine (docs/security.md)"]
    return [f"Ray head at {bind}:{port} with token authentication; the token: {token}",
            "hand it to every host (`shinken fleet join`) and the workspace server's machine: copy the file there as "
            f"~/.ray/auth_token (mode 600) or set {ray_auth.TOKEN_PATH_ENV} to its path",
            f"Ray 2.60 listens on every interface whatever --bind says: let only the fleet's machines reach port {port} "
            "and Ray's other ports (docs/security.md)"]


def run(bind: str, port: int = DEFAULT_PORT, *, insecure_flag: bool = False) -> None:
    """Check, print the notes, then become the head's `ray start` (never returns)."""
    bind = check_bind(bind)
    cmd = command(bind, port)
    token = None if ray_auth.insecure(insecure_flag) else ray_auth.ensure_token()
    mode = ray_auth.auth_env(insecure_flag=insecure_flag)
    for line in notes(bind, port, token):
        print(line, file=sys.stderr)
    sys.stderr.flush()
    sys.stdout.flush()
    os.execve(cmd[0], cmd, {**os.environ, **mode, "PYTHONUNBUFFERED": "1"})
