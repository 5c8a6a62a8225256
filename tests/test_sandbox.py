"""The Docker sandbox against the real engine and the real sandbox image: golden builds
of every demo bundle, forks, isolation, replay of process steps, reward runs including
hostile reward scripts (written to tmp_path bundles), labels and the golden cache."""

from __future__ import annotations

import datetime
import json
import os
import sys
import time
import uuid
from pathlib import Path

import pytest

from shinken.bundles.loader import load_bundle
from shinken.sandbox import guest, verifier
from shinken.sandbox.api import InfraError, SetupError
from shinken.sandbox.container import EXEC_GRACE_S
from shinken.sandbox.docker_provider import DockerProvider
from shinken.sandbox.ownership import LABEL_KIND, LABEL_OWNER, LABEL_RUN, Owner
from shinken.sandbox.policy import Limits
from shinken.tiers import Tier

pytestmark = pytest.mark.docker

REPO = Path(__file__).resolve().parent.parent
if str(REPO) not in sys.path:
    sys.path.insert(0, str(REPO))
from tests.desktop_demos import ALL_DEMOS  # noqa: E402

DEMO = REPO / "demo"
SPREADSHEET = "9a1f6c2e-5b3d-4e8a-9c71-2f0d4b6a8e13"
# In every bundle write_bundle makes: its goldens are this run's own, so another session
# running this module at the same time neither reuses them nor has them deleted under it.
SALT = uuid.uuid4().hex


@pytest.fixture(scope="module")
def image(docker_client) -> str:
    # SHINKEN_TEST_IMAGE lets a developer point at another image; CI builds the real one
    # (cached by content hash).
    ref = os.environ.get("SHINKEN_TEST_IMAGE")
    if ref:
        return docker_client.images.get(ref).id
    from shinken.images.build import ensure_image

    return ensure_image("linux", client=docker_client)


@pytest.fixture(scope="module")
def provider(docker_client):
    run = "test-sandbox-" + uuid.uuid4().hex[:8]
    p = DockerProvider(docker_client, run_id=run)
    built: list = []
    p.test_built = built  # goldens this module built, removed at the end
    yield p
    p.close()
    for g in built:
        p.delete_golden(g)
    left = docker_client.containers.list(all=True, filters={"label": f"{LABEL_RUN}={run}"})
    assert not left, f"containers left behind: {[c.name for c in left]}"


def _golden(provider, bundle, image, **kw):
    g = provider.ensure_golden(bundle, image, **kw)
    if not g.reused:
        provider.test_built.append(g)
    return g


def write_bundle(root: Path, name: str, reward: str, config: list | None = None, files: dict | None = None,
                 **extra) -> Path:
    d = root / name
    d.mkdir(parents=True)
    task = {"id": name, "instruction": "test", "app_type": "os", "shinken_state_fidelity": "filesystem",
            "config": config or [], "evaluator": {"type": "python", "url": "./reward.py"}, **extra}
    (d / "config.json").write_text(json.dumps(task))
    (d / "reward.py").write_text(reward)
    (d / "salt.txt").write_text(SALT)
    for n, text in (files or {}).items():
        (d / n).write_text(text)
    return d


# What each demo bundle's setup leaves behind, and the reward of the untouched state.
DEMO_EXPECT = {
    "hello-file": ("/home/user/notes/todo.txt", 0.0, None),
    SPREADSHEET: ("/home/user/sales.xlsx", 0.0, None),
    "zenity-entry": ("/home/user/ask_name.sh", 0.0, None),
    "zero-signal": ("/home/user/readme.txt", 1.0, None),
    "broken-reward": (None, None, "no_reward_line"),
}


# The oracle and vandal probe demos (golden_patch.py, rewards that pay for damage): tests/test_probe.py's
# test_oracle_probe and test_vandal_probe build their goldens, fork them and score them.
CHECK_DEMOS = ("oracle-solves", "oracle-half", "oracle-wrong-path", "vandal-except-pass", "vandal-absent-check",
               "delete-the-file")


def test_every_demo_bundle_is_covered() -> None:
    # the desktop demos need the CUA image's apps: tests/test_start_state.py runs them
    assert sorted(p.name for p in DEMO.iterdir() if p.is_dir()) == sorted([*DEMO_EXPECT, *ALL_DEMOS, *CHECK_DEMOS])


