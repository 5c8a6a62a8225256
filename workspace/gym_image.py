"""The NeMo Gym runner image (Debian sid + python3.13 + nemo-gym 0.7.0), built once and
reused by content hash.

NeMo Gym needs Python >= 3.13.14, which the hosts (3.11) lack, and no registry is
reachable, so the base is debootstrapped locally and imported; the Gym layer is an
ordinary Dockerfile (images/nemo_gym/) FROM it.
"""

from __future__ import annotations

import hashlib
import shutil
import subprocess
import sys
import tempfile
from typing import Any, TextIO
from pathlib import Path

from shinken.errors import EnvironmentProblem
from shinken.sandbox.ownership import LABEL_MANAGED

RECIPE_DIR = Path(__file__).resolve().parent.parent / "images" / "nemo_gym"
SID_MIRROR = "http://deb.debian.org/debian"
SID_RECIPE = f"debootstrap --variant=minbase sid {SID_MIRROR}\n"
SID_REPO = "shinken/sid-base"
GYM_REPO = "shinken/nemo-gym"
HOST_CA = Path("/etc/ssl/certs/ca-certificates.crt")
# Where the image expects the CA bundle; callers bind-mount the host bundle over it.
IMAGE_CA_PATH = "/etc/shinken/ca-bundle.crt"
LABEL_HASH = "shinken.content_hash"
LABEL_IMAGE = "shinken.image"


def _hash12(*parts: bytes) -> str:
    h = hashlib.sha256()
    for p in parts:
        h.update(hashlib.sha256(p).digest())
    return h.hexdigest()[:12]


def sid_base_hash() -> str:
    return _hash12(SID_RECIPE.encode())


def gym_image_hash() -> str:
    """Hash of the recipe only (Dockerfile + base recipe), not the CA: a CA change must not
    force a multi-minute rebuild, and run-time mounts supply the current CA anyway."""
    return _hash12(SID_RECIPE.encode(), (RECIPE_DIR / "Dockerfile").read_bytes())


def _run(cmd: list[str], log: TextIO, **kw: Any) -> None:
    log.write(f"$ {' '.join(cmd)}\n")
    log.flush()
    try:
        log.fileno()
        proc = subprocess.run(cmd, stdout=log, stderr=subprocess.STDOUT, **kw)
    except (AttributeError, OSError, ValueError):  # a log without a file descriptor
        proc = subprocess.run(cmd, stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True, **kw)
        log.write(proc.stdout[-20000:])
    if proc.returncode != 0:
        raise EnvironmentProblem(
            f"{' '.join(cmd[:3])} ...: exited {proc.returncode} while building the NeMo Gym image; "
            f"see {getattr(log, 'name', 'the log')}"
        )


def _image_exists(ref: str) -> bool:
    return subprocess.run(["docker", "image", "inspect", ref], capture_output=True).returncode == 0


def _check_docker() -> None:
    if shutil.which("docker") is None or subprocess.run(["docker", "info"], capture_output=True).returncode:
        raise EnvironmentProblem("Docker does not answer; run scripts/ensure-docker.sh (as root) and retry")


def ensure_sid_base(log: TextIO | None = None) -> str:
    """`shinken/sid-base:<hash12>`, debootstrapping it when missing."""
    log = log or sys.stderr
    ref = f"{SID_REPO}:{sid_base_hash()}"
    if _image_exists(ref):
        return ref
    if shutil.which("debootstrap") is None:
        raise EnvironmentProblem("debootstrap is missing; `apt-get install debootstrap` (as root) and retry")
    with tempfile.TemporaryDirectory(prefix="shinken-sid-", dir="/var/tmp") as tmp:
        root = Path(tmp) / "rootfs"
        _run(["debootstrap", "--variant=minbase", "sid", str(root), SID_MIRROR], log)
        tar = subprocess.Popen(["tar", "-C", str(root), "-c", "."], stdout=subprocess.PIPE)
        try:
            _run(["docker", "import",
                  "--change", f"LABEL {LABEL_MANAGED}=1 {LABEL_HASH}={sid_base_hash()} {LABEL_IMAGE}=sid-base",
                  "--change", "ENV PATH=/usr/local/sbin:/usr/local/bin:/usr/sbin:/usr/bin:/sbin:/bin",
                  "-", ref], log, stdin=tar.stdout)
        finally:
            if tar.stdout is not None:
                tar.stdout.close()
            if tar.wait() != 0:
                raise EnvironmentProblem("tar of the sid rootfs failed while importing the base image")
    return ref


def gym_image_ref() -> str:
    return f"{GYM_REPO}:{gym_image_hash()}"


def ensure_gym_image(log: TextIO | None = None, *, ca_bundle: Path = HOST_CA) -> str:
    """Return `shinken/nemo-gym:<hash12>`, building it (minutes) only when missing."""
    log = log or sys.stderr
    _check_docker()
    ref = gym_image_ref()
    if _image_exists(ref):
        return ref
    base = ensure_sid_base(log)
    if not ca_bundle.is_file():
        raise EnvironmentProblem(f"{ca_bundle}: CA bundle missing; pip inside the build needs it")
    with tempfile.TemporaryDirectory(prefix="shinken-gymctx-") as tmp:
        ctx = Path(tmp)
        shutil.copy(RECIPE_DIR / "Dockerfile", ctx / "Dockerfile")
        shutil.copy(ca_bundle, ctx / "proxy-ca.crt")
        # Host network: the build only needs the apt mirror and PyPI, and must not depend on
        # the default bridge (shared daemons lose docker0 now and then).
        _run(["docker", "build", "--network", "host", "--build-arg", f"BASE={base}",
              "--label", f"{LABEL_MANAGED}=1", "--label", f"{LABEL_HASH}={gym_image_hash()}",
              "--label", f"{LABEL_IMAGE}=nemo-gym",
              "-t", ref, "-t", f"{GYM_REPO}:latest", str(ctx)], log)
    return ref


if __name__ == "__main__":
    print(ensure_gym_image())
