"""Read the JSON documents profile and report take as input, each checked against its schema;
a wrong file is one line naming it and the command that writes the right one."""

from __future__ import annotations

from pathlib import Path
from typing import Any

from shinken.errors import ShinkenError
from shinken.schemas import read_json, validation_error

# schema name -> (the document's "schema" value, what it is, the command that writes it)
KINDS: dict[str, tuple[str, str, str]] = {
    "triage": ("shinken.triage/1", "triage report", "shinken triage"),
    "probe_receipt": ("shinken.probe/1", "probe receipt", "shinken probe --receipt PATH"),
    "profile": ("shinken.profile/1", "profile", "shinken profile --out DIR"),
}


def read_document(path: Path, name: str) -> dict[str, Any]:
    schema_id, what, writer = KINDS[name]
    doc = read_json(path, what, f"pass the file `{writer}` writes")
    if not isinstance(doc, dict) or doc.get("schema") != schema_id:
        raise ShinkenError(f"{path}: not a {what} (no \"schema\": \"{schema_id}\"); pass the file `{writer}` writes")
    problem = validation_error(name, doc)
    if problem:
        raise ShinkenError(f"{path}: the {what} does not match schemas/{name}.schema.json ({problem})")
    return doc


def read_receipt(path: Path) -> dict[str, Any]:
    return read_document(path, "probe_receipt")


def read_optional_profile(path: Path) -> dict[str, Any] | None:
    return read_document(path, "profile") if path.is_file() else None
