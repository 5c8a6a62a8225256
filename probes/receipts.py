"""The run's receipt log: one JSON line per finished task, appended durably as each task
finishes, so a run killed at any moment (even SIGKILL) resumes without redoing work.

Only the driver writes here (executors stream results back to it), so a single writer
per run dir is enforced with an advisory lock instead of coordinating appends."""

from __future__ import annotations

import fcntl
import os
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Iterator

import orjson

from shinken.errors import ShinkenError
from shinken.schemas import check_own, validation_error

LINE_SCHEMA = "shinken.probe.line/1"
RECEIPTS_NAME = "receipts.jsonl"
LOCK_NAME = ".lock"


def receipt_key(line: dict[str, Any]) -> tuple[str, str, str]:
    """What a finished result depends on: the bundle's content, the image, and the probe
    settings (repeats, replayed rollouts, ...). A receipt is reused only on an exact match."""
    return (line["bundle_hash"], line["image_id"], line.get("config_hash", ""))


@dataclass
class LoadResult:
    lines: list[dict[str, Any]] = field(default_factory=list)
    torn_bytes: int = 0  # bytes of an unterminated last line (a write cut by a kill)
    bad_lines: list[int] = field(default_factory=list)  # 1-based numbers of unreadable lines


def read_lines(path: Path) -> LoadResult:
    """Every well-formed receipt line of `path` (missing file: none). A torn last line
    (no trailing newline) is ignored; a corrupt middle line is skipped and reported."""
    res = LoadResult()
    try:
        data = path.read_bytes()
    except FileNotFoundError:
        return res
    end = data.rfind(b"\n") + 1
    res.torn_bytes = len(data) - end
    for n, raw in enumerate(data[:end].splitlines(), 1):
        if not raw.strip():
            continue
        try:
            doc = orjson.loads(raw)
        except orjson.JSONDecodeError:
            res.bad_lines.append(n)
            continue
        if validation_error("receipt_line", doc) is not None:
            res.bad_lines.append(n)
            continue
        res.lines.append(doc)
    return res


class ReceiptLog:
    """Append-only receipts for one run dir. Use as a context manager: it holds the run
    dir's lock so two probes cannot interleave writes to the same log."""

    def __init__(self, run_dir: Path) -> None:
        self.run_dir = Path(run_dir)
        self.path = self.run_dir / RECEIPTS_NAME
        self._fh: Any = None
        self._lock_fd: int | None = None
        self.latest: dict[str, dict[str, Any]] = {}  # task id -> its last receipt line
        self.loaded = LoadResult()

    def __enter__(self) -> "ReceiptLog":
        self.open()
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()

    def open(self) -> None:
        self.run_dir.mkdir(parents=True, exist_ok=True)
        fd = os.open(self.run_dir / LOCK_NAME, os.O_RDWR | os.O_CREAT, 0o644)
        try:
            fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
        except BlockingIOError:
            os.close(fd)
            raise ShinkenError(
                f"{self.run_dir}: another `shinken probe` is using this run dir; wait for it or pass --run-dir"
            ) from None
        self._lock_fd = fd
        self.loaded = read_lines(self.path)
        if self.loaded.torn_bytes:
            # Drop the fragment a kill left behind; appending after it would corrupt the next line.
            with open(self.path, "r+b") as fh:
                fh.truncate(fh.seek(0, os.SEEK_END) - self.loaded.torn_bytes)
                fh.flush()
                os.fsync(fh.fileno())
        for line in self.loaded.lines:
            self.latest[line["task_id"]] = line  # later lines supersede earlier ones
        self._fh = open(self.path, "ab", buffering=0)

    def close(self) -> None:
        if self._fh is not None:
            self._fh.close()
            self._fh = None
        if self._lock_fd is not None:
            os.close(self._lock_fd)  # releases the flock
            self._lock_fd = None

    def finished(self, task_id: str, key: tuple[str, str, str]) -> dict[str, Any] | None:
        """The receipt that makes re-probing `task_id` unnecessary, if any. Infrastructure
        failures are not final: the next run tries those tasks again."""
        line = self.latest.get(task_id)
        if line is None or receipt_key(line) != key or line.get("reason") == "infra_error":
            return None
        return line

    def append(self, line: dict[str, Any]) -> None:
        check_own("receipt_line", line, f"the receipt line of {line.get('task_id')!r}")  # our bug, never the task's
        if self._fh is None:
            raise RuntimeError("ReceiptLog is not open")
        # One write() of a whole line, then fsync: after a crash the file holds whole
        # lines plus at most one torn tail, which open() trims.
        self._fh.write(orjson.dumps(line) + b"\n")
        os.fsync(self._fh.fileno())
        self.latest[line["task_id"]] = line

    def __iter__(self) -> Iterator[dict[str, Any]]:
        return iter(self.latest.values())
