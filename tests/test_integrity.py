"""Reward integrity on real forks (docs/integrity.md): the red-team battery forges nothing and every
solution beside an attack still scores 1.0; `shinken image audit` fails, naming the attack, on an
image whose PATH has a folder the task's user can write; the policy's processes are stopped before
verify while the task's app keeps running and a reward can still read it live."""

from __future__ import annotations

import json
import shlex
import time
import uuid
from pathlib import Path

import pytest

from shinken.bundles.loader import load_bundle
from shinken.integrity import canary
from shinken.integrity.audit import BROKEN, FORGED, HELD, SCORED, run_battery
from shinken.integrity.battery import ATTACKS
from shinken.sandbox import guest, verifier
from shinken.sandbox.docker_client import run_container
from shinken.sandbox.docker_provider import DockerProvider
from shinken.sandbox.ownership import labels_for

pytestmark = pytest.mark.docker

DEMO = Path(__file__).resolve().parent.parent / "demo"


def test_the_battery_forges_nothing_and_solutions_still_score(linux_image) -> None:
    assert len(ATTACKS) >= 12 and len({a.kind for a in ATTACKS}) >= 8
    outcomes = run_battery(linux_image, ATTACKS, parallel=3)
    table = "\n".join(f"{o.attack} solved={o.solved} {o.verdict} {o.why}" for o in outcomes)
    assert [o.verdict for o in outcomes if not o.solved] == [HELD] * len(ATTACKS), table
    assert [o.verdict for o in outcomes if o.solved] == [SCORED] * len(ATTACKS), table
    assert FORGED not in table and BROKEN not in table


def test_the_canary_solution_is_no_victim_of_the_proc_fd_writer(linux_image, docker_client) -> None:
    """The battery's solved runs must fail only through the verifier. The proc-fd-writer attack
    truncates whatever fd 1 and 2 of the user's processes point at; a solution written by a shell
    redirect is such a target (the control: some of its answers are clobbered), the canary's is not."""
    writer = next(a for a in ATTACKS if a.name == "proc-fd-writer").script
    check = f"cmp -s {canary.ANSWER} /tmp/ref || bad=$((bad+1))"
    script = (f"printf '{canary.SOLVED_TEXT}' > /tmp/ref\n{writer}sleep 0.3\n"
              f"bad=0; for i in $(seq 300); do bash -c \"printf '{canary.SOLVED_TEXT}' > {canary.ANSWER}\"; {check}; done\n"
              "echo redirect=$bad >&2\n"
              f"bad=0; for i in $(seq 150); do bash -lc {shlex.quote(canary.SOLVE)}; {check}; done\n"
              "echo solve=$bad >&2\n")
    box = run_container(docker_client, linux_image, ["bash", "-c", script], user="user", detach=True,
                        network_mode="none", labels=labels_for("build", task="canary-solution"))
    try:
        assert box.wait(timeout=240)["StatusCode"] == 0
        counts = dict(ln.split("=") for ln in box.logs(stdout=False, stderr=True).decode().split()
                      if ln.startswith(("redirect=", "solve=")))
    finally:
        box.remove(force=True)
    assert int(counts["redirect"]) > 0, counts  # the writer does hit a redirect's answer
    assert int(counts["solve"]) == 0, counts


@pytest.fixture(scope="module")
def weak_image(linux_image, shinken_cli, tmp_path_factory) -> str:
    """The linux image with /usr/local/bin writable by everyone (on the verifier's PATH)."""
    frag = tmp_path_factory.mktemp("weak") / "weak-bin.Dockerfile"
    frag.write_text("RUN chmod 0777 /usr/local/bin\n")
    res = shinken_cli("image", "build", "linux", "--extra", str(frag), "--json")
    assert res.returncode == 0, res.stderr
    return json.loads(res.stdout)[0]["tag"]


