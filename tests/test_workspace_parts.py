"""The parts of a workspace, without Docker: the vendored wheel (the server's import closure),
the bundle store (content-addressed, deduplicated), the license from the source record, the
verifier cases from probe evidence, the YAML writer, and the staging folder gc can reclaim."""

from __future__ import annotations

import dataclasses
import json
import os
import signal
import subprocess
import sys
import time
import zipfile
from pathlib import Path

import pytest
import yaml

from shinken.download.source import SOURCE_FILE, ArchiveRecord, SourceInfo, write_source
from shinken.errors import ShinkenError
from shinken.workspace.wheel import build_wheel
from shinken.workspace.writer import MANIFEST, SERVER_CODE, WorkspaceOptions, make_workspace
from shinken.workspace.yaml_out import dump_yaml

REPO = Path(__file__).resolve().parent.parent
SERVER = Path("resources_servers/shinken_cua")
TEMPLATES = REPO / "workspace_templates" / "server"


def _server_sources() -> list[str]:
    return [(TEMPLATES / rel).read_text() for rel in SERVER_CODE]


def _bundle(root: Path, tid: str, instruction: str, *, setup: bytes = b"true\n", app_type: str = "os") -> None:
    d = root / tid
    d.mkdir(parents=True)
    (d / "config.json").write_text(json.dumps({
        "id": tid, "instruction": instruction, "app_type": app_type, "shinken_state_fidelity": "filesystem",
        "config": [{"type": "download", "parameters": {"files": [{"url": "./initial_setup.sh",
                                                                  "path": "/home/user/initial_setup.sh"}]}},
                   {"type": "execute", "parameters": {"command": "bash /home/user/initial_setup.sh"}}],
        "evaluator": {"type": "python", "url": "./reward.py"},
    }))
    (d / "initial_setup.sh").write_bytes(setup)
    (d / "reward.py").write_text(f"print('REWARD: 0.0')  # {tid}\n")


def _jsonl(path: Path) -> list[dict]:
    return [json.loads(x) for x in path.read_text().splitlines() if x.strip()]


# ---------------------------------------------------------------- the wheel


