"""Helpers for the NeMo Gym tests: the runner container (python 3.13 + nemo-gym 0.7.0) with
the Docker socket and the needed host paths mounted at the same paths, and a cookie-carrying
HTTP client that behaves like NeMo Gym's simple agent towards a resources server."""

from __future__ import annotations

import http.client
import json
import socket
import subprocess
import time
import uuid
from dataclasses import dataclass, field
from http.cookies import SimpleCookie
from pathlib import Path
from typing import Any

from shinken.sandbox.ownership import labels_for
from shinken.workspace.gym_image import HOST_CA, IMAGE_CA_PATH, ensure_gym_image

SANDBOX_IMAGE = "shinken/sandbox-linux:latest"


def sandbox_image() -> str:
    """The sandbox image the demo tasks run in (it has the desktop, AT-SPI and zenity; built by
    the images module and cached by content hash)."""
    from shinken.images.build import ensure_image

    ensure_image("linux")
    return SANDBOX_IMAGE


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


@dataclass
class GymContainer:
    """A detached nemo-gym container on the host network and pid namespace: the servers it
    runs reach 127.0.0.1 services of the host, and the forks they create carry owner labels
    (host/pid) that `shinken gc` on the host reads correctly."""

    mounts: list[Path]
    env: dict[str, str] = field(default_factory=dict)
    workdir: str | None = None
    name: str = field(default_factory=lambda: f"shinken-gymtest-{uuid.uuid4().hex[:10]}")
    image: str = ""

    def start(self, command: str) -> "GymContainer":
        self.image = self.image or ensure_gym_image()
        args = ["docker", "run", "-d", "--name", self.name, "--network", "host", "--pid", "host", "--init",
                "-v", "/var/run/docker.sock:/var/run/docker.sock",
                "-v", f"{HOST_CA}:{IMAGE_CA_PATH}:ro"]
        for k, v in labels_for("server", run=self.name).items():
            args += ["--label", f"{k}={v}"]
        for m in dict.fromkeys(Path(p).resolve() for p in self.mounts):
            args += ["-v", f"{m}:{m}"]
        for k, v in self.env.items():
            args += ["-e", f"{k}={v}"]
        if self.workdir:
            args += ["-w", self.workdir]
        args += [self.image, "bash", "-c", command]
        r = subprocess.run(args, capture_output=True, text=True)
        assert r.returncode == 0, f"docker run failed: {r.stderr}"
        return self

    def exec(self, command: str, timeout: float = 600) -> subprocess.CompletedProcess:
        args = ["docker", "exec"]
        if self.workdir:
            args += ["-w", self.workdir]
        return subprocess.run([*args, self.name, "bash", "-c", command], capture_output=True, text=True,
                              timeout=timeout)

    def running(self) -> bool:
        r = subprocess.run(["docker", "inspect", "-f", "{{.State.Running}}", self.name],
                           capture_output=True, text=True)
        return r.stdout.strip() == "true"

    def logs(self, tail: int = 80) -> str:
        r = subprocess.run(["docker", "logs", "--tail", str(tail), self.name], capture_output=True, text=True)
        return r.stdout + r.stderr

    def pids(self) -> set[int]:
        r = subprocess.run(["docker", "top", self.name, "-eo", "pid"], capture_output=True, text=True)
        return {int(x) for x in r.stdout.split()[1:] if x.isdigit()}

    def stop(self) -> list[str]:
        """Stop (SIGTERM, so servers can close their engines), remove, then remove forks that
        servers in this container made and did not remove (their owner pid was one of ours).
        Returns the ids of such leftovers: a test may assert there were none."""
        pids = self.pids()
        subprocess.run(["docker", "stop", "-t", "30", self.name], capture_output=True)
        subprocess.run(["docker", "rm", "-f", self.name], capture_output=True)
        host = socket.gethostname()
        leftovers = []
        for kind in ("fork", "pool"):
            r = subprocess.run(["docker", "ps", "-a", "--filter", f"label=shinken.kind={kind}", "--format",
                                '{{.ID}} {{.Label "shinken.owner"}}'], capture_output=True, text=True)
            for line in r.stdout.splitlines():
                cid, _, owner = line.partition(" ")
                parts = owner.rsplit("/", 2)
                if len(parts) == 3 and parts[0] == host and parts[1].isdigit() and int(parts[1]) in pids:
                    leftovers.append(cid)
        if leftovers:
            subprocess.run(["docker", "rm", "-f", *leftovers], capture_output=True)
        return leftovers


@dataclass
class Reply:
    status: int
    text: str
    cookies: dict[str, str]

    def json(self) -> Any:
        return json.loads(self.text)


def post(port: int, path: str, body: Any = None, cookies: dict[str, str] | None = None,
         timeout: float = 300) -> Reply:
    """One POST like nemo_gym's server_client: explicit request cookies, Set-Cookie returned."""
    conn = http.client.HTTPConnection("127.0.0.1", port, timeout=timeout)
    headers = {"Content-Type": "application/json"}
    if cookies:
        headers["Cookie"] = "; ".join(f"{k}={v}" for k, v in cookies.items())
    try:
        conn.request("POST", path, body=json.dumps(body if body is not None else {}), headers=headers)
        resp = conn.getresponse()
        text = resp.read().decode("utf-8", errors="replace")
        jar: dict[str, str] = {}
        for header in resp.headers.get_all("Set-Cookie") or []:
            c = SimpleCookie()
            c.load(header)
            jar.update({k: m.value for k, m in c.items()})
        return Reply(resp.status, text, jar)
    finally:
        conn.close()


def wait_http(port: int, path: str = "/docs", timeout: float = 300, container: GymContainer | None = None) -> None:
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        try:
            conn = http.client.HTTPConnection("127.0.0.1", port, timeout=5)
            conn.request("GET", path)
            if conn.getresponse().status < 500:
                return
        except OSError:
            pass
        if container is not None and not container.running():
            raise AssertionError(f"server container exited:\n{container.logs()}")
        time.sleep(0.5)
    raise AssertionError(f"nothing answered on 127.0.0.1:{port}{path} within {timeout:.0f}s"
                         + (f"\n{container.logs()}" if container else ""))
