"""shinken probe: receipts (durable, resumable), and end-to-end probes on real Docker."""

from __future__ import annotations

import json
import os
from pathlib import Path

import subprocess
import sys

import orjson
import pytest

from shinken.errors import InternalError, ShinkenError
from shinken.probes.receipts import ReceiptLog, read_lines
from shinken.probes.rollouts import load_rollouts
from shinken.sandbox.docker_client import run_container
from shinken.sandbox.ownership import labels_for
from shinken.schemas import check_with_jsonschema
from tests.cli_runner import CliResult, run_cli

REPO = Path(__file__).resolve().parent.parent


def _line(task_id: str, reason: str | None = None, bundle_hash: str = "b" * 64, image_id: str = "sha256:img",
          config_hash: str = "c1") -> dict:
    return {
        "schema": "shinken.probe.line/1", "task_id": task_id, "bundle_hash": bundle_hash, "image_id": image_id,
        "config_hash": config_hash, "outcome": "dropped" if reason else "kept", "reason": reason, "detail": "d",
        "rewards": [0.0, 0.0], "timings": {"golden_build_s": 1.5, "golden_reused": False, "fork_s": [0.2, 0.2],
                                           "reward_s": [0.1, 0.1], "total_s": 2.0},
        "attempts": 1, "finished_at": "2026-11-29T10:00:00Z",
    }


# --- receipts: no Docker needed -------------------------------------------------------------

def test_receipt_append_is_durable_and_reloads(tmp_path: Path) -> None:
    with ReceiptLog(tmp_path) as log:
        log.append(_line("a"))
        log.append(_line("b", "zero_signal"))
    raw = (tmp_path / "receipts.jsonl").read_bytes()
    assert raw.count(b"\n") == 2 and raw.endswith(b"\n")
    with ReceiptLog(tmp_path) as log:
        assert set(log.latest) == {"a", "b"}
        key = ("b" * 64, "sha256:img", "c1")
        assert log.finished("a", key)["outcome"] == "kept"
        assert log.finished("b", key)["reason"] == "zero_signal"
        # A different bundle hash, image or probe setting is not a match.
        assert log.finished("a", ("x" * 64, "sha256:img", "c1")) is None
        assert log.finished("a", ("b" * 64, "sha256:other", "c1")) is None
        assert log.finished("a", ("b" * 64, "sha256:img", "c2")) is None
        assert log.finished("zzz", key) is None


