"""The resources server's error table (shinken/computer/failures.py) and Gym's failure vocabulary
(shinken/failure_kinds.py): every exception class shinken defines has an answer, only task errors
answer 422 `bad_task`, and an engine outage answers 503 through the generated server over HTTP."""

from __future__ import annotations

import importlib
import json
import pkgutil
import subprocess
import sys
from pathlib import Path

import pytest

from shinken.computer.failures import ANSWERS, ANSWERS_BY_NAME, BUG, INFRA, NOT_RAISED_TO_SERVER, answer_for
from shinken.errors import EnvironmentProblem, InternalError, ShinkenError, WorkFailed
from shinken.failure_kinds import GYM_FAILURE_KINDS, REASONS, gym_kind, is_gym_kind, kind_of
from shinken.sandbox.api import (EngineUnreachable, ForkLost, ImageMissing, InfraError, SandboxError, SessionError,
                                 SetupError, StartStateError)

sys.path.insert(0, str(Path(__file__).resolve().parent))
import gym_harness as gh  # noqa: E402
from private_dockerd import private_engine  # noqa: E402

REPO = Path(__file__).resolve().parent.parent
# Not importable on the host: they run in Gym's own venv (python 3.13) and import nemo_gym (the
# server template; the sandbox provider's Gym adapter, whose errors are Gym's classes).
HOST_SKIP = ("shinken.workspace_templates", "shinken.provider.gym")


def _shipped_packages() -> list[str]:
    """The packages the shinken wheel ships (pyproject.toml), not the tests or benchmarks."""
    import tomllib

    doc = tomllib.loads((REPO / "pyproject.toml").read_text())
    return list(doc["tool"]["setuptools"]["packages"])


def _shinken_exception_classes() -> dict[str, type[BaseException]]:
    """Every exception class defined in a module shinken ships, by qualified name (all imported)."""
    names = []
    for pkg in _shipped_packages():
        if pkg.startswith(HOST_SKIP):
            continue
        module = importlib.import_module(pkg)
        names.append(pkg)
        names += [f"{pkg}.{m.name}" for m in pkgutil.iter_modules(module.__path__)
                  if not m.ispkg and not f"{pkg}.{m.name}".startswith(HOST_SKIP)]
    found: dict[str, type[BaseException]] = {}
    for name in names:
        module = importlib.import_module(name)  # an import error fails the test: no module goes unread
        for value in vars(module).values():
            if isinstance(value, type) and issubclass(value, BaseException) and value.__module__ == name:
                found[f"{name}.{value.__qualname__}"] = value
    assert len(names) > 100, names  # the walk reached the modules (a broken walk would pass vacuously)
    return found


def test_every_exception_class_shinken_defines_has_an_answer() -> None:
    classes = _shinken_exception_classes()
    # the walk saw the classes it must see (a broken walk would pass vacuously)
    assert {"shinken.errors.ShinkenError", "shinken.sandbox.api.InfraError", "shinken.sandbox.api.ForkLost",
            "shinken.computer.tools.ToolArgError"} <= set(classes)
    missing = sorted(n for n, c in classes.items()
                     if c not in ANSWERS and n not in ANSWERS_BY_NAME and n not in NOT_RAISED_TO_SERVER)
    assert not missing, (f"exception classes with no entry in shinken/computer/failures.py: {missing}; add each "
                         "to ANSWERS (what the server answers) or NOT_RAISED_TO_SERVER (why it never gets there)")
    stale = sorted((set(NOT_RAISED_TO_SERVER) | set(ANSWERS_BY_NAME)) - set(classes))
    assert not stale, f"NOT_RAISED_TO_SERVER names classes that no longer exist: {stale}"
    # a ShinkenError subclass always has its own entry: its answer is decided, not inherited
    unlisted = sorted(n for n, c in classes.items()
                      if issubclass(c, ShinkenError) and c not in ANSWERS and n not in ANSWERS_BY_NAME
                      and n not in NOT_RAISED_TO_SERVER)
    assert not unlisted, unlisted


