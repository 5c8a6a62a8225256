"""Build the sandbox images, cached by content hash.

Chain: `shinken/base-bookworm` (debootstrap minbase + docker import) -> `shinken/sandbox-core`
(images/core: desktop, python libraries, user) -> `shinken/sandbox-linux` (core + images/guest/) and
`shinken/sandbox-cua` (core + the task desktop's apps, tools and reward modules + images/guest/). The
guest scripts come last in both, so editing one never reinstalls the applications. User fragments
on top of either are built by shinken.images.extra with the same runner (`run_build`).
Each image is tagged `<repo>:<hash12>` and `<repo>:latest` and labelled `shinken.content_hash`; the
hash covers the image folder, the guest scripts (linux), a recipe version and the parent image id,
so any change below an image rebuilds it and nothing else does.

Builds use the engine's classic builder through the SDK's low-level API: Docker 20.10 with a
buildx-less client cannot run BuildKit, so the proxy CA for pip is shipped in the build context
(`ca/ca.pem`) and only COPY'd into a throwaway pip stage; the final image never contains it.
Build steps use the host network: they are our own Dockerfiles, and it keeps builds working when
the default bridge is unusable.
"""

from __future__ import annotations

import contextlib
import fcntl
import hashlib
import io
import os
import re
import shutil
import subprocess
import tarfile
import tempfile
import time
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING, Callable, Iterator

from shinken.errors import EnvironmentProblem, ShinkenError
from shinken.images.layout import GUEST_DIR, IMAGES_DIR, LABEL_HASH, LABEL_IMAGE, LABEL_PARENT
from shinken.runtime import cache_root

if TYPE_CHECKING:  # docker is imported where it is used: `shinken --help` reads DEFAULT_IMAGE from here
    from docker import DockerClient

IMAGE_NAMES = ("linux", "cua")  # what users build and run; "core" is their shared parent
BUILDABLE = ("core", *IMAGE_NAMES)
PARENT = {"core": "base", "linux": "core", "cua": "core"}
WITH_GUEST = ("linux", "cua")
REPO = {"base": "shinken/base-bookworm", "core": "shinken/sandbox-core", "linux": "shinken/sandbox-linux",
        "cua": "shinken/sandbox-cua"}
# The full task image (office apps, GIMP, ...): what every command and the workspace server
# use unless told otherwise, so a task is never blocked only because --image was omitted.
DEFAULT_IMAGE = f"{REPO['cua']}:latest"
# Bump when the build procedure itself changes in a way the hashed files do not show.
RECIPE_VERSION = "1"
DEFAULT_CA_BUNDLE = Path("/etc/ssl/certs/ca-certificates.crt")
DEFAULT_MIRROR = "http://deb.debian.org/debian"
BASE_SUITE = "bookworm"
BASE_VARIANT = "minbase"

Progress = Callable[[str], None]


def _client(client: DockerClient | None = None) -> DockerClient:
    from shinken.sandbox.docker_client import connect

    return client if client is not None else connect()


def _say(progress: Progress | None, line: str) -> None:
    if progress is not None:
        progress(line)


@contextlib.contextmanager
def _build_lock(name: str) -> Iterator[None]:
    """One build per image name at a time across processes (parallel test sessions, CLI runs):
    the second waiter then finds the first one's result in the cache."""
    d = cache_root() / "locks"
    d.mkdir(parents=True, exist_ok=True)
    with open(d / f"image-{name}.lock", "w") as fh:
        fcntl.flock(fh, fcntl.LOCK_EX)
        try:
            yield
        finally:
            fcntl.flock(fh, fcntl.LOCK_UN)


def _image_id(client: DockerClient, ref: str) -> str | None:
    from shinken.sandbox.docker_client import find_image

    return find_image(client, ref)


def _tag_latest(client: DockerClient, image_id: str, repo: str) -> None:
    if _image_id(client, f"{repo}:latest") != image_id:
        client.api.tag(image_id, repo, "latest")


# ---------------------------------------------------------------- base image (debootstrap)


