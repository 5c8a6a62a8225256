"""Put a completely written folder in place of another, never leaving a half-written one."""

from __future__ import annotations

import os
import shutil
from pathlib import Path


def swap_into_place(stage: Path, dest: Path) -> None:
    """Rename the finished `stage` to `dest`. An existing `dest` is moved aside first and
    removed only once the new tree is in place, so a crash leaves the old or the new tree at
    `dest` (and at worst a hidden `.<name>.old-<pid>` beside it), never a mix."""
    if dest.exists():
        old = dest.with_name(f".{dest.name}.old-{os.getpid()}")
        dest.rename(old)
        stage.rename(dest)
        shutil.rmtree(old, ignore_errors=True)
    else:
        stage.rename(dest)