def test_wheel_holds_only_the_servers_import_closure(tmp_path: Path) -> None:
    wheel = build_wheel(tmp_path / "a", _server_sources())
    again = build_wheel(tmp_path / "b", _server_sources())
    assert wheel.read_bytes() == again.read_bytes()  # same sources, same bytes
    with zipfile.ZipFile(wheel) as zf:
        names = zf.namelist()
        meta = zf.read(next(n for n in names if n.endswith("/METADATA"))).decode()
    modules = {n for n in names if n.startswith("shinken/")}
    for needed in ["shinken/computer/engine.py", "shinken/computer/tools.py", "shinken/sandbox/docker_provider.py",
                   "shinken/bundles/loader.py", "shinken/errors.py", "shinken/reclaim.py", "shinken/schemas/task.schema.json"]:
        assert needed in modules, needed
    # The commands and everything around them stay out (the engine's own imports decide the rest:
    # e.g. sandbox.policy reads needs.analyze for a fork's desktop evidence, so that module is in,
    # and none of triage: its run, cache and report sit above the sandbox).
    assert "shinken/needs/analyze.py" in modules and "shinken/needs/reward.py" in modules
    for part in ["benchmarks", "cli", "probes", "triage", "workspace", "workspace_templates", "publish", "profiles",
                 "report", "tests", "demo", "docs", "scripts"]:
        assert not any(n.startswith(f"shinken/{part}/") for n in modules), part
    folders = {n.split("/")[1] for n in modules if n.count("/") >= 2}
    # fleet: the server routes rollouts to fleet hosts when shinken_fleet_address is set (docs/fleet.md)
    assert folders == {"bundles", "computer", "fleet", "images", "judge", "mockweb", "needs", "provider", "sandbox",
                       "schemas"}, folders
    assert "shinken/fleet/router.py" in modules and "shinken/fleet/agent.py" in modules
    assert not any(n.endswith((".toml", ".md", ".txt")) for n in modules)
    # The engine reads the default image name from images.build: that module, not the image recipes.
    assert not any(n.startswith("shinken/images/") and not n.endswith(".py") for n in modules)
    # No CLI in the server's venv: the one entry point is the NeMo Gym sandbox provider (provider/gym.py).
    with zipfile.ZipFile(wheel) as zf:
        eps = zf.read(next(n for n in names if n.endswith("entry_points.txt"))).decode()
    assert eps.split() == ["[nemo_gym.sandbox_providers]", "shinken", "=", "shinken.provider.gym:ShinkenProvider"]
    assert "shinken/provider/gym.py" in modules and "shinken/provider/sandboxes.py" in modules
    requires = {ln.split(":", 1)[1].strip().split(">")[0].split("=")[0] for ln in meta.splitlines()
                if ln.startswith("Requires-Dist:")}
    assert {"docker", "orjson"} <= requires and not requires & {"typer", "rich", "huggingface_hub", "zstandard"}
    # The closure is complete: the modules import from the wheel alone (beside third-party packages).
    (tmp_path / "site").mkdir()
    with zipfile.ZipFile(wheel) as zf:
        zf.extractall(tmp_path / "site")
    r = subprocess.run([sys.executable, "-c", "import shinken, shinken.computer.engine, shinken.computer.tools, "
                        "shinken.sandbox.docker_provider, shinken.reclaim, shinken.schemas as s; "
                        "print(shinken.__file__); s.load_schema('task')"],
                       cwd=tmp_path, env={**os.environ, "PYTHONPATH": str(tmp_path / "site")},
                       capture_output=True, text=True)
    assert r.returncode == 0, r.stderr
    assert r.stdout.startswith(str(tmp_path / "site")), r.stdout


# ---------------------------------------------------------------- the bundle store


def test_bundles_are_copied_content_addressed_and_deduplicated(tmp_path: Path) -> None:
    root = tmp_path / "tasks"
    doc = os.urandom(50_000)  # the same setup document in three tasks
    for i in range(3):
        _bundle(root, f"t{i}", f"task {i}", setup=doc)
    _bundle(root, "other", "another task", setup=os.urandom(10_000))
    (tmp_path / "ids.txt").write_text("t0\nt1\nt2\nother\n")
    res = make_workspace(WorkspaceOptions(dest=tmp_path / "ws", task_root=root, ids_file=tmp_path / "ids.txt",
                                          license="MIT"))
    tasks = tmp_path / "ws" / SERVER / "tasks"
    assert sorted(p.name for p in tasks.iterdir()) == ["other", "t0", "t1", "t2"]
    assert (tasks / "t2" / "initial_setup.sh").read_bytes() == doc
    assert os.stat(tasks / "t0" / "initial_setup.sh").st_nlink == 3  # one copy, two links
    s = res.store
    assert s["bundles"] == 4 and s["files"] == 12 and s["linked_files"] == 2
    assert s["bytes_total"] - s["bytes_stored"] == 2 * len(doc)
    index = json.loads((tmp_path / "ws" / MANIFEST).read_text())["store"]["index"]
    import hashlib

    assert index["t1"]["initial_setup.sh"] == hashlib.sha256(doc).hexdigest()


# ---------------------------------------------------------------- the license


def _record(root: Path, license: str | None) -> None:
    write_source(root, SourceInfo(repo_id="xlangai/CUA-Gym", repo_type="dataset", revision="a" * 40,
                                  archives=(ArchiveRecord("artifacts/cua_gym_tasks_v1.tar.zst", "b" * 64, 123),),
                                  license=license, card={"license": license} if license else {},
                                  downloaded_at="2026-12-01T00:00:00Z"))


