"""`shinken image build --extra FILE`: a user's Dockerfile fragment built on top of a task image.

The fragment holds Dockerfile instructions without FROM (e.g. VS Code from Microsoft's apt repository,
for a user whose machine reaches it); shinken prepends `FROM <base image id>` and appends the sandbox
defaults (root, /home/user, `sleep infinity`) so a fragment that switches USER still yields an image
shinken can run. The result is tagged `<repo>:<hash12>` + `<repo>:latest`, the hash covering the
fragment's bytes, the base image id and a recipe version: the same fragment on the same base is a
cache hit, and a rebuilt base gives a new tag. Labels name the base and the fragment, which is how the
capability manifest reports what the fragment added (shinken.images.capabilities)."""

from __future__ import annotations

import hashlib
import re
import time
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING, Iterator

from shinken.errors import ShinkenError
from shinken.images.build import (
    IMAGE_NAMES, REPO, SANDBOX_EXECUTABLES, BuildOutcome, Progress,
    _build_lock, _client, _image_id, _say, _tag_latest, build_image, context_tar, run_build, smoke_check,
)
from shinken.images.layout import EXTRA_KIND, LABEL_FRAGMENT_NAME, LABEL_FRAGMENT_SHA, LABEL_HASH, LABEL_IMAGE, LABEL_PARENT

if TYPE_CHECKING:
    from docker import DockerClient

EXTRA_RECIPE_VERSION = "1"
MAX_FRAGMENT_BYTES = 256 * 1024
_REPO_RE = re.compile(r"^[a-z0-9]+(?:[._-][a-z0-9]+)*(?:/[a-z0-9]+(?:[._-][a-z0-9]+)*)*$")
_SUFFIX = """
# appended by shinken: the sandbox contract (setup steps exec as root or user, the container idles)
USER root
WORKDIR /home/user
CMD ["sleep", "infinity"]
"""


@dataclass(frozen=True)
class Fragment:
    path: Path
    text: str
    sha256: str
    name: str  # from the file name: vscode.Dockerfile, Dockerfile.vscode -> "vscode"


def read_fragment(path: Path | str) -> Fragment:
    p = Path(path)
    if not p.is_file():
        raise ShinkenError(f"{p}: no such file; pass --extra with a Dockerfile fragment (RUN/ENV/COPY lines, no FROM)")
    data = p.read_bytes()
    if len(data) > MAX_FRAGMENT_BYTES:
        raise ShinkenError(f"{p}: {len(data)} bytes is not a Dockerfile fragment (limit {MAX_FRAGMENT_BYTES}); "
                           "pass the fragment file itself")
    try:
        text = data.decode("utf-8")
    except UnicodeDecodeError:
        raise ShinkenError(f"{p}: not UTF-8 text; pass a Dockerfile fragment") from None
    instructions = list(_instructions(text))
    if not instructions:
        raise ShinkenError(f"{p}: no Dockerfile instructions; add e.g. `RUN apt-get update && apt-get install -y ...`")
    for lineno, word in instructions:
        if word == "FROM":
            raise ShinkenError(f"{p}:{lineno}: FROM is not allowed in a fragment; shinken builds it on top of the "
                               "task image (choose the base with the image name: `shinken image build cua --extra ...`)")
    return Fragment(p, text, hashlib.sha256(data).hexdigest(), _name_of(p))


def _instructions(text: str) -> Iterator[tuple[int, str]]:
    """(line number, upper-cased instruction) of each instruction, skipping comments and continuations."""
    continued = False
    for n, line in enumerate(text.splitlines(), 1):
        stripped = line.strip()
        if not continued and stripped and not stripped.startswith("#"):
            yield n, stripped.split(None, 1)[0].upper()
        if stripped.startswith("#") and continued:
            continue  # a comment inside a continued instruction does not end it
        continued = stripped.endswith("\\") or (continued and not stripped)


def _name_of(p: Path) -> str:
    parts = [s for s in p.name.lower().split(".") if s and s not in ("dockerfile", "docker", "fragment", "txt")]
    name = re.sub(r"[^a-z0-9]+", "-", "-".join(parts)).strip("-")
    return name or "extra"


def extra_hash(fragment: Fragment, base_id: str) -> str:
    h = hashlib.sha256(f"extra-recipe={EXTRA_RECIPE_VERSION}\nbase={base_id}\n".encode())
    h.update(fragment.text.encode())
    return h.hexdigest()[:12]


def default_repo(base: str, fragment: Fragment) -> str:
    return f"{REPO[base]}-{fragment.name}" if base in REPO else f"shinken/extra-{fragment.name}"


def dockerfile_for(fragment: Fragment) -> str:
    return (f"# built by `shinken image build --extra {fragment.path.name}`\n"
            "ARG BASE_IMAGE\nFROM ${BASE_IMAGE}\nUSER root\n" + fragment.text.rstrip("\n") + "\n" + _SUFFIX)


def build_extra(fragment_path: Path | str, base: str = "cua", *, repo: str | None = None, client: DockerClient | None = None,
                ca_bundle: Path | str | None = None, progress: Progress | None = None,
                nocache: bool = False) -> BuildOutcome:
    """Build the fragment on `base` (linux, cua, or an existing image ref), cached by content hash."""
    fragment = read_fragment(fragment_path)
    if repo is not None and not _REPO_RE.match(repo):
        raise ShinkenError(f"--tag {repo!r} is not a Docker repository name (lower-case, e.g. me/cua-vscode); "
                           "the tag is added by shinken")
    client = _client(client)
    started = time.monotonic()
    if base in IMAGE_NAMES:
        base_out = build_image(base, client=client, ca_bundle=ca_bundle, progress=progress, nocache=False)
        base_id, base_ref = base_out.image_id, base_out.tag
    else:
        found = _image_id(client, base)
        if found is None:
            raise ShinkenError(f"base image {base!r} not found; use linux, cua or an existing image tag")
        base_id, base_ref = found, base
    repo = repo or default_repo(base, fragment)
    h = extra_hash(fragment, base_id)
    tag = f"{repo}:{h}"
    with _build_lock(f"extra-{h}"):
        found = _image_id(client, tag)
        if found and not nocache:
            _tag_latest(client, found, repo)
            return BuildOutcome(fragment.name, found, tag, h, True, time.monotonic() - started)
        _say(progress, f"building {tag} (from {base_ref} + {fragment.path.name})")
        context = context_tar([], {"Dockerfile": dockerfile_for(fragment).encode()})
        image_id = run_build(
            client, context, tag, f"extra-{fragment.name}-{h}", buildargs={"BASE_IMAGE": base_id},
            labels={LABEL_HASH: h, LABEL_IMAGE: EXTRA_KIND, LABEL_PARENT: base_id,
                    LABEL_FRAGMENT_SHA: fragment.sha256, LABEL_FRAGMENT_NAME: fragment.name},
            progress=progress, nocache=nocache,
        )
        # the fragment must not break what the base offered (python3, the guest scripts, X)
        from shinken.images.capabilities import get_manifest

        base_exes = set(get_manifest(base_id, client)["executables"])
        smoke_check(client, tag, tuple(e for e in SANDBOX_EXECUTABLES if e in base_exes))
        _tag_latest(client, image_id, repo)
    return BuildOutcome(fragment.name, image_id, tag, h, False, time.monotonic() - started)
