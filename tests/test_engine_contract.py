"""The engine contract without an engine (computer/contract.py, fleet/wire.py): what of a server's
EngineConfig a fleet host serves with, and a failure carried across the wire answered as raised
here. The same over a real Ray fleet with real engines: tests/test_fleet_parity.py."""

from __future__ import annotations

import pickle
from pathlib import Path

import pytest

from shinken.computer.contract import EngineConfig
from shinken.computer.failures import ANSWERS, INFRA, LOST, RaisedElsewhere, answer_for
from shinken.computer.profiles import Profile
from shinken.errors import ShinkenError
from shinken.judge.config import JudgeConfig
from shinken.sandbox.api import ForkLost, InfraError, SessionError, SetupError, StartStateError


def test_a_host_serves_the_servers_rollout_settings_and_keeps_its_own_resources(tmp_path: Path) -> None:
    server = EngineConfig(tmp_path / "tasks", "shinken/sandbox-cua:latest", accept_filesystem=False,
                          profile=Profile(observation="screenshot", actions="pixel", exec=False),
                          judge=JudgeConfig("http://judge:8000/v1", "grader"), hub_image="shinken/hub:1",
                          idle_ttl_s=120, pool_size=3, golden_ttl_s=10, max_goldens=2)
    host = EngineConfig(tmp_path / "agent", "shinken/sandbox-cua:latest", accept_filesystem=True, pool_size=0,
                        golden_ttl_s=3600, max_goldens=64)
    served = host.with_rollout(pickle.loads(pickle.dumps(server.rollout())))  # as it crosses Ray
    assert served.rollout() == server.rollout()
    assert (served.accept_filesystem, served.profile, served.judge, served.hub_image, served.idle_ttl_s) == (
        False, server.profile, server.judge, "shinken/hub:1", 120)
    # the host's own: where its bundles are and what it spends
    assert (served.task_root, served.pool_size, served.golden_ttl_s, served.max_goldens) == (
        tmp_path / "agent", 0, 3600, 64)
    assert served.differences(server) == [] and host.differences(served) == [
        "accept_filesystem: True vs False",
        f"profile: {Profile().to_json()!r} vs {server.profile.to_json()!r}",
        "judge: None vs {'url': 'http://judge:8000/v1', 'model': 'grader', 'api_key_env': 'SHINKEN_JUDGE_API_KEY'}",
        "hub_image: None vs 'shinken/hub:1'", "idle_ttl_s: 900.0 vs 120.0"]
    # the tier policy is the config's: a relaunch row is never served unchecked unless the operator chose it
    assert served.serving_tier("relaunch", needs_relaunch=True).value == "relaunch"
    assert host.serving_tier("relaunch", needs_relaunch=True).value == "filesystem"


def test_bad_engine_settings_are_one_line_errors(tmp_path: Path) -> None:
    with pytest.raises(ShinkenError, match="max_goldens is 0"):
        EngineConfig(tmp_path, "img", max_goldens=0)
    with pytest.raises(ShinkenError, match="idle_ttl_s is -1"):
        EngineConfig(tmp_path, "img", idle_ttl_s=-1)


def _instances() -> list[BaseException]:
    special = {SetupError: SetupError(0, "execute", "exit 1"), StartStateError: StartStateError("relaunch", ["x"])}
    out: list[BaseException] = []
    for cls in ANSWERS:
        if cls is RaisedElsewhere:
            out.append(RaisedElsewhere(LOST, "shinken.sandbox.api.ForkLost", "lost elsewhere"))
        elif cls in special:
            out.append(special[cls])
        else:
            try:
                out.append(cls("raised on the host"))
            except TypeError:  # a class whose own arguments the table test of the fleet covers
                continue
    return out + [KeyError("a bug")]


def test_a_failure_carried_from_a_host_is_answered_as_raised_here() -> None:
    from shinken.fleet.wire import Failed

    for exc in _instances():
        failed = pickle.loads(pickle.dumps(Failed.of(exc, "h1")))  # what crosses Ray
        raised = failed.exception()
        assert answer_for(raised) == answer_for(exc) and str(raised) == (str(exc) or type(exc).__name__), exc
        assert failed.exc_class.endswith(type(exc).__qualname__) and failed.host == "h1"
    # a stale session stays the SessionError callers reseed on; the rest carry their answer
    assert type(Failed.of(SessionError("stale")).exception()) is SessionError
    carried = Failed.of(ForkLost("gone")).exception()
    assert isinstance(carried, RaisedElsewhere) and answer_for(carried) == LOST
    assert answer_for(Failed.of(InfraError("engine down")).exception()) == INFRA
    assert answer_for(Failed.of(ShinkenError("task 'x': not found")).exception()).status == 422