def test_license_comes_from_the_download_record_and_travels_with_the_bundles(tmp_path: Path) -> None:
    root = tmp_path / "tasks"
    _bundle(root, "a", "task a")
    _bundle(root, "b", "task b")
    _record(root, "cc-by-4.0")
    (tmp_path / "ids.txt").write_text("a\nb\n")
    res = make_workspace(WorkspaceOptions(dest=tmp_path / "ws", task_root=root, ids_file=tmp_path / "ids.txt"))
    ws = tmp_path / "ws"
    manifest = yaml.safe_load((ws / "environments/shinken_cua/manifest.yaml").read_text())
    config = yaml.safe_load((ws / SERVER / "configs/shinken_cua.yaml").read_text())
    datasets = config["shinken_cua_simple_agent"]["responses_api_agents"]["shinken_agent"]["datasets"]
    assert res.license == manifest["licensing"] == "CC-BY-4.0"
    assert {d["license"] for d in datasets} == {"Creative Commons Attribution 4.0 International"}
    assert (ws / SERVER / "tasks" / SOURCE_FILE).read_bytes() == (root / SOURCE_FILE).read_bytes()
    doc = json.loads((ws / MANIFEST).read_text())
    assert doc["source"]["revision"] == "a" * 40 and "dataset card" in doc["license_source"]
    assert "xlangai/CUA-Gym" in (ws / SERVER / "README.md").read_text()
    # --license wins over the card; `unknown` only when the user says so, and then the notes say publish refuses.
    res = make_workspace(WorkspaceOptions(dest=ws, task_root=root, ids_file=tmp_path / "ids.txt", license="MIT",
                                          force=True))
    assert res.license == "MIT"
    res = make_workspace(WorkspaceOptions(dest=ws, task_root=root, ids_file=tmp_path / "ids.txt", license="unknown",
                                          force=True))
    assert yaml.safe_load((ws / "environments/shinken_cua/manifest.yaml").read_text())["licensing"] == "unknown"
    assert any("publish" in n for n in res.notes)
    # A card without a license is no license.
    _record(root, None)
    with pytest.raises(ShinkenError, match="no license is known"):
        make_workspace(WorkspaceOptions(dest=tmp_path / "ws2", task_root=root, ids_file=tmp_path / "ids.txt"))


# ---------------------------------------------------------------- verifier cases from evidence


def _line(tid: str, rewards: list[float], replay: list[dict] | None = None, **extra) -> dict:
    return {"schema": "shinken.probe.line/1", "task_id": tid, "bundle_hash": "h", "image_id": "sha256:x",
            "config_hash": "c", "outcome": "kept", "reason": None, "detail": "", "rewards": rewards,
            "replay": replay or [], "timings": {"golden_build_s": 1.0, "golden_reused": False, "fork_s": [0.1],
                                                "reward_s": [0.1], "total_s": 1.0},
            "attempts": 1, "finished_at": "2026-12-01T00:00:00Z", **extra}


def _receipt(path: Path, lines: list[dict], **summary) -> Path:
    doc = {"schema": "shinken.probe/1", "image": {"ref": "shinken/sandbox-linux:latest", "id": "sha256:x"},
           "kept": [ln["task_id"] for ln in lines], "dropped": [], "tasks": lines,
           "summary": {"total": len(lines), "kept": len(lines), "dropped": 0, "by_reason": {}, "repeats": 2, **summary}}
    path.write_text(json.dumps(doc))
    return path


def _rollout(tid: str, calls: list[tuple[str, dict]], reward: float) -> dict:
    return {"task_id": tid, "reward": reward, "response": {"output": [
        {"type": "function_call", "name": n, "arguments": json.dumps(a), "call_id": f"c{i}"}
        for i, (n, a) in enumerate(calls)]}}


@pytest.fixture()
def evidence_root(tmp_path: Path) -> Path:
    root = tmp_path / "tasks"
    for tid, app in [("a", "calc"), ("b", "calc"), ("c", "writer"), ("d", "os"), ("e", "os")]:
        _bundle(root, tid, f"task {tid}", app_type=app)
    return root


