"""Every shipped schema is a valid JSON Schema, listed, and compiles for validation."""

from __future__ import annotations

from importlib import resources

import jsonschema
import pytest

from shinken.schemas import SCHEMA_NAMES, load_schema, validation_error, validator


def test_every_shipped_schema_is_listed() -> None:
    shipped = {p.name.removesuffix(".schema.json") for p in resources.files("shinken.schemas").iterdir()
               if p.name.endswith(".schema.json")}
    assert shipped == set(SCHEMA_NAMES)


@pytest.mark.parametrize("name", SCHEMA_NAMES)
def test_schema_is_valid_and_compiles(name: str) -> None:
    schema = load_schema(name)
    jsonschema.Draft7Validator.check_schema(schema)
    assert callable(validator(name))


def test_task_schema_rejects_a_step_without_type() -> None:
    assert validation_error("task", {"id": "x", "config": [{"parameters": {}}]}) is not None
    assert validation_error("task", {"id": "x", "config": [{"type": "sleep", "parameters": {"seconds": 1}}]}) is None


def test_write_json_checks_the_schema_first_and_read_json_names_the_file(tmp_path) -> None:
    import pytest

    from shinken.errors import InternalError, ShinkenError
    from shinken.schemas import read_json, write_json

    path = tmp_path / "out" / "gc.json"
    good = {"schema": "shinken.gc/1", "dry_run": True, "reclaimable": [], "reclaimed": [], "failed": []}
    write_json(path, good, "gc")
    assert read_json(path, "gc report", "run shinken gc --json", schema="gc") == good
    with pytest.raises(InternalError, match="gc.schema.json"):  # a bug of ours: reported, nothing written
        write_json(path, {**good, "dry_run": "yes"}, "gc")
    assert read_json(path, "gc report", "hint") == good and [p.name for p in path.parent.iterdir()] == ["gc.json"]
    path.write_text("{not json")
    with pytest.raises(ShinkenError, match=r"gc.json: the gc report is not JSON .*; run it again"):
        read_json(path, "gc report", "run it again")
    with pytest.raises(ShinkenError, match=r"missing.json: cannot read the gc report"):
        read_json(tmp_path / "missing.json", "gc report", "hint")
    path.write_text('{"schema": "x"}')
    with pytest.raises(ShinkenError, match="not a valid gc report"):
        read_json(path, "gc report", "hint", schema="gc")
