"""`shinken make-workspace`: layout, split properties, refusals, row validation (no Docker)."""

from __future__ import annotations

import json
import zipfile
from pathlib import Path

import pytest

from shinken.errors import ShinkenError
from shinken.schemas import check_with_jsonschema, validation_error
from shinken.workspace.rows import AGENT_INSTANCE, check_row
from shinken.workspace.split import normalize_instruction, split_ids
from shinken.bundles.selection import read_task_ids as read_ids
from shinken.workspace.writer import MANIFEST, WorkspaceOptions, make_workspace

REPO = Path(__file__).resolve().parent.parent
SERVER = Path("resources_servers/shinken_cua")


def _bundle(root: Path, tid: str, instruction: str, app_type: str = "os") -> None:
    d = root / tid
    d.mkdir(parents=True)
    (d / "config.json").write_text(json.dumps({
        "id": tid, "instruction": instruction, "app_type": app_type,
        "config": [{"type": "execute", "parameters": {"command": "true"}}],
        "evaluator": {"type": "python", "url": "./reward.py"},
    }))
    (d / "reward.py").write_text("print('REWARD: 0.0')\n")


@pytest.fixture()
def corpus(tmp_path: Path) -> tuple[Path, list[str]]:
    """60 distinct tasks over 3 app types, with two pairs of tasks sharing an instruction."""
    root = tmp_path / "tasks"
    ids = []
    for i in range(60):
        app = ("calc", "writer", "os")[i % 3]
        text = f"Zorb{i} the quib{i} records in {app}."  # distinct from the first word on: no family
        if i in (1, 4):
            text = "  Shared   instruction ONE "
        if i in (7, 10):
            text = "shared instruction two"
        tid = f"task-{i:03d}"
        _bundle(root, tid, text, app)
        ids.append(tid)
    return root, ids


def _ids_file(tmp_path: Path, ids: list[str], name: str = "ids.txt") -> Path:
    p = tmp_path / name
    p.write_text("# kept tasks\n" + "\n".join(ids) + "\n\n")
    return p


def _read_jsonl(path: Path) -> list[dict]:
    return [json.loads(line) for line in path.read_text().splitlines() if line.strip()]