@pytest.mark.parametrize("name", sorted(DEMO_EXPECT))
def test_demo_golden_fork_and_reward(provider, image, name) -> None:
    bundle = load_bundle(DEMO / name)
    golden = _golden(provider, bundle, image)
    assert golden.image_id.startswith("sha256:") and golden.bundle_hash == bundle.bundle_hash
    assert golden.lost_processes == [] and not golden.needs_relaunch  # nothing left running: snapshot tier
    path, reward, error = DEMO_EXPECT[name]
    with provider.fork(golden) as fork:
        if path:
            res = fork.exec(["test", "-s", path])
            assert res.exit_code == 0, f"{path} missing in the fork of {name}"
        result = fork.run_reward(bundle, timeout=60)
        assert (result.reward, result.error) == (reward, error), result.output_tail


def test_imported_bundle_is_recorded_not_refused(provider, image) -> None:
    # An imported bundle (no shinken_state_fidelity) gets a golden with the record of what its
    # setup left; the spreadsheet setup leaves nothing running, so a plain fork is exact.
    bundle = load_bundle(DEMO / SPREADSHEET)
    assert bundle.state_fidelity == "process_memory"
    golden = _golden(provider, bundle, image)
    assert golden.desktop is not None and golden.desktop.roots == () and not golden.needs_relaunch


def test_forks_are_isolated_and_see_the_golden(provider, image) -> None:
    golden = _golden(provider, load_bundle(DEMO / "hello-file"), image)
    a, b = provider.fork(golden), provider.fork(golden)
    try:
        assert a.id != b.id
        assert a.exec("echo only-a > /home/user/hello.txt && rm /home/user/notes/todo.txt").ok
        assert a.download("/home/user/hello.txt") == b"only-a\n"
        assert b.exec("test -e /home/user/hello.txt").exit_code == 1
        assert b.download("/home/user/notes/todo.txt").startswith(b"remember")
        with pytest.raises(FileNotFoundError):
            a.download("/home/user/notes/todo.txt")
    finally:
        a.close()
        b.close()
    c = provider.fork(golden)  # the golden itself is untouched
    try:
        assert c.exec("test -e /home/user/notes/todo.txt && test ! -e /home/user/hello.txt").ok
    finally:
        c.close()


def test_golden_cache_hit_and_labels(provider, image, docker_client, tmp_path) -> None:
    d = write_bundle(tmp_path, "cache-" + uuid.uuid4().hex[:8], 'print("REWARD: 0")\n',
                     config=[{"type": "execute", "parameters": {"command": "echo x > /home/user/x"}}])
    bundle = load_bundle(d)
    since = int(time.time()) - 1
    first = _golden(provider, bundle, image)
    assert not first.reused
    second = provider.ensure_golden(bundle, image)
    assert second.reused and second.image_id == first.image_id and second.tag == first.tag
    # no build for the second call: this task's only container is the first call's build (a
    # timed bound here was at the mercy of a loaded box; what matters is that nothing was built)
    made = docker_client.api.events(since=since, until=int(time.time()) + 1, decode=True,
                                    filters={"type": "container", "event": "create", "label": f"shinken.task={bundle.id}"})
    kinds = sorted(e["Actor"]["Attributes"].get(LABEL_KIND, "") for e in made)
    assert kinds == ["build", "lease"]  # the first call's build, and this provider's one lease on the golden
    labels = docker_client.images.get(first.image_id).labels
    me = Owner.current().label()
    assert labels[LABEL_KIND] == "golden" and labels[LABEL_OWNER] == me
    assert labels["shinken.task"] == bundle.id and labels["shinken.bundle_hash"] == bundle.bundle_hash
    assert labels["shinken.base_image"] == image and labels["shinken.managed"] == "1"
    with provider.fork(first) as fork:
        c = docker_client.containers.get(fork.id)
        assert c.labels[LABEL_KIND] == "fork" and c.labels[LABEL_OWNER] == me
        assert c.labels[LABEL_RUN] == provider.run_id and c.labels["shinken.golden"] == first.image_id
        hc = c.attrs["HostConfig"]
        assert hc["CapDrop"] == ["ALL"] and "no-new-privileges" in hc["SecurityOpt"][0]
        assert hc["NetworkMode"] == "none" and hc["PidsLimit"] > 0 and hc["Memory"] > 0
    # no build container survives a build
    builds = docker_client.containers.list(all=True, filters={"label": [f"{LABEL_KIND}=build",
                                                                         f"{LABEL_RUN}={provider.run_id}"]})
    assert builds == []
    # a changed bundle is a different golden
    (d / "extra.txt").write_text("changed")
    third = _golden(provider, load_bundle(d), image)
    assert not third.reused and third.image_id != first.image_id


