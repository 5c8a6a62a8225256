"""The computer-use engine on real Docker forks of shinken/sandbox-linux (no mocks).

Each module run uses a private copy of the demo bundles with a salted reward.py, so its goldens
have their own bundle hash: the engine may delete them without touching anyone else's."""

from __future__ import annotations

import os
import re
import shutil
import socket
import threading
import time
import uuid
from pathlib import Path

import docker
import pytest

from shinken.computer.contract import EngineConfig
from shinken.computer.engine import ComputerEngine
from shinken.errors import ShinkenError
from shinken.sandbox.api import InfraError, SessionError

pytestmark = pytest.mark.docker

DEMO = Path(__file__).resolve().parent.parent / "demo"
TASKS = ("hello-file", "zenity-entry", "zero-signal", "broken-reward")


def _private_root(dest: Path) -> Path:
    salt = uuid.uuid4().hex
    for name in TASKS:
        shutil.copytree(DEMO / name, dest / name)
        with open(dest / name / "reward.py", "a", encoding="utf-8") as fh:
            fh.write(f"\n# test salt {salt}\n")
    return dest


@pytest.fixture(scope="module")
def sandbox_image(linux_image) -> str:
    return linux_image  # conftest: built for the current sources, cached by content hash


@pytest.fixture(scope="module")
def task_root(tmp_path_factory) -> Path:
    return _private_root(tmp_path_factory.mktemp("tasks"))


@pytest.fixture(scope="module")
def engine(task_root, sandbox_image):
    # No gc of dead owners here: it lives through the module, and every engine of this process
    # takes test_maintenance_reclaims_forks_of_dead_owners' "dead" orphan (our pid, another
    # start time) for its own to reclaim; a pass of this one in that test's window took it
    # first (seen once in CI: the orphan gone, the test's engine reclaimed 0).
    # Demand pools off: it lives through the module and would keep warm hello-file computers of this
    # process, which test_demand_pool_grows_for_a_burst_and_shrinks_when_idle counts as its own.
    eng = ComputerEngine(EngineConfig(task_root, sandbox_image, accept_filesystem=True, idle_ttl_s=600,
                                      demand_pools=False), gc_interval_s=None)
    yield eng
    eng.close()


def _exec(engine, session, gen, command) -> str:
    return engine.tool(session, gen, "computer_exec", {"command": command})


def _container_exists(client, cid: str) -> bool:
    try:
        client.containers.get(cid)
        return True
    except docker.errors.NotFound:
        return False


def test_hello_file_scores_one_via_exec(engine):
    gen = engine.seed("hello", "hello-file")
    out = _exec(engine, "hello", gen, "printf 'hello shinken' > /home/user/hello.txt && cat /home/user/hello.txt")
    assert out.startswith("exit code 0") and "hello shinken" in out
    res = engine.verify("hello", gen)
    assert (res.reward, res.mask_sample, res.failure_kind) == (1.0, False, None)
    assert "REWARD: 1.0" in res.reward_output_tail
    engine.end("hello", gen)
    engine.end("hello", gen)  # idempotent
    assert "hello" not in engine.sessions()


def test_exec_output_is_capped_and_errors_are_text(engine):
    gen = engine.seed("cap", "hello-file")
    try:
        out = _exec(engine, "cap", gen, "seq 1 100000; exit 3")
        assert "output cut" in out and out.splitlines()[0].startswith("exit code 3")
        assert len(out) < 9_000 and out.rstrip().endswith("100000")
        assert engine.tool("cap", gen, "computer_click", {"element": "e999", "x": None, "y": None}).startswith("error:")
        assert engine.tool("cap", gen, "computer_fly", {}).startswith("error: unknown tool")
    finally:
        engine.end("cap", gen)


# Up to 30 s for the window manager to give the 'Shinken' dialog the focus; prints the active window's name.
WAIT_FOR_ACTIVE_SHINKEN = ('for i in $(seq 300); do [ "$(xdotool getactivewindow getwindowname 2>/dev/null)" = Shinken ] '
                           '&& break; sleep 0.1; done; xdotool getactivewindow getwindowname')