def test_verifier_cases_come_from_the_receipt_and_the_replayed_rollouts(tmp_path: Path, evidence_root: Path) -> None:
    solution = [("computer_exec", {"command": "printf hi > /home/user/x"}), ("computer_done", {})]
    rollouts = tmp_path / "rollouts.jsonl"
    rollouts.write_text("\n".join(json.dumps(r) for r in [
        _rollout("a", [("computer_done", {})], 0.0),  # rollout 0 of a: recorded 0.0
        _rollout("a", solution, 1.0),  # rollout 1 of a: the probe replayed it with 1.0
        _rollout("c", solution, 1.0),  # c: the replay did not reproduce it
    ]) + "\n")
    lines = [
        _line("a", [0.0, 0.0], [{"rollout": 0, "recorded": 0.0, "reward": 0.0, "match": True, "calls": 1},
                                {"rollout": 1, "recorded": 1.0, "reward": 1.0, "match": True, "calls": 2}]),
        _line("b", [0.0, 0.0]),
        _line("c", [0.0, 0.0], [{"rollout": 0, "recorded": 1.0, "reward": 0.0, "match": False, "calls": 2}]),
        _line("d", [0.5, 0.5]),  # partial credit at the start: not a zero-reward case
        _line("e", [0.0, 0.0]),
    ]
    receipt = _receipt(tmp_path / "receipt.json", lines)
    res = make_workspace(WorkspaceOptions(dest=tmp_path / "ws", task_root=evidence_root, ids_file=receipt,
                                          rollouts=[rollouts], license="MIT"))
    cases = _jsonl(tmp_path / "ws" / SERVER / "tests" / "verifier_cases.jsonl")
    by_kind: dict[str, list[dict]] = {}
    for c in cases:
        by_kind.setdefault(c["kind"], []).append(c)
    # Three zero cases spread over app types (calc, os, writer), never the partial-credit task.
    zero_tasks = [c["request"]["task_id"] for c in by_kind["zero_reward"]]
    assert len(zero_tasks) == 3 and "d" not in zero_tasks
    assert {"calc", "os", "writer"} == {c["request"]["app_type"] for c in by_kind["zero_reward"]}
    assert all(c["expected_reward"] == 0.0 and c["request"]["response"]["output"] == [] for c in by_kind["zero_reward"])
    # One full case: a's rollout 1 with exactly its recorded calls; c's unreproduced rollout is not evidence.
    (full,) = by_kind["full_reward"]
    assert full["request"]["task_id"] == "a" and full["expected_reward"] == 1.0
    calls = [(o["name"], json.loads(o["arguments"])) for o in full["request"]["response"]["output"]]
    assert calls == solution
    # Repeats 2, no unchecked start state: seeded, with a determinism case re-running the solution.
    assert res.determinism == "seeded"
    (det,) = by_kind["determinism"]
    assert det["request"] == full["request"] and det["expected_reward"] == 1.0
    assert {c["expected_error"] for c in by_kind["malformed"]} == {"response", "task_id", "not found under"}
    assert "response" not in by_kind["malformed"][0]["request"]
    manifest = yaml.safe_load((tmp_path / "ws/environments/shinken_cua/manifest.yaml").read_text())
    assert manifest["determinism"] == "seeded"
    assert res.verifier_cases == {"zero_reward": 3, "full_reward": 1, "determinism": 1, "malformed": 3}
    for c in cases:  # every request is a row Gym would accept plus a response
        assert c["request"].get("agent_ref", {}).get("name") == "shinken_cua_simple_agent"