def test_delete_golden_is_explicit(provider, image, docker_client, tmp_path) -> None:
    d = write_bundle(tmp_path, "del-" + uuid.uuid4().hex[:8], 'print("REWARD: 0")\n')
    golden = provider.ensure_golden(load_bundle(d), image)
    fork = provider.fork(golden)  # deleting closes this provider's forks of it first
    provider.delete_golden(golden)
    assert not docker_client.images.list(filters={"label": f"shinken.bundle_hash={golden.bundle_hash}"})
    assert not docker_client.containers.list(all=True, filters={"id": fork.id})
    provider.delete_golden(golden)  # already gone: fine
    with pytest.raises(Exception):
        provider.delete_golden(image)  # not a golden: refused


def test_setup_failure_names_the_step(provider, image, tmp_path) -> None:
    d = write_bundle(tmp_path, "failing-setup", 'print("REWARD: 0")\n', files={"s.sh": "echo about to fail; exit 3\n"},
                     config=[{"type": "download", "parameters": {"files": [{"url": "./s.sh", "path": "/home/user/s.sh"}]}},
                             {"type": "execute", "parameters": {"command": ["bash", "/home/user/s.sh"]}}])
    with pytest.raises(SetupError) as info:
        provider.ensure_golden(load_bundle(d), image)
    err = info.value
    assert (err.step_index, err.step_type) == (1, "execute")
    assert "config[1] (execute)" in str(err) and "status 3" in err.detail
    assert "about to fail" in err.output_tail


def test_setup_memory_hog_is_a_setup_error(tight_provider, image, tmp_path) -> None:
    d = write_bundle(tmp_path, "setup-hog", 'print("REWARD: 0")\n',
                     config=[{"type": "execute", "parameters": {"command": [
                         "python3", "-c", "x = bytearray(2 << 30)\nfor i in range(0, len(x), 4096): x[i] = 1"]}}])
    with pytest.raises(SetupError) as info:
        tight_provider.ensure_golden(load_bundle(d), image)
    assert info.value.step_index == 0 and "oom_kills=" in info.value.detail


def test_remote_download_needs_network(provider, image, tmp_path) -> None:
    d = write_bundle(tmp_path, "remote", 'print("REWARD: 0")\n',
                     config=[{"type": "download", "parameters": {"files": [
                         {"url": "https://example.com/data.xlsx", "path": "/home/user/data.xlsx"}]}}])
    with pytest.raises(SetupError, match="no network") as info:
        provider.ensure_golden(load_bundle(d), image)
    assert info.value.step_type == "download"


def test_lost_processes_are_recorded(provider, image, tmp_path) -> None:
    d = write_bundle(tmp_path, "lost-" + uuid.uuid4().hex[:8], 'print("REWARD: 0")\n',
                     config=[{"type": "execute", "parameters": {
                         "command": "nohup sleep 4242 >/dev/null 2>&1 & echo started"}}])
    golden = _golden(provider, load_bundle(d), image)
    assert any("sleep 4242" in p for p in golden.lost_processes), golden.lost_processes
    again = provider.ensure_golden(load_bundle(d), image)
    assert again.reused and again.lost_processes == golden.lost_processes
    assert again.desktop == golden.desktop and [r.argv for r in golden.desktop.roots] == [("sleep", "4242")]
    with provider.fork(golden, tier=Tier.FILESYSTEM) as fork:  # a plain fork loses it
        assert "sleep 4242" not in fork.exec(["ps", "-eo", "args"]).output
    with provider.fork(golden) as fork:  # the default (relaunch) brings it back
        assert fork.tier is Tier.RELAUNCH
        assert "sleep 4242" in fork.exec(["ps", "-eo", "args"]).output


