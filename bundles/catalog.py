"""Task id -> Bundle for everything that serves rollouts (the computer engine, the fleet router,
the sandbox provider): one lookup, so they cannot disagree on which folder a task is, when a
bundle is defective, or how a web task is prepared for the mock addresses it will run against.

Folders are found once (`discover`) and loaded on first use; a folder whose name is not its
task's id is found by one scan of the rest. A folder added later (a fleet host receives bundles
as rollouts are placed on it) replaces what was cached under its name."""

from __future__ import annotations

import os
import threading
from pathlib import Path
from typing import Callable

from shinken.bundles.loader import discover, load_bundle
from shinken.bundles.model import Bundle
from shinken.errors import ShinkenError

# The bundle to run and why it cannot run (None: it can); mockweb.runs.WebPlan.prepare is one.
Prepare = Callable[[Bundle], "tuple[Bundle, str | None]"]


class BundleCatalog:
    """The bundles under one task root, by task id (thread-safe)."""

    def __init__(self, root: str | os.PathLike[str], prepare: Prepare | None = None) -> None:
        self.root = Path(root)
        self.prepare = prepare
        self._lock = threading.Lock()
        self._folders = {p.name: p for p in discover(self.root)}  # folder name -> folder (loaded lazily)
        self._bundles: dict[str, Bundle] = {}  # task id -> the bundle to run (prepared)
        self._scanned = False

    def add_folder(self, folder: Path) -> None:
        """Serve the bundle in `folder` too, by its folder name and its task id; a changed folder of
        the same name replaces the cached bundle."""
        task_id = load_bundle(folder).id
        with self._lock:
            for key in {folder.name, task_id} - {""}:
                self._folders[key] = folder
                self._bundles.pop(key, None)

    def raw(self, task_id: str) -> Bundle:
        """The task's bundle as it is on disk (unprepared); ShinkenError when it is unknown or defective."""
        folder = self._folders.get(task_id)
        found = load_bundle(folder) if folder is not None else None
        if found is None or found.id != task_id:
            found = self._scan_for(task_id) or found
        if found is None or found.id != task_id:
            raise ShinkenError(f"task {task_id!r}: not found under {self.root}")
        if not found.ok:
            raise ShinkenError(f"task {task_id!r}: the bundle is defective ({found.why_defective()}); "
                               "run `shinken triage`")
        return found

    def get(self, task_id: str) -> Bundle:
        """The bundle to run for `task_id`, prepared (a web task on its copy naming this run's mock
        addresses); ShinkenError when it is unknown, defective or cannot run here."""
        with self._lock:
            cached = self._bundles.get(task_id)
        if cached is not None:
            return cached
        bundle = self.raw(task_id)
        if self.prepare is not None:
            bundle, blocked = self.prepare(bundle)
            if blocked:
                raise ShinkenError(f"task {task_id!r}: {blocked}")
        with self._lock:
            self._bundles[task_id] = bundle
        return bundle

    def _scan_for(self, task_id: str) -> Bundle | None:
        """A folder not named by its id (rare: the demo and the release name folders by id): one
        scan of every folder per catalog, remembering where each id lives."""
        with self._lock:
            if self._scanned:
                return None
            self._scanned = True
            folders = list(self._folders.values())
        found = None
        for folder in folders:
            b = load_bundle(folder)
            if b.id != folder.name:
                with self._lock:
                    self._folders.setdefault(b.id, folder)
            if b.id == task_id:
                found = b
        return found
