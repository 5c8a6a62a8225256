"""NeMo Gym 0.7.0's own sandbox layer drives the `shinken` provider inside the Gym runner image
(tests/provider_drive.py, run by the runner's own Gym interpreter after `pip install` of the wheel
a workspace ships, built as make-workspace builds it): registry lookup through the entry point,
the Sandbox / AsyncSandbox facade over every call, Gym's error types, and a killed creator's
sandboxes (and a TTL-expired one) reclaimed by `shinken gc` on the host. No Gym servers are
started: the provider needs none (a bare runner container, not another Gym stack)."""

from __future__ import annotations

import json
import os
import shutil
import signal
import subprocess
import sys
import time
import uuid
from pathlib import Path

import pytest

from gym_harness import DEMO, GymContainer, sandbox_image, shinken
from shinken.sandbox.ownership import LABEL_RUN, labels_for
from shinken.workspace.wheel import build_wheel
from shinken.workspace.writer import SERVER_CODE

pytestmark = [pytest.mark.docker, pytest.mark.slow]

DRIVE = Path(__file__).resolve().parent / "provider_drive.py"
TEMPLATES = Path(__file__).resolve().parent.parent / "workspace_templates" / "server"


def _args(run: str) -> str:
    return json.dumps({"image": sandbox_image("linux"), "base": sandbox_image("cua"), "run_id": run,
                       "task_root": str(DEMO), "network": run})


def _run_ids(run: str) -> list[str]:
    r = subprocess.run(["docker", "ps", "-aq", "--no-trunc", "--filter", f"label={LABEL_RUN}={run}"],
                       capture_output=True, text=True)
    return r.stdout.split()


@pytest.fixture(scope="module")
def runner(tmp_path_factory, docker_client):
    """A runner container with the workspace wheel installed into Gym's own environment."""
    tmp = tmp_path_factory.mktemp("provider-gym")
    wheel = build_wheel(tmp, [(TEMPLATES / rel).read_text() for rel in SERVER_CODE])
    shutil.copy(DRIVE, tmp / "provider_drive.py")
    c = GymContainer(mounts=[tmp, DEMO]).start()
    try:
        t0 = time.monotonic()
        r = c.exec(f"pip install -q {wheel}", timeout=900)  # PATH: the runner's /opt/gym
        assert r.returncode == 0, r.stdout + r.stderr
        print(f"\nwheel installed in {time.monotonic() - t0:.1f}s")
        yield c, tmp
    finally:
        c.stop()


@pytest.fixture()
def drive(runner):
    c, tmp = runner
    run = f"gymprov-{uuid.uuid4().hex[:8]}"
    # The sandboxes' own network (named after the run): a shared engine's docker0 can be missing.
    label_args = [a for k, v in labels_for("network", run=run).items() for a in ("--label", f"{k}={v}")]
    net = subprocess.run(["docker", "network", "create", *label_args, run], capture_output=True, text=True)
    assert net.returncode == 0, net.stderr
    try:
        yield c, f"python {tmp}/provider_drive.py", run, tmp
    finally:
        left = _run_ids(run)
        if left:
            subprocess.run(["docker", "rm", "-f", *left], capture_output=True)
        subprocess.run(["docker", "network", "rm", run], capture_output=True)