def test_exec_timeout_upload_download(provider, image) -> None:
    golden = _golden(provider, load_bundle(DEMO / "hello-file"), image)
    with provider.fork(golden) as fork:
        t0 = time.monotonic()
        res = fork.exec("echo before; sleep 30", timeout=1)
        assert res.timed_out and res.exit_code is None and "before" in res.output
        assert time.monotonic() - t0 < 1 + EXEC_GRACE_S  # the in-container timeout, not the API guard
        # a background process left holding the output pipe does not hold the exec
        t0 = time.monotonic()
        res = fork.exec("sleep 100 & echo started", timeout=30)
        assert res.ok and res.output == "started\n" and time.monotonic() - t0 < 10
        res = fork.exec(["bash", "-c", "echo out; echo err >&2; exit 7"])
        assert (res.exit_code, res.timed_out) == (7, False) and "out" in res.output and "err" in res.output
        res = fork.exec("head -c 200000 /dev/zero | tr '\\0' a; echo END", max_output=1000)
        assert res.truncated and len(res.output) <= 1000 and res.output.rstrip().endswith("END")
        fork.upload(b"\x00\x01binary", "/home/user/a/b/c.bin", mode=0o600)
        assert fork.download("/home/user/a/b/c.bin") == b"\x00\x01binary"
        assert fork.exec("stat -c '%U %a' /home/user/a/b/c.bin").output.strip() == "user 600"
        assert fork.exec("id -un").output.strip() == "user"
        assert fork.exec("id -un", user="root").output.strip() == "root"


def test_sandbox_has_no_network_and_no_privileges(provider, image) -> None:
    golden = _golden(provider, load_bundle(DEMO / "hello-file"), image)
    with provider.fork(golden) as fork:
        assert fork.exec("ls /sys/class/net").output.split() == ["lo"]
        caps = fork.exec("grep CapEff /proc/self/status").output.split()[-1]
        assert int(caps, 16) == 0  # `user` holds no capabilities
        nnp = fork.exec("grep NoNewPrivs /proc/self/status").output.split()[-1]
        assert nnp == "1"


def test_reward_runs_as_the_verifier_from_a_root_owned_dir(provider, image, tmp_path) -> None:
    # The verifier's uid is not the policy's; it reads the user's private files (as root would)
    # and runs isolated: no user site, no working folder on sys.path, a fixed PATH.
    d = write_bundle(tmp_path, "whoami", "import os, sys\n"
                     "print('uid', os.getuid(), 'path', __file__, 'cwd', os.getcwd())\n"
                     "print('isolated', sys.flags.isolated, 'usersite', sys.flags.no_user_site)\n"
                     "print('PATH', os.environ['PATH'])\n"
                     "print('private:', open('/home/user/private/secret.txt').read().strip())\n"
                     "print('REWARD: 1.0')\n")
    bundle = load_bundle(d)
    golden = _golden(provider, bundle, image)
    with provider.fork(golden) as fork:
        mine = fork.exec("mkdir -m 700 ~/private && (umask 077; echo s3cret > ~/private/secret.txt) && "
                         "test ! -w /opt && echo ok")
        assert mine.ok and "ok" in mine.output, mine
        res = fork.run_reward(bundle)
        owner = fork.exec(["stat", "-c", "%u %a", f"{guest.REWARD_DIR}/reward.py"], user="root").output.split()
        # the seal's report carries the free room an unsolved reward's machine check reads (as df says it)
        seal_free, df_free = fork.seal.free_kib if fork.seal else None, fork.free_kib()
    assert seal_free is not None and df_free is not None and abs(seal_free - df_free) < 256 * 1024, (seal_free, df_free)
    assert res.reward == 1.0 and res.error is None, res
    assert f"uid {guest.VERIFIER_UID} path {guest.REWARD_DIR}/reward.py cwd {guest.REWARD_DIR}/home" in res.output_tail
    assert "isolated 1 usersite 1" in res.output_tail and f"PATH {guest.PATH}" in res.output_tail
    assert "private: s3cret" in res.output_tail
    assert owner == ["0", "644"]


