"""A simulated fleet on this one machine, from the project's own parts (no registry outside):

- a registry: Debian's `docker-registry` on a loopback port, its storage in the fleet's folder;
- Docker engines: the machine's engine (host h0) and `extra` private `dockerd`s, each with its own
  socket, data root, exec root and pid file (`--bridge none --iptables=false`: they touch no shared
  network setup);
- a Ray head (no Docker resource of its own) and one Ray worker node per engine, joined with the
  real `shinken fleet join` (DOCKER_HOST = that engine), so each node's host agent owns that engine.

Every process is started here in its own process group and stopped by its id."""

from __future__ import annotations

import json
import os
import shlex
import shutil
import signal
import socket
import subprocess
import sys
import tempfile
import time
import uuid
from dataclasses import dataclass, field
from pathlib import Path

VENV_BIN = Path(sys.executable).parent
SHARED_ENGINE = os.environ.get("DOCKER_HOST", "unix:///var/run/docker.sock")
# Small object stores: nothing big travels through Ray (bundles are a few kB).
RAY_ARGS = "--object-store-memory=80000000"
# How often the py3.13 box (re)starts its head and each host's node when a start misses Ray's fixed
# startup windows on a loaded machine (FleetBox._start_head, `fleet join --start-attempts`).
START_ATTEMPTS = 3


def ray_token_path() -> Path:
    """Where this test process's fleets keep their Ray token (`shinken fleet head` creates the file
    on first use). One per process: a Ray driver reads its token once, so every fleet this process
    connects to must share it."""
    folder = Path(tempfile.gettempdir()) / f"shinken-test-ray-{os.getpid()}"
    if not folder.exists():
        import atexit

        atexit.register(shutil.rmtree, folder, True)
    return folder / "auth_token"


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


def _start(cmd: list[str], log: Path, env: dict[str, str] | None = None) -> subprocess.Popen:
    with open(log, "ab") as fh:
        return subprocess.Popen(cmd, stdout=fh, stderr=subprocess.STDOUT, stdin=subprocess.DEVNULL,
                                env={**os.environ, **(env or {})}, start_new_session=True)


def stop_group(proc: subprocess.Popen | None, sig: int = signal.SIGTERM, wait_s: float = 30) -> None:
    if proc is None:
        return
    try:
        os.killpg(proc.pid, sig)
    except ProcessLookupError:
        return
    try:
        proc.wait(wait_s)
    except subprocess.TimeoutExpired:
        pass
    try:
        os.killpg(proc.pid, signal.SIGKILL)
    except ProcessLookupError:
        pass
    try:
        proc.wait(10)
    except subprocess.TimeoutExpired:
        pass


def stop_pid(pid: int, wait_s: float = 15) -> None:
    """SIGTERM a process this harness started elsewhere (in a container sharing the host's pid
    namespace), SIGKILL after wait_s (with its process group when it leads one)."""
    for sig in (signal.SIGTERM, signal.SIGKILL):
        try:
            if sig == signal.SIGKILL and os.getpgid(pid) == pid:
                os.killpg(pid, sig)
            else:
                os.kill(pid, sig)
        except ProcessLookupError:
            return
        deadline = time.monotonic() + wait_s
        while time.monotonic() < deadline:
            try:
                os.kill(pid, 0)
            except ProcessLookupError:
                return
            time.sleep(0.2)


@dataclass
class Engine:
    name: str
    host: str  # DOCKER_HOST value
    proc: subprocess.Popen | None = None  # None: the machine's shared engine (never stopped here)
    args: list[str] = field(default_factory=list)
    log: Path | None = None

    def client(self):  # -> docker.DockerClient
        import docker

        return docker.DockerClient(base_url=self.host, timeout=60)

    def wait_up(self, timeout: float = 60) -> None:
        deadline = time.monotonic() + timeout
        while True:
            try:
                c = self.client()
                c.ping()
                c.close()
                return
            except Exception:  # noqa: BLE001
                if time.monotonic() > deadline:
                    tail = self.log.read_text(errors="replace")[-1500:] if self.log else ""
                    raise RuntimeError(f"dockerd {self.name} did not come up: {tail}") from None
                time.sleep(0.3)

    def kill(self) -> None:
        """SIGKILL the engine (and the containerd it started): the host's Docker dies mid-work."""
        assert self.proc is not None, "the shared engine is never killed"
        stop_group(self.proc, signal.SIGKILL, wait_s=10)

    def restart(self) -> None:
        assert self.log is not None
        self.proc = _start(self.args, self.log)
        self.wait_up()


