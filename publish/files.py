"""The files of a published dataset, written into one folder: exactly what goes to the hub
(or stays in `--local-dir` for review), each with the hashes the hub compares."""

from __future__ import annotations

import hashlib
import os
import shutil
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import orjson

from shinken.download.pack import PackedFolder, write_tar_zst
from shinken.errors import ShinkenError
from shinken.publish.card import render_card, split_files
from shinken.publish.contents import BUNDLES_PATH, Contents
from shinken.schemas import check_own
from shinken.swap import swap_into_place

PROVENANCE = "provenance.json"
CARD = "README.md"
# What shinken owns in a published repo: a re-publish replaces these and deletes what it no
# longer writes there (a split that went away), and never touches anything else.
MANAGED_PREFIXES = ("data/", "artifacts/")
MANAGED_FILES = (CARD, PROVENANCE)


@dataclass(frozen=True, slots=True)
class LocalFile:
    path: str  # path in the repo
    local: Path
    size: int
    sha256: str
    git_sha1: str  # git blob id: what the hub lists for a regular (non-LFS) file


def is_managed(path: str) -> bool:
    return path in MANAGED_FILES or path.startswith(MANAGED_PREFIXES)


def _hashes(path: Path) -> tuple[int, str, str]:
    size = path.stat().st_size
    sha, git = hashlib.sha256(), hashlib.sha1(b"blob %d\0" % size)
    with open(path, "rb") as fh:
        for block in iter(lambda: fh.read(1 << 20), b""):
            sha.update(block)
            git.update(block)
    return size, sha.hexdigest(), git.hexdigest()


def _jsonl(rows: list[dict[str, Any]]) -> bytes:
    # Key order as built (make_row's): the same bytes make-workspace writes for the same rows.
    return b"".join(orjson.dumps(r) + b"\n" for r in rows)


def write_files(contents: Contents, folder: Path) -> list[LocalFile]:
    """Write every file of the dataset under `folder` (which must be empty) and return them
    sorted by path. The bundles archive comes first: the card and provenance name its hash."""
    written: dict[str, bytes | None] = {}
    archive = folder / BUNDLES_PATH
    stats = write_tar_zst([PackedFolder(b.path.name, b.path, tuple(sorted(b.files))) for b in contents.kept], archive)
    size, sha, _ = _hashes(archive)
    contents.provenance["bundles"].update(sha256=sha, size=size, members=stats.members)
    written[BUNDLES_PATH] = None
    files = split_files(contents)
    for name, rel in files.items():
        rows = contents.dropped if name == "dropped" else contents.splits[name]
        written[rel] = _jsonl(rows)
    check_own("provenance", contents.provenance, PROVENANCE)
    written[PROVENANCE] = orjson.dumps(contents.provenance, option=orjson.OPT_INDENT_2 | orjson.OPT_SORT_KEYS) + b"\n"
    written[CARD] = render_card(contents).encode()
    out = []
    for rel, data in sorted(written.items()):
        target = folder / rel
        if data is not None:
            target.parent.mkdir(parents=True, exist_ok=True)
            target.write_bytes(data)
        out.append(LocalFile(rel, target, *_hashes(target)))
    return out


def is_publish_dir(folder: Path) -> bool:
    try:
        doc = orjson.loads((folder / PROVENANCE).read_bytes())
    except (OSError, orjson.JSONDecodeError):
        return False
    return isinstance(doc, dict) and doc.get("schema") == "shinken.provenance/1"


def write_local_dir(contents: Contents, dest: Path) -> list[LocalFile]:
    """`--local-dir`: the files exactly as they would be uploaded. DEST must be new, empty,
    or an earlier `--local-dir` (then replaced whole, only once the new one is complete)."""
    dest = dest.expanduser().absolute()
    if dest.exists() and not dest.is_dir():
        raise ShinkenError(f"{dest}: exists and is not a folder; pass a new --local-dir")
    replace = dest.is_dir() and any(dest.iterdir())
    if replace and not is_publish_dir(dest):
        raise ShinkenError(f"{dest}: is not empty and holds no {PROVENANCE} from `shinken publish`; "
                           "pass a new or empty --local-dir (nothing was changed)")
    dest.parent.mkdir(parents=True, exist_ok=True)
    stage = dest.with_name(f".{dest.name}.partial-{os.getpid()}")
    shutil.rmtree(stage, ignore_errors=True)
    stage.mkdir()
    try:
        files = write_files(contents, stage)
        swap_into_place(stage, dest)
    except BaseException:
        shutil.rmtree(stage, ignore_errors=True)
        raise
    return [LocalFile(f.path, dest / f.path, f.size, f.sha256, f.git_sha1) for f in files]