def test_a_recorded_solution_as_the_profiles_tools_make_it(tmp_path: Path, evidence_root: Path) -> None:
    """The pyautogui profile has no computer_done: a recorded solution ending with it is a
    full_reward case ending with the program DONE (the same: the rollout is done); without the
    shell (--no-exec) the solution's computer_exec has no counterpart, so it is no case."""
    from shinken.computer.profiles import Profile

    solution = [("computer_exec", {"command": "printf hi > /home/user/x"}), ("computer_done", {})]
    rollouts = tmp_path / "rollouts.jsonl"
    rollouts.write_text(json.dumps(_rollout("a", solution, 1.0)) + "\n")
    lines = [_line("a", [0.0, 0.0], [{"rollout": 0, "recorded": 1.0, "reward": 1.0, "match": True, "calls": 2}]),
             _line("b", [0.0, 0.0])]
    receipt = _receipt(tmp_path / "receipt.json", lines)
    for exec_, want in [(True, [solution[0], ("computer_pyautogui", {"code": "DONE"})]), (False, None)]:
        ws = tmp_path / f"ws-{exec_}"
        res = make_workspace(WorkspaceOptions(
            dest=ws, task_root=evidence_root, ids_file=receipt, rollouts=[rollouts], license="MIT",
            profile=Profile(observation="screenshot", actions="pyautogui", exec=exec_)))
        full = [c for c in _jsonl(ws / SERVER / "tests" / "verifier_cases.jsonl") if c["kind"] == "full_reward"]
        if want is None:
            assert full == [] and any("tools this workspace's profile does not have" in n for n in res.notes)
            continue
        (case,) = full
        assert [(o["name"], json.loads(o["arguments"])) for o in case["request"]["response"]["output"]] == want
        assert {t["name"] for t in case["request"]["responses_create_params"]["tools"]} == {
            "computer_pyautogui", "computer_exec"}


def _oracle(path: Path, outcome: str, reward: float, text: str = "open('/home/user/x', 'w').write('hi')\n") -> dict:
    import hashlib

    path.write_text(text)
    return {"source": "oracle_dir", "path": str(path), "sha256": hashlib.sha256(text.encode()).hexdigest(),
            "outcome": outcome, "reward": reward, "reward_error": None, "exit_code": 0, "script_tail": "",
            "reward_tail": f"REWARD: {reward}", "s": 1.0}


def test_full_reward_cases_from_oracles_without_rollouts(tmp_path: Path, evidence_root: Path) -> None:
    """No recorded rollouts: tasks whose oracle scored 1.0 in the probe become full_reward cases whose
    response runs that very script through computer_exec; a partial or changed oracle does not."""
    from shinken.probes.oracle import read_oracle

    od = tmp_path / "oracles"
    od.mkdir()
    lines = [
        _line("a", [0.0, 0.0], oracle=_oracle(od / "a.py", "oracle_passes", 1.0)),
        _line("b", [0.0, 0.0], oracle=_oracle(od / "b.py", "oracle_partial", 0.5)),
        _line("c", [0.0, 0.0], oracle=_oracle(od / "c.py", "oracle_passes", 1.0)),
        _line("d", [0.0, 0.0]),
        _line("e", [0.0, 0.0]),
    ]
    (od / "c.py").write_text("print('changed after the probe')\n")
    receipt = _receipt(tmp_path / "receipt.json", lines)
    res = make_workspace(WorkspaceOptions(dest=tmp_path / "ws", task_root=evidence_root, ids_file=receipt,
                                          license="MIT"))
    cases = _jsonl(tmp_path / "ws" / SERVER / "tests" / "verifier_cases.jsonl")
    (full,) = [c for c in cases if c["kind"] == "full_reward"]
    assert full["request"]["task_id"] == "a" and full["expected_reward"] == 1.0
    calls = [(o["name"], json.loads(o["arguments"])) for o in full["request"]["response"]["output"]]
    assert calls == read_oracle("a", od / "a.py", "oracle_dir").calls()
    assert calls[0][0] == "computer_exec" and "open('/home/user/x', 'w').write('hi')" in calls[0][1]["command"]
    assert res.verifier_cases["full_reward"] == 1 and res.verifier_cases["determinism"] == 1
    assert any("c:" in n and "changed since the probe" in n for n in res.notes)


