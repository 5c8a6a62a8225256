"""The evaluation benchmarks triage compares tasks with: the shipped OSWorld test set
(benchmark_data/osworld.json, derived from OSWorld under Apache-2.0, see its `notice`) and
any folder of task JSONs given with `--benchmark DIR`."""

from __future__ import annotations

import functools
import os
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import orjson

from shinken.errors import ShinkenError
from shinken.triage.overlap import BenchmarkTask, benchmark_task

DATA_DIR = Path(__file__).parent / "benchmark_data"
SHIPPED = ("osworld",)  # checked by default
MAX_FILES = 100_000  # task files read from one --benchmark folder
MAX_FILE_BYTES = 4 << 20


@dataclass(frozen=True)
class BenchmarkSet:
    name: str
    origin: str  # where the tasks came from (the shipped index's source, or the folder)
    tasks: tuple[BenchmarkTask, ...]
    skipped: int = 0  # JSON files in the folder without an instruction

    def describe(self) -> dict[str, Any]:
        return {"name": self.name, "origin": self.origin, "tasks": len(self.tasks), "skipped_files": self.skipped}


@functools.cache
def shipped(name: str) -> BenchmarkSet:
    """A benchmark index shipped in benchmark_data/ (schemas/benchmark_index.schema.json)."""
    from shinken.schemas import check_own

    doc = orjson.loads((DATA_DIR / f"{name}.json").read_bytes())
    check_own("benchmark_index", doc, f"the shipped benchmark index {name}")
    src = doc["source"]
    origin = f"{doc['title']}, {src['repository']} @ {src['commit'][:12]} ({doc['license']})"
    tasks = tuple(benchmark_task(name, t["id"], t["source"], t["instruction"]) for t in doc["tasks"])
    return BenchmarkSet(name, origin, tasks)


def from_folder(path: Path, taken: set[str]) -> BenchmarkSet:
    """Every `*.json` under `path` that is an object with a string `instruction` (OSWorld,
    WindowsAgentArena and most task formats); its `id`, else its file name, is the task id.
    Named after the folder (a number added when `taken` has the name)."""
    root = Path(path)
    if not root.is_dir():
        raise ShinkenError(f"--benchmark {path}: not a folder; give a folder of task JSON files with an `instruction`")
    name = _name(root, taken)
    tasks: list[BenchmarkTask] = []
    skipped = files = 0
    for dirpath, dirnames, filenames in os.walk(root):
        dirnames.sort()
        for fn in sorted(filenames):
            if not fn.endswith(".json"):
                continue
            files += 1
            if files > MAX_FILES:
                raise ShinkenError(f"--benchmark {path}: more than {MAX_FILES} JSON files; point it at the folder of "
                                   "the benchmark's task files only")
            full = Path(dirpath, fn)
            doc = _load(full)
            instruction = doc.get("instruction") if isinstance(doc, dict) else None
            if not isinstance(instruction, str) or not instruction.strip():
                skipped += 1
                continue
            rel = full.relative_to(root).as_posix()
            tid = doc.get("id") if isinstance(doc.get("id"), str) and doc.get("id") else full.stem
            tasks.append(benchmark_task(name, str(tid), rel, instruction))
    if not tasks:
        raise ShinkenError(f"--benchmark {path}: no task JSON with an `instruction` under it "
                           f"({skipped} JSON file(s) without one); give the folder of the benchmark's task files")
    return BenchmarkSet(name, str(root.absolute()), tuple(tasks), skipped)


def _name(root: Path, taken: set[str]) -> str:
    base = "".join(c if c.isalnum() or c in "_.-" else "_" for c in root.absolute().name.lower()) or "benchmark"
    name, n = base, 2
    while name in taken:
        name, n = f"{base}-{n}", n + 1
    taken.add(name)
    return name


def _load(path: Path) -> Any:
    try:
        if path.stat().st_size > MAX_FILE_BYTES:
            return None
        return orjson.loads(path.read_bytes())
    except (OSError, orjson.JSONDecodeError):
        return None  # not a task file: counted as skipped


def load_benchmarks(folders: list[Path], *, shipped_names: tuple[str, ...] = SHIPPED) -> list[BenchmarkSet]:
    """The shipped benchmarks, then one set per `--benchmark` folder."""
    sets = [shipped(n) for n in shipped_names]
    taken = {s.name for s in sets}
    sets += [from_folder(f, taken) for f in folders]
    return sets