class SimFleet:
    def __init__(self, extra: int = 2, slots: int = 2, cache: Path | None = None) -> None:
        # Short: unix socket paths must stay under 108 bytes.
        self.base = Path(tempfile.mkdtemp(prefix="shkf-", dir="/tmp"))
        # The registry's storage and the private engines' data roots may persist between runs
        # (`cache`): a second run finds the task image's layers already there (CI reuses the
        # machine), instead of compressing and unpacking ~1 GB again. Containers never persist.
        self.cache = cache
        self._lock_fd: int | None = None
        if cache is not None:  # one fleet at a time on a cache: two dockerds must not share a data root
            import fcntl

            cache.mkdir(parents=True, exist_ok=True)
            fd = os.open(cache / "lock", os.O_CREAT | os.O_RDWR, 0o600)
            try:
                fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
                self._lock_fd = fd
            except OSError:
                os.close(fd)
                self.cache = None
        self.state = self.base / "state"
        # Token authentication on, as for any fleet: the head makes the token, every join, status and
        # driver of the fleet reads it from here.
        self.env = {"RAY_AUTH_TOKEN_PATH": str(ray_token_path()), "SHINKEN_FLEET_STATE": str(self.state)}
        self.slots = slots
        self.engines = [Engine("h0", SHARED_ENGINE)]
        self.registry_proc: subprocess.Popen | None = None
        self.head: subprocess.Popen | None = None
        self.registry = ""
        self.address = ""
        self.hub: str | None = None  # the mock web hub image every host joins with (--hub), when given
        self.join_args: list[str] = []  # more `fleet join` options for every host
        self._extra = extra

    # ------------------------------------------------------------------ parts

    def start_registry(self) -> str:
        port = free_port()
        cfg = self.base / "registry.yml"
        cfg.write_text(f"version: 0.1\nstorage:\n  filesystem:\n    rootdirectory: {(self.cache or self.base) / 'registry'}\n"
                       f"  delete:\n    enabled: true\nhttp:\n  addr: 127.0.0.1:{port}\nlog:\n  level: warn\n")
        self.registry_proc = _start(["docker-registry", "serve", str(cfg)], self.base / "registry.log")
        self.registry = f"127.0.0.1:{port}"
        deadline = time.monotonic() + 30
        import urllib.request

        while True:
            try:
                urllib.request.urlopen(f"http://{self.registry}/v2/", timeout=2).read()
                return self.registry
            except Exception:  # noqa: BLE001
                if time.monotonic() > deadline:
                    raise RuntimeError((self.base / "registry.log").read_text()[-1000:]) from None
                time.sleep(0.2)

    def start_engine(self, i: int) -> Engine:
        d = self.base / f"d{i}"
        d.mkdir()
        sock = f"unix://{d}/docker.sock"
        data = (self.cache / f"d{i}-data") if self.cache else d / "data"
        # Its own network namespace: a dockerd with --bridge none deletes the docker0 it finds in
        # its namespace, which is the shared engine's default bridge (added by the lead). Its
        # loopback up and a registry process of its own there on the fleet registry's port and
        # storage: the engine pushes to and pulls from "the registry" as a real host does (the task
        # image's and the hub image's checks at join, goldens copied between hosts).
        script = (f"ip link set lo up && (docker-registry serve {self.base / 'registry.yml'} > {d / 'registry.log'} 2>&1 &) "
                  f"&& exec dockerd --host {sock} --data-root {data} --exec-root {d / 'exec'} --pidfile {d / 'docker.pid'} "
                  "--bridge none --iptables=false --ip-masq=false --storage-driver overlay2")
        args = ["unshare", "--net", "--", "sh", "-c", script]
        eng = Engine(f"h{i}", sock, args=args, log=d / "dockerd.log")
        eng.proc = _start(args, eng.log)
        eng.wait_up()
        self.engines.append(eng)
        return eng

    def start_head(self) -> str:
        port = free_port()
        self.head = _start([str(VENV_BIN / "shinken"), "fleet", "head", "--bind", "127.0.0.1", "--port", str(port)],
                           self.base / "head.log", {**self.env, "SHINKEN_RAY_START_ARGS": RAY_ARGS})
        self.address = f"127.0.0.1:{port}"
        # Joins need the head up: at load ~30 it took longer than the image pushes before the first
        # join (cached, they are quick), which then failed to connect.
        deadline = time.monotonic() + 300
        while "Ray runtime started" not in (text := (self.base / "head.log").read_text(errors="replace")):
            if self.head.poll() is not None or time.monotonic() > deadline:
                raise RuntimeError(f"the Ray head did not start: {text[-2000:]}")
            time.sleep(0.5)
        return self.address

    def shinken(self, *args: str, docker_host: str | None = None, timeout: float = 300,
                env: dict[str, str] | None = None) -> subprocess.CompletedProcess:
        e = {**os.environ, **self.env, **(env or {})}
        if docker_host:
            e["DOCKER_HOST"] = docker_host
        return subprocess.run([str(VENV_BIN / "shinken"), *args], capture_output=True, text=True, env=e,
                              timeout=timeout)

    def join(self, eng: Engine, image: str, slots: int | None = None) -> dict:
        r = self.shinken("fleet", "join", "--address", self.address, "--name", eng.name, "--slots",
                         str(slots or self.slots), "--registry", self.registry, "--image", image, "--num-cpus", "2",
                         *(["--hub", self.hub] if self.hub else []), *self.join_args, "--json", docker_host=eng.host,
                         env={"SHINKEN_RAY_START_ARGS": RAY_ARGS + " --node-ip-address=127.0.0.1"})
        if r.returncode != 0:
            raise RuntimeError(f"join {eng.name}: exit {r.returncode}: {r.stderr[-2000:]}")
        return json.loads(r.stdout)

    def leave(self, name: str) -> subprocess.CompletedProcess:
        return self.shinken("fleet", "leave", "--address", self.address, "--name", name)

    def node_pid(self, name: str) -> int:
        return int(json.loads((self.state / f"{name}.json").read_text())["pid"])

    def kill_node(self, name: str, agent_pid: int) -> None:
        """SIGKILL the host's Ray node: its process group (ray start, raylet, agents of the node)
        and the host agent's worker (Ray workers run in process groups of their own): what a
        machine that dies takes with it."""
        for pid, group in ((self.node_pid(name), True), (agent_pid, False)):
            try:
                (os.killpg if group else os.kill)(pid, signal.SIGKILL)
            except ProcessLookupError:
                pass
        (self.state / f"{name}.json").unlink(missing_ok=True)

    def engine(self, name: str) -> Engine:
        return next(e for e in self.engines if e.name == name)

    # ------------------------------------------------------------------ whole

    def start(self, image: str, hub: str | None = None) -> "SimFleet":
        """`hub`: a mock web hub image, pushed too; every host joins with it (the private engines
        pull it through the registry at join)."""
        self.start_registry()
        for i in range(1, self._extra + 1):
            self.start_engine(i)
        self.start_head()
        for ref in (image, *([hub] if hub else [])):  # recorded in the fleet: joins pull and check that digest
            r = self.shinken("image", "push", ref, "--registry", self.registry, "--address", self.address, timeout=1800)
            if r.returncode != 0:
                raise RuntimeError(f"push {ref}: {r.stderr[-2000:]}")
        self.hub = hub
        for eng in self.engines[1:]:
            self.preload(eng, image)
        return self

    def preload(self, eng: Engine, image: str) -> None:
        """The image onto a private engine by `docker save | docker load` (the same id the registry
        holds; join then checks it without pulling). Pulls from a private dockerd here fail at
        random: dockerd 20.10 started with `--bridge none` runs some of its threads in a network
        namespace of its own whose loopback is down ("dial tcp 127.0.0.1:...: network is
        unreachable"), seen on this machine; a real fleet's hosts pull normally."""
        src = self.engines[0].client()
        want = src.images.get(image).id
        src.close()
        dst = eng.client()
        try:
            have = dst.images.get(image).id
        except Exception:  # noqa: BLE001 - not there
            have = None
        if have == want:
            dst.close()
            return
        try:
            repo, tag = image.rsplit(":", 1)
            dst.api.tag(want, repo, tag)  # a cached data root still holds the id under no name
            dst.close()
            return
        except Exception:  # noqa: BLE001
            dst.close()
        save = subprocess.Popen(["docker", "-H", self.engines[0].host, "save", image], stdout=subprocess.PIPE)
        subprocess.run(["docker", "-H", eng.host, "load", "-q"], stdin=save.stdout, check=True, capture_output=True)
        save.wait()

    def _kill_leftover_shims(self) -> None:
        """containerd shims of our engines outlive a SIGKILLed dockerd (they run in their own
        session): found by their socket path under our folder, killed by pid."""
        mark = str(self.base).encode()
        for proc in Path("/proc").iterdir():
            if not proc.name.isdigit():
                continue
            try:
                cmd = (proc / "cmdline").read_bytes()
            except OSError:
                continue
            if b"containerd-shim" in cmd and mark in cmd:
                try:
                    os.kill(int(proc.name), signal.SIGKILL)
                except ProcessLookupError:
                    pass
        time.sleep(0.5)

    def stop(self, leave: bool = True) -> None:
        """Everything this fleet started. `leave`: each host leaves first (its agent releases its
        forks and deletes the goldens nobody else holds); without, its node is stopped under it
        (a fleet on the machine's engine, whose goldens other runs share: gc reclaims its leases)."""
        try:  # this process's own Ray connection first: a driver whose head goes away is terminated by Ray
            import ray

            if ray.is_initialized():
                ray.shutdown()
        except ImportError:
            pass
        # Each joined host leaves properly first: its agent releases its forks and goldens.
        for doc in sorted(self.state.glob("*.json")) if self.state.is_dir() and leave else []:
            try:
                self.leave(doc.stem)
            except Exception:  # noqa: BLE001 - then it is stopped by force below
                pass
        for doc in sorted(self.state.glob("*.json")) if self.state.is_dir() else []:
            try:
                os.killpg(int(json.loads(doc.read_text())["pid"]), signal.SIGTERM)
            except (ProcessLookupError, ValueError, KeyError):
                pass
        time.sleep(1)
        for doc in sorted(self.state.glob("*.json")) if self.state.is_dir() else []:
            try:
                os.killpg(int(json.loads(doc.read_text())["pid"]), signal.SIGKILL)
            except (ProcessLookupError, ValueError, KeyError):
                pass
        # `ray start --head --block` did not exit within 30 s of SIGTERM in the runs measured (the whole
        # wait, then SIGKILL of its group): its nodes and agents are gone by now, so 5 s are enough.
        stop_group(self.head, wait_s=5)
        for eng in self.engines:
            if eng.proc is not None:
                try:  # our engines' containers and goldens go with them (a cached data root keeps the task image)
                    c = eng.client()
                    for box in c.containers.list(all=True):
                        box.remove(force=True)
                    for img in c.images.list(filters={"label": "shinken.kind=golden"}):
                        c.images.remove(img.id, force=True)
                    c.close()
                except Exception:  # noqa: BLE001
                    pass
                stop_group(eng.proc)
        stop_group(self.registry_proc)
        self._kill_leftover_shims()
        subprocess.run(["umount", "-R", "-l", *[str(p) for p in self.base.glob("d*/exec")]],
                       capture_output=True)
        if self._lock_fd is not None:
            os.close(self._lock_fd)
        for _ in range(5):  # a just-stopped dockerd may still be letting go of its mounts
            shutil.rmtree(self.base, ignore_errors=True)
            if not self.base.exists():
                break
            time.sleep(2)


