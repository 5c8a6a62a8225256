"""The suite's NeMo Gym session: the runner container (python 3.13 + nemo-gym 0.7.0), the demo
workspace made the way a user makes one, and helpers that talk to Gym's servers.

Session fixtures (registered in tests/conftest.py, so every Gym test shares one of each):
- `gym_workspace`: the demo tasks probed for real (`shinken probe --replay demo/solutions.jsonl`),
  a workspace made from that receipt by `shinken make-workspace`, then MOVED to another folder;
  inside the runner it is mounted at WS_MOUNT, a path that is neither where it was made nor
  where it now lives (what "runs wherever it is copied" means).
- `gym_runner`: a runner container with the workspace at WS_MOUNT, the Docker socket, the CA
  bundle, the uv cache and the cached per-server venvs; `exec(cmd)` runs a command in the
  workspace. Gym's gates run here without starting services.
- `gym_env`: `gym env start` in that container with the scripted policy (tests/scripted_policy.py)
  as the model; yields {ws, tmp, container, policy, commands, log, ready_s} and sets `leftovers`.
- `gym_examples`: one `gym eval run` over the example rows with the scripted policy, copied to
  data/example_rollouts.jsonl, and `gym dataset collate --mode example_validation` (which writes
  data/example_metrics.json), as Gym's own servers ship them.

Per-server venvs (Gym builds four, a few minutes cold) are cached in a host folder keyed by the
runner image and the server's requirements without the shinken wheel line (the wheel changes
with every source edit and installs in a second); the folder is locked while a session uses it,
and a second session at the same time builds private venvs instead of sharing a live one.
"""

from __future__ import annotations

import contextlib
import fcntl
import hashlib
import http.client
import json
import os
import shutil
import socket
import subprocess
import sys
import time
import uuid
from dataclasses import dataclass, field
from http.cookies import SimpleCookie
from pathlib import Path
from typing import Any, Callable, Iterator

import pytest

from shinken.sandbox.docker_client import docker_run_argv
from shinken.sandbox.ownership import labels_for
from cli_runner import CliResult, run_cli  # beside this module (benchmarks import it with tests/ on sys.path)
from shinken.workspace.gym_config import MODEL_CONFIG  # noqa: F401  (for the Gym tests and benchmarks)
from shinken.workspace.gym_image import HOST_CA, IMAGE_CA_PATH, ensure_gym_image

TESTS = Path(__file__).resolve().parent
DEMO = TESTS.parent / "demo"
SOLUTIONS = DEMO / "solutions.jsonl"  # rollouts recorded by `gym eval run` with the scripted policy
CACHE = Path.home() / ".cache" / "shinken"
UV_CACHE = CACHE / "nemo-gym-uv"
VENV_CACHE = CACHE / "gym-venvs"
WS_MOUNT = "/gym/workspace"  # fixed: a venv's scripts name the absolute path it was built at
NAME = "shinken_cua"
AGENT = f"{NAME}_simple_agent"
SPREADSHEET = "9a1f6c2e-5b3d-4e8a-9c71-2f0d4b6a8e13"
DEMO_TASKS = ("hello-file", "zenity-entry", SPREADSHEET)  # the demo tasks the scripted policy solves
# Where Gym puts each server's venv below the working directory (its default uv_venv_dir).
VENV_DIRS = (f"resources_servers/{NAME}", "responses_api_agents/shinken_agent",
             "responses_api_models/openai_model", "environment_servers/legacy_agent")
# A screenshot workspace runs the vision agent it ships instead of the text one.
VISION_VENV_DIRS = (f"resources_servers/{NAME}", "responses_api_agents/shinken_vision_agent",
                    "responses_api_models/openai_model", "environment_servers/legacy_agent")