def test_only_task_errors_answer_bad_task() -> None:
    assert {c for c, a in ANSWERS.items() if a.task_error} == {ShinkenError, SetupError}
    for cls in _shinken_exception_classes().values():
        if issubclass(cls, (InfraError, EnvironmentProblem)):
            got = ANSWERS[cls]
            assert (got.status, got.error) == (503, "infra_error"), cls
    # the bug this table replaced: InfraError is a ShinkenError, an ordered except chain answered 422
    assert issubclass(InfraError, ShinkenError)
    for exc in (InfraError("daemon gone"), EngineUnreachable("x"), ImageMissing("x"), EnvironmentProblem("x"),
                StartStateError("relaunch", ["window missing"])):
        a = answer_for(exc)
        assert (a.status, a.error, a.failure_kind) == (503, "infra_error", "provider_unavailable"), exc
    assert (answer_for(ForkLost("gone")).status, answer_for(ForkLost("gone")).failure_kind) == (503, "session_lost")
    assert (answer_for(SessionError("stale")).status, answer_for(SessionError("stale")).error) == (409, "stale_session")
    assert answer_for(ShinkenError("task 'x': not found")).status == 422
    assert answer_for(SetupError(0, "execute", "exit 1")).error == "bad_task"
    for exc in (SandboxError("x"), WorkFailed("x"), InternalError("x"), KeyError("x"), RuntimeError("x")):
        assert answer_for(exc) == BUG and not answer_for(exc).task_error, exc


def test_no_class_answers_a_task_error_unless_it_is_one() -> None:
    """Every exception class shinken defines, with the answer it would really get (its own entry
    or its nearest base's, NOT_RAISED_TO_SERVER classes included, should one ever reach the
    server): only the task's own errors answer 422 bad_task. This caught the sandbox provider's
    CreateFailed and NotReady (ShinkenErrors raised for engine errors, failed pulls, lost
    containers and start states not reproduced), which would have answered bad_task."""
    task_errors = {"shinken.errors.ShinkenError", "shinken.sandbox.api.SetupError"}
    got = {n: answer_for(c.__new__(c)) for n, c in _shinken_exception_classes().items()}
    assert {n for n, a in got.items() if a.task_error} == task_errors, got
    for name in ("shinken.provider.sandboxes.CreateFailed", "shinken.provider.sandboxes.NotReady",
                 "shinken.sandbox.api.DiskFull", "shinken.sandbox.api.HubLost"):
        assert (got[name].status, got[name].error) == (503, "infra_error"), name
    assert got["shinken.sandbox.api.DiskFull"].failure_kind == "provider_quota_exhausted"


def test_a_new_subclass_gets_its_nearest_base_answer_never_an_earlier_entry() -> None:
    class NewOutage(InfraError):
        pass

    class NewTaskProblem(SetupError):
        pass

    assert answer_for(NewOutage("x")) == INFRA
    assert answer_for(NewTaskProblem(0, "x", "y")).task_error


def test_docker_sdk_errors_are_outages() -> None:
    import docker.errors
    import requests.exceptions

    assert answer_for(requests.exceptions.ConnectionError("socket gone")) == INFRA
    assert answer_for(docker.errors.APIError("500 Server Error: no space left on device")) == INFRA


def test_every_failure_kind_shinken_writes_is_gyms() -> None:
    kinds = {a.failure_kind for a in [*ANSWERS.values(), *ANSWERS_BY_NAME.values()]} | {BUG.failure_kind} | set(REASONS.values())
    assert all(is_gym_kind(k) for k in kinds), kinds
    # registered names where Gym has one; namespaced only for a bad task and a bug
    assert {k for k in kinds if k not in GYM_FAILURE_KINDS} == {"shinken:bad_task", "shinken:internal_error"}
    assert kind_of("reward_timeout") == "verifier_error" and kind_of("reward_resource_limit") == "provider_oom_killed"
    assert kind_of("fork_lost") == "session_lost" and kind_of("reward_judge_error") == "judge_failed"
    # older rollout files carry shinken's own codes: read as Gym's names
    assert gym_kind("infra") == "provider_unavailable" and gym_kind("start_state") == "provider_unavailable"
    assert gym_kind("session_lost") == "session_lost" and gym_kind("agent_run_error") == "agent_run_error"
    assert not is_gym_kind("Bad:Kind") and not is_gym_kind("infra")


@pytest.mark.docker
@pytest.mark.slow
def test_vocabulary_matches_the_gym_wheel() -> None:
    """The names copied into shinken/failure_kinds.py are NeMo Gym 0.7.0's own."""
    from shinken.workspace.gym_image import ensure_gym_image

    code = ("import json; from nemo_gym import failure_kinds as f; import typing; "
            "print(json.dumps({'kinds': sorted(f.FAILURE_KINDS), 'stages': list(typing.get_args(f.FailureStage))}))")
    from shinken.sandbox.docker_client import docker_run_argv
    from shinken.sandbox.ownership import labels_for

    r = subprocess.run([*docker_run_argv(labels_for("build", task="test-gym-kinds")), "--rm", "--network", "none",
                        ensure_gym_image(), "python", "-c", code],
                       capture_output=True, text=True, timeout=300)
    assert r.returncode == 0, r.stderr
    doc = json.loads(r.stdout.strip().splitlines()[-1])
    assert set(doc["kinds"]) == GYM_FAILURE_KINDS
    from shinken.failure_kinds import FailureStage
    import typing

    assert list(typing.get_args(FailureStage)) == doc["stages"]


