"""A bundle that crossed the wire (a Ray call's payload: fleet/nodes.bundle_payload) written back
into a folder on the receiving host.

The payload's task folder name and file names come from another process, so each must be one
path component: a name like `../x` or `/etc/x` would place the folder or a file outside the task
root (a bundle's files lie directly in its folder, bundles/loader.py). Files are created fresh,
never through a symlink."""

from __future__ import annotations

import os
from collections.abc import Mapping
from pathlib import Path
from typing import Any

from shinken.errors import ShinkenError

MAX_NAME = 255  # one component of a Linux path


def component(name: object, what: str) -> str:
    """`name` when it is a single path component that names nothing else ('.', '..', hidden
    names, separators and NUL refused); ShinkenError otherwise."""
    if (not isinstance(name, str) or not name or len(name.encode("utf-8", "surrogateescape")) > MAX_NAME
            or name.startswith(".") or "/" in name or "\\" in name or "\0" in name):
        raise ShinkenError(f"{what} {name!r} refused: it must be one file name (no '/', '..' or leading '.')")
    return name


def checked(payload: Mapping[str, Any]) -> tuple[str, dict[str, bytes]]:
    """(folder name, {file name: content}) of a bundle payload, every name checked."""
    name = component(payload.get("name"), "task folder name")
    files = payload.get("files")
    if not isinstance(files, Mapping):
        raise ShinkenError(f"bundle payload of {name!r} has no file map")
    out: dict[str, bytes] = {}
    for file_name, data in files.items():
        if not isinstance(data, (bytes, bytearray)):
            raise ShinkenError(f"bundle payload of {name!r}: file {file_name!r} is not bytes")
        out[component(file_name, f"file name in bundle {name!r}")] = bytes(data)
    return name, out


def write_files(folder: Path, files: Mapping[str, bytes]) -> None:
    """Create each file in `folder` (an empty folder the caller just made); a name that exists
    already or is a symlink fails instead of being written through."""
    flags = os.O_WRONLY | os.O_CREAT | os.O_EXCL | os.O_NOFOLLOW | getattr(os, "O_CLOEXEC", 0)
    for name, data in files.items():
        fd = os.open(folder / component(name, "file name"), flags, 0o644)
        with os.fdopen(fd, "wb") as fh:
            fh.write(data)