# ---------------------------------------------------------------- the fleet on Python 3.13

REPO = Path(__file__).resolve().parent.parent
PY313_CACHE = Path.home() / ".cache" / "shinken" / "fleet-py313"


def _fleet_requirements() -> list[str]:
    """shinken's dependencies and Ray (pyproject.toml), pinned by constraints.txt at install."""
    import tomllib

    project = tomllib.loads((REPO / "pyproject.toml").read_text())["project"]
    return [*project["dependencies"], *project["optional-dependencies"]["ray"]]


def py313_venv(gym_image: str) -> Path:
    """A Python 3.13 venv with shinken's dependencies and the Ray of constraints.txt, made in (and
    only usable in) a container of the NeMo Gym runner image: the Python and Ray the resources
    server's venv runs, which the fleet's nodes must match. Cached by the image id, the
    constraints and the requirements; shinken itself comes from the source tree (PYTHONPATH)."""
    import fcntl
    import hashlib

    image_id = subprocess.run(["docker", "image", "inspect", "-f", "{{.Id}}", gym_image], capture_output=True,
                              text=True, check=True).stdout.strip()
    reqs = _fleet_requirements()
    key = hashlib.sha256("\n".join(["bytecode", image_id, (REPO / "constraints.txt").read_text(), *reqs]).encode()).hexdigest()[:16]
    venv = PY313_CACHE / key
    PY313_CACHE.mkdir(parents=True, exist_ok=True)
    with open(PY313_CACHE / f"{key}.lock", "a+") as lock:
        fcntl.flock(lock, fcntl.LOCK_EX)
        if (venv / ".complete").exists():
            return venv
        shutil.rmtree(venv, ignore_errors=True)
        from gym_harness import UV_CACHE
        from shinken.workspace.gym_image import HOST_CA, IMAGE_CA_PATH

        UV_CACHE.mkdir(parents=True, exist_ok=True)
        script = (f"python3.13 -m venv {venv} && uv pip install -q --compile-bytecode --python {venv}/bin/python "
                  f"-c /constraints.txt {' '.join(repr(r) for r in reqs)}")
        from shinken.sandbox.docker_client import docker_run_argv
        from shinken.sandbox.ownership import labels_for

        r = subprocess.run([*docker_run_argv(labels_for("build", task="py313-venv")), "--rm", "--network", "host",
                            "-v", f"{HOST_CA}:{IMAGE_CA_PATH}:ro", "-v", f"{UV_CACHE}:/uvcache",
                            "-v", f"{REPO / 'constraints.txt'}:/constraints.txt:ro", "-v", f"{PY313_CACHE}:{PY313_CACHE}",
                            "-e", "UV_CACHE_DIR=/uvcache", "-e", "UV_LINK_MODE=copy", gym_image, "bash", "-c", script],
                           capture_output=True, text=True, timeout=1800)
        if r.returncode != 0:
            shutil.rmtree(venv, ignore_errors=True)
            raise RuntimeError(f"py3.13 fleet venv: {(r.stdout + r.stderr)[-3000:]}")
        (venv / ".complete").write_text("ok\n")
    return venv