def test_receipt_torn_last_line_is_trimmed_and_next_append_is_clean(tmp_path: Path) -> None:
    with ReceiptLog(tmp_path) as log:
        log.append(_line("a"))
    path = tmp_path / "receipts.jsonl"
    whole = orjson.dumps(_line("b")) + b"\n"
    with open(path, "ab") as fh:  # what a kill -9 in the middle of a write leaves
        fh.write(whole[: len(whole) // 2])
    res = read_lines(path)
    assert [ln["task_id"] for ln in res.lines] == ["a"] and res.torn_bytes == len(whole) // 2
    with ReceiptLog(tmp_path) as log:
        assert set(log.latest) == {"a"}
        log.append(_line("c"))
    lines = path.read_bytes().splitlines()
    assert [json.loads(x)["task_id"] for x in lines] == ["a", "c"]


def test_receipt_later_line_supersedes_and_infra_error_is_not_final(tmp_path: Path) -> None:
    key = ("b" * 64, "sha256:img", "c1")
    with ReceiptLog(tmp_path) as log:
        log.append(_line("a", "infra_error"))
    with ReceiptLog(tmp_path) as log:
        assert log.finished("a", key) is None  # the next run retries it
        log.append(_line("a"))
    with ReceiptLog(tmp_path) as log:
        assert log.finished("a", key)["outcome"] == "kept"


def test_receipt_corrupt_middle_line_is_skipped(tmp_path: Path) -> None:
    path = tmp_path / "receipts.jsonl"
    path.write_bytes(orjson.dumps(_line("a")) + b"\n{not json\n" + b'{"schema": "other"}\n'
                     + orjson.dumps(_line("b")) + b"\n")
    res = read_lines(path)
    assert [ln["task_id"] for ln in res.lines] == ["a", "b"] and res.bad_lines == [2, 3]


def test_receipt_rejects_invalid_line_and_second_writer(tmp_path: Path) -> None:
    with ReceiptLog(tmp_path) as log:
        bad = _line("a")
        bad["reason"] = "because"
        with pytest.raises(InternalError, match="receipt_line"):  # our bug, reported, never written
            log.append(bad)
        with pytest.raises(ShinkenError, match="another `shinken probe`"):
            ReceiptLog(tmp_path).open()
    assert not (tmp_path / "receipts.jsonl").read_bytes()


def test_schemas_are_valid_draft7() -> None:
    import jsonschema

    for name in ("probe_receipt", "receipt_line"):
        jsonschema.Draft7Validator.check_schema(json.loads((REPO / "schemas" / f"{name}.schema.json").read_text()))
    assert check_with_jsonschema("receipt_line", _line("a")) == []
    assert check_with_jsonschema("receipt_line", {**_line("a"), "outcome": "maybe"})


def test_rollouts_file_parsing(tmp_path: Path) -> None:
    p = tmp_path / "r.jsonl"
    rows = [
        {"task_id": "t1", "reward": 1.0, "response": {"output": [
            {"type": "message", "content": []},
            {"type": "function_call", "name": "computer_exec", "arguments": "{\"command\": \"echo hi\"}", "call_id": "1"},
            {"type": "function_call_output", "call_id": "1", "output": "hi"},
            {"type": "function_call", "name": "computer_done", "arguments": "{}", "call_id": "2"}]}},
        {"task_id": "t1", "reward": 0, "response": {"output": []}},
        {"metadata": {"task_id": "t2"}, "reward": 0.5, "response": {"output": []}},
    ]
    p.write_text("\n".join(json.dumps(r) for r in rows) + "\n")
    ro = load_rollouts(p)
    assert [c.name for c in ro["t1"][0].calls] == ["computer_exec", "computer_done"]
    assert ro["t1"][0].calls[0].arguments == {"command": "echo hi"}
    assert [r.index for r in ro["t1"]] == [0, 1] and ro["t1"][1].reward == 0.0 and ro["t2"][0].reward == 0.5
    p.write_text(json.dumps({"reward": 1, "response": {"output": []}}) + "\n")
    with pytest.raises(ShinkenError, match="task_id"):
        load_rollouts(p)



def test_plan_scope_from_ids_and_triage_report(tmp_path: Path) -> None:
    from shinken.probes.pipeline import ProbeRequest, plan

    root = tmp_path / "tasks"
    for t in ("a", "b", "c"):
        d = root / t
        d.mkdir(parents=True)
        (d / "config.json").write_text(json.dumps({"id": t, "instruction": "x", "config": [],
                                                   "evaluator": {"type": "python", "url": "./reward.py"}}))
        (d / "reward.py").write_text("print('REWARD: 0')\n")
    (root / "c" / "reward.py").unlink()
    ids = tmp_path / "ids.txt"
    ids.write_text("# probe these\nb\nc\na\n")
    triage = tmp_path / "triage.json"
    triage.write_text(json.dumps({"schema": "shinken.triage/1", "tasks": [
        {"id": "a", "verdict": "runnable", "reasons": []},
        {"id": "b", "verdict": "blocked", "reasons": [{"code": "missing_app", "detail": "gimp", "severity": "blocker"},
                                                      {"code": "extra_fields", "detail": "x", "severity": "note"}]}]}))
    p = plan(ProbeRequest(task_root=root, image="img", ids=ids, triage=triage))
    assert [b.id for b in p.bundles] == ["b", "c", "a"]
    assert p.dropped == {"b": ("blocked", "triage: blocked: missing_app: gimp"),
                          "c": ("defective", "missing_reward: reward.py is not in the bundle")}
    # --ids takes the same files as make-workspace: a JSON list, or a probe receipt's kept list.
    ids.write_text(json.dumps(["c", "a"]))
    assert [b.id for b in plan(ProbeRequest(task_root=root, image="img", ids=ids, triage=triage)).bundles] == ["c", "a"]
    ids.write_text(json.dumps({"schema": "shinken.probe/1", "image": {"ref": "img", "id": "sha256:x"}, "kept": ["a"],
                               "dropped": [], "tasks": [],
                               "summary": {"total": 1, "kept": 1, "dropped": 0, "by_reason": {}}}))
    assert [b.id for b in plan(ProbeRequest(task_root=root, image="img", ids=ids, triage=triage)).bundles] == ["a"]
    ids.write_text("a\nnope\n")
    with pytest.raises(ShinkenError, match="nope"):
        plan(ProbeRequest(task_root=root, image="img", ids=ids, triage=triage))
    r = cli(str(root), "--ids", str(ids), "--triage", str(triage))
    assert r.returncode == 2 and "nope" in r.stderr and "Traceback" not in r.stderr

def test_ray_payload_folder_is_registered_then_removed(tmp_path: Path, monkeypatch) -> None:
    """A node without the task root rebuilds the bundle from the payload in a temp folder:
    registered for `shinken gc` while the probe runs (a killed worker leaves it findable),
    removed with its registry entry afterwards (one leaked copy per task before)."""
    from shinken.bundles.loader import load_bundle
    from shinken.probes.executors import _bundle_payload, materialized
    from shinken.runtime import temp_dir_entries

    monkeypatch.setenv("SHINKEN_RUNTIME_DIR", str(tmp_path / "rt"))
    src = make_bundle(tmp_path / "tasks", "payload-task", reward="print('REWARD: 0')\n", files={"data.txt": "x"})
    payload = {**_bundle_payload(load_bundle(src)), "path": str(tmp_path / "elsewhere" / "payload-task")}
    with materialized(payload, "run-1") as bundle:
        assert bundle.id == "payload-task" and bundle.bundle_hash == payload["bundle_hash"]
        [entry] = temp_dir_entries()
        assert bundle.path.parent == entry.folder and entry.labels == {"shinken.task": "payload-task",
                                                                       "shinken.run": "run-1"}
    assert not entry.folder.exists() and temp_dir_entries() == []
    payload["path"] = str(src)  # the node has the task root: used in place, nothing registered
    with materialized(payload) as bundle:
        assert bundle.path == src and temp_dir_entries() == []


# --- end to end on real Docker ------------------------------------------------------------

import shutil
import signal
import socket
import time

from shinken.probes.final_receipt import decision_view

sys.path.insert(0, str(Path(__file__).resolve().parent))
from private_dockerd import PrivateDockerd, private_engine  # noqa: E402

IMAGE = os.environ.get("SHINKEN_PROBE_TEST_IMAGE", "shinken/sandbox-linux:latest")
# The demo spreadsheet task is a libreoffice_calc task: a self-run triage blocks it on an
# image without LibreOffice. The demo set runs on the CUA image when this checkout can build it.
CUA_IMAGE = "shinken/sandbox-cua:latest"
DEMO_IMAGE = os.environ.get("SHINKEN_PROBE_DEMO_IMAGE") or (
    CUA_IMAGE if (REPO / "images" / "cua" / "Dockerfile").is_file() else IMAGE)
SPREADSHEET = "9a1f6c2e-5b3d-4e8a-9c71-2f0d4b6a8e13"
FS = {"shinken_state_fidelity": "filesystem"}


def _ensure(client, ref: str, name: str) -> str:
    """The image the tests pass as `ref`. The default `:latest` refs are made to name the image of
    the current sources (built once, cached by content hash; ensure_image points `:latest` at it):
    a `:latest` left by an older checkout may carry older guest scripts. A ref set through the
    environment is used as it is."""
    import docker.errors

    if ref in (IMAGE, CUA_IMAGE) and ref.endswith(":latest") and not os.environ.get(
            "SHINKEN_PROBE_TEST_IMAGE" if name == "linux" else "SHINKEN_PROBE_DEMO_IMAGE"):
        from shinken.images.build import ensure_image

        return ensure_image(name)
    try:
        return client.images.get(ref).id
    except docker.errors.ImageNotFound:
        from shinken.images.build import ensure_image

        return ensure_image(name)  # built once, cached by content hash


@pytest.fixture(scope="session")
def sandbox_image(docker_client) -> str:
    return _ensure(docker_client, IMAGE, "linux")


@pytest.fixture(scope="session")
def demo_image(docker_client) -> str:
    return _ensure(docker_client, DEMO_IMAGE, "cua" if DEMO_IMAGE == CUA_IMAGE else "linux")


def make_bundle(root: Path, task_id: str, *, reward: str, config: list | None = None, files: dict | None = None,
                extra: dict | None = None, fidelity: bool = True) -> Path:
    d = root / task_id
    d.mkdir(parents=True)
    task = {"id": task_id, "instruction": f"task {task_id}", "app_type": "os", "config": config or [],
            "evaluator": {"type": "python", "url": "./reward.py"}, **(FS if fidelity else {}), **(extra or {})}
    (d / "config.json").write_text(json.dumps(task, indent=1))
    (d / "reward.py").write_text(reward)
    for name, text in (files or {}).items():
        (d / name).write_text(text)
    return d


FILE_REWARD = """import os
p = "/home/user/{name}"
ok = os.path.exists(p) and open(p).read().strip() == "{want}"
print("REWARD: 1.0" if ok else "REWARD: 0.0")
"""


def cli(*args: str, env: dict | None = None, timeout: float = 600) -> CliResult:
    """`shinken probe ARGS` in process (the shared runner); with `env` (a private engine's DOCKER_HOST,
    a Ray cluster's auth mode) in a process of its own: Ray reads its settings at import and keeps
    its driver connected for the life of the process that made it."""
    return run_cli("probe", *args, env={**os.environ, **env} if env else None, timeout=timeout)


def _receipt(path: Path) -> dict:
    doc = json.loads(path.read_text())
    assert check_with_jsonschema("probe_receipt", doc) == []
    for t in doc["tasks"]:
        assert check_with_jsonschema("receipt_line", t) == [], t["task_id"]
    return doc


def _outcomes(doc: dict) -> dict[str, str]:
    return {t["task_id"]: (t["reason"] or "kept") for t in doc["tasks"]}


def _remove_run_containers(client, run_id: str) -> None:
    """Forks a SIGKILLed probe left behind (ours only: labelled with this run)."""
    # Low-level list: the high-level one inspects each container and fails on one that
    # disappears meanwhile.
    for c in client.api.containers(all=True, filters={"label": f"shinken.run={run_id}"}):
        try:
            client.api.remove_container(c["Id"], force=True)
        except Exception:
            pass


BASIC_DEMOS = (SPREADSHEET, "hello-file", "zenity-entry", "zero-signal", "broken-reward")


@pytest.mark.docker
def test_demo_bundles(demo_image: str, demo_root: Path, tmp_path: Path) -> None:
    """The demo tasks that need no desktop app of their own, with default flags (the desktop
    ones are in test_start_state.py): each kept one is kept at the snapshot tier."""
    from shinken.images.capabilities import get_manifest

    has_calc = "libreoffice_calc" in get_manifest(DEMO_IMAGE)["desktop_apps"]
    run_dir, receipt = tmp_path / "run", tmp_path / "receipt.json"
    basic = tmp_path / "basic.txt"
    basic.write_text("\n".join(BASIC_DEMOS) + "\n")
    args = [str(demo_root), "--image", DEMO_IMAGE, "--receipt", str(receipt), "--run-dir", str(run_dir),
            "--ids", str(basic), "--repeats", "2", "--concurrency", "2"]
    r = cli(*args)
    assert r.returncode == 0, r.stderr[-3000:]
    doc = _receipt(receipt)
    assert _outcomes(doc) == {
        SPREADSHEET: "kept" if has_calc else "blocked", "hello-file": "kept", "zenity-entry": "kept",
        "zero-signal": "zero_signal", "broken-reward": "reward_error",
    }
    by_id = {t["task_id"]: t for t in doc["tasks"]}
    assert by_id["hello-file"]["rewards"] == [0.0, 0.0]
    assert by_id["zenity-entry"]["rewards"] == [0.0, 0.0]
    assert by_id["zero-signal"]["rewards"] == [1.0, 1.0]
    assert "no_reward_line" in by_id["broken-reward"]["detail"]
    assert doc["image"]["id"] == demo_image and doc["summary"]["probed"] == 5
    assert {t["task_id"]: t["tier"] for t in doc["tasks"] if t["outcome"] == "kept"} == {
        **({SPREADSHEET: "snapshot"} if has_calc else {}), "hello-file": "snapshot", "zenity-entry": "snapshot"}
    assert doc["summary"]["by_tier"] == {"snapshot": 3 if has_calc else 2}
    # The same command again settles everything from receipts: nothing is redone.
    log_before = (run_dir / "receipts.jsonl").read_bytes()
    r2 = cli(*args, "--json")
    assert r2.returncode == 0, r2.stderr[-3000:]
    doc2 = json.loads(r2.stdout)
    assert doc2["summary"]["resumed"] == 5 and doc2["summary"]["probed"] == 0
    assert decision_view(doc2) == decision_view(doc)
    assert (run_dir / "receipts.jsonl").read_bytes() == log_before
    if not has_calc:
        # Blocked only by the missing app; when the user's triage report says runnable, the
        # probe runs it and keeps it (its reward needs openpyxl only).
        assert "libreoffice_calc" in by_id[SPREADSHEET]["detail"]
        triage = tmp_path / "triage.json"
        triage.write_text(json.dumps({"tasks": [{"id": SPREADSHEET, "verdict": "runnable", "reasons": []}]}))
        ids = tmp_path / "ids.txt"
        ids.write_text(SPREADSHEET + "\n")
        r3 = cli(str(demo_root), "--image", DEMO_IMAGE, "--run-dir", str(tmp_path / "run-sheet"), "--ids", str(ids),
                 "--triage", str(triage), "--json")
        assert r3.returncode == 0, r3.stderr[-3000:]
        sheet = json.loads(r3.stdout)
        assert sheet["kept"] == [SPREADSHEET] and sheet["tasks"][0]["rewards"] == [0.0, 0.0]


ORACLE_DEMOS = ("oracle-solves", "oracle-half", "oracle-wrong-path")


@pytest.mark.docker
def test_oracle_probe(sandbox_image: str, demo_root: Path, tmp_path: Path) -> None:
    """Pipeline-export bundles with golden_patch.py: the probe runs it on a fresh fork through
    computer_exec after the start state is checked, then the reward. One solves (kept,
    oracle_passes), one half-solves (kept, flagged oracle_partial with its reward), one whose
    reward reads the wrong path (dropped oracle_fails with the reward's output); --oracle DIR
    replaces a bundle's script; the default (--probes noop) skips the oracle and is a different setting."""
    ids = tmp_path / "ids.txt"
    ids.write_text("\n".join(ORACLE_DEMOS) + "\n")
    receipt = tmp_path / "receipt.json"
    base = [str(demo_root), "--image", IMAGE, "--ids", str(ids), "--repeats", "1", "--concurrency", "3"]
    r = cli(*base, "--probes", "noop,oracle", "--receipt", str(receipt), "--run-dir", str(tmp_path / "run"))
    assert r.returncode == 0, r.stderr[-3000:]
    doc = _receipt(receipt)
    assert _outcomes(doc) == {"oracle-solves": "kept", "oracle-half": "kept", "oracle-wrong-path": "oracle_fails"}
    by_id = {t["task_id"]: t for t in doc["tasks"]}
    assert all(t["rewards"] == [0.0] for t in doc["tasks"])
    solves, half, wrong = (by_id[t]["oracle"] for t in ORACLE_DEMOS)
    assert (solves["outcome"], solves["reward"], solves["exit_code"]) == ("oracle_passes", 1.0, 0)
    assert "wrote /home/user/status.txt" in solves["script_tail"] and solves["source"] == "bundle"
    assert (half["outcome"], half["reward"]) == ("oracle_partial", 0.5)
    assert "oracle_partial" not in by_id["oracle-half"]["detail"] and "flagged: partial" in by_id["oracle-half"]["detail"]
    assert (wrong["outcome"], wrong["reward"]) == ("oracle_fails", 0.0)
    assert "/home/user/Documents/report.txt: missing or wrong" in by_id["oracle-wrong-path"]["detail"]
    assert doc["summary"]["by_oracle"] == {"oracle_passes": 1, "oracle_partial": 1, "oracle_fails": 1}
    assert doc["summary"]["by_reason"] == {"oracle_fails": 1}
    assert "oracle: oracle_passes 1, oracle_partial 1, oracle_fails 1" in r.stdout  # the summary line
    assert all(t["timings"]["oracle_s"] > 0 for t in doc["tasks"])
    # --oracle DIR: a script of the user's replaces the bundle's (this one writes where the reward reads).
    od = tmp_path / "oracles"
    od.mkdir()
    (od / "oracle-wrong-path.py").write_text(
        "import os\nos.makedirs('/home/user/Documents', exist_ok=True)\n"
        "open('/home/user/Documents/report.txt', 'w').write('ok')\n")
    r = cli(*base, "--probes", "noop,oracle", "--oracle", str(od), "--run-dir", str(tmp_path / "run"), "--json")
    assert r.returncode == 0, r.stderr[-3000:]
    doc2 = json.loads(r.stdout)
    assert doc2["summary"]["resumed"] == 2 and doc2["summary"]["probed"] == 1  # only its oracle changed
    line = {t["task_id"]: t for t in doc2["tasks"]}["oracle-wrong-path"]
    assert line["outcome"] == "kept" and line["oracle"]["outcome"] == "oracle_passes"
    assert line["oracle"]["source"] == "oracle_dir"
    # The default (--probes noop): no oracle runs (and the earlier receipts do not settle these settings).
    r = cli(*base, "--run-dir", str(tmp_path / "run"), "--json")
    assert r.returncode == 0, r.stderr[-3000:]
    doc3 = json.loads(r.stdout)
    assert doc3["kept"] == list(ORACLE_DEMOS) and all(t["oracle"] is None for t in doc3["tasks"])
    assert doc3["summary"]["probed"] == 3
    bad = cli(*base, "--probes", "noop,fuzz", "--run-dir", str(tmp_path / "run"))
    assert bad.returncode == 2 and "--probes" in bad.stderr and "Traceback" not in bad.stderr
    # A golden_patch.py that cannot be an oracle (binary): probed without one, and the line says why.
    shutil.copytree(demo_root / "oracle-solves", demo_root / "oracle-binary")
    (demo_root / "oracle-binary" / "golden_patch.py").write_bytes(b"\x7fELF\x00\x01 not a script")
    cfg = json.loads((demo_root / "oracle-binary" / "config.json").read_text())
    (demo_root / "oracle-binary" / "config.json").write_text(json.dumps({**cfg, "id": "oracle-binary"}))
    ids.write_text("oracle-binary\n")
    r = cli(*base, "--probes", "noop,oracle", "--run-dir", str(tmp_path / "run-binary"), "--json")
    assert r.returncode == 0, r.stderr[-3000:]
    line = json.loads(r.stdout)["tasks"][0]
    assert line["outcome"] == "kept" and line["oracle"] is None
    assert line["oracle_note"].startswith("no oracle run: ") and "binary" in line["oracle_note"], line
    assert check_with_jsonschema("receipt_line", line) == []


VANDAL_DEMOS = ("vandal-except-pass", "vandal-absent-check", "delete-the-file", "oracle-solves")


@pytest.mark.docker
def test_vandal_probe(sandbox_image: str, demo_root: Path, tmp_path: Path) -> None:
    """--probes noop,vandal,oracle: the files the setup made (the golden's diff against the base image)
    removed in one fork and garbled in another. Rewards that pay for that in both (an `except:` that
    prints 1.0, a check that only tests something is absent) are dropped with the files named; the
    legitimate "delete the file" task passes only `remove` and is kept, flagged; a sound reward resists."""
    ids = tmp_path / "ids.txt"
    ids.write_text("\n".join(VANDAL_DEMOS) + "\n")
    receipt = tmp_path / "receipt.json"
    r = cli(str(demo_root), "--image", IMAGE, "--ids", str(ids), "--repeats", "1", "--concurrency", "2",
            "--probes", "noop,vandal,oracle", "--receipt", str(receipt), "--run-dir", str(tmp_path / "run"))
    assert r.returncode == 0, r.stderr[-3000:]
    doc = _receipt(receipt)
    assert _outcomes(doc) == {"vandal-except-pass": "reward_passes_vandalism",
                              "vandal-absent-check": "reward_passes_vandalism",
                              "delete-the-file": "kept", "oracle-solves": "kept"}
    by_id = {t["task_id"]: t for t in doc["tasks"]}
    v = {t: by_id[t]["vandal"] for t in VANDAL_DEMOS}
    assert v["vandal-except-pass"]["files"] == ["/home/user/people.csv"]
    assert v["vandal-except-pass"]["rewards"] == {"remove": 1.0, "garbage": 1.0}
    assert "/home/user/people.csv" in by_id["vandal-except-pass"]["detail"]
    assert v["vandal-absent-check"]["files"] == ["/home/user/app.conf"]
    assert v["delete-the-file"]["outcome"] == "vandal_passes_remove"
    assert v["delete-the-file"]["files"] == ["/home/user/cache/README.txt", "/home/user/cache/old.bin"]
    assert v["delete-the-file"]["rewards"] == {"remove": 1.0, "garbage": 0.0}
    assert "flagged: the reward passes one vandal variant" in by_id["delete-the-file"]["detail"]
    assert v["oracle-solves"]["outcome"] == "vandal_resists" and v["oracle-solves"]["files"] == ["/home/user/status.txt"]
    assert by_id["oracle-solves"]["oracle"]["outcome"] == "oracle_passes"
    assert doc["summary"]["by_vandal"] == {"vandal_resists": 1, "vandal_passes_remove": 1, "reward_passes_vandalism": 2}
    assert doc["summary"]["probes"] == ["noop", "vandal", "oracle"]


def _generated_set(root: Path) -> tuple[dict[str, str], Path, Path]:
    """Bundles covering every outcome the probe decides itself, plus a triage report and
    recorded rollouts. Returns (expected outcome per task, triage path, rollouts path)."""
    write_setup = lambda name, text: [  # noqa: E731
        {"type": "execute", "parameters": {"command": f"rm -f /home/user/{name}; echo setup-{text} > /home/user/setup.txt"}}]
    make_bundle(root, "g-kept", reward=FILE_REWARD.format(name="out.txt", want="done"), config=write_setup("out.txt", "a"))
    make_bundle(root, "g-replay-ok", reward=FILE_REWARD.format(name="ok.txt", want="yes"), config=write_setup("ok.txt", "b"))
    make_bundle(root, "g-replay-bad", reward=FILE_REWARD.format(name="bad.txt", want="yes"), config=write_setup("bad.txt", "c"))
    make_bundle(root, "g-zero", reward="print('REWARD: 1.0')\n")
    make_bundle(root, "g-nondet", reward="import random\nprint(f'REWARD: {random.random() * 0.9:.6f}')\n")
    make_bundle(root, "g-setup", reward="print('REWARD: 0.0')\n",
                config=[{"type": "execute", "parameters": {"command": "echo failing on purpose; exit 3"}}])
    make_bundle(root, "g-postfork", reward="print('REWARD: 0.0')\n",
                extra={"shinken_post_fork": [{"type": "execute", "parameters": {"command": "exit 4"}}]})
    make_bundle(root, "g-crash", reward="raise RuntimeError('reward blew up')\n")
    make_bundle(root, "g-slow", reward="import time\ntime.sleep(3600)\nprint('REWARD: 0.0')\n")
    make_bundle(root, "g-blocked", reward="print('REWARD: 0.0')\n")
    # Left running at commit: a process that is relaunched as it was started (kept, tier relaunch),
    # and a dialog whose title is drawn anew each time the setup or a relaunch runs (neither tier
    # reproduces it: dropped for fidelity, naming the windows).
    make_bundle(root, "g-relaunch", reward="print('REWARD: 0.0')\n", fidelity=False,
                extra={"config": [{"type": "launch", "parameters": {"command": ["sleep", "1000"]}}]})
    make_bundle(root, "g-fidelity", reward="print('REWARD: 0.0')\n", fidelity=False,
                extra={"config": [{"type": "launch", "parameters": {"command": [
                    "bash", "-c", 'zenity --info --title "draw-$RANDOM$RANDOM" --text hi; true']}},
                    {"type": "sleep", "parameters": {"seconds": 1}}]})
    d = make_bundle(root, "g-defective", reward="print('REWARD: 0.0')\n")
    (d / "reward.py").unlink()
    expected = {
        "g-kept": "kept", "g-replay-ok": "kept", "g-replay-bad": "replay_mismatch", "g-zero": "zero_signal",
        "g-nondet": "nondeterministic", "g-setup": "setup_error", "g-postfork": "setup_error",
        "g-crash": "reward_error", "g-slow": "reward_timeout", "g-blocked": "blocked", "g-fidelity": "fidelity",
        "g-relaunch": "kept",
        "g-defective": "defective",
    }
    triage = root.parent / "triage.json"
    triage.write_text(json.dumps({"tasks": [
        {"id": t, "verdict": "blocked" if t == "g-blocked" else ("defective" if t == "g-defective" else "runnable"),
         "reasons": [{"code": "missing_app", "detail": "needs an app the image lacks"}] if t == "g-blocked" else []}
        for t in expected]}))
    call = lambda name, args: {"type": "function_call", "name": name, "arguments": json.dumps(args), "call_id": name}  # noqa: E731
    rollouts = root.parent / "rollouts.jsonl"
    rows = [
        {"task_id": "g-replay-ok", "reward": 1.0, "response": {"output": [
            call("computer_exec", {"command": "echo yes > /home/user/ok.txt"}), call("computer_done", {})]}},
        {"task_id": "g-replay-ok", "reward": 0.0, "response": {"output": [call("computer_done", {})]}},
        # Recorded as a success, but its tool calls do not produce the file: does not reproduce.
        {"task_id": "g-replay-bad", "reward": 1.0, "response": {"output": [
            call("computer_exec", {"command": "echo no > /home/user/bad.txt"})]}},
    ]
    rollouts.write_text("".join(json.dumps(r) + "\n" for r in rows))
    return expected, triage, rollouts


# g-slow never finishes and is cut at this timeout; every other reward must finish within
# it. A trivial reward took 0.4-0.9 s at load 45 (python3 start in a fork); 3 s was too
# tight on a busy 2-core box. The wait costs little: the other worker probes meanwhile.
GENERATED_REWARD_TIMEOUT_S = 20


@pytest.mark.docker
def test_generated_set_every_drop_reason(sandbox_image: str, tmp_path: Path) -> None:
    root = tmp_path / "tasks"
    expected, triage, rollouts = _generated_set(root)
    receipt = tmp_path / "receipt.json"
    r = cli(str(root), "--image", IMAGE, "--receipt", str(receipt), "--run-dir", str(tmp_path / "run"),
            "--triage", str(triage), "--replay", str(rollouts), "--repeats", "2", "--concurrency", "2",
            "--reward-timeout", str(GENERATED_REWARD_TIMEOUT_S))
    assert r.returncode == 0, r.stderr[-3000:]
    doc = _receipt(receipt)
    assert _outcomes(doc) == expected
    by_id = {t["task_id"]: t for t in doc["tasks"]}
    assert [x["match"] for x in by_id["g-replay-ok"]["replay"]] == [True, True]
    assert by_id["g-replay-ok"]["replay"][0]["reward"] == 1.0
    assert by_id["g-replay-bad"]["replay"][0] == {"rollout": 0, "recorded": 1.0, "reward": 0.0, "match": False,
                                                 "calls": 1, "error": None, "reward_tail": "REWARD: 0.0"}
    assert len(set(by_id["g-nondet"]["rewards"])) == 2
    assert "missing_app" in by_id["g-blocked"]["detail"]
    assert by_id["g-defective"]["detail"].startswith("missing_reward")
    assert set(doc["summary"]["by_reason"]) == set(expected.values()) - {"kept"}
    assert doc["summary"]["kept"] == 3 and doc["summary"]["dropped"] == len(expected) - 3
    # tiers: nothing running at commit -> snapshot; a relaunch that shows the golden's desktop ->
    # relaunch; neither relaunch nor a fresh setup draws the same dialog -> dropped, saying so
    assert by_id["g-kept"]["tier"] == "snapshot" and by_id["g-relaunch"]["tier"] == "relaunch"
    assert by_id["g-relaunch"]["lost_processes"] == ["sleep 1000"]
    # K=2: a golden built in this run scores one no-op on its own build computer and one on a
    # relaunched, checked fork; a golden found from an earlier run (these bundles are not salted)
    # has no build computer, so both are checked forks
    for tid, tier in (("g-relaunch", "relaunch"), ("g-kept", "snapshot")):
        line = by_id[tid]
        built = not line["timings"]["golden_reused"]
        assert line["start_state"]["computers"] == (["golden", tier] if built else [tier, tier]), line
        assert line["start_state"]["checked"] == ((1 if built else 2) if tier == "relaunch" else 0), line
    fid = by_id["g-fidelity"]
    assert fid["tier"] is None and "relaunch: missing dialog 'draw-" in fid["detail"]
    assert "reprovision: missing dialog 'draw-" in fid["detail"] and "unexpected dialog 'draw-" in fid["detail"]


def _quick_set(root: Path, n: int, tag: str) -> dict[str, str]:
    """n small CLI tasks (distinct content, so distinct goldens) plus one zero-signal."""
    expected = {}
    for i in range(n):
        tid = f"{tag}-{i}"
        make_bundle(root, tid, reward=FILE_REWARD.format(name=f"f{i}.txt", want="x"),
                    config=[{"type": "execute", "parameters": {"command": f"echo {tag} {i} > /home/user/seed.txt"}}])
        expected[tid] = "kept"
    make_bundle(root, f"{tag}-zero", reward="print('REWARD: 1.0')\n",
                config=[{"type": "execute", "parameters": {"command": f"echo {tag} > /home/user/seed.txt"}}])
    expected[f"{tag}-zero"] = "zero_signal"
    return expected


def _lines(run_dir: Path) -> list[dict]:
    return read_lines(run_dir / "receipts.jsonl").lines


def _wait_for_lines(run_dir: Path, n: int, proc: subprocess.Popen, timeout: float = 300) -> list[dict]:
    end = time.monotonic() + timeout
    while time.monotonic() < end:
        lines = _lines(run_dir)
        if len(lines) >= n:
            return lines
        if proc.poll() is not None:
            raise AssertionError(f"probe exited early ({proc.returncode}): {proc.stderr.read()[-3000:]}")
        time.sleep(0.05)
    raise AssertionError(f"no {n} receipt lines within {timeout} s")


def _popen(args: list[str], env: dict | None = None) -> subprocess.Popen:
    return subprocess.Popen([sys.executable, "-m", "shinken.cli.main", "probe", *args], cwd=REPO, text=True,
                            stdout=subprocess.PIPE, stderr=subprocess.PIPE, env={**os.environ, **(env or {})},
                            start_new_session=True)


@pytest.mark.docker
def test_sigkill_midway_then_rerun_redoes_nothing(sandbox_image: str, docker_client, tmp_path: Path) -> None:
    root = tmp_path / "tasks"
    expected = _quick_set(root, 5, "k")  # stable content: goldens are reused by later test runs
    run_dir, receipt = tmp_path / f"probe-kill-{os.getpid()}", tmp_path / "receipt.json"
    args = [str(root), "--image", IMAGE, "--receipt", str(receipt), "--run-dir", str(run_dir), "--repeats", "2"]
    proc = _popen(args)
    try:
        _wait_for_lines(run_dir, 2, proc)
        os.killpg(proc.pid, signal.SIGKILL)  # no cleanup, no flush: the worst case
        proc.wait(30)
    finally:
        if proc.poll() is None:
            os.killpg(proc.pid, signal.SIGKILL)
        _remove_run_containers(docker_client, run_dir.name)
    before = _lines(run_dir)
    assert 2 <= len(before) < len(expected), "the kill must land midway"
    assert not receipt.exists()
    r = cli(*args, "--json")
    assert r.returncode == 0, r.stderr[-3000:]
    doc = json.loads(r.stdout)
    assert _outcomes(doc) == expected
    after = _lines(run_dir)
    # Finished tasks were not redone: their lines are untouched and each task has one line.
    assert after[: len(before)] == before
    assert sorted(ln["task_id"] for ln in after) == sorted(expected)
    assert doc["summary"]["resumed"] == len(before)
    assert doc["summary"]["probed"] == len(expected) - len(before)
    assert json.loads(receipt.read_text())["kept"] == doc["kept"]


# --- a second, private Docker engine that the test may restart ----------------------------------


@pytest.fixture()
def private_dockerd(sandbox_image: str):
    from shinken.runtime import cache_root

    # a data root kept between runs: the task image is copied in once, not at every run
    with private_engine("h6", "shinken-h6-test", (IMAGE,), cache=cache_root() / "probe-h6-engine") as d:
        yield d


@pytest.mark.docker
def test_daemon_restart_is_retried_not_dropped(private_dockerd: PrivateDockerd, tmp_path: Path) -> None:
    root = tmp_path / "tasks"
    expected = _quick_set(root, 4, "r")
    run_dir, receipt = tmp_path / "probe-restart", tmp_path / "receipt.json"
    env = {"DOCKER_HOST": private_dockerd.host, "SHINKEN_PROBE_ENGINE_WAIT": "60"}
    args = [str(root), "--image", IMAGE, "--receipt", str(receipt), "--run-dir", str(run_dir), "--repeats", "2",
            "--retries", "4"]
    proc = _popen(args, env)
    try:
        _wait_for_lines(run_dir, 1, proc)
        private_dockerd.stop()  # kills every container of that engine mid-probe
        time.sleep(1.0)
        private_dockerd.start()
        out, errs = proc.communicate(timeout=600)
    finally:
        if proc.poll() is None:
            os.killpg(proc.pid, signal.SIGKILL)
    assert proc.returncode == 0, errs[-3000:]
    doc = _receipt(receipt)
    assert _outcomes(doc) == expected  # no false drops, no infra_error
    assert doc["summary"]["infra_retries"] >= 1, "the restart must have hit a task in flight"
    retried = [t for t in doc["tasks"] if t["attempts"] > 1]
    assert retried and all(t["infra_errors"] for t in retried)

    # An engine that stays down: infra_error only after the retries, exit 1, and the
    # next run (engine back) finishes those tasks instead of trusting the failure.
    root2 = tmp_path / "tasks2"
    expected2 = _quick_set(root2, 3, "d")
    run2, receipt2 = tmp_path / "probe-down", tmp_path / "receipt2.json"
    args2 = [str(root2), "--image", IMAGE, "--receipt", str(receipt2), "--run-dir", str(run2), "--repeats", "1",
             "--retries", "1"]
    env2 = {**env, "SHINKEN_PROBE_ENGINE_WAIT": "2"}
    proc = _popen(args2, env2)
    try:
        _wait_for_lines(run2, 1, proc)
        private_dockerd.stop()
        out, errs = proc.communicate(timeout=300)
    finally:
        if proc.poll() is None:
            os.killpg(proc.pid, signal.SIGKILL)
    assert proc.returncode == 1, errs[-3000:]
    doc = _receipt(receipt2)
    infra = [t for t in doc["tasks"] if t["reason"] == "infra_error"]
    assert infra and all(t["attempts"] == 2 for t in infra)
    assert all(_outcomes(doc)[t] in (e, "infra_error") for t, e in expected2.items())
    private_dockerd.start()
    r = cli(*args2, "--json", env=env2)
    assert r.returncode == 0, r.stderr[-3000:]
    doc = json.loads(r.stdout)
    assert _outcomes(doc) == expected2
    assert doc["summary"]["probed"] == len(infra)


def _keep_only(root: Path, *names: str) -> None:
    """Leave only the named tasks in a private demo copy (new demos must not lengthen these tests)."""
    for d in root.iterdir():
        if d.is_dir() and d.name not in names:
            shutil.rmtree(d)
    assert sorted(d.name for d in root.iterdir() if d.is_dir()) == sorted(names)


@pytest.mark.docker
def test_ray_executor_gives_the_same_receipt(sandbox_image: str, demo_root: Path, tmp_path: Path) -> None:
    from shinken.probes.executors import LocalExecutor, RayExecutor
    from shinken.probes.pipeline import ProbeRequest, run_probe

    _keep_only(demo_root, "hello-file", "zero-signal", "broken-reward")  # short: CLI tasks on the linux image
    docs = {}
    for name, ex in (("local", LocalExecutor(2)), ("ray", RayExecutor(2, num_cpus=2))):
        req = ProbeRequest(task_root=demo_root, image=IMAGE, run_dir=tmp_path / f"run-{name}",
                           receipt=tmp_path / f"{name}.json", state_fidelity="filesystem", repeats=2, concurrency=2,
                           executor=name)
        try:
            docs[name] = run_probe(req, executor=ex)
        finally:
            if isinstance(ex, RayExecutor):
                ex.shutdown()
    assert docs["ray"]["summary"]["executor"] == "ray"
    assert decision_view(docs["ray"]) == decision_view(docs["local"])
    assert _outcomes(docs["ray"]) == {"hello-file": "kept", "zero-signal": "zero_signal",
                                      "broken-reward": "reward_error"}
    # Written by the driver: one line per task in the Ray run's own log.
    assert sorted(ln["task_id"] for ln in _lines(tmp_path / "run-ray")) == sorted(docs["ray"]["kept"] + [
        d["id"] for d in docs["ray"]["dropped"]])


@pytest.mark.docker
def test_ray_cluster_with_docker_nodes_via_cli(sandbox_image: str, demo_root: Path, tmp_path: Path) -> None:
    """`--executor ray --ray-address`: a head started like a real cluster's (`shinken fleet head`,
    token authentication on), advertising the shinken_docker resource; the driver reaches it with
    the token, results come back to the driver's receipts."""
    _keep_only(demo_root, "hello-file", "zero-signal")
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        port = s.getsockname()[1]
    token = {"RAY_AUTH_TOKEN_PATH": str(tmp_path / "ray-token")}  # made by the head
    env = {**{k: v for k, v in os.environ.items() if not k.startswith("RAY_AUTH")}, **token,
           "SHINKEN_RAY_START_ARGS": """--num-cpus=2 --resources='{"shinken_docker": 2}'"""}  # shell words
    log = tmp_path / "head.log"
    with open(log, "wb") as out:
        head = subprocess.Popen([str(Path(sys.executable).parent / "shinken"), "fleet", "head", "--bind", "127.0.0.1",
                                 "--port", str(port)], env=env, cwd=tmp_path, start_new_session=True,
                                stdout=out, stderr=subprocess.STDOUT)
    try:
        deadline = time.monotonic() + 300  # the driver checks the head answers: wait for it first
        while "Ray runtime started" not in log.read_text(errors="replace"):
            assert head.poll() is None and time.monotonic() < deadline, log.read_text(errors="replace")[-2000:]
            time.sleep(0.5)
        receipt = tmp_path / "receipt.json"
        r = cli(str(demo_root), "--image", IMAGE, "--receipt", str(receipt), "--run-dir", str(tmp_path / "run"),
                "--state-fidelity", "filesystem", "--executor", "ray", "--ray-address", f"127.0.0.1:{port}",
                "--concurrency", "2", env=token, timeout=300)
        assert r.returncode == 0, r.stderr[-3000:]
        doc = _receipt(receipt)
        assert doc["summary"]["executor"] == "ray"
        assert _outcomes(doc) == {"hello-file": "kept", "zero-signal": "zero_signal"}
        assert sorted(ln["task_id"] for ln in _lines(tmp_path / "run")) == ["hello-file", "zero-signal"]
    finally:
        # The head and everything it started share its process group (ours, by id).
        try:
            os.killpg(head.pid, signal.SIGTERM)
            head.wait(20)
        except (ProcessLookupError, subprocess.TimeoutExpired):
            pass
        try:
            os.killpg(head.pid, signal.SIGKILL)
        except ProcessLookupError:
            pass
        cur = Path("/tmp/ray/ray_current_cluster")  # `ray start` leaves its address here
        if cur.is_file() and cur.read_text().strip().endswith(f":{port}"):
            cur.unlink()


@pytest.mark.docker
def test_image_is_resolved_once_even_when_the_tag_moves(sandbox_image: str, docker_client, tmp_path: Path) -> None:
    """`shinken image build` in another terminal moves the tag mid-run: every golden is still
    built on the image id the run resolved at its start, the one its receipt lines record."""
    import uuid

    from shinken.probes.executors import LocalExecutor
    from shinken.probes.pipeline import ProbeRequest, run_probe
    from shinken.sandbox.docker_provider import DockerProvider
    from shinken.sandbox.ownership import LABEL_BASE_IMAGE, LABEL_KIND, LABEL_RUN

    tag = uuid.uuid4().hex[:12]
    repo = "shinken-test/retag"
    ref = f"{repo}:{tag}"
    first = docker_client.images.get(sandbox_image).id
    docker_client.api.tag(first, repo, tag)
    box = run_container(docker_client, first, ["true"], create_only=True,
                        labels=labels_for("build", task="test-retag", extra={"shinken-test": tag}))
    second = box.commit(repository="shinken-test/retag-other", tag=tag, conf={"Labels": {"shinken-test": tag}}).id
    box.remove()
    assert second != first
    root = tmp_path / "tasks"
    for t in ("retag-a", "retag-b"):
        # salted with the run's tag: content-addressed goldens of another run (another session
        # running this test at the same time) are neither reused nor removed under this one
        make_bundle(root, t, reward="print('REWARD: 0')\n", config=[
            {"type": "execute", "parameters": {"command": f"echo {t} {tag} > /home/user/{t}.txt"}}])
    triage = tmp_path / "triage.json"
    triage.write_text(json.dumps({"tasks": [{"id": t, "verdict": "runnable", "reasons": []}
                                            for t in ("retag-a", "retag-b")]}))
    run_id = f"retag-{tag}"

    class RetaggedMidRun(DockerProvider):
        def ensure_golden(self, bundle, image_id, **kw):
            docker_client.api.tag(second, repo, tag, force=True)  # the rebuild lands now
            return super().ensure_golden(bundle, image_id, **kw)

    try:
        req = ProbeRequest(task_root=root, image=ref, triage=triage, run_dir=tmp_path / run_id, repeats=1,
                           state_fidelity="filesystem")
        doc = run_probe(req, executor=LocalExecutor(1, provider_factory=lambda: RetaggedMidRun(run_id=run_id)))
        assert doc["image"]["id"] == first and sorted(doc["kept"]) == ["retag-a", "retag-b"], doc["dropped"]
        assert {t["image_id"] for t in doc["tasks"]} == {first}
        goldens = docker_client.api.images(filters={"label": [f"{LABEL_KIND}=golden", f"{LABEL_RUN}={run_id}"]})
        assert len(goldens) == 2
        assert {g["Labels"][LABEL_BASE_IMAGE] for g in goldens} == {first}
        assert docker_client.images.get(ref).id == second  # the tag did move
    finally:
        from shinken.probes.runner import drain_cleanup

        drain_cleanup()
        for g in docker_client.api.images(filters={"label": f"{LABEL_RUN}={run_id}"}):
            docker_client.api.remove_image(g["Id"], force=True)
        for image in (ref, f"shinken-test/retag-other:{tag}"):
            try:
                docker_client.api.remove_image(image)
            except Exception:
                pass
