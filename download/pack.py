"""Write task bundles as one `.tar.zst` shaped like the release, byte-for-byte reproducible.

The layout is the release's (members `<folder>/<file>`, regular files only, no leading
folder), so `extract_archives` and `shinken download` read it back into the same task root.
The same bundles always give the same bytes (members sorted, fixed mtime/owner, modes reduced
to 0644/0755, one zstd frame at a fixed level), which is what lets `shinken publish` see that
nothing changed by comparing hashes.
"""

from __future__ import annotations

import io
import os
import stat
import tarfile
from dataclasses import dataclass
from pathlib import Path
from typing import Iterable

import zstandard

from shinken.errors import ShinkenError

FIXED_MTIME = 0  # nothing downstream reads mtimes (extraction does not restore them)
ZSTD_LEVEL = 10  # measured in docs/publish.md: close to 19 in size at a fraction of its time


@dataclass(frozen=True, slots=True)
class PackedFolder:
    name: str  # the member prefix (the task folder's name)
    path: Path
    files: tuple[str, ...]  # regular files directly in the folder, the bundle's own


@dataclass(frozen=True, slots=True)
class PackStats:
    archive: Path
    folders: int
    members: int
    bytes_in: int
    size: int


def write_tar_zst(folders: Iterable[PackedFolder], archive: Path, *, level: int = ZSTD_LEVEL) -> PackStats:
    """Write `folders` into `archive` (replaced atomically). Fails with a ShinkenError naming
    the file when a listed file is gone or no longer a regular file."""
    archive = Path(archive)
    archive.parent.mkdir(parents=True, exist_ok=True)
    tmp = archive.with_name(f".{archive.name}.tmp-{os.getpid()}")
    folders = sorted(folders, key=lambda f: f.name)
    seen: set[str] = set()
    members = total = 0
    cctx = zstandard.ZstdCompressor(level=level, threads=0)  # single-threaded: reproducible frames
    try:
        with open(tmp, "wb") as raw, cctx.stream_writer(raw, closefd=False) as zw:
            # PAX only adds extended headers where ustar cannot hold a name; the extractor reads both.
            with tarfile.open(fileobj=zw, mode="w|", format=tarfile.PAX_FORMAT) as tar:
                for folder in folders:
                    if folder.name in seen or "/" in folder.name or folder.name.startswith("."):
                        raise ShinkenError(f"{folder.path}: folder name {folder.name!r} cannot be an archive prefix "
                                           "(duplicate, nested or hidden)")
                    seen.add(folder.name)
                    for name in sorted(folder.files):
                        path = folder.path / name
                        try:
                            st = os.stat(path, follow_symlinks=False)
                            if not stat.S_ISREG(st.st_mode):
                                raise ShinkenError(f"{path}: no longer a regular file; run triage again")
                            data = path.read_bytes()
                        except OSError as exc:
                            raise ShinkenError(f"{path}: cannot read ({exc.strerror}); nothing was written") from None
                        info = tarfile.TarInfo(f"{folder.name}/{name}")
                        info.size = len(data)
                        info.mode = 0o755 if st.st_mode & 0o111 else 0o644
                        info.mtime = FIXED_MTIME
                        info.uid = info.gid = 0
                        info.uname = info.gname = ""
                        tar.addfile(info, io.BytesIO(data))
                        members += 1
                        total += len(data)
        tmp.replace(archive)
    except BaseException:
        tmp.unlink(missing_ok=True)
        raise
    return PackStats(archive, len(folders), members, total, archive.stat().st_size)