def test_zenity_entry_scripted_agent_scores_one(engine):
    gen = engine.seed("zen", "zenity-entry")
    try:
        entry_re = re.compile(r"\[(e\d+)\] (?:text|entry)\b[^\n]*editable")
        tree = ""
        deadline = time.monotonic() + 30
        while time.monotonic() < deadline:  # the dialog is launched after the fork; wait for it
            tree = engine.tool("zen", gen, "computer_observe", {"mode": "tree"})
            if entry_re.search(tree):
                break
            time.sleep(0.5)
        m = entry_re.search(tree)
        assert m, f"no editable text entry in the tree:\n{tree}"
        entry = m.group(1)
        assert '"Your name:"' in tree and all(line.lstrip().startswith("[e") for line in tree.splitlines())

        again = engine.tool("zen", gen, "computer_observe", {"mode": "tree"})
        assert entry_re.search(again).group(1) == entry  # stable ids across observations
        assert engine.tool("zen", gen, "computer_observe", {"mode": "diff"}) == "(no changes)"

        for attempt in range(3):  # like an agent: if the keystrokes went nowhere, look again and retry
            clicked = engine.tool("zen", gen, "computer_click", {"element": entry, "x": None, "y": None})
            assert clicked.startswith(("clicked", "error: element")), clicked
            assert engine.tool("zen", gen, "computer_type_text", {"text": "Ada Lovelace"}) == "typed 12 characters"
            diff = engine.tool("zen", gen, "computer_observe", {"mode": "diff"})
            if diff != "(no changes)":
                break
            # (seen only under heavy host load: a dialog mapped before the window manager took it
            # reports a stale position and gets no focus): wait until the window manager has made
            # it the active window, then read its (new) position again
            active = _exec(engine, "zen", gen, WAIT_FOR_ACTIVE_SHINKEN)
            assert "Shinken" in active, f"the dialog never became the active window: {active}"
            entry = entry_re.search(engine.tool("zen", gen, "computer_observe", {"mode": "tree"})).group(1)
        changed = [line for line in diff.splitlines() if line.startswith("~ ")]
        assert any(f"[{entry}]" in line and 'value="Ada Lovelace"' in line for line in changed), diff
        assert len(diff.encode()) < 600, diff  # a small change gives a small diff
        assert len(diff) < len(tree)

        assert engine.tool("zen", gen, "computer_key", {"keys": "Return"}) == "pressed Return"
        # zenity writes the answer as it exits; a real agent would check too
        out = _exec(engine, "zen", gen, "for i in $(seq 100); do [ -f answer.txt ] && break; sleep 0.1; done; cat answer.txt")
        assert "Ada Lovelace" in out
        res = engine.verify("zen", gen)
        assert (res.reward, res.mask_sample) == (1.0, False), res
    finally:
        engine.end("zen", gen)


def test_stale_generation_is_refused_and_newer_rollout_untouched(engine):
    old = engine.seed("stale", "hello-file")
    new = engine.seed("stale", "hello-file", old)  # reseed carries the current token
    assert new != old
    _exec(engine, "stale", new, "echo newer > /home/user/marker.txt")
    with pytest.raises(SessionError):
        engine.tool("stale", old, "computer_exec", {"command": "rm -f /home/user/marker.txt"})
    with pytest.raises(SessionError):
        engine.verify("stale", old)
    with pytest.raises(SessionError):
        engine.end("stale", old)
    with pytest.raises(SessionError):
        engine.seed("stale", "hello-file", old)
    with pytest.raises(SessionError):
        engine.seed("stale", "hello-file")  # a live rollout is not replaced without its token
    with pytest.raises(SessionError):
        engine.tool("stale", "g" + "0" * 24, "computer_done", {})
    with pytest.raises(SessionError):
        engine.tool("never-seeded", new, "computer_done", {})
    assert "newer" in _exec(engine, "stale", new, "cat /home/user/marker.txt")
    engine.end("stale", new)
    with pytest.raises(SessionError):
        engine.tool("stale", new, "computer_done", {})
    # after the rollout ended, the client's leftover token may start a new one (nothing to protect)
    newest = engine.seed("stale", "hello-file", new)
    assert newest not in (old, new)
    assert "No such file" in _exec(engine, "stale", newest, "cat /home/user/marker.txt")  # a fresh fork
    engine.end("stale", newest)