def apt_mirror(sources_d: Path = Path("/etc/apt/sources.list.d"), sources_list: Path = Path("/etc/apt/sources.list")) -> str:
    """The Debian mirror this machine's apt uses (deb822 `.sources` first, then sources.list)."""
    for f in sorted(sources_d.glob("*.sources")) if sources_d.is_dir() else []:
        for stanza in f.read_text(errors="replace").split("\n\n"):
            fields = dict(
                (k.strip().lower(), v.strip())
                for k, _, v in (ln.partition(":") for ln in stanza.splitlines() if ln and not ln.startswith("#"))
            )
            uris, suites = fields.get("uris", ""), fields.get("suites", "").split()
            if uris and any(s in (BASE_SUITE, "stable") for s in suites) and "security" not in uris:
                return uris.split()[0]
    if sources_list.is_file():
        for ln in sources_list.read_text(errors="replace").splitlines():
            m = re.match(r"\s*deb\s+(?:\[[^\]]*\]\s+)?(\S+)\s+(\S+)", ln)
            if m and m.group(2) in (BASE_SUITE, "stable") and "security" not in m.group(1):
                return m.group(1)
    return DEFAULT_MIRROR


def base_hash(mirror: str, suite: str = BASE_SUITE) -> str:
    return hashlib.sha256(f"{suite}|{BASE_VARIANT}|{mirror}|{RECIPE_VERSION}".encode()).hexdigest()[:12]


def base_repo(suite: str = BASE_SUITE) -> str:
    """`shinken/base-<suite>`: the debootstrapped base of one Debian suite."""
    return REPO["base"] if suite == BASE_SUITE else f"shinken/base-{suite}"


def ensure_base(client: DockerClient | None = None, *, progress: Progress | None = None,
                suite: str = BASE_SUITE) -> str:
    """Image id of `shinken/base-<suite>:<hash>` (default bookworm, what the sandbox images
    use), creating it with debootstrap when missing. The suite's packages come from the mirror
    this machine's apt uses for bookworm."""
    client = _client(client)
    mirror = apt_mirror()
    h = base_hash(mirror, suite)
    repo = base_repo(suite)
    with _build_lock("base" if suite == BASE_SUITE else f"base-{suite}"):
        found = _image_id(client, f"{repo}:{h}")
        if found:
            return found
        # A hand-made base from the machine setup (same recipe, no hash label yet) is adopted
        # rather than rebuilt: debootstrap costs about a minute and gives the same tree.
        latest = client.images.get(f"{repo}:latest") if _image_id(client, f"{repo}:latest") else None
        if latest is not None and not (latest.labels or {}).get(LABEL_HASH):
            _say(progress, f"adopting existing {repo}:latest as {repo}:{h}")
            client.api.tag(latest.id, repo, h)
            return str(latest.id)
        return _debootstrap_base(client, mirror, h, progress, suite)


def _debootstrap_base(client: DockerClient, mirror: str, h: str, progress: Progress | None,
                      suite: str = BASE_SUITE) -> str:
    if shutil.which("debootstrap") is None:
        raise EnvironmentProblem("building the base image needs debootstrap; run `apt-get install debootstrap`")
    if os.geteuid() != 0:
        raise EnvironmentProblem("building the base image runs debootstrap, which needs root; rerun as root")
    repo = base_repo(suite)
    with tempfile.TemporaryDirectory(prefix="shinken-base-", dir="/var/tmp") as tmp:
        root = Path(tmp) / "rootfs"
        _say(progress, f"debootstrap --variant={BASE_VARIANT} {suite} {mirror}")
        proc = subprocess.Popen(
            ["debootstrap", f"--variant={BASE_VARIANT}", suite, str(root), mirror],
            stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True,
        )
        tail: list[str] = []
        assert proc.stdout is not None
        for line in proc.stdout:
            tail = (tail + [line.rstrip()])[-20:]
            _say(progress, line.rstrip())
        if proc.wait() != 0:
            raise EnvironmentProblem("debootstrap failed:\n" + "\n".join(tail))
        _say(progress, f"docker import -> {repo}:{h}")
        tar = subprocess.Popen(["tar", "-C", str(root), "--numeric-owner", "-c", "."], stdout=subprocess.PIPE)
        assert tar.stdout is not None
        out = client.api.import_image_from_stream(
            tar.stdout, repository=repo, tag=h, changes=[f"LABEL {LABEL_HASH}={h} {LABEL_IMAGE}=base"]
        )
        if tar.wait() != 0:
            raise EnvironmentProblem("tar of the debootstrapped tree failed")
    image_id = _image_id(client, f"{repo}:{h}")
    if image_id is None:
        raise EnvironmentProblem(f"docker import did not create {repo}:{h}: {str(out)[-500:]}")
    _tag_latest(client, image_id, repo)
    return image_id


