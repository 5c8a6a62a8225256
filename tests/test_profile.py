"""`shinken profile` without Docker: the reader on rollouts recorded from the real NeMo Gym
0.7.0 (tests/data/gym_rollouts/, written by the run in test_profile_gym.py), the band edges,
the control sample, accumulation and the one-line errors."""

from __future__ import annotations

import json
import shutil
from pathlib import Path

import pytest

from tests.cli_runner import run_cli as shinken

from shinken.errors import ShinkenError
from shinken.profiles.bands import Settings, band_of, control_sample
from shinken.profiles.rollouts import merge, read_file
from shinken.schemas import check_with_jsonschema
from shinken.bundles.selection import read_task_ids as read_ids

REPO = Path(__file__).resolve().parent.parent
DEMO = REPO / "demo"
DATA = REPO / "tests" / "data" / "gym_rollouts"
RUN1, RUN2 = DATA / "run1" / "rollouts.jsonl", DATA / "run2" / "rollouts.jsonl"
SHEET = "9a1f6c2e-5b3d-4e8a-9c71-2f0d4b6a8e13"




def _lines(path: Path) -> list[dict]:
    return [json.loads(x) for x in path.read_text().splitlines() if x.strip()]


def test_reader_takes_what_gym_wrote() -> None:
    rows = _lines(RUN1)
    got = read_file(RUN1)
    assert len(got) == len(rows)
    for o, row in zip(got, rows):
        assert o.task_id == row["task_id"] and o.bundle_hash == row["bundle_hash"]
        assert o.key == "resp:" + row["response"]["id"]
        assert o.status == ("masked" if row["mask_sample"] else "scored")
        calls = [i for i in row["response"]["output"] if i["type"] == "function_call"]
        replies = [i for i in row["response"]["output"] if i["type"] == "message"]
        assert o.tool_calls == len(calls) and o.turns == len(calls) + len(replies)  # one call per reply here
        assert o.total_tokens == row["response"]["usage"]["total_tokens"]
        assert check_with_jsonschema("profile_outcome", o.to_json()) == []
    masked = [o for o in got if o.status == "masked"]
    # the file says shinken's older "infra": read in Gym's vocabulary
    assert len(masked) == 1 and masked[0].failure_kind == "provider_unavailable" and masked[0].task_id == "hello-file"


def test_task_named_by_the_materialized_inputs_when_the_rollout_does_not(tmp_path: Path) -> None:
    run = tmp_path / "run"
    shutil.copytree(RUN1.parent, run)
    rows = _lines(run / "rollouts.jsonl")
    (run / "rollouts.jsonl").write_text("".join(json.dumps({k: v for k, v in r.items() if k != "task_id"}) + "\n"
                                                for r in rows))
    assert [o.task_id for o in read_file(run / "rollouts.jsonl")] == [r["task_id"] for r in rows]
    (run / "rollouts_materialized_inputs.jsonl").unlink()
    with pytest.raises(ShinkenError, match="names no task_id"):
        read_file(run / "rollouts.jsonl")


def test_a_failed_attempt_is_superseded_by_a_later_rollout_of_its_slot(tmp_path: Path) -> None:
    run = tmp_path / "run"
    shutil.copytree(RUN1.parent, run)
    first = _lines(run / "rollouts.jsonl")[0]
    # A sidecar row as rollout_collection writes one for a /run that came back without a result.
    slot = {k: first[k] for k in ("task_id", "_ng_task_index", "_ng_rollout_index")}
    other = {**slot, "_ng_rollout_index": 99}
    fail = {"_ng_failure_class": "agent_run_error", "_ng_failure_message": "500", "_ng_failure_http_status": 500}
    (run / "rollouts_failures.jsonl").write_text(json.dumps({**slot, **fail}) + "\n" + json.dumps({**other, **fail}) + "\n")
    failures = read_file(run / "rollouts_failures.jsonl")
    assert [o.status for o in failures] == ["failed", "failed"]
    merged, added = merge(failures, read_file(run / "rollouts.jsonl"))
    assert [o.slot for o in merged if o.status == "failed"] == [failures[1].slot]  # slot 99 never succeeded
    assert added == len(_lines(run / "rollouts.jsonl"))
    again, added = merge(merged, read_file(run / "rollouts.jsonl"))
    assert added == 0 and len(again) == len(merged)