@pytest.mark.docker
@pytest.mark.slow
def test_seed_during_an_engine_outage_answers_503(gym_workspace: gh.GymWorkspace, tmp_path: Path) -> None:
    """The generated server, in Gym's runner, on an engine of our own: an engine without the task
    image, then the engine stopped under the connected server. Both are the machine's fault:
    503 infra_error with Gym's provider_unavailable, never 422 bad_task."""
    row = next(json.loads(ln) for ln in (gym_workspace.server / "data" / "example.jsonl").read_text().splitlines()
               if json.loads(ln)["task_id"] == "hello-file")
    with private_engine("i21o", "shinken-i21-outage") as engine:
        port = gh.free_port()
        c = gh.resources_server(tmp_path, gym_workspace, port, binds=[(engine.base, "/engine")],
                                env={"DOCKER_HOST": "unix:///engine/d.sock"})
        try:
            missing = gh.post(port, "/seed_session", row)  # this engine never had the task image
            assert missing.status == 503, missing.text
            doc = missing.json()
            assert doc["error"] == "infra_error" and doc["failure_kind"] == "provider_unavailable", doc
            assert "not found" in doc["detail"], doc
            engine.stop()  # the outage: the server's client stays connected to a socket nobody answers
            down = gh.post(port, "/seed_session", row)
            assert down.status == 503, down.text
            doc = down.json()
            assert doc["error"] == "infra_error" and doc["failure_kind"] == "provider_unavailable", doc
            assert "Connection" in doc["detail"] or "not reachable" in doc["detail"], doc
            # a call before any seed is still the caller's mistake, not the machine's
            r = gh.post(port, "/computer_exec", {"command": "true"})
            assert r.status == 409 and r.json()["error"] == "no_session"
        finally:
            leftovers = c.stop()
    assert leftovers == []


@pytest.mark.docker
@pytest.mark.slow
def test_a_seed_failing_for_infrastructure_ends_masked_and_gym_eval_run_goes_on(gym_workspace: gh.GymWorkspace,
                                                                                tmp_path: Path) -> None:
    """`gym eval run` over the example rows with the resources server on an engine that lacks the
    task image: every seed answers 503 infra_error, and the agent the workspace ships answers each
    of those rollouts masked with the server's failure kind (failure_stage seed). The run exits 0
    with every row written; before, Gym's simple_agent turned the 503 into a 500 from /run and the
    run stopped at the first one."""
    import shutil

    import scripted_policy as sp

    ws = tmp_path / "ws"  # a copy: the session's workspace stays as the other Gym tests expect it
    shutil.copytree(gym_workspace.path, ws, symlinks=True, ignore=shutil.ignore_patterns(".venv", "results"))
    rows = [json.loads(x) for x in (ws / "resources_servers" / gh.NAME / "data" / "example.jsonl").read_text().splitlines()
            if x.strip()]
    policy = sp.PolicyServer().start()
    with private_engine("i35m", "shinken-i35-masked") as engine:
        gh.point_at_policy(ws, policy.base_url)
        with gh.gym_session(ws, tmp_path / "venvs", policy, env={"DOCKER_HOST": "unix:///engine/d.sock"},
                            binds=[(engine.base, "/engine")]) as session:
            c = session.container
            log, _ = session.start(gym_workspace.command("gym env start "))
            r = c.exec(gym_workspace.command("gym eval run --no-serve"), timeout=1500)
            assert r.returncode == 0, (r.stdout + r.stderr)[-3000:] + "\nserver log:\n" + c.exec(f"cat {log}").stdout[-4000:]
            out = ws / "results" / "example_rollouts.jsonl"
            rollouts = [json.loads(x) for x in out.read_text().splitlines() if x.strip()]
    assert sorted(x["task_id"] for x in rollouts) == sorted(r["task_id"] for r in rows), rollouts
    for x in rollouts:
        assert (x["reward"], x["mask_sample"], x["failure_kind"], x["failure_stage"]) == (
            0.0, True, "provider_unavailable", "seed"), x
        assert x["failure_reason"].startswith("infra: /seed_session answered 503 (infra_error): "), x["failure_reason"]
        assert "not found" in x["failure_reason"], x["failure_reason"]  # the server's own detail: the missing image
    assert policy.calls == []  # no rollout reached the policy