def test_layout_from_demo_bundles(tmp_path: Path, demo_root: Path) -> None:
    ids = _ids_file(tmp_path, ["hello-file", "zenity-entry"])
    dest = tmp_path / "ws"
    res = make_workspace(WorkspaceOptions(dest=dest, task_root=demo_root, ids_file=ids, license="Apache-2.0",
                                          authors=["Ada Lovelace"]))
    server = dest / SERVER
    for rel in ["__init__.py", "app.py", "task_data.py", "configs/shinken_cua.yaml", "requirements.txt", "README.md",
                "tests/__init__.py", "tests/test_app.py", "tests/verifier_cases.jsonl", "data/example.jsonl",
                "data/train.jsonl", "data/validation.jsonl"]:
        assert (server / rel).is_file(), rel
    for rel in ["__init__.py", "manifest.yaml", "config.yaml", "README.md"]:
        assert (dest / "environments" / "shinken_cua" / rel).is_file(), rel
    assert (dest / "env.yaml").is_file()
    # The shinken sandbox provider's named block for Gym agents (docs/provider.md), parsed as the provider parses it.
    import yaml

    from shinken.provider.config import ProviderConfig

    block = yaml.safe_load((server / "configs" / "shinken_sandbox.yaml").read_text())["shinken_sandbox"]["shinken"]
    assert block["task_root"] == "${oc.env:CUA_GYM_TASKS}" and ProviderConfig.parse(block).default_ttl_s == 3600
    assert not (dest / "pyproject.toml").exists()  # Gym would take the folder for a Gym checkout
    assert not (server / "pyproject.toml").exists()  # requirements.txt XOR pyproject.toml
    # The server's code is shipped as the real Python files of workspace_templates/server/.
    assert (server / "app.py").read_bytes() == (REPO / "workspace_templates/server/app.py").read_bytes()

    example = _read_jsonl(server / "data" / "example.jsonl")
    assert len(example) == 5
    assert {r["task_id"] for r in example} == {"hello-file", "zenity-entry"}
    train = _read_jsonl(server / "data" / "train.jsonl")
    val = _read_jsonl(server / "data" / "validation.jsonl")
    assert sorted(r["task_id"] for r in train + val) == ["hello-file", "zenity-entry"]
    assert len(val) == 1  # a two-task set still gets a validation signal
    for row in train + val + example:
        assert validation_error("gym_row", row) is None
        assert row["agent_ref"] == {"type": "responses_api_agents", "name": AGENT_INSTANCE}
        from shinken.computer.tools import TOOL_SCHEMAS

        assert row["responses_create_params"]["tools"] == TOOL_SCHEMAS
        assert row["responses_create_params"]["input"][-1]["content"] == row["instruction"]

    # requirements: nemo-gym pinned, shinken from the vendored wheel, no Gym-checkout relative path.
    req = [ln for ln in (server / "requirements.txt").read_text().splitlines() if ln and not ln.startswith("#")]
    assert req[0] == "nemo-gym[dev]==0.7.0"
    assert req[1].startswith("./vendor/shinken-") and (server / req[1]).is_file()
    assert not any("../.." in ln for ln in req)

    # The bundles travel with the workspace, each loadable with the hash it had.
    from shinken.bundles.loader import load_bundle

    for tid in ("hello-file", "zenity-entry"):
        assert load_bundle(server / "tasks" / tid).bundle_hash == load_bundle(demo_root / tid).bundle_hash
    # No path of the machine that made it: everything is relative to the workspace.
    for path in dest.rglob("*"):
        if path.is_file() and path.suffix in (".yaml", ".py", ".jsonl", ".md", ".txt"):
            text = path.read_text(errors="replace")
            assert str(demo_root) not in text and str(dest) not in text and str(tmp_path) not in text, path
    cfg = (server / "configs" / "shinken_cua.yaml").read_text()
    assert "license: \"Apache 2.0\"" in cfg and "legacy_agent" in cfg and "num_workers: 1" in cfg
    assert "cua_gym_tasks: \"${oc.env:CUA_GYM_TASKS,'resources_servers/shinken_cua/tasks'}\"" in cfg
    for knob, default in (("SHINKEN_POOL_SIZE", 0), ("SHINKEN_IDLE_TTL", 900), ("SHINKEN_GOLDEN_TTL", 3600),
                          ("SHINKEN_MAX_GOLDENS", 64)):  # the engine's defaults (computer/settings.py), as written before
        assert f"{knob},{default}}}" in cfg, knob
    manifest_yaml = (dest / "environments" / "shinken_cua" / "manifest.yaml").read_text()
    assert 'licensing: "Apache-2.0"' in manifest_yaml and '- "Ada Lovelace"' in manifest_yaml
    assert "TODO" not in manifest_yaml and "TBD" not in cfg
    env = (dest / "env.yaml").read_text()
    assert "policy_base_url" in env and "sk-" not in env
    readme = (server / "README.md").read_text()
    for var in ["CUA_GYM_TASKS", "SHINKEN_IMAGE", "SHINKEN_STATE_FIDELITY", "SHINKEN_IDLE_TTL", "Licensing information",
                "Validation recipe", "gym env test shinken_cua", "Expected reward"]:
        assert var in readme
    assert "$" not in readme.replace("$ ", "").replace("${oc.env:VAR,default}", "")  # every placeholder filled
    manifest = json.loads((dest / MANIFEST).read_text())
    assert check_with_jsonschema("workspace_manifest", manifest) == []
    assert manifest["store"]["bundles"] == 2 and set(manifest["store"]["index"]) == {"hello-file", "zenity-entry"}
    assert any(c.startswith("gym env start") for c in res.commands)
    assert any("ng_collect_rollouts" in c for c in res.commands)
    for gate in ["gym env validate shinken_cua", "gym env test shinken_cua", "gym env test --resources-server shinken_cua",
                 "gym env schema --resources-server shinken_cua", "gym env publish shinken_cua"]:
        assert gate in res.commands
    # A plain id list is no evidence: only the malformed cases, and the notes say what is missing.
    cases = _read_jsonl(server / "tests" / "verifier_cases.jsonl")
    assert [c["kind"] for c in cases] == ["malformed"] * 3
    assert any("zero_reward" in n for n in res.notes) and any("full_reward" in n for n in res.notes)


