"""Process ownership at ground level: who owns a resource (host, pid, start time), whether
that owner still lives, the registry of temporary folders a crashed process leaves behind
for `shinken gc`, and the cache root. No Docker here: download/, images/ and the sandbox
all build on it."""

from __future__ import annotations

import datetime as _dt
import hashlib
import os
import socket
import tempfile
import time
from collections.abc import Mapping
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import orjson

OWNER_MARKER = ".shinken-owner"  # in a registered temp folder: the owner label


# --------------------------------------------------------------------- time

def utc_now(*, precise: bool = False) -> str:
    """The time stamp every shinken document uses: UTC ISO 8601 with Z, to the second
    (`precise`: to the microsecond, where records of one run must sort)."""
    return _dt.datetime.now(_dt.timezone.utc).strftime("%Y-%m-%dT%H:%M:%S.%fZ" if precise else "%Y-%m-%dT%H:%M:%SZ")


# --------------------------------------------------------------------- cache root

def cache_root() -> Path:
    """$XDG_CACHE_HOME/shinken, else ~/.cache/shinken: manifests, build locks and logs,
    triage results (SHINKEN_CACHE_DIR moves triage's alone)."""
    return Path(os.environ.get("XDG_CACHE_HOME") or Path.home() / ".cache") / "shinken"


# --------------------------------------------------------------------- owners

def process_start_ticks(pid: int) -> str | None:
    """Start time of `pid` in clock ticks since boot (field 22 of /proc/<pid>/stat).
    Together with the pid it names one process: a reused pid has another start time."""
    try:
        with open(f"/proc/{pid}/stat", "rb") as fh:
            data = fh.read()
    except OSError:
        return None
    # comm (field 2) may hold spaces and parentheses; fields after the last ')' are fixed.
    rest = data[data.rindex(b")") + 2 :].split()
    return rest[19].decode()


def is_zombie(pid: int) -> bool:
    """Exited but not yet reaped by its parent (it holds nothing any more)."""
    try:
        with open(f"/proc/{pid}/stat", "rb") as fh:
            data = fh.read()
    except OSError:
        return False
    return data[data.rindex(b")") + 2 :].split()[:1] == [b"Z"]


@dataclass(frozen=True)
class Owner:
    host: str
    pid: int
    start: str

    @classmethod
    def current(cls) -> Owner:
        pid = os.getpid()
        return cls(socket.gethostname(), pid, process_start_ticks(pid) or "0")

    @classmethod
    def parse(cls, label: str) -> Owner | None:
        try:
            host, pid, start = label.rsplit("/", 2)
            return cls(host, int(pid), start)
        except ValueError:
            return None

    def label(self) -> str:
        return f"{self.host}/{self.pid}/{self.start}"

    def is_local(self) -> bool:
        return self.host == socket.gethostname()

    def is_alive(self) -> bool:
        """True only for a live process on this host with the same pid AND start time."""
        if not self.is_local():
            raise ValueError("the liveness of an owner on another host cannot be told from here")
        return process_start_ticks(self.pid) == self.start


@dataclass(frozen=True)
class Liveness:
    state: str  # "alive" | "dead" | "unknown"
    why: str


def owner_liveness(label: str | None) -> Liveness:
    """Whether the process an owner label names is still alive."""
    owner = Owner.parse(label) if label else None
    if owner is None:
        return Liveness("unknown", "owner label missing or unreadable")
    if not owner.is_local():
        return Liveness("unknown", f"owner is on host {owner.host}; its liveness cannot be told from here "
                                   "(run gc there, or use --older-than)")
    if owner.is_alive():
        if is_zombie(owner.pid):
            return Liveness("dead", f"owner pid {owner.pid} has exited (zombie, not yet reaped)")
        return Liveness("alive", f"owner pid {owner.pid} is running")
    if process_start_ticks(owner.pid) is None:
        return Liveness("dead", f"owner pid {owner.pid} has exited")
    return Liveness("dead", f"owner pid {owner.pid} exited; the pid now belongs to another process")