@pytest.mark.parametrize("rate,scored,band", [
    (1.0, 4, "too_easy"), (0.9, 10, "too_easy"), (0.75, 4, "band"), (0.11, 100, "band"), (0.1, 10, "too_hard"),
    (0.0, 4, "too_hard"), (0.5, 3, "insufficient"), (None, 0, "insufficient"),
])
def test_band_edges_belong_to_the_bands_outside(rate: float | None, scored: int, band: str) -> None:
    assert band_of(scored, rate, Settings()) == band


def test_control_is_a_seeded_sample_of_the_measured_tasks() -> None:
    pool = [f"t{i}" for i in range(50)]
    a, b = control_sample(pool, 10, 3), control_sample(list(reversed(pool)), 10, 3)
    assert a == b and len(a) == 10 and set(a) <= set(pool) and a == sorted(a)
    assert control_sample(pool, 10, 4) != a
    assert control_sample(pool[:3], 10, 3) == pool[:3]


def test_cli_writes_profile_band_control_and_accumulates(tmp_path: Path) -> None:
    out = tmp_path / "prof"
    r = shinken("profile", str(RUN1), "--task-root", str(DEMO), "--out", str(out), "--json")
    assert r.returncode == 0, r.stderr
    doc = json.loads(r.stdout)
    assert check_with_jsonschema("profile", doc) == []
    assert doc["counts"] == {"too_easy": 1, "band": 1, "too_hard": 1, "insufficient": 1}
    band = json.loads((out / "band.json").read_text())
    assert check_with_jsonschema("task_ids", band) == [] and read_ids(out / "band.json") == band == [SHEET]
    assert read_ids(out / "control.json") == json.loads((out / "control.json").read_text())
    by = {t["task_id"]: t for t in doc["tasks"]}
    assert by["hello-file"]["masked"] == 1 and by["hello-file"]["band"] == "insufficient"
    # partial credit: fails at the 1.0 threshold, passes at 0.5
    sheet = by[SHEET]
    assert 0 < sheet["passed"] < sheet["scored"] and sheet["mean_reward"] > sheet["pass_rate"]
    r = shinken("profile", str(RUN1), "--task-root", str(DEMO), "--out", str(tmp_path / "half"), "--json",
                "--pass-threshold", "0.5")
    assert json.loads(r.stdout)["counts"]["too_easy"] == 2  # zero-signal and the sheet
    # more rollouts in a second run add up; the same file again adds nothing
    r = shinken("profile", str(RUN2), "--task-root", str(DEMO), "--out", str(out), "--json")
    acc = json.loads(r.stdout)
    assert acc["totals"]["rollouts"] == len(_lines(RUN1)) + len(_lines(RUN2))
    assert {t["task_id"]: t["band"] for t in acc["tasks"]}["hello-file"] != "insufficient"
    r = shinken("profile", str(RUN1.parent), "--task-root", str(DEMO), "--out", str(out), "--json")
    assert json.loads(r.stdout)["reads"][-1]["new"] == 0
    # --no-control removes a control that would no longer match the band; --reset forgets run 2
    r = shinken("profile", str(RUN1), "--task-root", str(DEMO), "--out", str(out), "--no-control", "--reset", "--json")
    assert json.loads(r.stdout)["tasks"] == doc["tasks"] and not (out / "control.json").exists()


def test_solved_rollouts_become_a_replay_file(tmp_path: Path) -> None:
    """solved.jsonl: one rollout per task that scored 1.0 (not masked, with tool calls), as Gym wrote
    it, readable by `shinken probe --replay` (probes.rollouts) with the recorded reward."""
    from shinken.probes.rollouts import load_rollouts

    out = tmp_path / "prof"
    r = shinken("profile", str(RUN1), "--task-root", str(DEMO), "--out", str(out))
    assert r.returncode == 0, r.stderr
    assert "solved rollout(s) to replay" in r.stderr
    rows = [json.loads(x) for x in (out / "solved.jsonl").read_text().splitlines()]
    want = {d["task_id"] for d in _lines(RUN1) if d["reward"] >= 1.0 and not d.get("mask_sample")
            and any(o.get("type") == "function_call" for o in d["response"]["output"])}
    assert want and [d["task_id"] for d in rows] == sorted(want)
    assert all(check_with_jsonschema("gym_rollout", d) == [] for d in rows)
    replays = load_rollouts(out / "solved.jsonl")
    assert set(replays) == want and all(len(v) == 1 and v[0].reward == 1.0 and v[0].calls for v in replays.values())