def test_split_is_deterministic_stratified_and_disjoint(tmp_path: Path, corpus) -> None:
    root, ids = corpus
    ids_file = _ids_file(tmp_path, ids)
    a = make_workspace(WorkspaceOptions(license="CC-BY-4.0", dest=tmp_path / "a", task_root=root, ids_file=ids_file, seed=7,
                                        val_fraction=0.2))
    b = make_workspace(WorkspaceOptions(license="CC-BY-4.0", dest=tmp_path / "b", task_root=root, ids_file=ids_file, seed=7,
                                        val_fraction=0.2))
    c = make_workspace(WorkspaceOptions(license="CC-BY-4.0", dest=tmp_path / "c", task_root=root, ids_file=ids_file, seed=8,
                                        val_fraction=0.2))
    assert (a.train, a.validation) == (b.train, b.validation)
    assert (tmp_path / "a" / SERVER / "data/train.jsonl").read_bytes() == \
        (tmp_path / "b" / SERVER / "data/train.jsonl").read_bytes()
    assert a.validation != c.validation  # the seed matters
    assert not set(a.train) & set(a.validation)
    assert sorted(a.train + a.validation) == sorted(ids)
    # 58 instruction units -> round(58 * 0.2) = 12 validation units, spread evenly over 3 app types
    rows = {r["task_id"]: r for r in _read_jsonl(tmp_path / "a" / SERVER / "data/validation.jsonl")}
    per_app = {}
    for r in rows.values():
        per_app[r["app_type"]] = per_app.get(r["app_type"], 0) + 1
    assert set(per_app) == {"calc", "writer", "os"} and max(per_app.values()) - min(per_app.values()) <= 2
    # shared instructions never straddle the split
    train_rows = _read_jsonl(tmp_path / "a" / SERVER / "data/train.jsonl")
    ti = {normalize_instruction(r["instruction"]) for r in train_rows}
    assert not any(normalize_instruction(r["instruction"]) in ti for r in rows.values())
    assert len({r["task_id"] for r in train_rows}) == len(train_rows)
    assert ({"task-001", "task-004"} <= set(a.train)) or ({"task-001", "task-004"} <= set(a.validation))


def test_split_unit_properties() -> None:
    items = [(f"t{i}", f"family {i}", "x" if i < 90 else "y") for i in range(100)]
    s = split_ids(items, key=lambda t: t[0], family=lambda t: t[1], stratum=lambda t: t[2],
                  val_fraction=0.1, seed=0)
    assert len(s.validation) == 10 and len(s.train) == 90
    assert sum(1 for t in s.validation if t.startswith("t9") and len(t) == 3) <= 2  # y stratum gets ~1
    assert split_ids(items, key=lambda t: t[0], family=lambda t: t[1], stratum=lambda t: t[2],
                     val_fraction=0.0, seed=0).validation == []
    one = split_ids(items[:1], key=lambda t: t[0], family=lambda t: t[1], stratum=lambda t: t[2],
                    val_fraction=0.5, seed=0)
    assert one.train == ["t0"] and one.validation == []  # never everything in validation
    # adding tasks of another stratum leaves a stratum's split unchanged
    more = items + [(f"z{i}", f"other {i}", "z") for i in range(30)]
    s2 = split_ids(more, key=lambda t: t[0], family=lambda t: t[1], stratum=lambda t: t[2],
                   val_fraction=0.1, seed=0)
    assert [t for t in s2.validation if not t.startswith("z")] == [t for t in s.validation]


