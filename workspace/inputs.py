"""What make-workspace reads: the id list (a probe receipt or a plain list), the bundles, and the
destination folder it may write."""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path
from typing import Any

import orjson

import shinken
from shinken.bundles.loader import load_root
from shinken.bundles.model import Bundle
from shinken.bundles.selection import read_task_ids
from shinken.errors import ShinkenError

MANIFEST = ".shinken-workspace.json"


@dataclass
class IdList:
    ids: list[str]
    receipt: dict[str, Any] | None  # the probe receipt, when the list was one (evidence for verifier cases)


def read_id_list(path: Path) -> IdList:
    """The ids (shinken.bundles.selection, the one reader of id lists) and, when the file is a
    probe receipt, the receipt itself (its schema was checked by that reader)."""
    ids = read_task_ids(path)
    data = Path(path).read_bytes()
    receipt = orjson.loads(data) if data.lstrip().startswith(b"{") else None
    return IdList(ids, receipt)


def source_root() -> Path:
    return Path(shinken.__file__).resolve().parent


def check_dest(dest: Path, force: bool) -> None:
    dest = dest.resolve()
    src = source_root()
    if dest == src or src in dest.parents:
        raise ShinkenError(f"{dest}: is inside the shinken source tree ({src}); choose a folder outside it "
                           "(Gym would take the tree's pyproject.toml for a Gym checkout)")
    if dest.exists() and not dest.is_dir():
        raise ShinkenError(f"{dest}: exists and is not a folder; choose another --dest")
    if dest.is_dir() and any(dest.iterdir()):
        if not force:
            raise ShinkenError(f"{dest}: is not empty; pass --force to replace an earlier workspace, "
                               "or choose an empty folder")
        if not (dest / MANIFEST).is_file():
            raise ShinkenError(f"{dest}: is not empty and holds no {MANIFEST}; --force only replaces a "
                               "workspace written by shinken, so nothing was changed")


def load_bundles(task_root: Path, ids: list[str]) -> tuple[list[Bundle], list[Bundle]]:
    """The listed bundles, and every bundle of the root (task families span the whole root)."""
    if not task_root.is_dir():
        raise ShinkenError(f"{task_root}: task root is not a folder")
    by_id: dict[str, Bundle] = {}
    every = load_root(task_root)
    for b in every:
        by_id.setdefault(b.id, b)
    missing = [i for i in ids if i not in by_id]
    if missing:
        shown = ", ".join(missing[:5]) + (f" and {len(missing) - 5} more" if len(missing) > 5 else "")
        raise ShinkenError(f"{task_root}: {len(missing)} listed task id(s) are not in the task root: {shown}; "
                           "check --task-root or the id list")
    bad = [b for b in (by_id[i] for i in ids) if not b.ok]
    if bad:
        b = bad[0]
        raise ShinkenError(f"{b.id}: the bundle is defective ({b.why_defective()}); run `shinken triage` and drop it")
    return [by_id[i] for i in ids], list(every)
