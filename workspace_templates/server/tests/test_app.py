"""Checks of this server that need no Docker (run by `gym env test --resources-server <name>`).
The verifier itself runs on real forks in `gym env test <environment>` (tests/verifier_cases.jsonl);
the Docker-backed HTTP contract is tested in the shinken repository."""

import json
from pathlib import Path
from unittest.mock import MagicMock

import pytest
from fastapi.testclient import TestClient

from nemo_gym.server_utils import ServerClient
from nemo_gym.task_data import load_task_data_schema, validate_jsonl_rows

from ..app import (CONFIG_PATH, SERVER_DIR, ShinkenCuaConfig, ShinkenCuaResourcesServer, ShinkenSeedSessionResponse,
                   load_config)

DATASETS = sorted(p for p in (SERVER_DIR / "data").glob("*.jsonl") if p.stem in ("train", "validation", "example"))


def _server(**kw):
    config = ShinkenCuaConfig(host="127.0.0.1", port=8080, entrypoint="app.py", name=SERVER_DIR.name, **kw)
    return ShinkenCuaResourcesServer(config=config, server_client=MagicMock(spec=ServerClient))


def test_routes_cover_every_tool():
    from shinken.computer.tools import TOOL_SCHEMAS

    app = _server().setup_webserver()
    posts = {r.path for r in app.routes if "POST" in getattr(r, "methods", set())}
    for path in ["/seed_session", "/verify", "/close_session"] + [f"/{t['name']}" for t in TOOL_SCHEMAS]:
        assert path in posts, path


def test_routes_serve_this_workspaces_profile():
    from shinken.computer.actions import tool_schemas

    config = load_config(CONFIG_PATH)
    server = ShinkenCuaResourcesServer(config=config, server_client=MagicMock(spec=ServerClient))
    posts = {r.path for r in server.setup_webserver().routes if "POST" in getattr(r, "methods", set())}
    for tool in tool_schemas(config.profile()):
        assert f"/{tool['name']}" in posts, tool["name"]
    rows = [json.loads(x) for p in DATASETS for x in p.read_text().splitlines() if x.strip()]
    names = [t["name"] for t in tool_schemas(config.profile())]
    assert all([t["name"] for t in r["responses_create_params"]["tools"]] == names for r in rows)


def test_routes_answer_typed_models():
    # As Gym's own servers do: /seed_session and /verify declare their response models (the
    # OpenAPI schema names them); refusals are raised and answered with their own body.
    paths = _server().setup_webserver().openapi()["paths"]
    answers = {p: paths[p]["post"]["responses"]["200"]["content"]["application/json"]["schema"].get("$ref", "")
               for p in ("/seed_session", "/verify", "/close_session")}
    assert answers == {"/seed_session": "#/components/schemas/ShinkenSeedSessionResponse",
                       "/verify": "#/components/schemas/ShinkenVerifyResponse",
                       "/close_session": "#/components/schemas/ResourcesCloseSessionResponse"}
    # An a11y rollout's seed answers {} as before; a screenshot one names its first screen, null included.
    assert ShinkenSeedSessionResponse().model_dump() == {}
    assert ShinkenSeedSessionResponse(observation=None).model_dump(mode="json") == {"observation": None}
    # A local-engine seed names the rollout's fork for agents that borrow it as a Gym sandbox.
    assert ShinkenSeedSessionResponse(sandbox_handle="f" * 64).model_dump() == {"sandbox_handle": "f" * 64}


def test_verify_without_a_session_is_refused_with_the_tables_body():
    client = TestClient(_server().setup_webserver())
    row = json.loads(next(p for p in DATASETS).read_text().splitlines()[0])
    response = client.post("/verify", json={**row, "response": {
        "id": "r", "created_at": 0, "model": "m", "object": "response", "output": [], "parallel_tool_calls": False,
        "tool_choice": "auto", "tools": []}})
    assert response.status_code == 409
    assert response.json() == {"error": "no_session", "detail": "call /seed_session first"}


def test_a_row_made_for_another_profile_is_refused():
    client = TestClient(_server().setup_webserver())  # the default profile
    row = {"task_id": "any", "shinken_profile": {"observation": "screenshot", "actions": "pixel", "exec": False,
                                                 "image_format": "png", "quality": 80, "size": None}}
    response = client.post("/seed_session", json=row)
    assert response.status_code == 422 and response.json()["error"] == "profile_mismatch"


def test_more_than_one_worker_is_refused():
    with pytest.raises(ValueError, match="one worker"):
        _server(num_workers=2)


def test_more_than_one_worker_is_accepted_with_a_fleet():
    # Against a fleet the rollouts live in the host agents and the token names the host: no
    # rollout state in this process (the engine, a router, is only made on first use).
    server = _server(num_workers=2, shinken_fleet_address="127.0.0.1:6379")
    assert server.config.num_workers == 2 and server.config.shinken_fleet_address == "127.0.0.1:6379"


def test_tool_call_without_a_session_is_refused():
    client = TestClient(_server().setup_webserver())
    response = client.post("/computer_observe", json={"mode": "tree"})
    assert response.status_code == 409
    assert response.json()["error"] == "no_session"


def test_judge_settings_come_in_pairs():
    from shinken.errors import ShinkenError

    # Refused before any engine (or Docker) is made: a judge URL needs the model it serves.
    with pytest.raises(ShinkenError, match="shinken_judge_model"):
        _server(shinken_judge_url="http://127.0.0.1:9/v1").config.make_engine()


def test_config_names_a_task_root_inside_the_workspace_holding_every_task():
    config = load_config(CONFIG_PATH)
    root = config.task_root()
    assert root.is_dir(), root
    for path in DATASETS:
        for line in path.read_text().splitlines():
            task = json.loads(line)["task_id"]
            assert (root / task).is_dir(), f"{path.name}: {task} is not under {root}"


@pytest.mark.parametrize("path", DATASETS, ids=[p.name for p in DATASETS])
def test_rows_match_the_task_data_schema(path: Path):
    adapter = load_task_data_schema(SERVER_DIR)
    assert adapter is not None
    report = validate_jsonl_rows(SERVER_DIR.name, adapter, str(path), path.read_text().splitlines())
    assert report.rows > 0 and report.clean, report.summary()