def test_receipt_kept_list_is_what_enters(tmp_path: Path, corpus) -> None:
    root, ids = corpus
    receipt = {
        "schema": "shinken.probe/1", "image": {"ref": "shinken/sandbox-linux:latest", "id": "sha256:x"},
        "kept": ids[:6] + [ids[2]], "dropped": [{"id": ids[10], "reason": "zero_signal", "detail": "1.0 untouched"}],
        "tasks": [], "summary": {"total": 7, "kept": 6, "dropped": 1, "by_reason": {"zero_signal": 1}},
    }
    p = tmp_path / "receipt.json"
    p.write_text(json.dumps(receipt))
    assert read_ids(p) == ids[:6]  # duplicates dropped, order kept
    res = make_workspace(WorkspaceOptions(license="CC-BY-4.0", dest=tmp_path / "ws", task_root=root, ids_file=p))
    assert sorted(res.train + res.validation) == sorted(ids[:6])
    (tmp_path / "list.json").write_text(json.dumps(ids[:3]))
    assert read_ids(tmp_path / "list.json") == ids[:3]


@pytest.mark.parametrize("case", ["missing_id", "bad_receipt", "empty", "inside_tree", "non_empty", "force_foreign",
                                  "bad_fraction", "not_json_object"])
def test_refusals(tmp_path: Path, corpus, case: str) -> None:
    root, ids = corpus
    dest = tmp_path / "ws"
    ids_file = _ids_file(tmp_path, ids[:4])
    force = False
    frac = 0.1
    match = ""
    if case == "missing_id":
        ids_file = _ids_file(tmp_path, ids[:2] + ["no-such-task"])
        match = "not in the task root: no-such-task"
    elif case == "bad_receipt":
        ids_file = tmp_path / "r.json"
        ids_file.write_text(json.dumps({"schema": "shinken.probe/1", "kept": ids[:2]}))
        match = "does not match its schema"
    elif case == "not_json_object":
        ids_file = tmp_path / "r.json"
        ids_file.write_text(json.dumps({"kept": ids[:2]}))
        match = "shinken.probe/1"
    elif case == "empty":
        ids_file = _ids_file(tmp_path, [])
        match = "empty"
    elif case == "inside_tree":
        dest = REPO / "tmp-ws-should-not-exist"
        match = "inside the shinken source tree"
    elif case == "non_empty":
        dest.mkdir()
        (dest / "notes.txt").write_text("mine")
        match = "not empty; pass --force"
    elif case == "force_foreign":
        dest.mkdir()
        (dest / "notes.txt").write_text("mine")
        force = True
        match = "holds no .shinken-workspace.json"
    elif case == "bad_fraction":
        frac = 1.0
        match = "val-fraction"
    with pytest.raises(ShinkenError, match=match):
        make_workspace(WorkspaceOptions(license="CC-BY-4.0", dest=dest, task_root=root, ids_file=ids_file, force=force,
                                        val_fraction=frac))
    assert not (REPO / "tmp-ws-should-not-exist").exists()
    if case in ("non_empty", "force_foreign"):
        assert sorted(p.name for p in dest.iterdir()) == ["notes.txt"]  # untouched


def test_force_replaces_an_earlier_workspace(tmp_path: Path, corpus) -> None:
    root, ids = corpus
    dest = tmp_path / "ws"
    make_workspace(WorkspaceOptions(license="CC-BY-4.0", dest=dest, task_root=root, ids_file=_ids_file(tmp_path, ids[:10])))
    (dest / SERVER / "data" / "stale.jsonl").write_text("{}\n")
    with pytest.raises(ShinkenError, match="not empty"):
        make_workspace(WorkspaceOptions(license="CC-BY-4.0", dest=dest, task_root=root, ids_file=_ids_file(tmp_path, ids[:5])))
    res = make_workspace(WorkspaceOptions(license="CC-BY-4.0", dest=dest, task_root=root, ids_file=_ids_file(tmp_path, ids[:5]),
                                          force=True))
    assert sorted(res.train + res.validation) == ids[:5]
    assert not (dest / SERVER / "data" / "stale.jsonl").exists()
    assert [p.name for p in tmp_path.iterdir() if p.name.startswith(".ws")] == []  # no staging left over


