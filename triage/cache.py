"""Triage cache: one file per Python version of the images triaged against,
~/.cache/shinken/triage/py<X.Y>.json.

`entries` maps an analysis key (bundle hash + folder name, since the loader's id
checks depend on the name) to the analysis, which depends on the bundle and the image's
Python version only (syntax is checked with its grammar); everything else about the image
is matched afresh on every run. So triaging against a rebuilt image (same Python) is a
re-run, not a cold analysis. `stat` maps a folder path to (stat fingerprint, analysis key)
so an unchanged folder is not even re-hashed. A different ANALYSIS_VERSION or code
fingerprint empties it.

Beside it, `py<X.Y>.results.json` keeps the last run's evaluated tasks (the report's
entries) by folder, for one evaluation setting (manifest, mock map, judge: the
Evaluator's fingerprint): an unchanged folder triaged the same way again is taken from
there, without loading the analyses or matching them again. Another setting replaces it."""

from __future__ import annotations

import functools
import hashlib
import os
import re
import zlib
from pathlib import Path
from typing import Any

import orjson

from shinken.runtime import cache_root

ANALYSIS_VERSION = 6  # bump when analysis output (needs/analyze.py) changes: invalidates every cache entry


@functools.cache
def code_fingerprint() -> str:
    """Hash of the code an analysis depends on (triage, the static reading in needs/, the
    bundle loader, the task schema): editing any of it invalidates cached analyses without a
    manual version bump."""
    import shinken.bundles.loader as loader
    import shinken.needs as needs
    import shinken.schemas as schemas

    h = hashlib.sha256()
    files = (sorted(Path(__file__).parent.glob("*.py")) + sorted(Path(needs.__file__).parent.glob("*.py"))
             + [Path(loader.__file__), Path(schemas.__file__).parent / "task.schema.json"])
    for f in files:
        try:
            h.update(f.name.encode() + b"\0" + f.read_bytes())
        except OSError:
            h.update(f.name.encode() + b"\0?")
    return h.hexdigest()[:16]


def stat_key(folder: str, names: list[str] | None = None) -> tuple[str, list[str]] | None:
    """A cheap fingerprint of a folder (its own mtime/ctime/inode, then type, size, mtime,
    ctime and inode of each entry) and the entry names. Unchanged key -> unchanged bytes, so
    the bundle need not be re-hashed. With `names` from a previous run no listing is needed:
    adding, removing or renaming an entry changes the folder's mtime. Int tuples hash the
    same in every process (only str hashing is salted); names go through crc32."""
    try:
        st = os.stat(folder, follow_symlinks=False)
        if names is None:
            names = sorted(os.listdir(folder))
        ints = [st.st_mtime_ns, st.st_ctime_ns, st.st_ino]
        prefix = folder + os.sep  # not os.path.join: this runs for every entry of every folder
        for n in names:
            s = os.lstat(prefix + n)
            ints += (s.st_mode, s.st_size, s.st_mtime_ns, s.st_ctime_ns, s.st_ino)
    except OSError:
        return None
    crc = zlib.crc32("\0".join(names).encode("utf-8", "surrogateescape"))
    return f"{len(names)}:{crc:x}:{hash(tuple(ints)) & (2**64 - 1):x}", names


def cache_dir() -> Path:
    return Path(os.environ.get("SHINKEN_CACHE_DIR") or cache_root()) / "triage"


def entry_key(bundle_hash: str, folder: str) -> str:
    return f"{bundle_hash}:{os.path.basename(folder)}"


class TriageCache:
    def __init__(self, python: str, directory: Path | None = None) -> None:
        safe = re.sub(r"[^A-Za-z0-9_.-]", "_", python or "unknown")
        self.path = (directory or cache_dir()) / f"py{safe}.json"
        self.header = {"version": ANALYSIS_VERSION, "code": code_fingerprint(), "python": python}
        self.entries: dict[str, dict[str, Any]] = {}
        self.stat: dict[str, list[Any]] = {}  # folder -> [stat key, entry key, entry names]
        self.dirty = False

    def load(self) -> None:
        try:
            doc = orjson.loads(self.path.read_bytes())
        except (OSError, orjson.JSONDecodeError):
            return  # no cache or a torn one: start empty
        if not isinstance(doc, dict) or any(doc.get(k) != v for k, v in self.header.items()):
            return
        if isinstance(doc.get("entries"), dict) and isinstance(doc.get("stat"), dict):
            self.entries, self.stat = doc["entries"], doc["stat"]

    def lookup(self, folder: str) -> dict[str, Any] | None:
        """The cached analysis of `folder` if its stat fingerprint is unchanged."""
        hit = self.stat.get(folder)
        if not isinstance(hit, list) or len(hit) != 3 or not _unchanged(folder, hit[0], hit[2]):
            return None
        return self.entries.get(hit[1])

    def put(self, folder: str, skey: tuple[str, list[str]] | None, analysis: dict[str, Any]) -> None:
        # Results from unreadable folders are not kept: a permission fix may not change the stat key.
        if skey is None or not analysis["bundle_hash"] or any(r[0] == "unreadable" for r in analysis["reasons"]):
            self.stat.pop(folder, None)
            return
        key = entry_key(analysis["bundle_hash"], folder)
        self.entries[key] = {k: v for k, v in analysis.items() if k != "path"}  # the stat map has the path
        self.stat[folder] = [skey[0], key, skey[1]]
        self.dirty = True

    def save(self, root: str, keep_folders: set[str]) -> None:
        """Write the cache. Folders under `root` that this run did not see are
        forgotten (other roots triaged against the same image are kept)."""
        prefix = root.rstrip(os.sep) + os.sep
        stale = [f for f in self.stat if f.startswith(prefix) and f not in keep_folders]
        if not self.dirty and not stale:
            return
        for f in stale:
            del self.stat[f]
        stat = self.stat
        live = {v[1] for v in stat.values()}
        doc = {**self.header, "entries": {k: v for k, v in self.entries.items() if k in live}, "stat": stat}
        self.path.parent.mkdir(parents=True, exist_ok=True)
        _write(self.path, doc)