# ---------------------------------------------------------------- sandbox images


def _image_files(name: str) -> list[tuple[str, Path]]:
    """(path in build context, file on disk) for everything an image's build reads."""
    folder = IMAGES_DIR / name
    if not (folder / "Dockerfile").is_file():
        raise ShinkenError(f"{folder}/Dockerfile: missing; unknown image {name!r} (known: {', '.join(BUILDABLE)})")
    files = [(str(p.relative_to(folder)), p) for p in folder.rglob("*") if p.is_file() and "__pycache__" not in p.parts]
    if name in WITH_GUEST:
        files += [(f"guest/{p.relative_to(GUEST_DIR)}", p) for p in GUEST_DIR.rglob("*")
                  if p.is_file() and "__pycache__" not in p.parts]
    return sorted(files)


def content_hash(name: str, parent_id: str) -> str:
    h = hashlib.sha256(f"recipe={RECIPE_VERSION}\nparent={parent_id}\n".encode())
    for arc, path in _image_files(name):
        data = path.read_bytes()
        # the executable bit matters in the image, so it is part of the content
        executable = bool(path.stat().st_mode & 0o111)  # mode bits, not os.access: same for every user
        h.update(f"{arc}\0{len(data)}\0{executable}\0".encode())
        h.update(data)
    return h.hexdigest()[:12]


def context_tar(files: list[tuple[str, Path]], extra: dict[str, bytes]) -> io.BytesIO:
    """A build context: `files` (path in context, file on disk) plus in-memory `extra` members."""
    buf = io.BytesIO()
    with tarfile.open(fileobj=buf, mode="w") as tar:
        for arc, path in files:
            info = tar.gettarinfo(str(path), arcname=arc)
            info.uid = info.gid = 0
            info.uname = info.gname = "root"
            info.mtime = 0  # stable context -> the builder's COPY cache hits across checkouts
            with open(path, "rb") as fh:
                tar.addfile(info, fh)
        for arc, data in extra.items():
            info = tarfile.TarInfo(arc)
            info.size = len(data)
            info.mode = 0o644
            tar.addfile(info, io.BytesIO(data))
    buf.seek(0)
    return buf


def _read_ca(ca_bundle: Path | str | None) -> bytes:
    if ca_bundle is None:
        return DEFAULT_CA_BUNDLE.read_bytes() if DEFAULT_CA_BUNDLE.is_file() else b""
    p = Path(ca_bundle)
    if not p.is_file():
        raise ShinkenError(f"{p}: CA bundle not found; pass --ca-bundle with a PEM file (or omit it)")
    return p.read_bytes()


@dataclass
class BuildOutcome:
    name: str
    image_id: str
    tag: str
    content_hash: str
    cached: bool
    seconds: float


def ensure_image(name: str, *, client: DockerClient | None = None, ca_bundle: Path | str | None = None,
                 progress: Progress | None = None) -> str:
    """Image id of `shinken/sandbox-<name>` for the current sources, building it (and its parents)
    only when no image with the same content hash exists. Also points `:latest` at it."""
    return build_image(name, client=client, ca_bundle=ca_bundle, progress=progress).image_id