def test_gym_registry_and_facade_drive_the_shinken_provider(drive):
    c, script, run, _ = drive
    t0 = time.monotonic()
    r = c.exec(f"{script} api '{_args(run)}'", timeout=900)
    took = time.monotonic() - t0
    assert r.returncode == 0, (r.stdout + r.stderr)[-6000:]
    out = json.loads(r.stdout.strip().splitlines()[-1])
    print(f"\nGym facade run: {took:.1f}s; plain start {out['sync_start_s']}s, task fork start {out['task_start_s']}s")
    assert out["listed"] and out["entry_point"] and out["class"] == "shinken.provider.gym.ShinkenProvider"
    assert out["capabilities"] == {"pause_resume": True, "connect": True, "endpoint": True}
    assert out["exec"] == ["gym /work from spec\n", "oops\n", 7, None]
    assert out["roundtrip"] == "uploaded by gym\n"
    assert (out["status_running"], out["status_paused"], out["status_paused_again"]) == ("running", "paused", "paused")
    assert out["exec_after_pause"] == ["awake\n", 0] and out["status_after_exec"] == "running"
    assert out["status_resumed"] == "running" and out["timeout"] == ["timeout"]
    assert out["task_exec"][1] == 0 and out["task_exec"][0].startswith("user\n"), out["task_exec"]
    assert "initial_setup.sh" in out["task_exec"][0]
    assert out["descriptor"]["provider"] == "shinken" and out["descriptor"]["task_id"] == "hello-file"
    assert out["after_connect"] == "seen-by-another\n" and out["task_status"] == "running"
    assert out["endpoint"][0].startswith("http://127.0.0.1:") and out["endpoint"][1] == "served\n"
    errors = out["errors"]
    assert errors["unknown_key"].startswith("ValueError: sandbox.shinken: unknown key(s) bogus_key"), errors
    assert errors["bad_option"].startswith("SandboxCreateError: provider_options: unknown key(s) colour"), errors
    assert errors["no_image"].startswith("SandboxCreateError: spec.image or provider_options.task_id"), errors
    assert errors["no_task"].startswith("SandboxCreateError: task 'no-such-task': not found"), errors
    assert errors["bad_image"].startswith("SandboxCreateError: image 'shinken/no-such-image:none'"), errors
    assert errors["not_ready"].startswith("SandboxCreateVerificationError: sandbox "), errors
    assert _run_ids(run) == []  # every sandbox closed, none left by the refused or half-made ones


def test_killed_creator_and_expired_sandbox_are_reclaimed_by_gc(drive):
    c, script, run, tmp = drive
    log = f"{tmp}/provider-spawn-{run}.log"
    args = tmp / f"args-{run}.json"  # a file: spawn's shell wrapper quotes with '
    args.write_text(_args(run))
    pid = c.spawn(f"{script} spawn {args}", log)
    ids: list[str] = []
    deadline = time.monotonic() + 600
    while time.monotonic() < deadline and not ids:
        text = c.exec(f"cat {log}").stdout
        lines = [ln for ln in text.splitlines() if ln.startswith("[")]
        ids = json.loads(lines[-1]) if lines else []
        if not ids:
            assert Path(f"/proc/{pid}").exists(), text[-4000:]
            time.sleep(1)
    assert len(ids) == 3, c.exec(f"cat {log}").stdout[-4000:]
    plain, short, task = ids
    pooled: list[str] = []  # the task's warm pool, filled in the background after the task fork's create
    deadline = time.monotonic() + 300
    while time.monotonic() < deadline and not pooled:
        pooled = subprocess.run(["docker", "ps", "-q", "--no-trunc", "--filter", f"label={LABEL_RUN}={run}",
                                 "--filter", "label=shinken.kind=pool"], capture_output=True, text=True).stdout.split()
        time.sleep(0.5)
    assert len(pooled) == 1, c.exec(f"cat {log}").stdout[-4000:]
    time.sleep(2.5)  # the second one's ttl_s=2 has passed; its creator still lives
    r = shinken("gc", "--force", "--label", f"{LABEL_RUN}={run}", "--json", timeout=300)
    assert r.returncode == 0, r.stdout + r.stderr
    doc = json.loads(r.stdout)
    gone = {i["id"]: i["reason"] for i in doc["reclaimed"]}
    assert set(gone) == {short} and "past its ttl_s" in gone[short], doc
    # the creator's lease on the task's golden (docs/sandbox.md): kept while it lives, like its sandboxes
    leases = subprocess.run(["docker", "ps", "-aq", "--no-trunc", "--filter", f"label={LABEL_RUN}={run}",
                             "--filter", "label=shinken.kind=lease"], capture_output=True, text=True).stdout.split()
    assert len(leases) == 1, leases
    os.kill(pid, signal.SIGKILL)
    deadline = time.monotonic() + 30
    while Path(f"/proc/{pid}").exists() and time.monotonic() < deadline:
        time.sleep(0.2)
    r = shinken("gc", "--force", "--label", f"{LABEL_RUN}={run}", "--json", timeout=300)
    assert r.returncode == 0, r.stdout + r.stderr
    doc = json.loads(r.stdout)
    gone = {i["id"]: i["reason"] for i in doc["reclaimed"]}
    assert set(gone) == {plain, task, pooled[0], leases[0]}, doc  # the waiting pool fork and the lease too
    assert all("dead" in why or "not running" in why or "exited" in why for why in gone.values()), gone
    assert _run_ids(run) == []


if __name__ == "__main__":  # pragma: no cover
    sys.exit(pytest.main([__file__, "-x", "-s"]))