def test_sessions_run_concurrently_and_calls_in_one_session_are_serialized(engine):
    gens: dict[str, str] = {}
    errors: list[BaseException] = []

    def seed(name):
        try:
            gens[name] = engine.seed(name, "hello-file")
        except BaseException as exc:  # noqa: BLE001
            errors.append(exc)

    threads = [threading.Thread(target=seed, args=(n,)) for n in ("ca", "cb")]
    [t.start() for t in threads]
    [t.join() for t in threads]
    assert not errors and set(gens) == {"ca", "cb"}
    try:
        def spans(calls):
            """When each call's command ran, read from the (host's) clock inside the forks: a
            total wall time bound told the same at low load and broke at load 40+."""
            out: dict[int, str] = {}
            cmd = "date +%s.%N; sleep 3; date +%s.%N"
            ts = [threading.Thread(target=lambda i=i, s=s: out.__setitem__(i, _exec(engine, s, gens[s], cmd)))
                  for i, s in enumerate(calls)]
            [t.start() for t in ts]
            [t.join() for t in ts]
            stamps = [[float(x) for x in re.findall(r"\b\d{10}\.\d+\b", out[i])] for i in range(len(calls))]
            assert all(len(st) == 2 for st in stamps), out
            return sorted((st[0], st[1]) for st in stamps)

        (a0, a1), (b0, b1) = spans(["ca", "cb"])
        assert b0 < a1, (a1, b0)  # two sessions' calls ran at the same time
        (c0, c1), (d0, d1) = spans(["ca", "ca"])
        assert d0 >= c1, (c1, d0)  # one session's calls wait for each other

        _exec(engine, "ca", gens["ca"], "echo -n 'hello shinken' > hello.txt")
        _exec(engine, "cb", gens["cb"], "echo -n 'hello world' > hello.txt")
        ra, rb = engine.verify("ca", gens["ca"]), engine.verify("cb", gens["cb"])
        assert (ra.reward, rb.reward) == (1.0, 0.5)  # forks are isolated
    finally:
        engine.end("ca")
        engine.end("cb")


def test_broken_reward_masks_instead_of_scoring_zero(engine):
    gen = engine.seed("broken", "broken-reward")
    try:
        res = engine.verify("broken", gen)
        assert res.mask_sample is True and res.failure_kind == "verifier_error", res  # Gym's name
        assert res.code == "reward_no_reward_line" and res.failure_stage == "verification", res
        assert "status file missing" in res.reward_output_tail
    finally:
        engine.end("broken", gen)


def test_infra_failure_masks_the_sample(engine, docker_client):
    gen = engine.seed("infra", "hello-file")
    try:
        fork_id = engine._sessions["infra"].fork.id
        docker_client.containers.get(fork_id).remove(force=True)  # the container vanishes under us
        out = _exec(engine, "infra", gen, "echo hi")
        assert "infrastructure" in out
        res = engine.verify("infra", gen)
        assert res.mask_sample is True and res.failure_kind == "session_lost", res  # its container is gone
        assert res.code == "fork_lost" and res.failure_stage == "agent", res
    finally:
        engine.end("infra", gen)


def test_fork_killed_while_reward_runs_masks_as_session_lost(engine, docker_client):
    """A container killed under reward.py is a lost session (Gym's session_lost), not a reward
    crash: the exec's exit 137 is not the reward's doing."""
    gen = engine.seed("killv", "hello-file")
    try:
        _exec(engine, "killv", gen, "printf 'hello shinken' > hello.txt")  # solved: only the kill can fail it
        fork = docker_client.containers.get(engine._sessions["killv"].fork.id)
        slow = ("import sys; exec(\"if any(a.endswith('reward.py') for a in getattr(sys, 'orig_argv', ())):\\n"
                " import time; time.sleep(30)\")\n")
        r = fork.exec_run(["sh", "-c", 'printf %s "$1" > /usr/lib/python3/dist-packages/zz_slow.pth', "_", slow],
                          user="root")
        assert r.exit_code == 0, r.output

        def kill_when_reward_runs() -> None:
            for _ in range(300):
                if any("reward.py" in " ".join(p) for p in fork.top(ps_args="-eo pid,args")["Processes"]):
                    fork.kill()
                    return
                time.sleep(0.1)

        killer = threading.Thread(target=kill_when_reward_runs)
        killer.start()
        res = engine.verify("killv", gen)
        killer.join()
        fork.reload()
        assert fork.status != "running"  # the kill landed
        assert (res.mask_sample, res.failure_kind, res.code, res.failure_stage) == \
               (True, "session_lost", "fork_lost", "verification"), res
    finally:
        engine.end("killv")