def test_image_audit_names_the_attack_a_writable_path_folder_lets_through(weak_image, linux_image, shinken_cli) -> None:
    picked = ["--attack", "writable-path-folder", "--attack", "output-injection", "--attack", "tmp-module-shadow"]
    weak = shinken_cli("image", "audit", weak_image, *picked, "--json")
    assert weak.returncode == 1, weak.stderr
    doc = json.loads(weak.stdout)
    verdicts = {(o["attack"], o["solved"]): o for o in doc["outcomes"]}
    assert verdicts[("writable-path-folder", False)]["verdict"] == FORGED
    assert "writable: /usr/local/bin" in verdicts[("writable-path-folder", False)]["why"]
    assert verdicts[("output-injection", False)]["verdict"] == HELD and doc["forged"] == 1
    assert "1 attack(s) forged" in weak.stderr and "Traceback" not in weak.stderr
    shipped = shinken_cli("image", "audit", linux_image, *picked)
    assert shipped.returncode == 0, shipped.stdout + shipped.stderr
    assert "writable-path-folder" in shipped.stdout and "0 forged, 0 broken of 6 runs" in shipped.stdout


def test_an_unknown_attack_is_one_line_exit_2(shinken_cli, linux_image) -> None:
    res = shinken_cli("image", "audit", linux_image, "--attack", "no-such-attack")
    assert res.returncode == 2 and "no attack named no-such-attack" in res.stderr
    assert len(res.stderr.strip().splitlines()) == 1


LIVE_REWARD = """import subprocess, time
title = subprocess.run(["xdotool", "search", "--name", "^Shinken$"], capture_output=True, text=True)
print("window found" if title.returncode == 0 else f"no window: {title.stderr}")
import gi
gi.require_version("Atspi", "2.0")
from gi.repository import Atspi
desktop = Atspi.get_desktop(0)  # the registry answers the verifier: it lists the apps
apps = desktop.get_child_count()
names = [desktop.get_child_at_index(i).get_name() for i in range(apps)]
print("a11y apps:", apps, "names:", names)
left = subprocess.run(["pgrep", "-u", "user", "-f", "policy-sleeper"], capture_output=True, text=True).stdout.split()
print("policy processes left:", len(left))
ok = title.returncode == 0 and apps >= 1 and not left
print(f"REWARD: {1.0 if ok else 0.0}")
"""


def test_the_policy_stops_before_verify_and_the_task_app_stays_readable(linux_image, tmp_path, docker_client) -> None:
    # zenity-entry's dialog is the task's app (replayed on the fork before hand-out): it keeps
    # running through verify, and a reward running as the verifier reads its window through X and
    # the accessibility bus; what the policy started is gone by then.
    folder = tmp_path / "live-app"
    folder.mkdir()
    for f in (DEMO / "zenity-entry").iterdir():
        (folder / f.name).write_bytes(f.read_bytes())
    cfg = json.loads((folder / "config.json").read_text())
    cfg["id"] = "live-app"
    (folder / "config.json").write_text(json.dumps(cfg))
    (folder / "reward.py").write_text(LIVE_REWARD + f"# {uuid.uuid4().hex}\n")
    bundle = load_bundle(folder)
    with DockerProvider(docker_client, run_id="test-integrity-" + uuid.uuid4().hex[:8]) as p:
        golden = p.ensure_golden(bundle, p.resolve_image(linux_image))
        with p.fork(golden) as fork:
            assert {name for _, _, name, _ in fork.handout.keep} >= {"Xvfb", "zenity"}
            assert not {name for _, _, name, _ in fork.handout.keep} & {"bash", "sh"}  # the policy's to drive
            # ask_name.sh, started by the task with no terminal: let finish at verify, never kept
            assert {name for _, _, name, _ in fork.handout.scripts} == {"bash"}
            deadline = time.monotonic() + 60  # the dialog up and on the accessibility bus (slow at load)
            while time.monotonic() < deadline and not (
                    fork.exec("xdotool search --name '^Shinken$'").ok
                    and '"zenity"' in fork.exec("shinken-a11y-dump --app zenity --max-depth 1", timeout=40).output):
                time.sleep(0.5)
            armed = fork.exec("nohup setsid bash -c 'exec -a policy-sleeper sleep 600' >/dev/null 2>&1 & "
                              "sleep 0.3; pgrep -f policy-sleeper")
            assert armed.ok, armed.output
            res = fork.run_reward(bundle)
            assert res.reward == 1.0, res.output_tail
            assert "window found" in res.output_tail and "policy processes left: 0" in res.output_tail
            # The apps' own AT-SPI bridge answers only its uid and root: their names read empty to the
            # verifier (docs/integrity.md says so; a reward reads what the app saved, or X).
            assert "a11y apps: 1 names: ['']" in res.output_tail or "names: ['zenity']" in res.output_tail
            zenity = fork.exec(["pgrep", "-x", "zenity"], user="root")
            assert zenity.ok, "the task's app was stopped"
            who = fork.exec(["ps", "-o", "user=", "-C", "zenity"], user="root").output.split()
            assert who == [guest.USER]


