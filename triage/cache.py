"""Triage cache: one file per Python version of the images triaged against,
~/.cache/shinken/triage/py<X.Y>.json.

`entries` maps an analysis key (bundle hash + folder name, since the loader's id
checks depend on the name) to the analysis, which depends on the bundle and the image's
Python version only (syntax is checked with its grammar); everything else about the image
is matched afresh on every run. So triaging against a rebuilt image (same Python) is a
re-run, not a cold analysis. `stat` maps a folder path to (stat fingerprint, analysis key)
so an unchanged folder is not even re-hashed. A different ANALYSIS_VERSION or code
fingerprint empties it."""

from __future__ import annotations

import functools
import hashlib
import os
import re
from pathlib import Path
from typing import Any

import orjson

from shinken.runtime import cache_root
from shinken.triage.analyze import ANALYSIS_VERSION, stat_key


@functools.cache
def code_fingerprint() -> str:
    """Hash of the code an analysis depends on (triage, the bundle loader, the task
    schema): editing any of it invalidates cached analyses without a manual version bump."""
    import shinken.bundles.loader as loader
    import shinken.schemas as schemas

    h = hashlib.sha256()
    files = sorted(Path(__file__).parent.glob("*.py")) + [Path(loader.__file__),
                                                         Path(schemas.__file__).parent / "task.schema.json"]
    for f in files:
        try:
            h.update(f.name.encode() + b"\0" + f.read_bytes())
        except OSError:
            h.update(f.name.encode() + b"\0?")
    return h.hexdigest()[:16]


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
        if not isinstance(hit, list) or len(hit) != 3:
            return None
        now = stat_key(folder, hit[2])
        if now is None or now[0] != hit[0]:
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
        tmp = self.path.with_name(f".{self.path.name}.{os.getpid()}.tmp")
        tmp.write_bytes(orjson.dumps(doc))
        tmp.replace(self.path)