def test_idle_session_is_reaped_and_its_fork_removed(task_root, sandbox_image, docker_client):
    eng = ComputerEngine(EngineConfig(task_root, sandbox_image, accept_filesystem=True, idle_ttl_s=1.0),
                         maintenance_interval_s=0.25, keep_goldens_on_close=True)
    try:
        gen = eng.seed("idle", "zero-signal")
        fork_id = eng._sessions["idle"].fork.id
        assert _container_exists(docker_client, fork_id)
        deadline = time.monotonic() + 20
        while time.monotonic() < deadline and (_container_exists(docker_client, fork_id) or "idle" in eng.sessions()):
            time.sleep(0.2)
        assert not _container_exists(docker_client, fork_id)  # the reaper removed the fork
        assert "idle" not in eng.sessions() and eng.stats["reaped"] == 1
        with pytest.raises(SessionError):
            eng.tool("idle", gen, "computer_done", {})
    finally:
        eng.close()
    with pytest.raises(SessionError):
        eng.seed("after-close", "zero-signal")  # close() is terminal


def test_golden_lru_eviction_deletes_through_provider(tmp_path, sandbox_image, docker_client):
    root = _private_root(tmp_path / "tasks")  # goldens private to this test
    eng = ComputerEngine(EngineConfig(root, sandbox_image, accept_filesystem=True, max_goldens=1))
    try:
        g1 = eng.seed("a", "zero-signal")
        first = eng._goldens["zero-signal"].golden.image_id
        eng.end("a", g1)
        assert eng.goldens() == ["zero-signal"]  # unreferenced but cached
        g2 = eng.seed("b", "hello-file")
        assert eng.goldens() == ["hello-file"] and eng.stats["evicted"] == 1
        with pytest.raises(docker.errors.ImageNotFound):
            docker_client.images.get(first)
        second = eng._goldens["hello-file"].golden.image_id
        g3 = eng.seed("c", "zero-signal")  # the cache may overflow while goldens are in use
        assert sorted(eng.goldens()) == ["hello-file", "zero-signal"]
        eng.end("b", g2)
        eng.end("c", g3)
        assert len(eng.goldens()) == 1
        assert not eng.pending_deletions
    finally:
        eng.close()
    with pytest.raises(docker.errors.ImageNotFound):
        docker_client.images.get(second)  # close() deletes the cached goldens


def test_failed_deletions_are_retried_and_block_seeds_at_high_water(task_root, sandbox_image):
    eng = ComputerEngine(EngineConfig(task_root, sandbox_image, accept_filesystem=True),
                         delete_high_water=2, backlog_wait_s=0, maintenance_interval_s=3600, keep_goldens_on_close=True)
    broken = {"on": True}
    calls = []

    def flaky_delete():  # stands in for a daemon that refuses a removal for a while
        calls.append(1)
        if broken["on"]:
            raise RuntimeError("conflict: removal already in progress")

    try:
        eng._try_delete("fork aaa", flaky_delete)
        eng._try_delete("fork bbb", flaky_delete)
        assert len(eng.pending_deletions) == 2 and "conflict" in eng.pending_deletions[0]
        with pytest.raises(InfraError, match="new rollouts are refused"):
            eng.seed("blocked", "zero-signal")
        assert "blocked" not in eng.sessions()
        broken["on"] = False
        gen = eng.seed("unblocked", "zero-signal")  # the seed retries the backlog first
        assert not eng.pending_deletions and gen
        eng.end("unblocked", gen)
        # retries are bounded per pass
        broken["on"] = True
        for i in range(20):
            eng._try_delete(f"fork {i}", flaky_delete)
        before = len(calls)
        assert eng.retry_deletions(batch=8) == 20 and len(calls) - before == 8
        broken["on"] = False
    finally:
        eng.close()
    assert not eng.pending_deletions  # close() drains the backlog


