"""Oracles: a task's reference solution (the pipeline export's `golden_patch.py`, or a per-task
script from `--oracle DIR`) and the one shell command that runs it through the workspace's own
`computer_exec` tool, so the probe's oracle run and the workspace's `full_reward` verifier case
are the same tool call. The script itself is untrusted: it only ever runs inside a fork."""

from __future__ import annotations

import hashlib
import re
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from shinken.errors import ShinkenError
from shinken.needs.oracle_file import MAX_ORACLE_BYTES, ORACLE_NAME as BUNDLE_ORACLE  # noqa: F401 (re-exported)

ORACLE_SUFFIXES = (".py", ".sh")
GUEST_DIR = "/tmp/shinken-oracle"  # where the command puts the script in the fork (removed after)
OUTCOMES = ("oracle_passes", "oracle_partial", "oracle_fails")
_EXIT_RE = re.compile(r"^exit code (-?\d+)")


@dataclass(frozen=True)
class Oracle:
    """One task's solution script: where it came from and its text."""

    task_id: str
    source: str  # "bundle" (golden_patch.py in the task folder) or "oracle_dir"
    path: Path  # the file read (absolute)
    text: str
    sha256: str

    @property
    def name(self) -> str:
        return self.path.name

    def command(self) -> str:
        """The bash command line (for `computer_exec`) that writes the script into the fork, runs
        it from the user's home with the interpreter its suffix names, removes it and exits with
        its status."""
        run = "bash" if self.name.endswith(".sh") else "python3"
        guest = f"{GUEST_DIR}/{self.name}"
        eof = f"SHINKEN_ORACLE_{self.sha256[:12]}"
        body = self.text if self.text.endswith("\n") else self.text + "\n"
        return (f"mkdir -p {GUEST_DIR} && cat > {guest} <<'{eof}'\n{body}{eof}\n"
                f"cd /home/user && {run} {guest}; rc=$?; rm -rf {GUEST_DIR}; exit $rc")

    def calls(self) -> list[tuple[str, dict[str, Any]]]:
        """The tool calls of an oracle run, in order (what the verifier case replays)."""
        from shinken.computer.tools import DONE, EXEC

        return [(EXEC, {"command": self.command()}), (DONE, {})]

    def to_json(self) -> dict[str, Any]:
        return {"source": self.source, "path": str(self.path), "sha256": self.sha256}


def exit_code_of(tool_text: str) -> int | None:
    """The script's exit status from `computer_exec`'s answer (None: it timed out)."""
    m = _EXIT_RE.match(tool_text)
    return int(m.group(1)) if m else None


def read_oracle(task_id: str, path: Path, source: str) -> Oracle:
    path = Path(path).absolute()
    try:
        data = path.read_bytes()
    except OSError as exc:
        raise ShinkenError(f"{path}: cannot read the oracle ({exc.strerror})") from None
    if len(data) > MAX_ORACLE_BYTES:
        raise ShinkenError(f"{path}: the oracle is {len(data)} bytes, over {MAX_ORACLE_BYTES}; "
                           "shorten it or leave the task without one")
    if b"\0" in data:
        raise ShinkenError(f"{path}: the oracle is binary (NUL bytes); give a Python or bash script")
    text = data.decode("utf-8", errors="replace")
    eof = f"SHINKEN_ORACLE_{hashlib.sha256(data).hexdigest()[:12]}"
    if any(line == eof for line in text.splitlines()):  # would end the here-document early
        raise ShinkenError(f"{path}: a line of the oracle reads {eof}; change that line")
    return Oracle(task_id, source, path, text, hashlib.sha256(data).hexdigest())


def bundle_oracle(task_id: str, folder: Path, files: dict[str, int]) -> Oracle | None:
    """The golden_patch.py a pipeline export ships in the task folder, if any."""
    if BUNDLE_ORACLE not in files:
        return None
    return read_oracle(task_id, Path(folder) / BUNDLE_ORACLE, "bundle")


def oracle_dir(folder: Path, task_ids: list[str]) -> dict[str, Oracle]:
    """Per-task scripts of `--oracle DIR`: `<task id>.py|.sh` or `<task id>/golden_patch.py`.
    Files for tasks not in `task_ids` are ignored (an oracle folder may cover a larger set)."""
    folder = Path(folder)
    if not folder.is_dir():
        raise ShinkenError(f"--oracle {folder}: not a folder; pass a folder of <task id>.py scripts "
                           f"(or <task id>/{BUNDLE_ORACLE})")
    out: dict[str, Oracle] = {}
    for tid in task_ids:
        found = [p for p in (folder / f"{tid}{s}" for s in ORACLE_SUFFIXES) if p.is_file()]
        nested = folder / tid / BUNDLE_ORACLE
        if nested.is_file():
            found.append(nested)
        if len(found) > 1:
            raise ShinkenError(f"--oracle {folder}: {len(found)} scripts for task {tid} "
                               f"({', '.join(p.name for p in found)}); keep one")
        if found:
            out[tid] = read_oracle(tid, found[0], "oracle_dir")
    if not out:
        raise ShinkenError(f"--oracle {folder}: no script named after any of the {len(task_ids)} task(s) "
                           f"(expected <task id>.py, <task id>.sh or <task id>/{BUNDLE_ORACLE})")
    return out