def sandbox_image(kind: str = "cua") -> str:
    """The content-hash tag of a sandbox image: `cua` (the full task image: desktop, AT-SPI,
    zenity, LibreOffice: every demo task runs on it) or `linux`."""
    from shinken.images.build import build_image

    return build_image(kind).tag


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def shinken(*args: str, timeout: float = 1800) -> CliResult:
    return run_cli(*args, timeout=timeout)  # in process (tests/cli_runner.py)


@dataclass
class GymContainer:
    """A detached nemo-gym container on the host network and pid namespace: the servers it
    runs reach 127.0.0.1 services of the host, and the forks they create carry owner labels
    (host/pid) that `shinken gc` on the host reads correctly. `mounts` appear at their host
    path, `binds` (host path, container path) elsewhere."""

    mounts: list[Path] = field(default_factory=list)
    binds: list[tuple[Path, str]] = field(default_factory=list)
    env: dict[str, str] = field(default_factory=dict)
    workdir: str | None = None
    name: str = field(default_factory=lambda: f"shinken-gymtest-{uuid.uuid4().hex[:10]}")
    image: str = ""
    # CPU weight (docker's cpu-shares; every container has 1024 by default). Gym starts Ray in
    # here, and Ray's raylet gives its Python dashboard agent a fixed 15 s to write its port
    # file (ray/util/port_persistence.h, not configurable in the Ray that Gym 0.7.0 pins), then
    # aborts ("Timed out waiting for file .../metrics_agent_port_..."). At load 25-70 on 2 cores,
    # mostly other containers (desktops, builds), the agent's imports took longer: `gym env start`
    # failed twice in a row. A heavier weight gives the Gym stack its share under contention
    # only; an idle machine is unaffected.
    cpu_shares: int = 8192

    def start(self, command: str = "exec sleep infinity") -> "GymContainer":
        self.image = self.image or ensure_gym_image()
        args = [*docker_run_argv(labels_for("server", run=self.name)),
                "-d", "--name", self.name, "--network", "host", "--pid", "host", "--init",
                "--cpu-shares", str(self.cpu_shares),
                "-v", "/var/run/docker.sock:/var/run/docker.sock",
                "-v", f"{HOST_CA}:{IMAGE_CA_PATH}:ro"]
        for m in dict.fromkeys(Path(p).resolve() for p in self.mounts):
            args += ["-v", f"{m}:{m}"]
        for host, inside in self.binds:
            args += ["-v", f"{Path(host).resolve()}:{inside}"]
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

    def spawn(self, command: str, log: str, wait_s: float = 30) -> int:
        """Start `command` in the background (output to `log`, a container path); return its pid,
        a host pid (shared pid namespace), so the caller can signal exactly that process.
        The pid comes from a file named for this call only, waited for up to `wait_s`: a
        `{log}.pid` an earlier session left in the same workspace named a dead process, which
        wait_ready took for a `gym env start` that had exited with an empty log."""
        pidfile = f"{log}.{uuid.uuid4().hex[:8]}.pid"
        r = self.exec(f"rm -f {pidfile}; nohup bash -c 'echo $$ > {pidfile}; exec {command}' > {log} 2>&1 < /dev/null & "
                      f"end=$((SECONDS + {int(wait_s)})); until [ -s {pidfile} ] || [ $SECONDS -ge $end ]; do "
                      f"sleep 0.1; done; cat {pidfile} && rm -f {pidfile}", timeout=wait_s + 30)
        assert r.returncode == 0 and r.stdout.strip().isdigit(), \
            f"{command!r} did not start within {wait_s:.0f} s: {r.stdout}{r.stderr}"
        return int(r.stdout.strip())

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
        leftovers = containers_owned_by(pids, ("fork", "pool"))
        if leftovers:
            subprocess.run(["docker", "rm", "-f", *leftovers], capture_output=True)
        return leftovers