def test_close_waits_for_calls_in_flight(task_root, sandbox_image, docker_client):
    eng = ComputerEngine(EngineConfig(task_root, sandbox_image, accept_filesystem=True), keep_goldens_on_close=True)
    gen = eng.seed("busy", "zero-signal")
    fork_id = eng._sessions["busy"].fork.id
    result: dict[str, str] = {}
    t = threading.Thread(target=lambda: result.setdefault("out", _exec(eng, "busy", gen, "sleep 1.5; echo finished")))
    t.start()
    deadline = time.monotonic() + 30  # the call is in flight once its sleep runs in the fork
    while time.monotonic() < deadline and not any(
            "sleep 1.5" in " ".join(p) for p in docker_client.api.top(fork_id).get("Processes") or []):
        time.sleep(0.02)
    assert t.is_alive(), "the call ended before close() could meet it in flight"
    eng.close()
    t.join(timeout=30)
    # close waited: the call ran to its end in a fork that still existed (else no "finished")
    assert "finished" in result["out"], result
    assert not _container_exists(docker_client, fork_id)
    with pytest.raises(SessionError):
        eng.tool("busy", gen, "computer_done", {})
    eng.close()  # idempotent


def test_maintenance_reclaims_forks_of_dead_owners(task_root, sandbox_image, docker_client):
    from shinken.computer.engine import ENGINE_LABELS
    from shinken.sandbox.docker_client import run_container
    from shinken.sandbox.ownership import LABEL_MADE_BY, Owner, labels_for

    dead = Owner(socket.gethostname(), os.getpid(), "1")  # our pid with another start time: a dead process
    run = lambda labels: run_container(  # noqa: E731
        docker_client, "shinken/base-bookworm:latest", ["sleep", "600"], detach=True, network_mode="none", labels=labels)
    orphans = []
    # a dead `shinken probe`'s fork: `shinken gc`'s to reclaim when the user asks, not an engine's
    not_an_engines = run(labels_for("fork", task="probe-left", owner=dead))
    eng = ComputerEngine(EngineConfig(task_root, sandbox_image, accept_filesystem=True),
                         gc_interval_s=0, maintenance_interval_s=3600, keep_goldens_on_close=True)
    try:
        gen = eng.seed("live", "zero-signal")
        live_id = eng._sessions["live"].fork.id
        assert docker_client.api.inspect_container(live_id)["Config"]["Labels"][LABEL_MADE_BY] == "computer-engine"
        # Every engine on this Docker engine reclaims dead engines' forks (a Gym run's servers beside
        # this suite too): one may take the orphan first, so it is made just before the pass, and
        # again when this engine did not reclaim it itself.
        for _ in range(3):
            orphans.append(run(labels_for("fork", task="orphan", owner=dead, extra=ENGINE_LABELS)))  # a dead engine's fork
            before = eng.stats["gc_reclaimed"]
            eng.maintain_once()
            assert not _container_exists(docker_client, orphans[-1].id)
            if eng.stats["gc_reclaimed"] > before:
                break
        else:
            pytest.fail("three orphans went, none reclaimed by this engine's maintenance")
        assert _container_exists(docker_client, live_id)  # our own fork (live owner) is untouched
        assert _container_exists(docker_client, not_an_engines.id)
        eng.end("live", gen)
    finally:
        eng.close()
        for c in (*orphans, not_an_engines):
            if _container_exists(docker_client, c.id):
                c.remove(force=True)


def test_warm_pool_serves_seeds(task_root, sandbox_image):
    eng = ComputerEngine(EngineConfig(task_root, sandbox_image, accept_filesystem=True, pool_size=2),
                         keep_goldens_on_close=True)
    try:
        gen = eng.seed("p1", "hello-file")
        assert eng._goldens["hello-file"].pool is not None
        _exec(eng, "p1", gen, "echo -n 'hello shinken' > hello.txt")
        assert eng.verify("p1", gen).reward == 1.0
        gen2 = eng.seed("p2", "hello-file")
        assert eng.verify("p2", gen2).reward == 0.0  # a fresh fork: p1's file is not there
    finally:
        eng.close()


