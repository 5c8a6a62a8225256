"""Whether a task's reference solution (`golden_patch.py`, or a script of `--oracle DIR`) can be
used as its oracle: the probe carries the script in one `computer_exec` command, so it must be
text and fit in one command-line argument. Triage and the probe give the same answer."""

from __future__ import annotations

ORACLE_NAME = "golden_patch.py"  # what pipeline exports ship beside reward.py
MAX_ORACLE_BYTES = 96 * 1024  # the command carries the script; Linux caps one argument at 128 KiB


def oracle_problem(data: bytes | None, size: int) -> str | None:
    """Why the script cannot be an oracle (one line), or None when it can. `data` is its content
    (it may be cut after MAX_ORACLE_BYTES), None when it could not be read."""
    if data is None:
        return "cannot be read"
    if size > MAX_ORACLE_BYTES:
        return f"{size} bytes, over the {MAX_ORACLE_BYTES} an oracle may have"
    if b"\0" in data:
        return "binary (NUL bytes), not a Python or bash script"
    return None