def containers_owned_by(pids: set[int], kinds: tuple[str, ...]) -> list[str]:
    """Ids of shinken containers of these kinds whose owner label names one of `pids` on this host."""
    host = socket.gethostname()
    out = []
    for kind in kinds:
        r = subprocess.run(["docker", "ps", "-a", "--filter", f"label=shinken.kind={kind}", "--format",
                            '{{.ID}} {{.Label "shinken.owner"}}'], capture_output=True, text=True)
        for line in r.stdout.splitlines():
            cid, _, owner = line.partition(" ")
            parts = owner.rsplit("/", 2)
            if len(parts) == 3 and parts[0] == host and parts[1].isdigit() and int(parts[1]) in pids:
                out.append(cid)
    return out


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


# ---------------------------------------------------------------- the resources server on its own

SERVER_LAUNCHER = """
import sys, uvicorn
sys.path.insert(0, {server!r})
from omegaconf import OmegaConf
from nemo_gym.config_types import BaseServerConfig
from nemo_gym.server_utils import ServerClient
from app import ShinkenCuaResourcesServer, load_config
# Gym's real client, pointed at a head server that is not there: the resources server calls no other server.
client = ServerClient(head_server_config=BaseServerConfig(host="127.0.0.1", port={no_head_port}),
                      global_config_dict=OmegaConf.create({{}}))
cfg = load_config().model_copy(update={{"port": {port}}})
server = ShinkenCuaResourcesServer(config=cfg, server_client=client)
uvicorn.run(server.setup_webserver(), host="127.0.0.1", port={port}, log_level="warning")
"""


def resources_server(tmp: Path, ws: "GymWorkspace", port: int, *, binds: list[tuple[Path, str]] | None = None,
                     env: dict[str, str] | None = None) -> GymContainer:
    """The workspace's generated server (Gym's server class, its own config, the vendored shinken
    wheel) alone in a runner container, answering on 127.0.0.1:`port`; `tmp` holds its launcher."""
    tmp.mkdir(parents=True, exist_ok=True)
    inside = f"{WS_MOUNT}/resources_servers/{NAME}"
    (tmp / "launch.py").write_text(SERVER_LAUNCHER.format(server=inside, port=port, no_head_port=free_port()))
    wheel = next((ws.server / "vendor").glob("shinken-*.whl")).name
    c = GymContainer(mounts=[tmp], binds=[(ws.path, WS_MOUNT), *(binds or [])], env=dict(env or {}), workdir=inside)
    c.start(f"pip install -q --no-cache-dir vendor/{wheel} && exec python {tmp / 'launch.py'}")
    try:
        wait_http(port, container=c, timeout=600)
    except BaseException:
        c.stop()
        raise
    return c


# ---------------------------------------------------------------- per-server venv cache


def venv_key(gym_image: str, requirements: str, dirs: tuple[str, ...] = VENV_DIRS) -> str:
    """Cache key: the runner image (its python, Gym and the built-in servers' requirements),
    the resources server's requirements minus the vendored shinken wheel, and the server dirs
    (a screenshot workspace's set differs, so it has its own shared cache)."""
    image_id = subprocess.run(["docker", "image", "inspect", "-f", "{{.Id}}", gym_image],
                              capture_output=True, text=True).stdout.strip()
    kept = [ln for ln in requirements.splitlines() if ln.strip() and not ln.strip().startswith("./vendor/")]
    extra = [] if dirs == VENV_DIRS else list(dirs)  # the default key is what it always was
    return hashlib.sha256("\n".join([image_id, WS_MOUNT, *kept, *extra]).encode()).hexdigest()[:16]


@dataclass
class VenvCache:
    """The venv folders a Gym container mounts over `<WS_MOUNT>/<server dir>/.venv`."""

    root: Path
    shared: bool  # False: a private, cold set (the shared one was in use)
    lock: Any = None
    dirs: tuple[str, ...] = VENV_DIRS

    def binds(self) -> list[tuple[Path, str]]:
        out = []
        for rel in self.dirs:
            host = self.root / rel
            host.mkdir(parents=True, exist_ok=True)
            out.append((host, f"{WS_MOUNT}/{rel}/.venv"))
        return out

    def release(self) -> None:
        if self.lock is not None:
            self.lock.close()
        elif self.root.exists():  # private venvs (GBs) go with the session that built them
            subprocess.run(["rm", "-rf", str(self.root)], capture_output=True)


