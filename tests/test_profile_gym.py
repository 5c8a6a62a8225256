"""`shinken profile` over rollouts the real NeMo Gym 0.7.0 collects in the suite's one Gym
session (`gym eval run --num-repeats 4` against the shared demo workspace), with a policy that
solves each demo task with a known, seeded probability (tests/chance_policy.py), so every
task's figures and band are known before the run. In run 1 the policy kills one rollout's fork
mid-rollout (the server masks it); run 2 adds rollouts to the same profile. The report of this
demo run (triage + the session's probe receipt + the profile) is opened in headless Chromium."""

from __future__ import annotations

import json
import sys
from pathlib import Path

import pytest

sys.path.insert(0, str(Path(__file__).resolve().parent))
import chance_policy as cp  # noqa: E402
import gym_harness as gh  # noqa: E402
from tests.cli_runner import CliResult, run_cli  # noqa: E402
import report_check  # noqa: E402
import scripted_policy as sp  # noqa: E402

from shinken.schemas import check_with_jsonschema  # noqa: E402

pytestmark = [pytest.mark.docker, pytest.mark.slow]

DEMO = Path(__file__).resolve().parent.parent / "demo"
AGENT = "shinken_cua_simple_agent"
REPEATS = 4
SEED = 7
# Pass probability per demo task, for those the shared workspace holds: hello-file lands in
# the band (and loses one rollout to a killed fork in run 1, so it is measured only after
# run 2), zenity-entry is never solved, the spreadsheet and zero-signal always are.
CHANCE = {"hello-file": 0.5, "zenity-entry": 0.0, sp.SPREADSHEET: 1.0, "zero-signal": 1.0}
KILLS = {"hello-file": 1}


def shinken(*args: str, timeout: float = 600) -> CliResult:
    return run_cli(*args, timeout=timeout)  # in process (tests/cli_runner.py)


def _eval(gym_env: dict, inputs: str, out: str, plans: dict[str, list[str]]) -> cp.ChancePolicy:
    policy = cp.ChancePolicy(plans)
    server = gym_env["policy"]
    server.decide = policy
    try:
        r = gym_env["container"].exec(f"gym eval run --no-serve --agent {AGENT} --input {inputs} --output {out} "
                                      f"--num-repeats {REPEATS} --concurrency 2", timeout=1800)
    finally:
        server.decide = sp.next_call
    assert r.returncode == 0, (r.stdout + r.stderr)[-6000:]
    assert not server.errors, server.errors
    assert dict(policy.handed) == {t: len(p) for t, p in plans.items()}  # every planned rollout ran
    return policy


def band(scored: int, rate: float) -> str:
    """The default edges (docs/profile.md): measured with 4+ scored rollouts, too_easy at
    >= 0.9, too_hard at <= 0.1, the band strictly between."""
    return "insufficient" if scored < 4 else "too_easy" if rate >= 0.9 else "too_hard" if rate <= 0.1 else "band"


def expected(plans: list[dict[str, list[str]]]) -> dict[str, dict]:
    """Per task, what the profile must say after these runs, from the plans alone."""
    exp = {}
    for task in plans[0]:
        outcomes = [o for p in plans for o in p[task]]
        rewards = [1.0 if o == "pass" else cp.FAIL_REWARD.get(task, 0.0) for o in outcomes if o != "kill"]
        passed = outcomes.count("pass")
        exp[task] = {"rollouts": len(outcomes), "scored": len(rewards), "masked": outcomes.count("kill"),
                     "passed": passed, "mean_reward": sum(rewards) / len(rewards),
                     "band": band(len(rewards), passed / len(rewards))}
    return exp


@pytest.fixture(scope="module")
def runs(gym_env) -> dict:
    ws: Path = gym_env["ws"]
    data = ws / "resources_servers" / "shinken_cua" / "data"
    rows = [json.loads(x) for f in ("train.jsonl", "validation.jsonl") for x in (data / f).read_text().splitlines()]
    rows = [r for r in rows if r["task_id"] in CHANCE]
    tasks = {r["task_id"] for r in rows}
    assert "hello-file" in tasks and len(tasks) >= 2, tasks
    rel = "results/profile"  # inside the workspace: the runner sees it at the same relative path
    (ws / rel).mkdir(parents=True, exist_ok=True)
    (ws / rel / "inputs.jsonl").write_text("".join(json.dumps(r) + "\n" for r in rows))
    chance = {t: p for t, p in CHANCE.items() if t in tasks}
    plan1 = cp.seeded_plans(chance, REPEATS, SEED, KILLS)
    plan2 = cp.seeded_plans(chance, REPEATS, SEED + 1)
    p1 = _eval(gym_env, f"{rel}/inputs.jsonl", f"{rel}/run1/rollouts.jsonl", plan1)
    _eval(gym_env, f"{rel}/inputs.jsonl", f"{rel}/run2/rollouts.jsonl", plan2)
    return {"dir": ws / rel, "plans": [plan1, plan2], "killed": p1.killed, "tasks": tasks, "gym_env": gym_env,
            "run1": ws / rel / "run1" / "rollouts.jsonl", "run2": ws / rel / "run2" / "rollouts.jsonl"}


def test_the_seeded_plans_put_hello_file_in_the_band(runs) -> None:
    # A precondition on SEED, not on shinken: after both runs hello-file passed some, not all.
    plan1, plan2 = runs["plans"]
    assert 0 < (plan1["hello-file"] + plan2["hello-file"]).count("pass") < 7
    assert plan1["hello-file"][0] == "kill" and len(runs["killed"]) == 1