def test_a_reward_too_large_for_the_seals_arguments_is_uploaded_and_runs_the_same(provider, image, tmp_path) -> None:
    # The reward's files normally travel as the seal's exec arguments (one argument holds 128 KiB);
    # a larger reward.py goes through the engine's upload, with the same owner, mode and verifier.
    src = ("# " + "x" * 100 + "\n") * 1000 + "import os\nprint('uid', os.getuid(), 'cwd', os.getcwd())\nprint('REWARD: 1.0')\n"
    assert verifier.placements(src.encode()) is None and verifier.placements(b"print(1)\n") is not None
    bundle = load_bundle(write_bundle(tmp_path, "big-reward", src))
    with provider.fork(_golden(provider, bundle, image)) as fork:
        res = fork.run_reward(bundle)
        owner = fork.exec(["stat", "-c", "%u %a %s", f"{guest.REWARD_DIR}/reward.py"], user="root").output.split()
    assert res.reward == 1.0 and res.error is None, res
    assert f"uid {guest.VERIFIER_UID} cwd {guest.REWARD_DIR}/home" in res.output_tail
    assert owner == ["0", "644", str(len(src))]


def test_reward_infinite_loop_is_killed_at_timeout(provider, image, tmp_path) -> None:
    d = write_bundle(tmp_path, "forever", "print('spinning', flush=True)\nwhile True:\n    pass\n")
    bundle = load_bundle(d)
    golden = _golden(provider, bundle, image)
    with provider.fork(golden) as fork:
        t0 = time.monotonic()
        res = fork.run_reward(bundle, timeout=2)
        assert time.monotonic() - t0 < 2 + EXEC_GRACE_S  # the in-container timeout, not the API guard
        assert res.error == "timeout" and res.reward is None and "spinning" in res.output_tail
        # the loop is gone: nothing left burning CPU in the fork
        assert "python3" not in fork.exec(["ps", "-eo", "comm"]).output


@pytest.fixture(scope="module")
def tight_provider(docker_client):
    """Small limits so a hostile reward hits them fast."""
    p = DockerProvider(docker_client, run_id="test-sandbox-tight-" + uuid.uuid4().hex[:8],
                       limits=Limits(mem="256m", pids=64))
    yield p
    p.close()


def test_reward_fork_bomb_is_contained(tight_provider, provider, image, docker_client, tmp_path) -> None:
    d = write_bundle(tmp_path, "forkbomb", "import os\nprint('bomb', flush=True)\nwhile True:\n"
                     "    try:\n        os.fork()\n    except OSError:\n        pass\n")
    bundle = load_bundle(d)
    golden = _golden(provider, bundle, image)
    with tight_provider.fork(golden) as fork:
        res = fork.run_reward(bundle, timeout=3)
        assert res.error in ("resource_limit", "crash"), res
        assert res.error == "resource_limit" and "pids_limit" in res.output_tail
        # the fork is still usable once the bomb is killed, and the host is fine
        assert fork.exec("echo alive", timeout=10).output.strip() == "alive"
    assert docker_client.ping()


def test_reward_escaping_fork_bomb_is_contained(tight_provider, provider, image, docker_client, tmp_path) -> None:
    # setsid() leaves the timeout's process group: the run still ends at the timeout and
    # every process of `user` is killed afterwards
    d = write_bundle(tmp_path, "setsid-bomb", "import os, time\nos.setsid()\nprint('bomb', flush=True)\n"
                     "while True:\n    try:\n        os.fork()\n    except OSError:\n        time.sleep(0.01)\n")
    bundle = load_bundle(d)
    golden = _golden(provider, bundle, image)
    with tight_provider.fork(golden) as fork:
        t0 = time.monotonic()
        res = fork.run_reward(bundle, timeout=3)
        assert time.monotonic() - t0 < 20
        assert res.error == "resource_limit", res
        deadline = time.monotonic() + 10
        while time.monotonic() < deadline:
            try:
                out = fork.exec(["ps", "-e", "-o", "comm="], timeout=5, user="root")
            except InfraError:
                continue
            if out.ok and "python3" not in out.output:
                break
            time.sleep(0.2)
        assert out.ok and "python3" not in out.output
    assert docker_client.ping()