# --------------------------------------------------------------------- temp folders

def runtime_root() -> Path:
    """Where shinken's temp-folder registry lives: $SHINKEN_RUNTIME_DIR, else
    $XDG_RUNTIME_DIR/shinken, else /tmp/shinken-<uid> (per user, so users never share it)."""
    explicit = os.environ.get("SHINKEN_RUNTIME_DIR")
    if explicit:
        return Path(explicit)
    xdg = os.environ.get("XDG_RUNTIME_DIR")
    if xdg:
        return Path(xdg) / "shinken"
    return Path(tempfile.gettempdir()) / f"shinken-{os.getuid()}"


def temp_registry(root: Path | None = None) -> Path:
    return (root or runtime_root()) / "tempdirs"


def _entry_path(root: Path | None, folder: Path) -> Path:
    return temp_registry(root) / (hashlib.sha256(str(folder).encode()).hexdigest()[:24] + ".json")


def register_temp_dir(path: str | os.PathLike[str], *, labels: Mapping[str, str] | None = None,
                      owner: Owner | None = None, root: Path | None = None) -> Path:
    """Mark an existing folder as owned by this process so `shinken gc` can remove it if the
    process dies before cleaning up. Writes `<path>/.shinken-owner` and a registry entry
    under runtime_root(). Call unregister_temp_dir(path) after removing it normally."""
    folder = Path(path).resolve()
    if not folder.is_dir():
        raise NotADirectoryError(f"{folder}: register_temp_dir needs an existing folder")
    label = (owner or Owner.current()).label()
    (folder / OWNER_MARKER).write_text(label + "\n")
    entry = _entry_path(root, folder)
    entry.parent.mkdir(parents=True, exist_ok=True, mode=0o700)
    doc = {"path": str(folder), "owner": label, "labels": dict(labels or {}), "created": int(time.time())}
    tmp = entry.with_name(f".{entry.name}.{os.getpid()}.tmp")
    tmp.write_bytes(orjson.dumps(doc))
    tmp.replace(entry)  # atomic: gc never reads half an entry
    return folder


def unregister_temp_dir(path: str | os.PathLike[str], *, root: Path | None = None) -> None:
    """Forget a folder registered with register_temp_dir (after its owner removed it)."""
    _entry_path(root, Path(path).resolve()).unlink(missing_ok=True)


def make_temp_dir(prefix: str = "run-", *, parent: Path | None = None, labels: Mapping[str, str] | None = None,
                  root: Path | None = None) -> Path:
    """mkdtemp (under `parent`, default the runtime root) and register it in one step."""
    base = parent or (root or runtime_root()) / "dirs"
    base.mkdir(parents=True, exist_ok=True, mode=0o700)
    return register_temp_dir(tempfile.mkdtemp(prefix=prefix, dir=base), labels=labels, root=root)


def read_owner_marker(folder: Path) -> str | None:
    try:
        return (folder / OWNER_MARKER).read_text().strip()
    except OSError:
        return None


@dataclass(frozen=True)
class TempDirEntry:
    """One registry entry: a folder some process registered, and who."""

    entry: Path
    folder: Path
    owner: str
    labels: dict[str, str]
    created: float | None


def temp_dir_entries(root: Path | None = None) -> list[TempDirEntry]:
    """Every readable registry entry (half-written or foreign files are skipped)."""
    registry = temp_registry(root)
    if not registry.is_dir():
        return []
    found = []
    for entry in sorted(registry.glob("*.json")):
        try:
            doc: Any = orjson.loads(entry.read_bytes())
            created = doc.get("created")
            found.append(TempDirEntry(entry, Path(doc["path"]), str(doc["owner"]), dict(doc.get("labels") or {}),
                                      float(created) if isinstance(created, (int, float)) else None))
        except (OSError, ValueError, KeyError, TypeError, AttributeError):
            continue
    return found
