"""`make-workspace --observation/--actions/--no-exec/--screenshot-*`: what a profile changes in the
workspace (rows, server config, the vision agent, manifest, README) and that the default
changes nothing (no Docker; the profiles run for real in test_screen.py and test_gym_vision.py)."""

from __future__ import annotations

import importlib.util
import json
from pathlib import Path

import pytest
import yaml

from shinken.computer.actions import tool_schemas
from shinken.computer.profiles import Profile
from shinken.computer.tools import TOOL_SCHEMAS
from shinken.errors import ShinkenError
from shinken.schemas import check_with_jsonschema, validation_error
from shinken.workspace.writer import MANIFEST, WorkspaceOptions, make_workspace

REPO = Path(__file__).resolve().parent.parent
SERVER = Path("resources_servers/shinken_cua")


def _rows(path: Path) -> list[dict]:
    return [json.loads(x) for x in path.read_text().splitlines() if x.strip()]


def _make(tmp_path: Path, demo_root: Path, name: str, **kw) -> Path:
    ids = tmp_path / "ids.txt"
    ids.write_text("hello-file\nzenity-entry\n")
    dest = tmp_path / name
    make_workspace(WorkspaceOptions(dest=dest, task_root=demo_root, ids_file=ids, license="Apache-2.0",
                                    authors=["Ada Lovelace"], **kw))
    return dest


def test_tool_sets_per_profile() -> None:
    names = lambda p: [t["name"] for t in tool_schemas(p)]  # noqa: E731
    assert tool_schemas(Profile()) == TOOL_SCHEMAS
    assert names(Profile(exec=False)) == ["computer_observe", "computer_click", "computer_type_text", "computer_key",
                                          "computer_done"]
    assert names(Profile(observation="screenshot", actions="pixel", exec=False)) == [
        "computer_click", "computer_double_click", "computer_right_click", "computer_drag", "computer_scroll",
        "computer_move", "computer_type_text", "computer_key", "computer_wait", "computer_done"]
    assert names(Profile(observation="both", actions="pixel")) == [
        "computer_observe", "computer_click", "computer_double_click", "computer_right_click", "computer_drag",
        "computer_scroll", "computer_move", "computer_type_text", "computer_key", "computer_wait", "computer_exec",
        "computer_done"]
    assert names(Profile(observation="screenshot", actions="pyautogui")) == ["computer_pyautogui", "computer_exec"]
    for p in (Profile(observation="screenshot", actions="pixel"), Profile(actions="pyautogui", exec=False)):
        for t in tool_schemas(p):  # strict function tools, as Gym and the rows need
            params = t["parameters"]
            assert t["strict"] is True and params["additionalProperties"] is False
            assert params["required"] == list(params["properties"])


def test_default_profile_writes_what_it_always_wrote(tmp_path: Path, demo_root: Path) -> None:
    """The default profile's rows and server config are what they were before profiles; its agent is
    Gym's simple_agent answering a seed's infrastructure failure masked (workspace_templates/agent)."""
    dest = _make(tmp_path, demo_root, "ws")
    agent = dest / "responses_api_agents" / "shinken_agent"
    assert sorted(p.name for p in (dest / "responses_api_agents").iterdir()) == ["shinken_agent"]
    assert (agent / "app.py").read_bytes() == (REPO / "workspace_templates/agent/text_app.py").read_bytes()
    assert (agent / "seed_failures.py").read_bytes() == (REPO / "workspace_templates/agent/seed_failures.py").read_bytes()
    for row in _rows(dest / SERVER / "data" / "train.jsonl"):
        assert "shinken_profile" not in row and row["responses_create_params"]["tools"] == TOOL_SCHEMAS
        assert row["agent_ref"]["name"] == "shinken_cua_simple_agent"
    cfg = (dest / SERVER / "configs" / "shinken_cua.yaml").read_text()
    assert "shinken_observation" not in cfg and "shinken_agent:" in cfg and "vision" not in cfg
    manifest = yaml.safe_load((dest / "environments/shinken_cua/manifest.yaml").read_text())
    assert (manifest["modality"], manifest["agent_server"]) == ("text", "shinken_agent")
    assert "## Profile" not in (dest / SERVER / "README.md").read_text()
    assert "profile" not in json.loads((dest / MANIFEST).read_text())