def test_reward_memory_hog_is_contained(tight_provider, provider, image, docker_client, tmp_path) -> None:
    d = write_bundle(tmp_path, "memhog", "print('allocating', flush=True)\nx = bytearray(2 << 30)\n"
                     "for i in range(0, len(x), 4096):\n    x[i] = 1\nprint('REWARD: 1.0')\n")
    bundle = load_bundle(d)
    golden = _golden(provider, bundle, image)
    with tight_provider.fork(golden) as fork:
        res = fork.run_reward(bundle, timeout=30)
        assert res.error == "resource_limit" and res.reward is None, res
        assert "oom_kills=" in res.output_tail
        assert fork.exec("echo alive").output.strip() == "alive"
    assert docker_client.ping()


def test_a_failed_reward_leaves_no_kill_for_the_next_exec(provider, image, docker_client, tmp_path) -> None:
    # The kill of a failed reward's processes is over when run_reward returns: a detached
    # `kill -KILL -1` as user once landed on whatever ran next (here: within the sleep).
    d = write_bundle(tmp_path, "hang", "import time\nprint('waiting', flush=True)\ntime.sleep(3600)\n")
    bundle = load_bundle(d)
    golden = _golden(provider, bundle, image)
    with provider.fork(golden) as fork:
        since = int(time.time()) - 1
        res = fork.run_reward(bundle, timeout=1)
        assert res.error == "timeout", res
        # the wrapper reported, so its kill builtin did the work: no separate kill exec
        # (a detached one needs no more than a busy scheduler to land later)
        execs = [e["status"] for e in docker_client.api.events(
            since=since, until=int(time.time()) + 1, decode=True,
            filters={"container": fork.id, "event": "exec_create"})]
        assert any("reward.py" in e for e in execs) and not [e for e in execs if ": kill " in e], execs
        after = fork.exec("sleep 2; echo alive", timeout=30)
        assert after.ok and after.output.strip() == "alive", after
        assert "python3" not in fork.exec(["ps", "-e", "-o", "comm="], user="root").output


def test_a_reward_that_kills_the_wrapper_still_has_its_processes_killed(provider, image, tmp_path) -> None:
    # No marker line: the waited-for fallback kill ends what the reward left (a sleeper in its
    # own session, outside the timeout's process group) before run_reward returns.
    d = write_bundle(tmp_path, "wrapper-killer", "import os, subprocess, time\n"
                     "subprocess.Popen(['sleep', '3600'], start_new_session=True, stdout=subprocess.DEVNULL,"
                     " stderr=subprocess.DEVNULL)\n"
                     "wrapper = int(open(f'/proc/{os.getppid()}/stat').read().rsplit(')', 1)[1].split()[1])\n"
                     "os.kill(wrapper, 9)\ntime.sleep(3600)\n")
    bundle = load_bundle(d)
    golden = _golden(provider, bundle, image)
    with provider.fork(golden) as fork:
        res = fork.run_reward(bundle, timeout=2)
        assert res.error in ("timeout", "crash") and res.reward is None, res
        left = fork.exec(["ps", "-u", guest.USER, "-o", "comm="], user="root")
        assert left.exit_code in (0, 1) and left.output.split() == [], left
        assert fork.exec("echo alive").output.strip() == "alive"


def test_zenity_dialog_is_back_after_fork(provider, image, docker_client) -> None:
    bundle = load_bundle(DEMO / "zenity-entry")
    golden = _golden(provider, bundle, image)
    assert golden.needs_desktop and [s.type for s in golden.post_fork] == ["launch", "sleep"]
    with provider.fork(golden) as fork:
        deadline = time.monotonic() + 10
        while True:
            res = fork.exec("pgrep -x zenity && xdotool search --name '^Shinken$'")
            if res.ok or time.monotonic() > deadline:
                break
            time.sleep(0.2)
        assert res.ok, f"no zenity window after fork: {res.output}"
        assert _launches(docker_client, fork.id), "the replay issued no launch"
        # answering the replayed dialog is scored by the bundle's reward (zenity writes as it exits)
        assert fork.exec("xdotool search --name '^Shinken$' windowactivate --sync; "
                         "xdotool type --delay 5 'Ada Lovelace'; xdotool key Return; "
                         "while pgrep -x zenity >/dev/null; do sleep 0.05; done").ok
        assert fork.run_reward(bundle).reward == 1.0
    with provider.fork(golden, replay=False) as fork:
        # no replay: the engine was never asked to launch anything in this fork (its exec records)
        assert _launches(docker_client, fork.id) == []
        assert fork.exec("pgrep -x zenity").exit_code == 1