def test_from_env_reads_knobs(task_root, sandbox_image, monkeypatch):
    monkeypatch.setenv("CUA_GYM_TASKS", str(task_root))
    monkeypatch.setenv("SHINKEN_IMAGE", sandbox_image)
    monkeypatch.setenv("SHINKEN_STATE_FIDELITY", "filesystem")
    monkeypatch.setenv("SHINKEN_POOL_SIZE", "0")
    monkeypatch.setenv("SHINKEN_IDLE_TTL", "42")
    monkeypatch.setenv("SHINKEN_GOLDEN_TTL", "99")
    monkeypatch.setenv("SHINKEN_MAX_GOLDENS", "3")
    monkeypatch.setenv("SHINKEN_DEMAND_POOLS", "true")  # the local engine with demand-sized pools
    eng = ComputerEngine.from_env()
    try:
        assert (eng.accept_filesystem, eng.idle_ttl_s, eng.golden_ttl_s, eng.max_goldens, eng.image) == (
            True, 42.0, 99.0, 3, sandbox_image)
        assert eng.demand is not None and eng.pool_targets() == {}  # no seed yet: no warm computer
    finally:
        eng.close()
    monkeypatch.delenv("SHINKEN_DEMAND_POOLS")
    monkeypatch.setenv("SHINKEN_IDLE_TTL", "soon")
    with pytest.raises(ShinkenError, match="SHINKEN_IDLE_TTL"):
        ComputerEngine.from_env()
    monkeypatch.delenv("CUA_GYM_TASKS")
    with pytest.raises(ShinkenError, match="CUA_GYM_TASKS"):
        ComputerEngine.from_env()


def test_demand_sizer_grows_for_groups_and_rate_and_shrinks_when_idle():
    """The arithmetic alone (computer/demand.py): the first group of N seeds pre-warms N; from the
    second group on, Little's law: N ready for the next group's burst plus rate x make time being
    made; an idle task wants none, and the budget goes to the busiest task first."""
    from shinken.computer.demand import DemandPolicy, DemandSizer

    s = DemandSizer(DemandPolicy(group_gap_s=2, idle_s=30))
    for _ in range(8):  # a GRPO group of 8 at t=0: no rate yet, the burst alone
        s.seen("grpo", 0.0)
    assert s.rate("grpo", 1.0) == 0.0
    assert s.want("grpo", 1.0, refill_s=3.0) == 8
    assert s.want("grpo", 29.0, refill_s=3.0) == 8  # a long step: the group size does not fade
    for _ in range(8):  # the next group 20 s later: 8 per 20 s, 3 s to make one: 8 + 0.4 x 3
        s.seen("grpo", 20.0)
    assert s.rate("grpo", 21.0) == 8 / 20
    assert s.want("grpo", 21.0, refill_s=3.0) == 10
    assert s.want("grpo", 21.0, refill_s=30.0) == 20  # slower to make: more of them being made at once
    assert s.want("grpo", 39.0, refill_s=3.0) == 10  # steady between groups (no sawtooth) ...
    assert s.rate("grpo", 60.0) == 8 / 40  # ... and falling once the next group is late
    for _ in range(2):  # a smaller group, 20 s later: ready for 8 while it may still grow ...
        s.seen("grpo", 40.0)
    assert s.want("grpo", 41.0, refill_s=10.0) == 8 + 4
    s.seen("grpo", 60.0)  # ... and once the next group begins, for 2: 2 ready + 2 per 20 s x 10 s
    assert s.want("grpo", 61.0, refill_s=10.0) == 3
    s2 = DemandSizer(DemandPolicy(group_gap_s=0.1, idle_s=30))
    for i in range(40):  # a trickle: one seed every 0.5 s, each its own group
        s2.seen("trickle", i * 0.5)
    assert abs(s2.rate("trickle", 19.6) - 2.0) < 1e-6
    assert s2.want("trickle", 19.6, refill_s=10.0) == 21  # 20 being made + 1 ready
    assert s.want("grpo", 91.0, refill_s=3.0) == 0  # idle past idle_s: the pool goes back to 0
    s.seen("grpo", 100.0)  # back after the idle spell: the old group and rate are forgotten
    assert s.want("grpo", 101.0, refill_s=3.0) == 1 and s.rate("grpo", 101.0) == 0.0
    s.in_use("grpo", 125.0)  # its rollout still live: not idle 30 s after the seed
    assert s.want("grpo", 145.0, refill_s=3.0) == 1
    assert s.want("grpo", 156.0, refill_s=3.0) == 0
    b = DemandSizer(DemandPolicy(group_gap_s=2, idle_s=30))
    for t in (0.0, 10.0):
        for _ in range(8):
            b.seen("big", t)
        for _ in range(4):
            b.seen("small", t + 0.5)
    assert b.targets({"big": 1.0, "small": 1.0}, 11.0, budget=10) == {"big": 9, "small": 1}  # busiest first
    assert b.targets({"big": 1.0, "small": 1.0}, 41.0, budget=10) == {"big": 0, "small": 0}