def test_screenshot_profile_workspace(tmp_path: Path, demo_root: Path) -> None:
    profile = Profile(observation="screenshot", actions="pixel", exec=False, image_format="jpeg", quality=60,
                      size=(1280, 720))
    dest = _make(tmp_path, demo_root, "vl", profile=profile)
    rows = [r for split in ("train", "validation", "example") for r in _rows(dest / SERVER / "data" / f"{split}.jsonl")]
    spec = importlib.util.spec_from_file_location("task_data_vl", dest / SERVER / "task_data.py")
    assert spec and spec.loader
    task_data = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(task_data)
    for row in rows:
        assert validation_error("gym_row", row) is None
        assert row["shinken_profile"] == {"observation": "screenshot", "actions": "pixel", "exec": False,
                                          "image_format": "jpeg", "quality": 60, "size": "1280x720"}
        assert row["agent_ref"] == {"type": "responses_api_agents", "name": "shinken_cua_vision_agent"}
        assert row["responses_create_params"]["tools"] == tool_schemas(profile)
        system = row["responses_create_params"]["input"][0]["content"]
        assert "screen 1280x720" in system and "no shell" in system and "computer_exec" not in system
        task_data.TaskData.model_validate({k: v for k, v in row.items()
                                           if k not in ("responses_create_params", "agent_ref")})
    agent = dest / "responses_api_agents" / "shinken_vision_agent"
    assert (agent / "app.py").read_bytes() == (REPO / "workspace_templates/agent/app.py").read_bytes()
    assert (agent / "seed_failures.py").read_bytes() == (REPO / "workspace_templates/agent/seed_failures.py").read_bytes()
    assert (agent / "requirements.txt").read_text().strip() == "nemo-gym[dev]==0.7.0"
    cfg = yaml.safe_load((dest / SERVER / "configs" / "shinken_cua.yaml").read_text())
    server = cfg["shinken_cua_resources_server"]["resources_servers"]["shinken_cua"]
    assert (server["shinken_observation"], server["shinken_actions"], server["shinken_exec"],
            server["shinken_screenshot_format"], server["shinken_screenshot_quality"],
            server["shinken_screenshot_size"]) == ("screenshot", "pixel", False, "jpeg", 60, "1280x720")
    block = cfg["shinken_cua_vision_agent"]["responses_api_agents"]["shinken_vision_agent"]
    assert [d["type"] for d in block["datasets"]] == ["train", "validation", "example"] and "context_history" not in block
    assert "shinken_cua_simple_agent" not in cfg
    env = cfg["shinken_cua_environment_server"]["environment_servers"]["legacy_agent"]
    assert env["agent_server"]["name"] == "shinken_cua_vision_agent"
    manifest = yaml.safe_load((dest / "environments/shinken_cua/manifest.yaml").read_text())
    assert (manifest["modality"], manifest["agent_server"]) == ("multimodal", "shinken_vision_agent")
    readme = (dest / SERVER / "README.md").read_text()
    assert "## Profile" in readme and "input_image" in readme and "Nemotron VL/Omni" in readme
    assert "every screenshot stays in the history" in readme
    ws_manifest = json.loads((dest / MANIFEST).read_text())
    assert check_with_jsonschema("workspace_manifest", ws_manifest) == []
    assert ws_manifest["profile"]["observation"] == "screenshot" and ws_manifest["profile"]["screenshot_history"] is None
    commands = (dest / SERVER / "README.md").read_text()
    assert "--agent shinken_cua_vision_agent" in commands


def test_screenshot_history_uses_gyms_recency_policy(tmp_path: Path, demo_root: Path) -> None:
    dest = _make(tmp_path, demo_root, "h", profile=Profile(observation="both", actions="pyautogui"),
                 screenshot_history=3)
    cfg = yaml.safe_load((dest / SERVER / "configs" / "shinken_cua.yaml").read_text())
    block = cfg["shinken_cua_vision_agent"]["responses_api_agents"]["shinken_vision_agent"]
    assert block["context_history"]["policy"] == {"type": "recency", "config": {"images": {
        "enabled": True, "keep_last_groups": 3, "protect_initial_context": False}}}
    assert "only the last 3 screenshots" in (dest / SERVER / "README.md").read_text()
    with pytest.raises(ShinkenError, match="--screenshot-history"):
        _make(tmp_path, demo_root, "h2", screenshot_history=3)  # no screenshots to keep


