"""shinken probe: receipts (durable, resumable), and end-to-end probes on real Docker."""

from __future__ import annotations

import json
import os
from pathlib import Path

import orjson
import pytest

from shinken.errors import ShinkenError
from shinken.probes.receipts import ReceiptLog, read_lines
from shinken.probes.rollouts import load_rollouts
from shinken.schemas import check_with_jsonschema

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
        with pytest.raises(ValueError):
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
