"""JSON Schemas for every file format shinken reads or writes, and validators for them."""

from __future__ import annotations

import functools
from importlib import resources
from typing import Any, Callable

import fastjsonschema
import orjson

SCHEMA_NAMES = (
    "task", "triage", "probe_receipt", "receipt_line", "capabilities", "gc", "mock_urls",
    "download_result", "download_state", "extract_marker", "extract_result", "gym_row",
    "workspace_manifest", "source",
)


@functools.cache
def load_schema(name: str) -> dict[str, Any]:
    """The schema document `<name>.schema.json` shipped in this package."""
    data = resources.files(__package__).joinpath(f"{name}.schema.json").read_bytes()
    return orjson.loads(data)


@functools.cache
def validator(name: str) -> Callable[[Any], Any]:
    """A compiled validator (fastjsonschema: ~50x faster than jsonschema per call,
    which matters for 10,910 bundles). Raises fastjsonschema.JsonSchemaException."""
    return fastjsonschema.compile(load_schema(name))


def validation_error(name: str, document: Any) -> str | None:
    """None when `document` is valid against schema `name`, else a one-line reason."""
    try:
        validator(name)(document)
    except fastjsonschema.JsonSchemaException as exc:
        return str(exc.message)
    return None


def check_with_jsonschema(name: str, document: Any) -> list[str]:
    """Full error list from the reference jsonschema implementation (used in tests and
    for detailed reports; slower)."""
    import jsonschema

    v = jsonschema.Draft7Validator(load_schema(name))
    return [f"{'/'.join(map(str, e.absolute_path)) or '<root>'}: {e.message}" for e in v.iter_errors(document)]