def test_demand_pool_grows_for_a_burst_and_shrinks_when_idle(task_root, sandbox_image, docker_client):
    """A burst of seeds of one task grows its pool to the group's size (within the budget), the
    next group is served from it, and once the task is idle the pool shrinks back to nothing."""
    from shinken.computer.demand import DemandPolicy

    budget = [3]
    policy = DemandPolicy(group_gap_s=5, idle_s=8, parallel=2)
    eng = ComputerEngine(EngineConfig(task_root, sandbox_image, accept_filesystem=True),
                         keep_goldens_on_close=True, gc_interval_s=None, demand=policy, warm_budget=lambda: budget[0],
                         desktop_mib=64)  # these computers are small: the machine's memory never binds here

    def group(tag: str, n: int) -> list[tuple[str, str]]:
        out: list[tuple[str, str]] = []
        threads = [threading.Thread(target=lambda i=i: out.append((f"{tag}{i}", eng.seed(f"{tag}{i}", "hello-file"))))
                   for i in range(n)]
        for t in threads:
            t.start()
        for t in threads:
            t.join(120)
        assert len(out) == n
        return out

    from shinken.runtime import Owner

    me = f"shinken.owner={Owner.current().label()}"  # this process's: other runs fork hello-file too

    def pooled() -> list[str]:
        return [c.id for c in docker_client.containers.list(
            filters={"label": ["shinken.kind=pool", "shinken.task=hello-file", me]})]

    try:
        first = group("d", 4)  # a group of 4, cold: the task's pool wants 4, the budget allows 3
        deadline = time.monotonic() + 180  # generous: machines under load make forks slowly
        while eng.pool_targets()["hello-file"]["ready"] < 3:
            assert time.monotonic() < deadline, eng.pool_targets()
            time.sleep(0.2)
        assert eng.pool_targets()["hello-file"]["size"] == 3
        for s, g in first:
            eng.end(s, g)
        hits = eng.stats["pool_hits"]
        second = group("e", 3)  # the next group finds its computers ready
        assert eng.stats["pool_hits"] - hits == 3, eng.stats
        _exec(eng, second[0][0], second[0][1], "echo -n 'hello shinken' > hello.txt")
        assert eng.verify(second[0][0], second[0][1]).reward == 1.0  # a pooled computer serves a rollout
        for s, g in second:
            eng.end(s, g)
        budget[0] = 1  # the host's free slots shrink: so does the pool
        deadline = time.monotonic() + 30
        while eng.pool_targets()["hello-file"]["size"] != 1:
            assert time.monotonic() < deadline, eng.pool_targets()
            time.sleep(0.2)
        budget[0] = 3
        deadline = time.monotonic() + 120  # idle past idle_s (8 s): back to 0, its containers removed
        while eng.pool_targets()["hello-file"]["size"] != 0 or pooled():
            assert time.monotonic() < deadline, (eng.pool_targets(), pooled())
            time.sleep(0.5)
    finally:
        eng.close()
    assert pooled() == []


def test_an_engine_gone_mid_call_masks_as_the_machines_failure(engine, docker_client, tmp_path):
    """The engine's socket gone under a rollout (what an engine restart does): the Docker SDK raises
    its own ConnectionError, which no shinken code wraps. A tool call masks the rollout
    (provider_unavailable, stage agent) instead of failing the whole /run; a verify masks it at
    stage verification as provider_unavailable, not as the verifier's error. The fork's client is
    pointed at a socket nobody answers, so the SDK's real connection attempt fails."""
    import docker as docker_sdk

    for stage in ("agent", "verification"):
        session = f"gone-{stage}"
        gen = engine.seed(session, "hello-file")
        fork = engine._sessions[session].fork
        real = fork.api
        gone = docker_sdk.APIClient(base_url=f"unix://{tmp_path / 'nobody.sock'}", version=real.api_version)
        try:
            if stage == "verification":
                _exec(engine, session, gen, "printf 'hello shinken' > hello.txt")  # solved: only the outage can fail it
            fork.api = gone
            if stage == "agent":
                assert "infrastructure" in _exec(engine, session, gen, "echo hi")
            res = engine.verify(session, gen)
            assert (res.mask_sample, res.failure_kind, res.code, res.failure_stage) == \
                (True, "provider_unavailable", "infra", stage), res
            assert "ConnectionError" in (res.failure_reason or ""), res
        finally:
            fork.api = real
            engine.end(session, gen)