# Shared venv sets kept per key: the suite's session holds the first for its whole run, so a test
# that starts a Gym session of its own beside it (a private engine, a web workspace) takes the
# second, warm after its first use, instead of building a cold private set every run.
VENV_SLOTS = 2


def acquire_venvs(key: str, private: Path, dirs: tuple[str, ...] = VENV_DIRS) -> VenvCache:
    VENV_CACHE.mkdir(parents=True, exist_ok=True)
    for slot in range(1, VENV_SLOTS + 1):
        name = key if slot == 1 else f"{key}-{slot}"
        lock = open(VENV_CACHE / f"{name}.lock", "a+")
        try:
            fcntl.flock(lock, fcntl.LOCK_EX | fcntl.LOCK_NB)
        except BlockingIOError:
            lock.close()
            continue
        return VenvCache(VENV_CACHE / name, shared=True, lock=lock, dirs=dirs)
    print(f"\nall {VENV_SLOTS} shared Gym venv sets {key} are in use: building private ones", file=sys.stderr)
    return VenvCache(private, shared=False, dirs=dirs)


# ---------------------------------------------------------------- the session


@dataclass
class GymWorkspace:
    path: Path  # where it lives on the host now (moved after it was made)
    made_at: Path  # where make-workspace wrote it
    mount: str  # where Gym containers see it
    result: dict[str, Any]  # make-workspace --json
    receipt: Path
    tmp: Path

    @property
    def server(self) -> Path:
        return self.path / "resources_servers" / NAME

    @property
    def commands(self) -> list[str]:
        return self.result["commands"]

    def command(self, prefix: str) -> str:
        return next(c for c in self.commands if c.startswith(prefix))


@pytest.fixture(scope="session")
def gym_workspace(tmp_path_factory, docker_client) -> GymWorkspace:
    return make_demo_workspace(tmp_path_factory.mktemp("gym"))


def make_demo_workspace(tmp: Path) -> GymWorkspace:
    """The demo tasks probed, a workspace made from the receipt and moved (see the module doc)."""
    image = sandbox_image()
    ensure_gym_image()
    ids = tmp / "ids.txt"
    ids.write_text("".join(t + "\n" for t in DEMO_TASKS))
    receipt = tmp / "receipt.json"
    # --state-fidelity filesystem as scripts/demo.sh: the spreadsheet bundle declares no fidelity.
    r = shinken("probe", str(DEMO), "--ids", str(ids), "--image", image, "--replay", str(SOLUTIONS),
                "--state-fidelity", "filesystem", "--receipt", str(receipt), "--run-dir", str(tmp / "probe-run"))
    assert r.returncode == 0, r.stdout + r.stderr
    made_at = tmp / "made" / "ws"
    r = shinken("make-workspace", "--dest", str(made_at), "--task-root", str(DEMO), "--ids", str(receipt),
                "--rollouts", str(SOLUTIONS), "--image", image, "--license", "Apache-2.0", "--json")
    assert r.returncode == 0, r.stderr
    moved = tmp / "moved" / "somewhere-else"
    moved.parent.mkdir(parents=True)
    shutil.move(str(made_at), str(moved))
    assert not made_at.exists()
    return GymWorkspace(moved, made_at, WS_MOUNT, json.loads(r.stdout), receipt, tmp)


