"""A workspace made by `shinken make-workspace` from the demo bundles, served and driven by
the real NeMo Gym 0.7.0: `gym env start` (servers, per-server uv venvs, the shinken wheel from
the workspace), `gym eval run --no-serve` and the legacy `ng_collect_rollouts` against the
scripted policy (tests/scripted_policy.py, Responses API on 127.0.0.1), and
`gym dataset collate --mode example_validation`.

Slow on a cold machine (the NeMo Gym image and uv cache are built once and reused:
~/.cache/shinken/nemo-gym-uv); it runs in CI."""

from __future__ import annotations

import json
import subprocess
import sys
import time
from pathlib import Path

import pytest

sys.path.insert(0, str(Path(__file__).resolve().parent))
import gym_harness as gh  # noqa: E402
import scripted_policy as sp  # noqa: E402

from shinken.workspace.gym_image import ensure_gym_image  # noqa: E402
from shinken.workspace.writer import SERVER_DIR  # noqa: E402

pytestmark = [pytest.mark.docker, pytest.mark.slow]

DEMO = Path(__file__).resolve().parent.parent / "demo"
UV_CACHE = Path.home() / ".cache" / "shinken" / "nemo-gym-uv"
AGENT = "shinken_cua_simple_agent"


def _wait_ready(log: Path, c: gh.GymContainer, timeout: float) -> float:
    t0 = time.monotonic()
    while time.monotonic() - t0 < timeout:
        text = log.read_text(errors="replace") if log.exists() else ""
        if "servers ready!" in text:
            return time.monotonic() - t0
        if not c.running():
            raise AssertionError(f"gym env start exited:\n{text[-6000:]}")
        time.sleep(2)
    raise AssertionError(f"gym env start not ready after {timeout:.0f}s:\n{log.read_text(errors='replace')[-6000:]}")


@pytest.fixture(scope="module")
def gym_env(tmp_path_factory, docker_client):
    image = gh.sandbox_image()
    ensure_gym_image()
    tmp = tmp_path_factory.mktemp("e2e")
    ids = tmp / "ids.txt"
    ids.write_text("hello-file\nzenity-entry\n")
    ws = tmp / "ws"
    r = subprocess.run([sys.executable, "-m", "shinken.cli.main", "make-workspace", "--dest", str(ws),
                        "--task-root", str(DEMO), "--ids-file", str(ids), "--image", image,
                        "--license", "Apache 2.0", "--json"], capture_output=True, text=True)
    assert r.returncode == 0, r.stderr
    commands = json.loads(r.stdout)["commands"]
    policy = sp.PolicyServer().start()
    # What a user does after make-workspace: point env.yaml at the policy.
    (ws / "env.yaml").write_text(f"policy_base_url: {policy.base_url}\npolicy_api_key: EMPTY\n"
                                 f"policy_model_name: scripted\n")
    UV_CACHE.mkdir(parents=True, exist_ok=True)
    start = next(cmd for cmd in commands if cmd.startswith("gym env start "))
    c = gh.GymContainer(mounts=[tmp, DEMO, UV_CACHE], workdir=str(ws), env={"UV_LINK_MODE": "copy"})
    log = tmp / "start.log"
    c.start(f"exec {start} +uv_cache_dir={UV_CACHE} > {log} 2>&1")
    env = {"ws": ws, "tmp": tmp, "container": c, "policy": policy, "commands": commands, "log": log}
    try:
        env["ready_s"] = _wait_ready(log, c, timeout=1500)
        yield env
    finally:
        env["leftovers"] = c.stop()
        policy.stop()


def _rollouts(path: Path) -> list[dict]:
    return [json.loads(x) for x in path.read_text().splitlines() if x.strip()]


def _calls(rollout: dict) -> list[str]:
    return [o["name"] for o in rollout["response"]["output"] if o.get("type") == "function_call"]


def test_gym_eval_run_scores_both_demo_tasks(gym_env) -> None:
    c: gh.GymContainer = gym_env["container"]
    out = gym_env["tmp"] / "eval" / "rollouts.jsonl"
    cmd = next(x for x in gym_env["commands"] if x.startswith("gym eval run --no-serve"))
    cmd = cmd.replace("results/shinken_cua_example.jsonl", str(out))
    t0 = time.monotonic()
    r = c.exec(cmd, timeout=1200)
    elapsed = time.monotonic() - t0
    assert r.returncode == 0, (r.stdout + r.stderr)[-6000:]
    rollouts = _rollouts(out)
    assert len(rollouts) == 5
    assert {x["task_id"] for x in rollouts} == {"hello-file", "zenity-entry"}
    for x in rollouts:
        assert x["reward"] == 1.0, (x["task_id"], x.get("failure_reason"), x.get("reward_output_tail"))
        assert x["mask_sample"] is False
        assert sp.follows_script(x["task_id"], _calls(x)), _calls(x)
        assert x["response"]["usage"]["total_tokens"] > 0
    failures = out.with_name("rollouts_failures.jsonl")
    assert not failures.exists() or failures.read_text().strip() == ""
    assert not gym_env["policy"].errors
    metrics = json.loads(out.with_name("rollouts_aggregate_metrics.json").read_text())
    assert "1.0" in json.dumps(metrics)
    print(f"\n5 rollouts through gym eval run in {elapsed:.1f}s ({5 * 3600 / elapsed:.0f} rollouts/hour)")


def test_legacy_ng_collect_rollouts(gym_env) -> None:
    c: gh.GymContainer = gym_env["container"]
    out = gym_env["tmp"] / "legacy" / "rollouts.jsonl"
    ws = gym_env["ws"]
    r = c.exec(f"ng_collect_rollouts +agent_name={AGENT} +input_jsonl_fpath={ws / SERVER_DIR}/data/train.jsonl "
               f"+output_jsonl_fpath={out} +limit=1 +num_samples_in_parallel=1", timeout=900)
    assert r.returncode == 0, (r.stdout + r.stderr)[-6000:]
    rollouts = _rollouts(out)
    assert len(rollouts) == 1 and rollouts[0]["reward"] == 1.0


def test_collate_example_validation_passes(gym_env) -> None:
    c: gh.GymContainer = gym_env["container"]
    outdir = gym_env["tmp"] / "collate"
    cmd = next(x for x in gym_env["commands"] if x.startswith("gym dataset collate"))
    cmd = cmd.replace("results/example_validation", str(outdir))
    r = c.exec(cmd, timeout=600)
    assert r.returncode == 0, (r.stdout + r.stderr)[-6000:]
    rows = _rollouts(outdir / "example.jsonl")
    assert len(rows) == 5  # collate drops invalid rows silently: all five survived
    assert (outdir / "example_metrics.json").is_file()


def test_servers_release_their_forks(gym_env) -> None:
    # Rollouts that reached /verify release their containers at once; none may be alive now
    # for a rollout of this container's resources server.
    c: gh.GymContainer = gym_env["container"]
    pids = c.pids()
    r = subprocess.run(["docker", "ps", "--filter", "label=shinken.kind=fork", "--format",
                        '{{.Label "shinken.owner"}}'], capture_output=True, text=True)
    ours = [o for o in r.stdout.split() if o.count("/") == 2 and o.split("/")[1].isdigit()
            and int(o.split("/")[1]) in pids]
    assert ours == []