def _launches(docker_client, cid: str) -> list[str]:
    """Every `launch` (a detached `setsid ... shinken-launch` exec) the engine was asked to make in
    container cid, from the engine's own event stream (exec_create events name the command)."""
    created = docker_client.api.inspect_container(cid)["Created"]
    since = int(datetime.datetime.fromisoformat(created[:19]).replace(tzinfo=datetime.timezone.utc).timestamp()) - 1
    events = docker_client.events(since=since, until=int(time.time()) + 1, decode=True,
                                  filters={"container": cid, "event": "exec_create"})
    return [e["Action"] for e in events if "shinken-launch" in e.get("Action", "")]


def test_warm_pool(provider, image, docker_client) -> None:
    golden = _golden(provider, load_bundle(DEMO / "hello-file"), image)
    with provider.pool(golden, 2) as pool:
        a = pool.acquire(timeout=60)
        b = pool.acquire(timeout=60)
        assert a.id != b.id and a.exec("cat /home/user/notes/todo.txt").ok
        deadline = time.monotonic() + 30
        while pool.ready < 2 and time.monotonic() < deadline:
            time.sleep(0.05)
        assert pool.ready == 2  # refilled in the background
        made = {x["Id"] for x in docker_client.api.containers(
            filters={"label": [f"{LABEL_RUN}={provider.run_id}", f"{LABEL_KIND}=pool"]})}
        c = pool.acquire()
        assert c.id in made  # a computer made beforehand: none is created on acquire
        for f in (a, b, c):
            f.close()
    with pytest.raises(Exception):
        pool.acquire(timeout=0.1)


def test_closed_fork_is_an_error(provider, image) -> None:
    from shinken.sandbox.api import SessionError

    golden = _golden(provider, load_bundle(DEMO / "hello-file"), image)
    fork = provider.fork(golden)
    fork.close()
    fork.close()  # idempotent
    with pytest.raises(SessionError):
        fork.exec("true")


def test_missing_image_is_infra_error(provider) -> None:
    with pytest.raises(InfraError, match="not found"):
        provider.ensure_golden(load_bundle(DEMO / "hello-file"), "shinken/no-such-image:never")


def test_launch_and_open_processes_are_relaunched(provider, image, tmp_path) -> None:
    d = write_bundle(tmp_path, "launcher-" + uuid.uuid4().hex[:8], 'print("REWARD: 0")\n', files={"note.txt": "hi\n"},
                     config=[{"type": "launch", "parameters": {"command": ["sleep", "777"]}},
                             {"type": "download", "parameters": {"files": [{"url": "./note.txt", "path": "/home/user/note.txt"}]}},
                             {"type": "open", "parameters": {"path": "/home/user/note.txt"}},
                             {"type": "sleep", "parameters": {"seconds": 0.2}}])
    golden = _golden(provider, load_bundle(d), image)
    # the whole config ran at build: the launched process was alive at commit, so it is recorded
    # and relaunched on forks; a filesystem-tier fork replays the launch/open steps instead
    assert "sleep 777" in golden.lost_processes
    assert [s.type for s in golden.post_fork] == ["launch", "open", "sleep"]
    with provider.fork(golden) as fork:
        assert fork.tier is Tier.RELAUNCH and fork.exec("pgrep -f '^sleep 777'").ok
    with provider.fork(golden, tier=Tier.FILESYSTEM) as fork:
        assert fork.exec("pgrep -f '^sleep 777'").ok
        # `open` chose an application by extension (or xdg-open), or said there is none
        res = fork.exec("pgrep -af note.txt; cat /tmp/.shinken-launch/*.log")
        assert "note.txt" in res.output, res.output


def test_docker_host_is_honoured(monkeypatch, tmp_path) -> None:
    monkeypatch.setenv("DOCKER_HOST", f"unix://{tmp_path}/no-daemon.sock")
    with pytest.raises(InfraError, match="Docker engine"):
        DockerProvider()
    monkeypatch.setenv("DOCKER_HOST", "unix:///var/run/docker.sock")
    p = DockerProvider()
    assert p.api.ping()
    p.close()
