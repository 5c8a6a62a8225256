"""A second, private Docker engine that a test may stop, restart or fill up, beside the shared one.

Its own data root, exec root, socket, pidfile, containerd namespace and network namespace, no
bridge: stopping or restarting it cannot touch the shared engine (machine.md). A dockerd started
with --bridge=none deletes the `docker0` interface it finds, which would break the shared
engine's default network, hence the network namespace (`unshare --net`)."""

from __future__ import annotations

import contextlib
import os
import shutil
import subprocess
import time
from pathlib import Path
from typing import Iterator


class PrivateDockerd:
    def __init__(self, base: Path, namespace: str = "shinken-h6-test", data_root: Path | None = None) -> None:
        self.base = base
        self.sock = base / "d.sock"
        self.host = f"unix://{self.sock}"
        self.namespace = namespace
        self.data_root = data_root or base / "data"
        self.proc: subprocess.Popen | None = None
        self.log = base / "dockerd.log"

    def start(self, timeout: float = 60) -> None:
        cmd = ["unshare", "--net", "--", "dockerd", "--data-root", str(self.data_root),
               "--exec-root", str(self.base / "exec"), "-H", self.host, "--pidfile", str(self.base / "d.pid"),
               "--bridge=none", "--iptables=false", "--ip-masq=false", "--containerd-namespace", self.namespace,
               "--containerd-plugins-namespace", f"{self.namespace}-plugins"]
        self.proc = subprocess.Popen(cmd, stdout=open(self.log, "ab"), stderr=subprocess.STDOUT,
                                     start_new_session=True)
        end = time.monotonic() + timeout
        while time.monotonic() < end:
            if self.docker("info").returncode == 0:
                return
            if self.proc.poll() is not None:
                break
            time.sleep(0.3)
        raise AssertionError(f"private dockerd did not start: {self.log.read_text()[-2000:]}")

    def docker(self, *args: str, **kwargs) -> subprocess.CompletedProcess:
        return subprocess.run(["docker", "-H", self.host, *args], capture_output=True, text=True, **kwargs)

    def stop(self) -> None:
        if self.proc is not None and self.proc.poll() is None:
            self.proc.terminate()  # our own pid, never a name match
            try:
                self.proc.wait(60)
            except subprocess.TimeoutExpired:
                self.proc.kill()
                self.proc.wait(10)
        self.proc = None

    def load(self, image: str) -> None:
        """Copy `image` from the shared engine into this one."""
        save = subprocess.Popen(["docker", "save", image], stdout=subprocess.PIPE)
        load = subprocess.run(["docker", "-H", self.host, "load"], stdin=save.stdout, capture_output=True)
        save.wait()
        assert load.returncode == 0 and save.returncode == 0, load.stderr


@contextlib.contextmanager
def private_engine(tag: str, namespace: str, images: tuple[str, ...] = (),
                   data_root: Path | None = None) -> Iterator[PrivateDockerd]:
    """A started PrivateDockerd with `images` loaded; afterwards its containers, the daemon and
    its folders are gone, and the shared engine's default bridge is asserted intact."""
    base = Path(f"/tmp/shk-{tag}-{os.getpid()}-{int(time.time())}")  # short: unix socket paths are capped at 108 bytes
    base.mkdir(parents=True)
    bridge_before = Path("/sys/class/net/docker0").exists()
    d = PrivateDockerd(base, namespace, data_root)
    try:
        d.start()
        for image in images:
            d.load(image)
        yield d
    finally:
        # Stop its containers first so the data root can be removed, then the daemon.
        if d.proc is not None:
            ids = d.docker("ps", "-aq").stdout.split()
            if ids:
                d.docker("rm", "-f", *ids)
        d.stop()
        subprocess.run(["umount", "-R", str(base / "exec")], capture_output=True)
        shutil.rmtree(base, ignore_errors=True)
    # The shared engine's default bridge must survive a private engine's start and stop.
    assert Path("/sys/class/net/docker0").exists() == bridge_before