def runner(ws: Path, private: Path, *, env: dict[str, str] | None = None,
           binds: list[tuple[Path, str]] | None = None,
           venv_dirs: tuple[str, ...] = VENV_DIRS) -> tuple[GymContainer, VenvCache]:
    """A started runner container (`sleep infinity`) with workspace `ws` at WS_MOUNT, the uv
    cache and the per-server venvs (shared when free, else private under `private`)."""
    image = ensure_gym_image()
    server = next(d for d in venv_dirs if d.startswith("resources_servers/"))  # they all pin the same
    requirements = (ws / server / "requirements.txt").read_text()
    venvs = acquire_venvs(venv_key(image, requirements, venv_dirs), private, venv_dirs)
    UV_CACHE.mkdir(parents=True, exist_ok=True)
    c = GymContainer(binds=[(ws, WS_MOUNT), (UV_CACHE, f"{WS_MOUNT}/cache/uv"), *venvs.binds(), *(binds or [])],
                     workdir=WS_MOUNT, env={"UV_LINK_MODE": "copy", **(env or {})}, image=image)
    try:
        c.start()
    except BaseException:
        venvs.release()
        raise
    return c, venvs


@dataclass
class GymSession:
    """A runner container with `gym env start` run in it (start()); gym_session() tears it down."""

    container: GymContainer
    pid: int | None = None  # the `gym env start` process while it runs

    def start(self, command: str, timeout: float = 1800) -> tuple[str, float]:
        """Start the servers; (their log, seconds until ready)."""
        self.pid, log, ready_s = start_servers(self.container, command, timeout)
        return log, ready_s

    def start_in_background(self, command: str) -> Callable[[float], tuple[str, float]]:
        """Start the servers without waiting (Gym's gates can run meanwhile in the same runner);
        the returned function waits until they are ready, like start(), and returns the same."""
        self.container.exec(f"mkdir -p {WS_MOUNT}/results")
        t0 = time.monotonic()
        log = f"{WS_MOUNT}/results/start-1.log"
        self.pid = self.container.spawn(command, log)

        def wait(timeout: float = 1800) -> tuple[str, float]:
            assert self.pid is not None
            try:
                wait_ready(self.container, log, self.pid, timeout)
                return log, time.monotonic() - t0
            except AssertionError:
                interrupt(self.pid)
                self.pid = None
                if "Failed to get node info" not in self.container.exec(f"cat {log}").stdout:
                    raise
            return self.start(command, timeout)  # Ray's own start timed out: once more, as start_servers does

        return wait

    def stop_servers(self) -> None:
        """Ctrl-C for the servers (idempotent), e.g. before checking what they released."""
        if self.pid is not None:
            interrupt(self.pid)
            self.pid = None


@contextlib.contextmanager
def gym_session(ws: Path, private: Path, policy: Any = None, *,
                env: dict[str, str] | None = None, binds: list[tuple[Path, str]] | None = None,
                venv_dirs: tuple[str, ...] = VENV_DIRS) -> Iterator[GymSession]:
    """A runner for workspace `ws` (see runner()); on the way out, whatever happened: the servers
    interrupted, the container stopped, the venvs released and `policy` (a scripted policy
    server) stopped."""
    c, venvs = runner(ws, private, env=env, binds=binds, venv_dirs=venv_dirs)
    session = GymSession(c)
    try:
        yield session
    finally:
        session.stop_servers()
        c.stop()
        venvs.release()
        if policy is not None:
            policy.stop()


def point_at_policy(ws: Path, base_url: str) -> None:
    """What a user does after make-workspace: point env.yaml at the policy. The head server's
    port is Gym's fixed default (11000) unless set; other sessions share the host network."""
    (ws / "env.yaml").write_text(f"policy_base_url: {base_url}\npolicy_api_key: EMPTY\npolicy_model_name: scripted\n"
                                 f"head_server:\n  host: 127.0.0.1\n  port: {free_port()}\n")


def start_servers(c: GymContainer, command: str, timeout: float = 1800) -> tuple[int, str, float]:
    """`gym env start` in the background of runner `c`; (its pid, its log, seconds until ready).
    One retry when Ray's own start timed out (seen only on a machine loaded far past its cores)."""
    c.exec(f"mkdir -p {WS_MOUNT}/results")
    for attempt in (1, 2):
        log = f"{WS_MOUNT}/results/start-{attempt}.log"
        pid = c.spawn(command, log)
        try:
            return pid, log, wait_ready(c, log, pid, timeout)
        except AssertionError:
            interrupt(pid)
            if attempt == 2 or "Failed to get node info" not in c.exec(f"cat {log}").stdout:
                raise
        except BaseException:
            interrupt(pid)
            raise
    raise AssertionError("unreachable")


