"""JSON Schemas for every file format shinken reads or writes, and validators for them."""

from __future__ import annotations

import contextlib
import functools
import os
from importlib import resources
from pathlib import Path
from typing import Any, Callable

import fastjsonschema
import orjson

from shinken.errors import InternalError, ShinkenError

SCHEMA_NAMES = (
    "task", "triage", "probe_receipt", "receipt_line", "capabilities", "gc", "mock_urls",
    "download_result", "download_state", "extract_marker", "extract_result", "gym_row",
    "workspace_manifest", "source", "gym_rollout", "profile", "profile_outcome", "task_ids",
    "dropped_row", "provenance", "publish_result",
    "hub_manifest",
    "hub_build", "hub_build_failed", "hub_status", "hub_check",
    "hub_state", "mockweb_bundle",
    "fleet_host", "fleet_status", "fleet_gc", "image_pin",
    "desktop_record",
    "benchmark_index",
    "image_audit",
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


JSON_OPTIONS = orjson.OPT_INDENT_2 | orjson.OPT_NON_STR_KEYS


def dumps(document: Any) -> bytes:
    """The bytes shinken writes for a JSON document: indented, newline-terminated."""
    return orjson.dumps(document, option=JSON_OPTIONS) + b"\n"


def check_own(name: str, document: Any, what: str) -> None:
    """A document shinken made must match its schema; one that does not is our bug
    (InternalError), reported instead of written or printed. Never an `assert`: those
    vanish under `python -O`."""
    problem = validation_error(name, document)
    if problem is not None:
        raise InternalError(f"internal error: {what} does not match schemas/{name}.schema.json ({problem}); "
                            "this is a bug in shinken")


# Far above any document shinken writes (a triage report of the whole release is ~10 MB); what
# is larger is the wrong file, and a device or endless stream (`--manifest /dev/urandom`) is
# refused after this many bytes instead of read until memory runs out.
MAX_JSON_BYTES = 256 * 1024 * 1024


def read_json(path: Path, what: str, hint: str, schema: str | None = None, *,
              max_bytes: int = MAX_JSON_BYTES) -> Any:
    """A JSON file given to shinken (by the user or an earlier run). Unreadable, larger than
    `max_bytes`, not JSON, or (with `schema`) not matching it: a ShinkenError naming the file,
    `what` it should be, and `hint`, the fix (e.g. "pass a file from `shinken image inspect --json`")."""
    try:
        with open(path, "rb") as fh:
            data = fh.read(max_bytes + 1)
    except OSError as exc:
        raise ShinkenError(f"{path}: cannot read the {what} ({exc.strerror or exc}); {hint}") from None
    if len(data) > max_bytes:
        raise ShinkenError(f"{path}: more than {max_bytes:,} bytes, larger than any {what}; {hint}")
    try:
        document = orjson.loads(data)
    except orjson.JSONDecodeError as exc:
        raise ShinkenError(f"{path}: the {what} is not JSON ({exc}); {hint}") from None
    if schema is not None:
        problem = validation_error(schema, document)
        if problem is not None:
            raise ShinkenError(f"{path}: not a valid {what} ({problem}); {hint}")
    return document


def write_json(path: Path, document: Any, schema: str) -> None:
    """Check `document` against schema `schema`, then write it atomically (a reader never
    sees half a file; a crash leaves the previous version)."""
    check_own(schema, document, str(path))
    write_bytes(path, dumps(document))


def write_bytes(path: Path, data: bytes) -> None:
    """Write a file atomically (JSONL, HTML, Markdown: formats without a document schema)."""
    path = Path(path)
    tmp = path.with_name(f".{path.name}.{os.getpid()}.tmp")
    try:
        path.parent.mkdir(parents=True, exist_ok=True)
        tmp.write_bytes(data)
        os.replace(tmp, path)
    except OSError as exc:
        raise ShinkenError(f"{path}: cannot write it ({exc.strerror or exc}); choose another path") from None
    finally:
        with contextlib.suppress(OSError):
            tmp.unlink(missing_ok=True)