def test_oracle_command_runs_the_script_and_keeps_its_status(tmp_path: Path) -> None:
    """The command an oracle run sends through computer_exec, run by bash here (a harmless script):
    it writes the script, runs it from a home-like folder, removes it and exits with its status."""
    from shinken.probes import oracle as om

    script = tmp_path / "t.sh"
    script.write_text("echo \"ran in $PWD\"\ncat <<'EOF'\nquoted $HOME\nEOF\nexit 3\n")
    orc = om.read_oracle("t", script, "oracle_dir")
    cmd = orc.command().replace(om.GUEST_DIR, str(tmp_path / "guest")).replace("cd /home/user", f"cd {tmp_path}")
    r = subprocess.run(["bash", "-c", cmd], capture_output=True, text=True, timeout=30)
    assert r.returncode == 3 and f"ran in {tmp_path}" in r.stdout and "quoted $HOME" in r.stdout
    assert not (tmp_path / "guest").exists()
    assert om.exit_code_of("exit code 3") == 3 and om.exit_code_of("timed out after 60s") is None
    big = tmp_path / "big.py"
    big.write_text("#" * (om.MAX_ORACLE_BYTES + 1))
    with pytest.raises(ShinkenError, match="over"):
        om.read_oracle("big", big, "oracle_dir")


@pytest.mark.parametrize("summary, tier, why", [
    ({"repeats": 1}, None, "--repeats 1"),
    ({"state_fidelity": "filesystem"}, None, "filesystem"),
    ({}, "filesystem", "filesystem"),
])
def test_determinism_is_unknown_without_evidence(tmp_path: Path, evidence_root: Path, summary, tier, why) -> None:
    extra = {"tier": tier} if tier else {}
    receipt = _receipt(tmp_path / "r.json", [_line(t, [0.0, 0.0], **extra) for t in "abcde"], **summary)
    res = make_workspace(WorkspaceOptions(dest=tmp_path / "ws", task_root=evidence_root, ids_file=receipt,
                                          license="MIT"))
    assert res.determinism == "unknown"
    doc = json.loads((tmp_path / "ws" / MANIFEST).read_text())
    assert why in doc["evidence"]["determinism"]
    kinds = [c["kind"] for c in _jsonl(tmp_path / "ws" / SERVER / "tests" / "verifier_cases.jsonl")]
    assert "determinism" not in kinds and "full_reward" not in kinds
    assert any("full_reward" in n for n in res.notes)
    # No silent dead end: which gate fails, and the commands (with this workspace's paths) that get the evidence.
    (help_note,) = [n for n in res.notes if "gym env test shinken_cua" in n]
    assert "requires full_reward verifier case(s)" in help_note and "zero_reward verifier" not in help_note
    assert f"--ids {receipt.resolve()} " in help_note and f"--dest {tmp_path / 'ws'} " in help_note
    assert "--oracle SOLUTIONS_DIR" in help_note and "profile/solved.jsonl" in help_note


# ---------------------------------------------------------------- YAML and staging


def test_yaml_writer_round_trips_through_a_yaml_parser() -> None:
    doc = {"a": "x: y # not a comment", "b": ["1", 2, 2.5, True, None, {"c": "${oc.env:X,'d:e'}", "d": []}],
           "e": {}, "f": [[1, 2], ["z"]], "quote": 'say "hi"\nnext', "empty": ""}
    text = dump_yaml(doc, comment="two\nlines")
    assert text.startswith("# two\n# lines\n")
    assert yaml.safe_load(text) == doc


KILL_AFTER_STAGING = """
import sys, time
from pathlib import Path
import shinken.workspace.writer as w
def stall(*a, **k):
    Path(sys.argv[3]).write_text("staging")
    time.sleep(600)
w.copy_bundles = stall
w.make_workspace(w.WorkspaceOptions(dest=Path(sys.argv[1]), task_root=Path(sys.argv[2]),
                                    ids_file=Path(sys.argv[2]) / "ids.txt", license="MIT"))
"""