@pytest.mark.parametrize("args, message", [
    (["--observation", "video"], "--observation 'video': use one of a11y, screenshot, both"),
    (["--actions", "mouse"], "--actions 'mouse': use one of shinken, pixel, pyautogui"),
    (["--screenshot-size", "1280"], "--screenshot-size '1280': give WIDTHxHEIGHT, e.g. 1280x800"),
    (["--screenshot-format", "gif"], "--screenshot-format 'gif': use one of png, jpeg, webp"),
    (["--screenshot-quality", "0"], "--screenshot-quality 0: use 1..100"),
])
def test_bad_profile_options_exit_2_with_one_line(tmp_path: Path, demo_root: Path, args, message,
                                                   shinken_cli) -> None:
    ids = tmp_path / "ids.txt"
    ids.write_text("hello-file\n")
    r = shinken_cli("make-workspace", "--dest", tmp_path / "ws", "--task-root", demo_root, "--ids", ids,
                    "--license", "Apache-2.0", *args)
    assert r.returncode == 2 and message in r.stderr and "Traceback" not in r.stderr, r.stderr
    assert len(r.stderr.strip().splitlines()) == 1
    assert not (tmp_path / "ws").exists()


def _rollouts(path: Path, rows: list[dict], shinken_profile: dict | None) -> None:
    tag = path.stem
    """Gym-shaped rollouts of `rows`: four per task, half of them solved (every task in the band)."""
    lines = []
    for i, row in enumerate(rows):
        for k in range(4):
            doc = {**row, "_ng_task_index": i, "_ng_rollout_index": k, "reward": float(k % 2), "mask_sample": False,
                   "response": {"id": f"resp-{tag}-{i}-{k}", "output": [], "usage": {"input_tokens": 1, "output_tokens": 1,
                                                                              "total_tokens": 2}}}
            if shinken_profile is None:
                doc.pop("shinken_profile", None)
            else:
                doc["shinken_profile"] = shinken_profile
            lines.append(json.dumps(doc))
    path.write_text("\n".join(lines) + "\n")


def test_a_band_is_not_used_with_another_profile(tmp_path: Path, demo_root: Path, shinken_cli) -> None:
    pixel = Profile(observation="screenshot", actions="pixel", exec=False)
    ws = _make(tmp_path, demo_root, "vl", profile=pixel)
    rows = _rows(ws / SERVER / "data" / "train.jsonl") + _rows(ws / SERVER / "data" / "validation.jsonl")
    _rollouts(tmp_path / "vl.jsonl", rows, pixel.to_json())
    r = shinken_cli("profile", tmp_path / "vl.jsonl", "--task-root", demo_root, "--out", tmp_path / "prof")
    assert r.returncode == 0, r.stderr
    doc = json.loads((tmp_path / "prof" / "profile.json").read_text())
    assert doc["policy_profile"] == pixel.to_json() and doc["counts"]["band"] == 2
    r = shinken_cli("report", "--profile", tmp_path / "prof", "--md", tmp_path / "r.md")
    assert r.returncode == 0, r.stderr
    assert "observation/action profile `screenshot+pixel-noexec`" in (tmp_path / "r.md").read_text()
    band = tmp_path / "prof" / "band.json"
    base = ["make-workspace", "--task-root", demo_root, "--ids", band, "--license", "Apache-2.0", "--author", "A"]
    r = shinken_cli(*base, "--dest", tmp_path / "a11y-ws")
    assert r.returncode == 2 and "this band was measured with profile screenshot+pixel-noexec" in r.stderr, r.stderr
    assert "--observation screenshot --actions pixel --no-exec" in r.stderr and "Traceback" not in r.stderr
    r = shinken_cli(*base, "--dest", tmp_path / "same", "--observation", "screenshot", "--actions", "pixel", "--no-exec")
    assert r.returncode == 0, r.stderr
    # Rollouts of two profiles do not make one pass rate.
    _rollouts(tmp_path / "a11y.jsonl", rows, None)
    r = shinken_cli("profile", tmp_path / "a11y.jsonl", "--task-root", demo_root, "--out", tmp_path / "prof")
    assert r.returncode == 2 and "observation/action profiles" in r.stderr, r.stderr
