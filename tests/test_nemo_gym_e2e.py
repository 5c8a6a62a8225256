"""The demo workspace as a NeMo Gym 0.7.0 environment, checked by Gym itself.

The workspace is made by `shinken make-workspace` from a real probe receipt of the demo tasks
(the `gym_workspace` session fixture, tests/gym_harness.py), moved to another folder, and
mounted at yet another path inside the runner. There, without starting services:
`gym env validate shinken_cua` (manifest, components, datasets), the strict config check,
`gym env schema --resources-server shinken_cua` and `gym env test shinken_cua` (the verifier
cases on real forks). Then `gym env start` with the scripted policy (tests/scripted_policy.py),
`gym eval run` over the example rows (whose rollouts become data/example_rollouts.jsonl), the
legacy `ng_collect_rollouts`, `gym dataset collate --mode example_validation`
(data/example_metrics.json), `gym env test --resources-server shinken_cua` (the server's pytest
in its own venv, with Gym's data validation) and `gym env publish shinken_cua`.

Slow on a cold machine (the runner image, uv cache and per-server venvs are built once and
reused, see gym_harness); it runs in CI."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

import pytest

sys.path.insert(0, str(Path(__file__).resolve().parent))
import gym_harness as gh  # noqa: E402
import scripted_policy as sp  # noqa: E402

pytestmark = [pytest.mark.docker, pytest.mark.slow]

REPO = Path(__file__).resolve().parent.parent
NAME = gh.NAME


def _ok(r: subprocess.CompletedProcess) -> str:
    assert r.returncode == 0, (r.stdout + r.stderr)[-6000:]
    return r.stdout


def _calls(rollout: dict) -> list[str]:
    return [o["name"] for o in rollout["response"]["output"] if o.get("type") == "function_call"]


# ---------------------------------------------------------------- the workspace itself


def test_workspace_runs_from_where_it_was_moved(gym_workspace: gh.GymWorkspace) -> None:
    ws = gym_workspace
    assert not ws.made_at.exists() and (ws.path / "environments" / NAME / "manifest.yaml").is_file()
    # Every demo task's untouched start scored 0.0 in the probe; hello-file's recorded solution replayed to 1.0.
    assert ws.result["verifier_cases"]["zero_reward"] == 3 and ws.result["verifier_cases"]["full_reward"] == 1
    for path in ws.path.rglob("*"):
        if path.is_file() and path.suffix in (".yaml", ".py", ".jsonl", ".md", ".txt"):
            text = path.read_text(errors="replace")
            for where in (str(ws.made_at), str(gh.DEMO), str(ws.tmp)):
                assert where not in text, (path, where)


# ---------------------------------------------------------------- Gym's gates (no services)


def test_gym_env_validate_the_manifest(gym_runner: gh.GymContainer) -> None:
    report = json.loads(_ok(gym_runner.exec(f"gym env validate {NAME} --json")))
    assert report["name"] == NAME and report["kind"] == "environment"
    assert report["declared_profile"] == report["inferred_profile"] == "custom-gym-verifier"
    assert report["warnings"] == [] and report["synchronized_fields"] == []
    rows = {d["name"]: d["rows"] for d in report["datasets"]}
    assert rows == {"train": 2, "validation": 1, "example": 5}
    assert {c["role"] for c in report["components"]} == {"resources_server", "agent_server", "model_server"}


def test_gym_env_validate_strict_config(gym_runner: gh.GymContainer, gym_workspace: gh.GymWorkspace) -> None:
    # Gym 0.7.0 takes --strict only for configs (`gym env validate NAME --strict` answers "Manifest-backed
    # commands do not accept runtime config overrides: strict" for any manifest), so the strict check
    # validates the environment's config composed with the model config, as `gym env start` will.
    out = _ok(gym_runner.exec(gym_workspace.command("gym env validate --environment")))
    assert "Config is valid" in out


def test_gym_env_schema_prints_the_row_schema(gym_runner: gh.GymContainer, gym_workspace: gh.GymWorkspace) -> None:
    schema = json.loads(_ok(gym_runner.exec(f"gym env schema --resources-server {NAME}")))
    ours = json.loads((REPO / "schemas" / "gym_row.schema.json").read_text())
    task_fields = {k for k in ours["properties"] if k not in ("responses_create_params", "agent_ref")}
    assert set(schema["properties"]) == task_fields
    assert set(schema["required"]) == set(ours["required"]) - {"responses_create_params", "agent_ref"}
    assert schema["properties"]["state_fidelity"]["enum"] == ours["properties"]["state_fidelity"]["enum"]


def test_gym_env_test_runs_the_verifier_cases_on_real_forks(gym_runner: gh.GymContainer,
                                                           gym_workspace: gh.GymWorkspace) -> None:
    report = json.loads(_ok(gym_runner.exec(f"gym env test {NAME} --json", timeout=1800)).strip().splitlines()[-1])
    by_kind: dict[str, list] = {}
    for case in report["cases"]:
        by_kind.setdefault(case["kind"], []).append(case)
    assert len(by_kind["zero_reward"]) == 3 and all(c["observed_rewards"] == [0.0] for c in by_kind["zero_reward"])
    assert [c["observed_rewards"] for c in by_kind["full_reward"]] == [[1.0]]
    assert len(by_kind["malformed"]) == 3
    if gym_workspace.result["determinism"] == "seeded":  # receipts with checked start states (tiers)
        assert [c["observed_rewards"] for c in by_kind["determinism"]] == [[1.0, 1.0]]  # same on a fresh fork
    else:  # probed with --state-fidelity filesystem and no tiers: start states unchecked, so Gym runs none
        assert "determinism" not in by_kind
    assert gh.forks_of(gym_runner) == []  # every case released its fork


# ---------------------------------------------------------------- served by Gym


def test_gym_eval_run_scores_both_demo_tasks(gym_env, gym_examples) -> None:
    rollouts = gym_examples["rollouts"]
    assert len(rollouts) == 5
    assert {x["task_id"] for x in rollouts} == set(gh.DEMO_TASKS)
    for x in rollouts:
        assert x["reward"] == 1.0, (x["task_id"], x.get("failure_reason"), x.get("reward_output_tail"))
        assert x["mask_sample"] is False
        assert sp.follows_script(x["task_id"], _calls(x)), _calls(x)
        assert x["response"]["usage"]["total_tokens"] > 0
    failures = gym_env["ws"] / "results" / "example_rollouts_failures.jsonl"
    assert not failures.exists() or failures.read_text().strip() == ""
    assert not gym_env["policy"].errors
    elapsed = gym_examples["eval_s"]
    print(f"\ngym env start ready in {gym_env['ready_s']:.0f}s; 5 rollouts through gym eval run in {elapsed:.1f}s "
          f"({5 * 3600 / elapsed:.0f} rollouts/hour)")


def test_legacy_ng_collect_rollouts(gym_env) -> None:
    c: gh.GymContainer = gym_env["container"]
    r = c.exec(f"ng_collect_rollouts +agent_name={gh.AGENT} +input_jsonl_fpath=resources_servers/{NAME}/data/train.jsonl "
               f"+output_jsonl_fpath=results/legacy/rollouts.jsonl +limit=1 +num_samples_in_parallel=1", timeout=900)
    _ok(r)
    rollouts = [json.loads(x) for x in (gym_env["ws"] / "results/legacy/rollouts.jsonl").read_text().splitlines()]
    assert len(rollouts) == 1 and rollouts[0]["reward"] == 1.0


def test_collate_keeps_every_example_and_writes_its_metrics(gym_examples) -> None:
    rows = [json.loads(x) for x in (gym_examples["collated"] / "example.jsonl").read_text().splitlines()]
    assert len(rows) == 5  # collate drops invalid rows silently: all five survived
    assert gym_examples["metrics"]["Number of examples"] == 5


def test_gym_env_test_resources_server_with_data_validation(gym_runner: gh.GymContainer, gym_workspace,
                                                             gym_examples) -> None:
    # The server's pytest in its own venv, then Gym's checks of what a server ships in data/
    # (5 examples, their metrics, 5 example rollouts): run once, after Gym wrote the last two.
    out = _ok(gym_runner.exec(gym_workspace.command(f"gym env test --resources-server {NAME} +should_validate_data"),
                              timeout=1800))
    assert " passed" in out and " failed" not in out
    assert "successfully validated" in out


def test_gym_env_publish(gym_runner: gh.GymContainer, gym_workspace: gh.GymWorkspace, gym_examples) -> None:
    report = json.loads(_ok(gym_runner.exec(f"gym env publish {NAME} --json", timeout=1800)).strip().splitlines()[-1])
    cases = sum(gym_workspace.result["verifier_cases"].values())  # determinism cases exist only when seeded
    assert report["name"] == NAME and report["kind"] == "environment" and report["verifier_cases"] == cases


def test_servers_release_their_forks(gym_env, gym_examples) -> None:
    # Rollouts that reached /verify release their containers at once; none may be alive now
    # for a rollout of this container's servers.
    assert gh.forks_of(gym_env["container"]) == []