class FleetBox:
    """The fleet's Ray head and host nodes on Python 3.13, as a training setup with NeMo Gym 0.7.0
    needs them (Ray refuses a driver of another Python minor: the resources server runs in Gym's
    3.13 venv). They run in one container of the Gym runner image (host network and pid
    namespace, like the Gym runner), each host joined with the real `shinken fleet join` from
    the source tree with its own DOCKER_HOST. The Ray temp dir is a host folder (`ray_dir`) that
    every container taking part mounts at the same path: a driver (the resources server) finds
    the raylet's sockets there, as a process on the same machine would."""

    def __init__(self, gym_image: str) -> None:
        self.gym_image = gym_image
        self.base = Path(tempfile.mkdtemp(prefix="shkb-", dir="/tmp"))  # short: unix socket paths
        self.ray_dir = self.base / "r"
        self.state = self.base / "state"
        (self.base / "src").mkdir()
        (self.base / "src" / "shinken").symlink_to(REPO)
        self.name = f"shinken-fleetbox-{uuid.uuid4().hex[:10]}"
        self.address = ""
        # The fleet's Ray token (made by `shinken fleet head`); the Gym container mounts its folder.
        self.token = self.base / "token" / "auth_token"
        self.venv: Path | None = None

    def start(self, extra_mounts: list[Path] | None = None) -> "FleetBox":
        from shinken.sandbox.docker_client import docker_run_argv
        from shinken.sandbox.ownership import labels_for
        from shinken.workspace.gym_image import HOST_CA, IMAGE_CA_PATH

        self.venv = py313_venv(self.gym_image)
        args = [*docker_run_argv(labels_for("server", run=self.name)),
                "-d", "--name", self.name, "--network", "host", "--pid", "host", "--init",
                "-v", "/var/run/docker.sock:/var/run/docker.sock", "-v", f"{HOST_CA}:{IMAGE_CA_PATH}:ro",
                "-v", f"{self.base}:{self.base}", "-v", f"{REPO}:{REPO}:ro", "-v", f"{self.venv}:{self.venv}:ro",
                "-e", f"PYTHONPATH={self.base / 'src'}", "-e", "RAY_AUTH_MODE=token",
                "-e", f"RAY_AUTH_TOKEN_PATH={self.token}",
                "-e", f"SHINKEN_FLEET_STATE={self.state}", "-e", "PYTHONDONTWRITEBYTECODE=1",
                "--shm-size", "256m",
                # The CPU weight the Gym runner gets too (gym_harness.GymContainer.cpu_shares): Ray's
                # startup windows are fixed (15 s for the dashboard agent's port file, 30 s for the
                # raylet to register); at load 17-50 the agents' Python start alone took longer.
                "--cpu-shares", "8192"]
        for m in extra_mounts or []:
            args += ["-v", f"{m}:{m}"]
        r = subprocess.run([*args, self.gym_image, "sleep", "infinity"], capture_output=True, text=True)
        if r.returncode != 0:
            raise RuntimeError(f"fleet box: {r.stderr}")
        for attempt in range(1, START_ATTEMPTS + 1):
            failed = self._start_head(attempt)
            if failed is None:
                return self
            if attempt == START_ATTEMPTS:
                raise RuntimeError(f"the py3.13 Ray head did not start in {START_ATTEMPTS} attempts: {failed}")
        return self

    def raylet_failure(self, since: float) -> str | None:
        """The fatal line of a raylet of this box that aborted at start (sessions newer than
        `since`): Ray 2.60's `ray start` does not always notice (seen: blocked minutes on a dead raylet)."""
        for logs in self.ray_dir.glob("session_2*/logs") if self.ray_dir.is_dir() else []:
            for p in logs.glob("raylet*.out"):
                if p.stat().st_mtime < since:
                    continue
                for line in p.read_text(errors="replace").splitlines():
                    if "Check failed" in line or " F " in line[:40]:
                        return f"{p.name}: {line[-300:]}"
        return None

    def _start_head(self, attempt: int, timeout: float = 150) -> str | None:
        """One `ray start --head`; None once its raylet registered ("Ray runtime started"), else why
        not (its processes are stopped). Ray 2.60's raylet waits a fixed 15 s for the dashboard
        agent's port file and `ray start` a fixed 30 s for the raylet (docs/fleet.md): on a loaded
        machine an attempt can miss them, and the next one starts with warm caches."""
        port = free_port()
        log = f"head.{attempt}.log"
        pidfile = self.base / f"head.{attempt}.pid"
        ray_args = f"--temp-dir={self.ray_dir} {RAY_ARGS} {self.node_ports()}"
        self.exec(f"echo $$ > {pidfile}; SHINKEN_RAY_START_ARGS={shlex.quote(ray_args)} exec {self.venv}/bin/python -u "
                  f"-m shinken.cli.main fleet head --bind 127.0.0.1 --port {port} > {self.base}/{log} 2>&1", detach=True)
        self.address = f"127.0.0.1:{port}"
        deadline, since = time.monotonic() + timeout, time.time() - 1
        while "Ray runtime started" not in (text := self.log(log)):  # its raylet too, not just the GCS
            dead = self.raylet_failure(since)
            if dead or "Traceback" in text or time.monotonic() > deadline:
                text = f"{text}\n{dead or ''}"
                try:  # this attempt's `ray start` stops its own processes on SIGTERM
                    stop_pid(int(pidfile.read_text()))
                except (OSError, ValueError):
                    pass
                return text[-1500:] or "(no output)"
            time.sleep(1)
        return None

    @staticmethod
    def node_ports() -> str:
        """Fixed ports for a node's agents: a raylet given none waits for its agents to write
        theirs, at most ~15 s, which their Python start on a loaded 2-core machine exceeds."""
        return (f"--dashboard-agent-grpc-port={free_port()} --dashboard-agent-listen-port={free_port()} "
                f"--runtime-env-agent-port={free_port()} --metrics-export-port={free_port()}")

    def log(self, name: str) -> str:
        p = self.base / name
        return p.read_text(errors="replace")[-3000:] if p.exists() else ""

    def exec(self, command: str, *, env: dict[str, str] | None = None, detach: bool = False,
             timeout: float = 600) -> subprocess.CompletedProcess:
        args = ["docker", "exec", *(["-d"] if detach else [])]
        for k, v in (env or {}).items():
            args += ["-e", f"{k}={v}"]
        return subprocess.run([*args, self.name, "bash", "-c", command], capture_output=True, text=True,
                              timeout=timeout)

    def shinken(self, *args: str, docker_host: str = SHARED_ENGINE, timeout: float = 600) -> subprocess.CompletedProcess:
        import shlex

        assert self.venv is not None
        return self.exec(f"{self.venv}/bin/python -m shinken.cli.main {shlex.join(args)}",
                         env={"DOCKER_HOST": docker_host}, timeout=timeout)

    def join_all(self, hosts: dict[str, str], image: str, slots: int) -> dict[str, dict]:
        """`shinken fleet join` of each host in turn (name -> DOCKER_HOST); name -> its --json.
        One at a time, so one node's fixed startup windows are not shared with another's start;
        `--num-cpus 0`: the agents need no CPU resource, and a node with CPUs prestarts as many
        Python workers at the moment its agents start. `--no-demand-pools`: the Gym test counts
        every fork and pool container the agents own once the servers stopped, and a live agent's
        warm computers would count (fleet hosts keep demand pools by default)."""
        import shlex

        out = {}
        for name, docker_host in hosts.items():
            ray_args = f"{RAY_ARGS} --node-ip-address=127.0.0.1 {self.node_ports()}"
            r = self.exec(f"SHINKEN_RAY_START_ARGS={shlex.quote(ray_args)} "
                          f"{self.venv}/bin/python -m shinken.cli.main fleet join --address {self.address} "
                          f"--name {name} --slots {slots} --image {image} --num-cpus 0 --no-demand-pools "
                          f"--start-attempts {START_ATTEMPTS} --json", env={"DOCKER_HOST": docker_host})
            if r.returncode != 0:
                raise RuntimeError(f"join {name}: exit {r.returncode}: {r.stderr[-2000:]}\n{self.node_logs(name)}")
            out[name] = dict(json.loads(r.stdout))
        return out

    def node_logs(self, name: str) -> str:
        """What a failed join leaves to read: its `ray start` output and the ends of the Ray logs
        that name a startup problem (raylet, agents), newest session."""
        out = [f"--- state/{name}.log:\n{self.log(f'state/{name}.log')[-1500:]}"]
        logs = self.ray_dir / "session_latest" / "logs"
        for p in sorted(logs.glob("raylet*.out")) + sorted(logs.glob("*agent*.err")) if logs.is_dir() else []:
            lines = [x for x in p.read_text(errors="replace").splitlines() if " E " in x or " F " in x or "Timed out" in x
                     or "Traceback" in x or "Error" in x]
            if lines:
                out.append(f"--- {p.name}:\n" + "\n".join(lines[-8:])[-1500:])
        return "\n".join(out)

    def status(self) -> dict[str, dict]:
        r = self.shinken("fleet", "status", "--address", self.address, "--json")
        if r.returncode != 0:
            raise RuntimeError(f"fleet status: {r.stderr[-2000:]}")
        return {h["host"]: h for h in json.loads(r.stdout)["hosts"]}

    def drivers(self) -> list[dict]:
        """The live Ray drivers of this fleet other than the one asking (with no other client
        connected: the resources server's worker processes that made a FleetEngine), from the
        GCS's job table."""
        assert self.venv is not None
        code = ("import json, os, ray; ray.init(address=%r, log_to_driver=False, configure_logging=False); "
                "print(json.dumps([{'pid': j['DriverPid'], 'entrypoint': j['Entrypoint']} for j in ray._private.state.jobs() "
                "if not j['IsDead'] and j['DriverPid'] != os.getpid()]))") % self.address
        r = self.exec(f"{self.venv}/bin/python -c {shlex.quote(code)} 2>/dev/null | tail -1")
        return list(json.loads(r.stdout or "[]"))

    def pids(self) -> set[int]:
        r = subprocess.run(["docker", "top", self.name, "-eo", "pid"], capture_output=True, text=True)
        return {int(x) for x in r.stdout.split()[1:] if x.isdigit()}

    def stop(self) -> None:
        """The container and every process in it (head, nodes, agents). The agents are not asked to
        leave: on the machine's engine their goldens are the content-addressed ones every other
        engine of this machine shares, which `fleet leave` would delete."""
        subprocess.run(["docker", "rm", "-f", self.name], capture_output=True)
        shutil.rmtree(self.base, ignore_errors=True)