@pytest.fixture(scope="session")
def gym_runner(gym_workspace: GymWorkspace) -> Iterator[GymContainer]:
    c, venvs = runner(gym_workspace.path, gym_workspace.tmp / "venvs")
    c.venvs_shared = venvs.shared  # type: ignore[attr-defined]
    try:
        yield c
    finally:
        c.leftovers = c.stop()  # type: ignore[attr-defined]
        venvs.release()


def wait_ready(c: GymContainer, log: str, pid: int, timeout: float) -> float:
    t0 = time.monotonic()
    while time.monotonic() - t0 < timeout:
        text = c.exec(f"cat {log} 2>/dev/null", timeout=30).stdout
        if "servers ready!" in text:
            return time.monotonic() - t0
        if not Path(f"/proc/{pid}").exists():
            raise AssertionError(f"gym env start exited:\n{text[-6000:]}")
        time.sleep(2)
    raise AssertionError(f"gym env start not ready after {timeout:.0f}s:\n{c.exec(f'cat {log}').stdout[-6000:]}")


@pytest.fixture(scope="session")
def gym_env(gym_workspace: GymWorkspace, gym_runner: GymContainer) -> Iterator[dict[str, Any]]:
    import scripted_policy as sp  # beside this module, on sys.path for every Gym test

    policy = sp.PolicyServer().start()
    point_at_policy(gym_workspace.path, policy.base_url)
    env: dict[str, Any] = {"ws": gym_workspace.path, "tmp": gym_workspace.tmp, "container": gym_runner,
                           "policy": policy, "commands": gym_workspace.commands, "workspace": gym_workspace}
    try:
        env["pid"], env["log"], env["ready_s"] = start_servers(gym_runner, gym_workspace.command("gym env start "))
        yield env
    finally:
        if "pid" in env:
            interrupt(env["pid"])
        env["leftovers"] = forks_of(gym_runner)
        policy.stop()


def interrupt(pid: int, timeout: float = 60) -> None:
    """Ctrl-C for `gym env start` (it stops its servers, which close their engines)."""
    try:
        os.kill(pid, 2)
    except ProcessLookupError:
        return
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline and Path(f"/proc/{pid}").exists():
        time.sleep(0.5)
    if Path(f"/proc/{pid}").exists():
        os.kill(pid, 9)


def forks_of(c: GymContainer) -> list[str]:
    """Forks made by processes of runner `c` that are still there."""
    return containers_owned_by(c.pids(), ("fork",))


@pytest.fixture(scope="session")
def gym_examples(gym_env: dict[str, Any]) -> dict[str, Any]:
    """The example rollouts and metrics, made by Gym with the scripted policy."""
    c: GymContainer = gym_env["container"]
    ws: GymWorkspace = gym_env["workspace"]
    out: dict[str, Any] = {}
    t0 = time.monotonic()
    r = c.exec(ws.command("gym eval run --no-serve"), timeout=1800)
    out["eval_s"] = time.monotonic() - t0
    assert r.returncode == 0, (r.stdout + r.stderr)[-6000:]
    r = c.exec(ws.command("cp results/example_rollouts.jsonl"))
    assert r.returncode == 0, r.stderr
    r = c.exec(ws.command("gym dataset collate"), timeout=900)
    assert r.returncode == 0, (r.stdout + r.stderr)[-6000:]
    out["rollouts"] = [json.loads(x) for x in (ws.server / "data" / "example_rollouts.jsonl").read_text().splitlines()
                       if x.strip()]
    out["metrics"] = json.loads((ws.server / "data" / "example_metrics.json").read_text())
    out["collated"] = ws.path / "results" / "example_validation"
    return out