# The task's script waits on its app (a `sleep 600` here), then takes 0.3 s to write the answer, as
# zenity-entry's moves the dialog's answer in place; then it never settles (a child every 50 ms).
FINISHING_SCRIPT = """#!/bin/bash
rm -f /home/user/answer.txt
sleep 600
sleep 0.3; echo 'Ada Lovelace' > /home/user/answer.txt
while true; do sleep 0.05; done
"""


def test_the_tasks_own_script_finishes_what_the_last_action_set_off_before_the_seal(linux_image, tmp_path,
                                                                                    docker_client) -> None:
    # The policy's last action ends the app the script waits on; verify comes at once. The seal
    # once killed the script mid-way (interpreters are never kept) and the answer never came: 0.0.
    folder = tmp_path / "finishing"
    folder.mkdir()
    (folder / "reward.py").write_bytes((DEMO / "zenity-entry" / "reward.py").read_bytes())
    (folder / "finish.sh").write_text(FINISHING_SCRIPT)
    (folder / "config.json").write_text(json.dumps({
        "id": "finishing-" + uuid.uuid4().hex[:8], "instruction": "End the waiting app.", "app_type": "os",
        "shinken_state_fidelity": "filesystem",
        "config": [{"type": "download", "parameters": {"files": [{"url": "./finish.sh", "path": "/home/user/finish.sh"}]}}],
        "shinken_post_fork": [{"type": "launch", "parameters": {"command": ["bash", "/home/user/finish.sh"]}},
                              {"type": "sleep", "parameters": {"seconds": 0.5}}],
        "evaluator": {"type": "python", "url": "./reward.py"}}))
    bundle = load_bundle(folder)
    with DockerProvider(docker_client, run_id="test-integrity-" + uuid.uuid4().hex[:8]) as p:
        golden = p.ensure_golden(bundle, p.resolve_image(linux_image))
        with p.fork(golden) as fork:
            assert "sleep" in {name for _, _, name, _ in fork.handout.keep}
            assert {name for _, _, name, _ in fork.handout.scripts} == {"bash"}
            armed = fork.exec("nohup setsid bash -c 'exec -a policy-sleeper sleep 600' >/dev/null 2>&1 & "
                              "sleep 0.2; pkill -x -u user -f 'sleep 600' ; true")
            assert armed.ok, armed.output
            t0 = time.monotonic()
            res = fork.run_reward(bundle)
            took = time.monotonic() - t0
            assert res.reward == 1.0, res.output_tail
            seal = fork.seal
            assert seal is not None
            # the 0.3 s of in-flight work waited for; the loop after it held the seal at most SETTLE_S
            assert 100 <= seal.settle_ms <= 1000 * verifier.SETTLE_S + 300 and seal.stopped >= 1, seal
            assert took < verifier.SETTLE_S + 10, took
            left = fork.exec(["pgrep", "-u", "user", "-f", "finish.sh|policy-sleeper"], user="root")
            assert not left.ok, left.output  # the script and the policy's process are gone after the seal