def test_a_killed_run_leaves_a_staging_folder_gc_reclaims(tmp_path: Path, evidence_root: Path,
                                                          monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("SHINKEN_RUNTIME_DIR", str(tmp_path / "runtime"))  # this test's registry only
    (evidence_root / "ids.txt").write_text("a\nb\n")
    flag = tmp_path / "flag"
    proc = subprocess.Popen([sys.executable, "-c", KILL_AFTER_STAGING, str(tmp_path / "out" / "ws"),
                             str(evidence_root), str(flag)])
    deadline = time.monotonic() + 60
    while not flag.exists() and time.monotonic() < deadline and proc.poll() is None:
        time.sleep(0.05)
    assert flag.exists(), "the run never reached the bundle copy"
    os.kill(proc.pid, signal.SIGKILL)
    proc.wait()
    stages = [p for p in (tmp_path / "out").iterdir() if p.name.startswith(".ws.")]
    assert len(stages) == 1 and not (tmp_path / "out" / "ws").exists()
    from shinken.reclaim import find_reclaimable, reclaim

    found = [r for r in find_reclaimable(None) if r.resource == "tempdir"]
    assert [Path(r.id) for r in found] == [stages[0].resolve()]
    done, failed = reclaim(None, found)
    assert failed == [] and not stages[0].exists()


# ---------------------------------------------------------------- the server's settings, written once
def test_server_defaults_have_one_home(monkeypatch) -> None:
    """Pool size, idle TTL, golden TTL and max goldens: computer/settings.py's ServerSettings is
    what the engine config's defaults, its environment reader and the generated server's config say."""
    import ast
    import inspect

    from shinken.computer.contract import EngineConfig
    from shinken.computer.settings import DEFAULTS, KNOBS, ServerSettings
    from shinken.errors import ShinkenError

    params = inspect.signature(EngineConfig).parameters  # what every engine is built from
    assert {name: params[name].default for name in KNOBS} == dataclasses.asdict(DEFAULTS)
    for _, var in KNOBS.values():
        monkeypatch.delenv(var, raising=False)
    assert ServerSettings.from_env() == DEFAULTS
    monkeypatch.setenv("SHINKEN_POOL_SIZE", "3")
    monkeypatch.setenv("SHINKEN_GOLDEN_TTL", "12.5")
    assert ServerSettings.from_env() == dataclasses.replace(DEFAULTS, pool_size=3, golden_ttl_s=12.5)
    monkeypatch.setenv("SHINKEN_DEMAND_POOLS", "on")  # the off switch's other side (shinken_demand_pools)
    assert ServerSettings.from_env().demand_pools is True
    monkeypatch.setenv("SHINKEN_DEMAND_POOLS", "maybe")
    with pytest.raises(ShinkenError, match="SHINKEN_DEMAND_POOLS='maybe': use true or false"):
        ServerSettings.from_env()
    monkeypatch.delenv("SHINKEN_DEMAND_POOLS")
    monkeypatch.setenv("SHINKEN_MAX_GOLDENS", "many")
    with pytest.raises(ShinkenError, match="SHINKEN_MAX_GOLDENS='many': not a number"):
        ServerSettings.from_env()
    # The generated server's typed config takes each default from DEFAULTS, nowhere else.
    tree = ast.parse((REPO / "workspace_templates" / "server" / "app.py").read_text())
    cls = next(n for n in ast.walk(tree) if isinstance(n, ast.ClassDef) and n.name == "ShinkenCuaConfig")
    defaults = {n.target.id: ast.unparse(n.value.args[0]) for n in cls.body
                if isinstance(n, ast.AnnAssign) and isinstance(n.target, ast.Name) and isinstance(n.value, ast.Call)}
    assert {key: defaults[key] for key, _ in KNOBS.values()} == {key: f"DEFAULTS.{name}" for name, (key, _) in KNOBS.items()}