def test_row_validation_rejects_what_gym_would_skip(tmp_path: Path, demo_root: Path) -> None:
    make_workspace(WorkspaceOptions(license="CC-BY-4.0", dest=tmp_path / "ws", task_root=demo_root,
                                    ids_file=_ids_file(tmp_path, ["hello-file"])))
    row = _read_jsonl(tmp_path / "ws" / SERVER / "data" / "example.jsonl")[0]
    check_row(row, where="ok")
    bad = json.loads(json.dumps(row))
    bad["responses_create_params"]["unknown_param"] = 1  # Gym's params model forbids extras
    with pytest.raises(ShinkenError, match="gym_row"):
        check_row(bad, where="x")
    bad = json.loads(json.dumps(row))
    bad["responses_create_params"]["input"][0]["role"] = "robot"
    assert validation_error("gym_row", bad)
    bad = json.loads(json.dumps(row))
    del bad["agent_ref"]
    assert validation_error("gym_row", bad)
    bad = json.loads(json.dumps(row))
    bad["responses_create_params"]["tools"][0]["type"] = "computer_use_preview"
    assert validation_error("gym_row", bad)


def test_empty_instruction_is_refused(tmp_path: Path) -> None:
    root = tmp_path / "tasks"
    _bundle(root, "blank", "   ")
    with pytest.raises(ShinkenError, match="blank: the task has no instruction"):
        make_workspace(WorkspaceOptions(license="CC-BY-4.0", dest=tmp_path / "ws", task_root=root,
                                        ids_file=_ids_file(tmp_path, ["blank"])))


def test_cli_exit_codes(tmp_path: Path, demo_root: Path, shinken_cli) -> None:
    ids = _ids_file(tmp_path, ["hello-file", "ghost"])
    base = ["make-workspace", "--dest", str(tmp_path / "ws"), "--task-root", str(demo_root)]
    r = shinken_cli(*base, "--ids-file", ids, "--license", "Apache-2.0")
    assert r.returncode == 2 and "ghost" in r.stderr and "Traceback" not in r.stderr
    ids = _ids_file(tmp_path, ["hello-file", "zenity-entry"])
    # The demo has no download record: without --license nothing is written, and the message says what to pass.
    r = shinken_cli(*base, "--ids-file", ids)
    assert r.returncode == 2 and "--license" in r.stderr and "Traceback" not in r.stderr
    assert not (tmp_path / "ws").exists()
    for bad, says in [(["--license", "WTFPL-9"], "not an SPDX id"), (["--license", "CC-BY-NC-4.0"], "--dataset-license"),
                      (["--license", "MIT", "--name", "Bad-Name"], "--name"),
                      (["--license", "MIT", "--author", "TODO"], "--author"),
                      (["--license", "MIT", "--rollouts", str(tmp_path / "none.jsonl")], "--rollouts")]:
        r = shinken_cli(*base, "--ids-file", ids, *bad)
        assert r.returncode == 2 and says in r.stderr and "Traceback" not in r.stderr, (bad, r.stderr)
        assert len(r.stderr.strip().splitlines()) <= 3, r.stderr  # progress line + one error
    r = shinken_cli(*base, "--ids-file", ids, "--license", "apache-2.0", "--json")
    assert r.returncode == 0, r.stderr
    doc = json.loads(r.stdout)
    assert len(doc["example"]) == 5 and any(c.startswith("gym eval run --no-serve") for c in doc["commands"])
    assert doc["license"] == "Apache-2.0" and doc["store"]["bundles"] == 2
