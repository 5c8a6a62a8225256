"""Copy the kept task bundles into the workspace, content-addressed and deduplicated.

A workspace runs wherever it is copied (a training cluster), so it carries its bundles:
`<server>/tasks/<task id>/...`, one folder per task named by its id (what the engine looks up).
Every file is addressed by its sha256: the first copy of a content is written, later files with
the same content become hard links to it (CUA-Gym ships many identical setup documents), and
the index (task -> file -> sha256) goes into the workspace manifest so a copy can be checked.
A copy tool that does not keep hard links (`cp -r`) still yields a correct, larger workspace.
"""

from __future__ import annotations

import hashlib
import os
import shutil
from dataclasses import dataclass, field
from pathlib import Path

from shinken.bundles.loader import load_bundle
from shinken.bundles.model import Bundle
from shinken.download.source import SOURCE_FILE
from shinken.errors import ShinkenError

CHUNK = 1 << 20


@dataclass
class StoreReport:
    bundles: int = 0
    files: int = 0
    bytes_total: int = 0  # what a plain copy of the bundles takes
    bytes_stored: int = 0  # what the workspace takes (each content once)
    linked: int = 0  # files stored as a link to an identical earlier file
    index: dict[str, dict[str, str]] = field(default_factory=dict)  # task id -> relative file -> sha256

    def to_json(self) -> dict[str, object]:
        return {"bundles": self.bundles, "files": self.files, "bytes_total": self.bytes_total,
                "bytes_stored": self.bytes_stored, "linked_files": self.linked}


def _hash_copy(src: Path, dst: Path) -> str:
    h = hashlib.sha256()
    with open(src, "rb") as fi, open(dst, "wb") as fo:
        while chunk := fi.read(CHUNK):
            h.update(chunk)
            fo.write(chunk)
    shutil.copymode(src, dst)
    return h.hexdigest()


def copy_bundles(bundles: list[Bundle], dest: Path, task_root: Path) -> StoreReport:
    """Copy `bundles` under `dest` (created) and check each copy loads with the same bundle hash."""
    report = StoreReport()
    first: dict[tuple[str, int], Path] = {}  # (sha256, mode) -> the stored file (a link shares the mode)
    dest.mkdir(parents=True)
    for bundle in bundles:
        folder = dest / bundle.id
        files: dict[str, str] = {}
        for src in sorted(p for p in bundle.path.rglob("*") if p.is_file() and not p.is_symlink()):
            rel = src.relative_to(bundle.path)
            target = folder / rel
            target.parent.mkdir(parents=True, exist_ok=True)
            digest = _hash_copy(src, target)  # one read: copy and hash together
            st = target.stat()
            size, key = st.st_size, (digest, st.st_mode)
            if key in first:
                target.unlink()
                os.link(first[key], target)
                report.linked += 1
            else:
                first[key] = target
                report.bytes_stored += size
            report.files += 1
            report.bytes_total += size
            files[rel.as_posix()] = digest
        copied = load_bundle(folder)
        if copied.bundle_hash != bundle.bundle_hash:
            raise ShinkenError(f"{bundle.id}: the copy in the workspace hashes differently from {bundle.path} "
                               f"({copied.bundle_hash} vs {bundle.bundle_hash}); was the task root modified meanwhile?")
        report.index[bundle.id] = files
        report.bundles += 1
    record = task_root / SOURCE_FILE
    if record.is_file():  # provenance travels with the bundles
        shutil.copyfile(record, dest / SOURCE_FILE)
    return report