def build_image(name: str, *, client: DockerClient | None = None, ca_bundle: Path | str | None = None,
                progress: Progress | None = None, nocache: bool = False) -> BuildOutcome:
    if name not in BUILDABLE:
        raise ShinkenError(f"unknown image {name!r}; choose one of: {', '.join(IMAGE_NAMES)}")
    client = _client(client)
    started = time.monotonic()
    parent = PARENT[name]
    if parent == "base":
        parent_id = ensure_base(client, progress=progress)
        parent_ref = f"{REPO['base']}:{base_hash(apt_mirror())}"
    else:
        parent_out = build_image(parent, client=client, ca_bundle=ca_bundle, progress=progress, nocache=nocache)
        parent_id, parent_ref = parent_out.image_id, parent_out.tag
    h = content_hash(name, parent_id)
    repo = REPO[name]
    tag = f"{repo}:{h}"
    with _build_lock(name):
        found = _image_id(client, tag)
        if found and not nocache:
            _tag_latest(client, found, repo)
            return BuildOutcome(name, found, tag, h, True, time.monotonic() - started)
        _say(progress, f"building {tag} (from {parent_ref})")
        context = context_tar(_image_files(name), {"ca/ca.pem": _read_ca(ca_bundle)})
        image_id = run_build(client, context, tag, f"{name}-{h}", buildargs={"BASE_IMAGE": parent_ref},
                             labels={LABEL_HASH: h, LABEL_IMAGE: name, LABEL_PARENT: parent_id},
                             progress=progress, nocache=nocache)
        if name in WITH_GUEST:
            smoke_check(client, tag)
        _tag_latest(client, image_id, repo)
    return BuildOutcome(name, image_id, tag, h, False, time.monotonic() - started)


SANDBOX_EXECUTABLES = ("python3", "shinken-desktop-up", "shinken-a11y-dump", "Xvfb")


def smoke_check(client: DockerClient, tag: str, required: tuple[str, ...] = SANDBOX_EXECUTABLES) -> None:
    """Before `:latest` moves, the new image must have python3 and the guest scripts (the manifest is
    cached by image id, so this also pre-fills `shinken image inspect`)."""
    from shinken.images.capabilities import get_manifest

    try:
        manifest = get_manifest(tag, client)
        missing = [e for e in required if e not in manifest["executables"]]
    except ShinkenError as exc:
        missing = [str(exc)]
    if missing:
        client.api.remove_image(tag, noprune=True)
        raise EnvironmentProblem(f"built {tag} but it lacks {', '.join(missing)}; the image was not tagged latest")


def run_build(client: DockerClient, context: io.BytesIO, tag: str, log_name: str, *, buildargs: dict[str, str],
              labels: dict[str, str], progress: Progress | None, nocache: bool) -> str:
    """Build `context` (a tar with a Dockerfile) as `tag`; the image id. Output goes to
    build-logs/<log_name>.log; a failed step raises EnvironmentProblem with the last lines."""
    import docker.errors

    log_dir = cache_root() / "build-logs"
    log_dir.mkdir(parents=True, exist_ok=True)
    log_path = log_dir / f"{log_name}.log"
    tail: list[str] = []
    image_id: str | None = None
    with open(log_path, "w", encoding="utf-8") as log:
        try:
            stream = client.api.build(
                fileobj=context, custom_context=True, tag=tag, rm=True, forcerm=True,
                pull=False, nocache=nocache, decode=True, network_mode="host", buildargs=buildargs, labels=labels,
            )
            for chunk in stream:
                if "error" in chunk:
                    log.write(chunk["error"] + "\n")
                    raise EnvironmentProblem(
                        f"building {tag} failed: {chunk['error'].strip()}\n" + "\n".join(tail[-15:])
                        + f"\n(full log: {log_path})"
                    )
                text = chunk.get("stream")
                if text:
                    log.write(text)
                    for line in text.splitlines():
                        if line.strip():
                            tail = (tail + [line])[-40:]
                            _say(progress, line)
                aux = chunk.get("aux")
                if isinstance(aux, dict) and aux.get("ID"):
                    image_id = aux["ID"]
        except docker.errors.APIError as exc:
            raise EnvironmentProblem(f"building {tag} failed: {exc} (full log: {log_path})") from exc
    image_id = _image_id(client, tag) or image_id
    if image_id is None:
        raise EnvironmentProblem(f"building {tag} produced no image (full log: {log_path})")
    return image_id