def _by_task(doc: dict) -> dict[str, dict]:
    return {t["task_id"]: t for t in doc["tasks"]}


def _check(doc: dict, exp: dict[str, dict]) -> None:
    assert check_with_jsonschema("profile", doc) == []
    got = _by_task(doc)
    assert set(got) == set(exp)
    for task, e in exp.items():
        t = got[task]
        assert {k: t[k] for k in ("rollouts", "scored", "masked", "passed", "band")} == \
               {k: e[k] for k in ("rollouts", "scored", "masked", "passed", "band")}, task
        assert t["pass_rate"] == pytest.approx(e["passed"] / e["scored"])
        assert t["mean_reward"] == pytest.approx(e["mean_reward"])
        assert t["mean_tool_calls"] >= 1 and t["mean_turns"] >= 2 and t["mean_total_tokens"] > 0
    assert doc["counts"] == {b: sum(e["band"] == b for e in exp.values())
                             for b in ("too_easy", "band", "too_hard", "insufficient")}


def test_run1_masked_rollout_makes_hello_file_insufficient(runs) -> None:
    out = runs["dir"] / "prof"
    r = shinken("profile", str(runs["run1"]), "--task-root", str(DEMO), "--out", str(out), "--seed", "3")
    assert r.returncode == 0, r.stderr
    doc = json.loads((out / "profile.json").read_text())
    exp = expected(runs["plans"][:1])
    _check(doc, exp)
    hello = _by_task(doc)["hello-file"]
    assert hello["band"] == "insufficient" and hello["scored"] == REPEATS - 1  # unmeasured, not "hard"
    assert hello["excluded_by_kind"] == {"session_lost": 1}  # Gym's name: the fork was killed
    in_band = sorted(t for t, e in exp.items() if e["band"] == "band")
    assert json.loads((out / "band.json").read_text()) == in_band
    control = json.loads((out / "control.json").read_text())
    measured = {t for t, e in exp.items() if e["band"] != "insufficient"}
    assert len(control) == min(len(in_band), len(measured)) and set(control) <= measured


def test_run2_accumulates_and_the_band_makes_a_workspace(runs) -> None:
    out = runs["dir"] / "prof-acc"
    assert shinken("profile", str(runs["run1"]), "--task-root", str(DEMO), "--out", str(out)).returncode == 0
    r = shinken("profile", str(runs["run2"]), "--task-root", str(DEMO), "--out", str(out), "--json")
    assert r.returncode == 0, r.stderr
    doc = json.loads(r.stdout)
    assert doc == json.loads((out / "profile.json").read_text())
    exp = expected(runs["plans"])
    _check(doc, exp)
    hello = _by_task(doc)["hello-file"]
    assert hello["scored"] == 2 * REPEATS - 1 and hello["band"] == "band"
    in_band = json.loads((out / "band.json").read_text())
    assert "hello-file" in in_band and len(json.loads((out / "control.json").read_text())) == len(in_band)
    mains = [x for x in doc["reads"] if Path(x["path"]).name == "rollouts.jsonl"]
    assert [(Path(x["path"]).parent.name, x["new"]) for x in mains] == \
           [("run1", REPEATS * len(runs["tasks"])), ("run2", REPEATS * len(runs["tasks"]))]
    # Both files again: every rollout is known, nothing moves.
    r = shinken("profile", str(runs["run1"]), str(runs["run2"]), "--task-root", str(DEMO), "--out", str(out), "--json")
    again = json.loads(r.stdout)
    assert all(x["new"] == 0 for x in again["reads"][len(doc["reads"]):])
    assert again["tasks"] == doc["tasks"] and again["counts"] == doc["counts"]
    # One fresh profile over both run folders equals the two that accumulated.
    r = shinken("profile", str(runs["run2"].parent), str(runs["run1"].parent), "--task-root", str(DEMO),
                "--out", str(runs["dir"] / "prof-fresh"), "--json")
    assert r.returncode == 0, r.stderr
    assert json.loads(r.stdout)["tasks"] == doc["tasks"]
    # The band is one command away from a workspace.
    ws = runs["dir"] / "band-ws"
    r = shinken("make-workspace", "--dest", str(ws), "--task-root", str(DEMO), "--ids", str(out / "band.json"),
                "--license", "Apache-2.0", "--json")
    assert r.returncode == 0, r.stderr
    made = json.loads(r.stdout)
    assert sorted(made["train"] + made["validation"]) == in_band


def test_report_of_this_demo_run_in_headless_chromium(runs) -> None:
    d = runs["dir"]
    triage = d / "triage.json"
    r = shinken("triage", str(DEMO), "--image", gh.sandbox_image(), "--report", str(triage))
    assert r.returncode == 0, r.stderr
    receipt = runs["gym_env"]["workspace"].receipt
    prof = d / "prof-report"
    assert shinken("profile", str(runs["run1"]), str(runs["run2"]), "--task-root", str(DEMO), "--receipt",
                   str(receipt), "--out", str(prof)).returncode == 0
    page = d / "report.html"
    r = shinken("report", "--triage", str(triage), "--receipt", str(receipt), "--profile", str(prof), "--html", str(page))
    assert r.returncode == 0, r.stderr
    docs = [json.loads(p.read_text()) for p in (triage, receipt, prof / "profile.json")]
    report_check.check_page(page, *docs, png_out=d / "report.png")
