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

    def image_id(self, image: str) -> str | None:
        r = self.docker("image", "inspect", "-f", "{{.Id}}", image)
        return r.stdout.strip() if r.returncode == 0 else None

    def load(self, image: str) -> None:
        """Copy `image` from the shared engine into this one (nothing to do when a cached data root
        holds it already, by the same id)."""
        want = subprocess.run(["docker", "image", "inspect", "-f", "{{.Id}}", image], capture_output=True,
                              text=True).stdout.strip()
        if want and self.image_id(image) == want:
            return
        save = subprocess.Popen(["docker", "save", image], stdout=subprocess.PIPE)
        load = subprocess.run(["docker", "-H", self.host, "load"], stdin=save.stdout, capture_output=True)
        save.wait()
        assert load.returncode == 0 and save.returncode == 0, load.stderr


@contextlib.contextmanager
def private_engine(tag: str, namespace: str, images: tuple[str, ...] = (),
                   data_root: Path | None = None, cache: Path | None = None) -> Iterator[PrivateDockerd]:
    """A started PrivateDockerd with `images` loaded; afterwards its containers, the daemon and
    its folders are gone, and the shared engine's default bridge is asserted intact.

    `cache` (instead of `data_root`): a folder whose data root outlives the run, so the next run
    finds `images` there instead of copying them again (`docker save | docker load` of the 1.17 GB
    task image is most of a short test's time); at the start every container and every other
    image in it is removed (a golden left by an earlier run would change what a probe does). Used
    only when no other run holds it (its lock), else a fresh data root as without it."""
    base = Path(f"/tmp/shk-{tag}-{os.getpid()}-{int(time.time())}")  # short: unix socket paths are capped at 108 bytes
    base.mkdir(parents=True)
    bridge_before = Path("/sys/class/net/docker0").exists()
    lock_fd: int | None = None
    if cache is not None and data_root is None:
        import fcntl

        cache.mkdir(parents=True, exist_ok=True)
        fd = os.open(cache / "lock", os.O_CREAT | os.O_RDWR, 0o600)
        try:
            fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
            lock_fd, data_root = fd, cache / "data"
        except OSError:
            os.close(fd)
    d = PrivateDockerd(base, namespace, data_root)
    try:
        d.start()
        if lock_fd is not None:  # a cached data root: only the wanted images stay
            ids = d.docker("ps", "-aq").stdout.split()
            if ids:
                d.docker("rm", "-f", *ids)
        for image in images:
            d.load(image)
        if lock_fd is not None:
            keep = {d.image_id(image) for image in images}
            other = set(d.docker("images", "-aq", "--no-trunc").stdout.split()) - keep
            if other:
                d.docker("rmi", "-f", *other)
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
        if lock_fd is not None:
            os.close(lock_fd)
    # The shared engine's default bridge must survive a private engine's start and stop.
    assert Path("/sys/class/net/docker0").exists() == bridge_before


@contextlib.contextmanager
def loop_fs(image: Path, size_mib: int) -> Iterator[Path]:
    """A small ext4 file system in a sparse file, loop-mounted beside it (`<image>.mnt`): a disk
    a test may fill to the last block. No blocks reserved for root (overlayfs writes a container's
    files with the engine's root credentials, so root's reserve would let them through) and no
    delayed allocation (a full disk answers ENOSPC at the write, not at a later flush).
    Unmounted and removed afterwards."""
    mnt = image.with_name(image.name + ".mnt")
    with open(image, "wb") as f:
        f.truncate(size_mib << 20)
    r = subprocess.run(["mkfs.ext4", "-q", "-F", "-m", "0", str(image)], capture_output=True, text=True)
    assert r.returncode == 0, r.stderr
    mnt.mkdir()
    r = subprocess.run(["mount", "-o", "loop,nodelalloc", str(image), str(mnt)], capture_output=True, text=True)
    assert r.returncode == 0, r.stderr
    try:
        yield mnt
    finally:
        for _ in range(20):
            if subprocess.run(["umount", str(mnt)], capture_output=True).returncode == 0:
                break
            time.sleep(0.5)
        shutil.rmtree(mnt, ignore_errors=True)
        image.unlink(missing_ok=True)


def fill(folder: Path) -> Path:
    """Fill the file system of `folder` to its last block, as root (ext4's blocks reserved for
    root included): a file `filler` there; remove it to free the disk again."""
    import errno

    filler = folder / "filler"
    fd = os.open(filler, os.O_WRONLY | os.O_CREAT | os.O_TRUNC, 0o600)
    try:
        # Allocate in chunks, halving a chunk that finds no room (the extent tree needs blocks too),
        # then write the last blocks one by one until the file system says ENOSPC.
        off, chunk = 0, 256 << 20
        while chunk >= 1 << 16:
            try:
                os.posix_fallocate(fd, off, chunk)
                off += chunk
            except OSError as exc:
                if exc.errno != errno.ENOSPC:
                    raise
                chunk //= 2
        os.lseek(fd, off, os.SEEK_SET)
        block = b"\0" * 4096
        while True:
            try:
                os.write(fd, block)
            except OSError as exc:
                if exc.errno != errno.ENOSPC:
                    raise
                break
        try:
            os.fsync(fd)
        except OSError:  # the last delayed blocks found no room: the disk is full all the same
            pass
    finally:
        os.close(fd)
    return filler
