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
