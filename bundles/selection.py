"""Which tasks a command works on: the one reader of `--ids` files.

An id list is a probe receipt (schema shinken.probe/1: its `kept` list), a JSON list of
ids, or text with one id per line (# comments and blank lines ignored)."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import orjson

from shinken.errors import ShinkenError
from shinken.schemas import validation_error

RECEIPT_SCHEMA_TAG = "shinken.probe/1"
_HINT = "pass a probe receipt (`shinken probe --receipt`), a JSON list of ids or one id per line"


def read_task_ids(path: Path) -> list[str]:
    """The ids in `path`, first occurrence order, duplicates dropped; never empty."""
    try:
        data = Path(path).read_bytes()
    except OSError as exc:
        raise ShinkenError(f"{path}: cannot read the id list ({exc.strerror}); {_HINT}") from None
    text = data.decode("utf-8", errors="replace").strip()
    ids: list[Any]
    if text.startswith(("{", "[")):
        try:
            doc = orjson.loads(data)
        except orjson.JSONDecodeError as exc:
            raise ShinkenError(f"{path}: not valid JSON ({exc}); {_HINT}") from None
        if isinstance(doc, dict):
            if doc.get("schema") != RECEIPT_SCHEMA_TAG:
                raise ShinkenError(f"{path}: JSON object without schema {RECEIPT_SCHEMA_TAG}; {_HINT}")
            problem = validation_error("probe_receipt", doc)
            if problem:
                raise ShinkenError(f"{path}: probe receipt does not match its schema: {problem}")
            ids = doc["kept"]
        else:
            ids = doc
        if not all(isinstance(i, str) and i.strip() for i in ids):
            raise ShinkenError(f"{path}: every id must be a non-empty string")
        ids = [i.strip() for i in ids]
    else:
        ids = [ln.strip() for ln in text.splitlines() if ln.strip() and not ln.lstrip().startswith("#")]
    unique = list(dict.fromkeys(ids))
    if not unique:
        raise ShinkenError(f"{path}: the id list is empty; {_HINT}")
    return unique