def test_a_stale_bundle_is_excluded(tmp_path: Path) -> None:
    root = tmp_path / "tasks"
    shutil.copytree(DEMO, root)
    (root / "hello-file" / "reward.py").write_text((root / "hello-file" / "reward.py").read_text() + "\n# edited\n")
    r = shinken("profile", str(RUN1), "--task-root", str(root), "--out", str(tmp_path / "p"), "--json")
    t = {t["task_id"]: t for t in json.loads(r.stdout)["tasks"]}["hello-file"]
    assert t["stale"] == t["rollouts"] and t["scored"] == 0 and t["excluded_by_kind"] == {"stale_bundle": t["rollouts"]}


def test_receipt_lists_unmeasured_kept_tasks_and_their_tier(tmp_path: Path) -> None:
    receipt = json.loads((REPO / "tests" / "data" / "demo_receipt.json").read_text())
    for line in receipt["tasks"]:
        line["tier"] = "snapshot" if line["outcome"] == "kept" else None
    path = tmp_path / "receipt.json"
    path.write_text(json.dumps(receipt))
    r = shinken("profile", str(RUN1), "--task-root", str(DEMO), "--out", str(tmp_path / "p"), "--receipt", str(path),
                "--json")
    assert r.returncode == 0, r.stderr
    by = {t["task_id"]: t for t in json.loads(r.stdout)["tasks"]}
    assert set(receipt["kept"]) <= set(by)
    assert {by[k]["tier"] for k in receipt["kept"]} == {"snapshot"}


@pytest.mark.parametrize("args,message", [
    ([], "Missing argument"),
    (["{run1}", "--out", "{tmp}/p"], "Missing option '--task-root'"),
    (["{tmp}/nope.jsonl", "--task-root", "{demo}", "--out", "{tmp}/p"], "no such rollouts file or folder"),
    (["{rows}", "--task-root", "{demo}", "--out", "{tmp}/p"], "not a NeMo Gym rollout"),
    (["{demo}/hello-file/config.json", "--task-root", "{demo}", "--out", "{tmp}/p"], "not JSON"),
    (["{demo}/hello-file/reward.py", "--task-root", "{demo}", "--out", "{tmp}/p"], "not JSON"),
    (["{run1}", "--task-root", "{tmp}", "--out", "{tmp}/p"], "are not in the task root"),
    (["{run1}", "--task-root", "{tmp}/none", "--out", "{tmp}/p"], "task root is not a folder"),
    (["{run1}", "--task-root", "{demo}", "--out", "{tmp}/p", "--min-pass", "0.9", "--max-pass", "0.5"], "min-pass < max-pass"),
    (["{run1}", "--task-root", "{demo}", "--out", "{run1}"], "is not a folder"),
    (["{run1}", "--task-root", "{demo}", "--out", "{tmp}/p", "--receipt", "{run1}"], "not JSON"),
    (["{run1}", "--task-root", "{demo}", "--out", "{tmp}/p", "--min-rollouts", "0"], "at least 1"),
])
def test_bad_input_is_one_line_and_exit_2(tmp_path: Path, args: list[str], message: str) -> None:
    rows = tmp_path / "rows.jsonl"  # dataset rows, not rollouts
    rows.write_bytes((RUN1.parent / "rollouts_materialized_inputs.jsonl").read_bytes())
    subst = {"run1": str(RUN1), "tmp": str(tmp_path), "demo": str(DEMO), "rows": str(rows)}
    r = shinken("profile", *(a.format(**subst) for a in args))
    assert r.returncode == 2, (r.stdout, r.stderr)
    assert message in r.stderr and "Traceback" not in r.stderr, r.stderr


def test_a_corrupt_outcomes_file_names_the_fix(tmp_path: Path) -> None:
    out = tmp_path / "p"
    assert shinken("profile", str(RUN1), "--task-root", str(DEMO), "--out", str(out)).returncode == 0
    (out / "outcomes.jsonl").write_text("{not json\n")
    r = shinken("profile", str(RUN1), "--task-root", str(DEMO), "--out", str(out))
    assert r.returncode == 2 and "--reset" in r.stderr and "Traceback" not in r.stderr