def _unchanged(folder: str, key: Any, names: Any) -> bool:
    if not isinstance(names, list):
        return False
    now = stat_key(folder, names)
    return now is not None and now[0] == key


def _write(path: Path, doc: dict[str, Any]) -> None:
    path.parent.mkdir(parents=True, exist_ok=True)
    tmp = path.with_name(f".{path.name}.{os.getpid()}.tmp")
    tmp.write_bytes(orjson.dumps(doc))
    tmp.replace(path)


class ResultsMemo:
    """The last run's evaluated tasks by folder (see the module doc), for one evaluation
    fingerprint. `tasks` maps a folder to [stat key, entry names, task, instruction] (the
    instruction for the hygiene pass over the whole root, which is redone every run)."""

    def __init__(self, python: str, evaluation: str, directory: Path | None = None) -> None:
        safe = re.sub(r"[^A-Za-z0-9_.-]", "_", python or "unknown")
        self.path = (directory or cache_dir()) / f"py{safe}.results.json"
        self.header = {"version": ANALYSIS_VERSION, "code": code_fingerprint(), "python": python,
                       "evaluation": evaluation}
        self.tasks: dict[str, list[Any]] = {}

    def load(self) -> None:
        try:
            doc = orjson.loads(self.path.read_bytes())
        except (OSError, orjson.JSONDecodeError):
            return
        if isinstance(doc, dict) and all(doc.get(k) == v for k, v in self.header.items()) \
                and isinstance(doc.get("tasks"), dict):
            self.tasks = doc["tasks"]

    def lookup(self, folder: str) -> tuple[dict[str, Any], str | None] | None:
        """(the task as last evaluated, its instruction) if `folder`'s stat fingerprint is unchanged."""
        hit = self.tasks.get(folder)
        if not isinstance(hit, list) or len(hit) != 4 or not _unchanged(folder, hit[0], hit[1]):
            return None
        task, instruction = hit[2], hit[3]
        if not isinstance(task, dict) or task.get("path") != folder or not isinstance(instruction, (str, type(None))):
            return None
        return task, instruction

    def stale(self, root: str, folders: set[str]) -> bool:
        """Folders under `root` remembered but not seen in this run."""
        prefix = root.rstrip(os.sep) + os.sep
        return any(f.startswith(prefix) and f not in folders for f in self.tasks)

    def save(self, root: str, tasks: dict[str, tuple[dict[str, Any], str | None]], stat: dict[str, list[Any]]) -> None:
        """Remember this run's `tasks` (folder -> (task, instruction)) under `root` whose
        analysis is cached (`stat`: TriageCache.stat); other roots' tasks are kept."""
        prefix = root.rstrip(os.sep) + os.sep
        keep = {f: v for f, v in self.tasks.items() if not f.startswith(prefix)}
        for f, (task, instruction) in tasks.items():
            st = stat.get(f)
            if st is not None:
                keep[f] = [st[0], st[2], task, instruction]
        _write(self.path, {**self.header, "tasks": keep})


class HygieneMemo:
    """The last hygiene pass's result (triage/hygiene.py): each task's family and benchmark
    matches, for one fingerprint of everything the pass reads. One file, replaced by each
    run that computes anew; the code fingerprint empties it like the others."""

    def __init__(self, directory: Path | None, fingerprint: str) -> None:
        self.path = (directory or cache_dir()) / "hygiene.json"
        self.header = {"version": ANALYSIS_VERSION, "code": code_fingerprint(), "inputs": fingerprint}

    def load(self, n: int) -> list[tuple[str, list[dict[str, Any]]]] | None:
        try:
            doc = orjson.loads(self.path.read_bytes())
        except (OSError, orjson.JSONDecodeError):
            return None
        if not isinstance(doc, dict) or any(doc.get(k) != v for k, v in self.header.items()):
            return None
        rows = doc.get("tasks")
        if not isinstance(rows, list) or len(rows) != n:
            return None
        return [(fam, matches) for fam, matches in rows]

    def save(self, rows: list[tuple[str, list[dict[str, Any]]]]) -> None:
        try:
            _write(self.path, {**self.header, "tasks": rows})
        except OSError:
            pass  # an unwritable cache costs the next run the pass, nothing else
