"""Fault injection for rollouts that run through the real NeMo Gym 0.7.0 (tests/test_chaos.py,
benchmarks/bench_chaos.py), and the row each batch reports.

A batch is `gym eval run --num-repeats N` over one demo row, with ChaosPolicy as the model: each
rollout draws a plan when its conversation starts (`pass`, or one fault), from a list shuffled
with a seed, so the faults land at random points of the batch. The first tool call of every
rollout is `echo plan=<plan>; <the container's id>`: the conversation carries its plan, and the id
names the rollout's fork (read from /proc/self/mountinfo as tests/chance_policy.py does: a fork's
host name is its golden's, not its own short id). Faults, one kind per batch:

- `kill_tool`: the fork is killed (`docker kill`) between two tool calls;
- `kill_verify`: the task is solved, then a slow start is planted for reward.py and the fork is
  killed while reward.py runs (seen in `docker top`);
- `oom`: the task is solved, then reward.py is made to allocate 3 GiB (the fork's limit is 2 GiB);
- `timeout`: the task is solved, then reward.py is made to sleep past its 120 s timeout;
- `engine_restart`: the Docker engine the forks live on (a private one) is stopped and started
  again between two tool calls; every container on it dies, other rollouts in flight included;
- `disk_full`: the private engine's data root (a small loop-mounted file system) filled to its
  last block one tool call in, so the solution's write fails with ENOSPC; freed once the
  rollout's fork is gone (released at /verify);
- `hub_killed`: a web task's star toggled (solved), then the server's hub container on the
  private engine killed (`docker kill`) before /verify.

The reward faults are planted as root in the fork (a `.pth` file Python runs at start, acting only
when the process is reward.py), after the policy's last tool call: the injector stands in for a
reward that misbehaves, not for the policy. Whether a rollout was faulted is read back from its own
conversation, so the row's counts come from the rollout files Gym wrote.
"""

from __future__ import annotations

import json
import os
import random
import re
import socket
import subprocess
import threading
import time
from collections import Counter
from dataclasses import asdict, dataclass, field
from pathlib import Path
from typing import Any, Callable

import scripted_policy as sp
from chance_policy import CONTAINER_ID

from shinken.failure_kinds import GYM_FAILURE_KINDS, is_gym_kind

FAULTS = ("kill_tool", "kill_verify", "oom", "timeout", "engine_restart", "disk_full", "hub_killed")
_PLAN = re.compile(r"echo plan=(\w+); sed ")
PTH = "/usr/lib/python3/dist-packages/zz_shinken_chaos.pth"
_IF_REWARD = "if any(a.endswith('reward.py') for a in getattr(sys, 'orig_argv', ())):"
PLANTS = {
    "kill_verify": f"import sys; exec(\"{_IF_REWARD}\\n import time; time.sleep(8)\")\n",
    "oom": f"import sys; exec(\"{_IF_REWARD}\\n sys.shinken_hog = b'x' * (3 << 30)\")\n",
    "timeout": f"import sys; exec(\"{_IF_REWARD}\\n import time; time.sleep(100000)\")\n",
}
# What a masked rollout of each fault must say (Gym kind, shinken code at the head of failure_reason).
EXPECTED = {
    "kill_tool": ("session_lost", "fork_lost"),
    "kill_verify": ("session_lost", "fork_lost"),
    "oom": ("provider_oom_killed", "reward_resource_limit"),
    "timeout": ("verifier_error", "reward_timeout"),
    "engine_restart": ("session_lost", "fork_lost"),
    "disk_full": ("provider_quota_exhausted", "disk_full"),
    "hub_killed": ("provider_unavailable", "hub_lost"),
}
# The web task of tests/data/web_tasks (star the message 'Quarterly report'), solved through the
# mock's State API from inside the fork: the state the reward reads lives in the hub only.
WEB_TASK = "8b2f7c1e-4a3d-5e6f-9a0b-1c2d3e4f5a6b"
TOGGLE = """
import json, urllib.request
sid = open('/tmp/task_web_sid').read().strip()
base = 'http://cua-gym-mailbox'
st = json.loads(urllib.request.urlopen(base + '/go?sid=' + sid, timeout=30).read())['current_state']
for m in st['messages']:
    if m['subject'] == 'Quarterly report':
        m['starred'] = not m['starred']
req = urllib.request.Request(base + '/post?sid=' + sid, method='POST', headers={'Content-Type': 'application/json'},
                             data=json.dumps({'action': 'set_current', 'state': st}).encode())
print(urllib.request.urlopen(req, timeout=30).status, sid)
"""


def star_by_toggle(history: list[tuple[str, str]]) -> "sp.Call | None":
    """The web task's script: toggle the star through the State API, then done."""
    import shlex

    steps: list[sp.Call] = [("computer_exec", {"command": f"python3 -c {shlex.quote(TOGGLE)}"}), ("computer_done", {})]
    return steps[len(history)] if len(history) < len(steps) else None


def register_web_task() -> None:
    """Let the scripted policy name and solve WEB_TASK (idempotent)."""
    sp.MATCH.setdefault(WEB_TASK, "'Quarterly report'")
    sp.SCRIPTS.setdefault(WEB_TASK, star_by_toggle)


def plans(fault: str, rollouts: int, faults: int, seed: int) -> list[str]:
    """`faults` of the batch's rollouts get the fault, at seeded random positions."""
    plan = [fault] * faults + ["pass"] * (rollouts - faults)
    random.Random(f"{seed}:{fault}").shuffle(plan)
    return plan


def mixed_plans(groups: dict[str, int], passes: int, seed: int) -> list[str]:
    """One batch, one fault kind per rollout group: `groups[fault]` rollouts get that fault and
    `passes` run the task untouched (the control), in a seeded random order."""
    plan = [f for f, n in groups.items() for _ in range(n)] + ["pass"] * passes
    random.Random(f"{seed}:mixed").shuffle(plan)
    return plan


def docker(*args: str, timeout: float = 60) -> subprocess.CompletedProcess:
    return subprocess.run(["docker", *args], capture_output=True, text=True, timeout=timeout)


@dataclass
class Injection:
    fault: str
    container: str
    ok: bool = False  # the fault landed as planned (kill_verify: the kill hit reward.py running)
    detail: str = ""


@dataclass
class ChaosPolicy:
    """A scripted policy (tests/scripted_policy.py decide function) that injects `plan[task]`."""

    plan: dict[str, list[str]]
    engine: tuple[str, ...] = ()  # ("-H", socket) when the forks live on another engine
    restart: Callable[[], None] | None = None  # restarts that engine (engine_restart)
    disk: Path | None = None  # the mounted file system of that engine's data root (disk_full)
    hub_pids: set[int] = field(default_factory=set)  # hub_killed on the shared engine: the hub these own
    handed: Counter = field(default_factory=Counter)
    injections: list[Injection] = field(default_factory=list)
    _done: set[str] = field(default_factory=set)
    _threads: list[threading.Thread] = field(default_factory=list)
    _lock: threading.Lock = field(default_factory=threading.Lock)
    _fillers: list[Path] = field(default_factory=list)

    def _draw(self, task: str) -> str:
        with self._lock:
            i = self.handed[task]
            if i >= len(self.plan[task]):
                raise LookupError(f"{task}: more rollouts than planned ({len(self.plan[task])})")
            self.handed[task] += 1
            return self.plan[task][i]

    def _fork(self, task: str, container_id: str) -> str:
        r = docker(*self.engine, "inspect", "-f",
                   '{{index .Config.Labels "shinken.kind"}} {{index .Config.Labels "shinken.task"}}', container_id)
        # Only ever the fork of this rollout: a shinken fork of this task.
        if r.stdout.split() != ["fork", task]:
            raise LookupError(f"{container_id} is not a fork of {task}: {r.stdout.strip()} {r.stderr.strip()}")
        return container_id

    def _inject(self, fault: str, cid: str) -> None:
        with self._lock:
            if cid in self._done:
                return
            self._done.add(cid)
        inj = Injection(fault, cid)
        self.injections.append(inj)
        if fault == "kill_tool":
            r = docker(*self.engine, "kill", cid)
            inj.ok, inj.detail = r.returncode == 0, r.stderr.strip()
            return
        if fault == "disk_full":
            self._fill(inj)
            return
        if fault == "hub_killed":
            # Only ever the batch's server's own hub: the one hub of a private engine, or on the shared
            # engine the running hub whose owner label names one of `hub_pids` (the runner's processes).
            assert self.engine or self.hub_pids, "hub_killed needs a private engine or the server's pids"
            out = docker(*self.engine, "ps", "--filter", "label=shinken.kind=hub", "--format",
                         '{{.ID}} {{.Label "shinken.owner"}}').stdout.splitlines()
            hubs = [line.split()[0] for line in out
                    if self.engine or _owner_pid(line.partition(" ")[2]) in self.hub_pids]
            if len(hubs) != 1:
                inj.detail = f"expected the server's one running hub, found {hubs}"
                return
            r = docker(*self.engine, "kill", hubs[0])
            inj.ok, inj.detail = r.returncode == 0, f"hub {hubs[0]} killed {r.stderr.strip()}".strip()
            return
        if fault == "engine_restart":
            assert self.restart is not None
            t0 = time.monotonic()
            self.restart()
            inj.ok, inj.detail = True, f"engine restarted in {time.monotonic() - t0:.1f} s"
            return
        r = docker(*self.engine, "exec", "-u", "root", cid, "sh", "-c", f'printf %s "$1" > {PTH}', "_", PLANTS[fault])
        if r.returncode != 0:
            inj.detail = f"plant failed: {r.stderr.strip()}"
            return
        inj.ok = fault != "kill_verify"
        if fault == "kill_verify":
            t = threading.Thread(target=self._kill_in_reward, args=(inj, self.engine), daemon=True)
            self._threads.append(t)
            t.start()

    def _fill(self, inj: Injection) -> None:
        """Fill the data root's file system; a thread frees it once the rollout's fork is gone."""
        from private_dockerd import fill

        assert self.disk is not None and self.engine, "disk_full needs a private engine on a disk of its own"
        filler = fill(self.disk)
        self._fillers.append(filler)
        st = os.statvfs(self.disk)
        inj.ok, inj.detail = True, f"filled ({st.f_bavail} blocks free)"
        t0 = time.monotonic()

        def free_when_released(wait_s: float = 300) -> None:
            while time.monotonic() - t0 < wait_s and docker(*self.engine, "inspect", inj.container).returncode == 0:
                time.sleep(0.2)
            filler.unlink(missing_ok=True)
            inj.detail += f"; freed {time.monotonic() - t0:.1f} s later (the fork released)"

        t = threading.Thread(target=free_when_released, daemon=True)
        self._threads.append(t)
        t.start()

    @staticmethod
    def _kill_in_reward(inj: Injection, engine: tuple[str, ...], wait_s: float = 120) -> None:
        end = time.monotonic() + wait_s
        while time.monotonic() < end:
            top = docker(*engine, "top", inj.container, "-eo", "pid,args")
            if top.returncode != 0:
                inj.detail = f"fork gone before reward.py ran: {top.stderr.strip()}"
                return
            if "reward.py" in top.stdout:
                r = docker(*engine, "kill", inj.container)
                inj.ok, inj.detail = r.returncode == 0, "killed while reward.py ran"
                return
            time.sleep(0.2)
        inj.detail = "reward.py never ran"

    def plan_names(self) -> set[str]:
        return {p for plan in self.plan.values() for p in plan}

    def wait(self, timeout: float = 180) -> None:
        for t in self._threads:
            t.join(timeout)
        for filler in self._fillers:  # whatever happened, the disk is free again after the batch
            filler.unlink(missing_ok=True)

    def __call__(self, input_items: list[dict[str, Any]]) -> tuple[str, sp.Call | None]:
        task = sp.task_of(input_items)
        history = sp.history(input_items)
        if not history:
            return task, ("computer_exec", {"command": f"echo plan={self._draw(task)}; {CONTAINER_ID}"})
        plan, rest = plan_of(input_items), history[1:]
        cid = self._fork(task, history[0][1].split()[-1]) if plan != "pass" else ""
        if plan in ("kill_tool", "engine_restart"):
            if not rest:
                self._inject(plan, cid)
                return task, ("computer_exec", {"command": "echo after the kill"})
            return task, (("computer_done", {}) if len(rest) == 1 else None)
        if plan == "disk_full" and not rest:
            self._inject(plan, cid)  # one tool call in; the script's own write comes next
        call = sp.SCRIPTS[task](rest)
        if call is None and (plan in PLANTS or plan == "hub_killed"):
            self._inject(plan, cid)  # the last tool call is done: the agent calls /verify next
        return task, call


def _owner_pid(label: str) -> int | None:
    """The pid of a shinken.owner label of this host (host/pid/start), else None."""
    parts = label.strip().rsplit("/", 2)
    ok = len(parts) == 3 and parts[0] == socket.gethostname() and parts[1].isdigit()
    return int(parts[1]) if ok else None


def plan_of(items: list[dict[str, Any]]) -> str:
    """The plan a rollout's conversation starts with."""
    first = next(i for i in items if isinstance(i, dict) and i.get("type") == "function_call")
    m = _PLAN.search(json.loads(first.get("arguments") or "{}").get("command", ""))
    if m is None:
        raise LookupError("the conversation does not start with a plan call")
    return m.group(1)


@dataclass
class Row:
    """One line of the chaos matrix (docs/reliability.md)."""

    fault: str
    rollouts: int = 0  # rollouts Gym recorded (scored, masked, or failed attempts)
    faults_injected: int = 0
    masked_gym_kind: int = 0  # masked with a failure_kind from Gym's vocabulary
    failed_gym_class: int = 0  # attempts Gym recorded without a rollout (its own failure class)
    scored: int = 0  # scored by the task's reward
    scored_zero_by_fault: int = 0  # a faulted rollout scored as if the policy had failed: must be 0
    left_after_gc: int = 0  # containers and networks left after the batch (and `shinken gc`): must be 0
    kinds: dict[str, int] = field(default_factory=dict)
    wrong_kind: list[str] = field(default_factory=list)  # masked faulted rollouts not named as EXPECTED
    injections: list[str] = field(default_factory=list)  # how each injection went
    seconds: float = 0.0

    def to_json(self) -> dict[str, Any]:
        return asdict(self)


def read_batch(out: Path, fault: str | None, policy: ChaosPolicy) -> list[Row]:
    """The rows of one batch, from the rollout files Gym wrote (`out` and its _failures sidecar).
    `fault` set: one row for the whole batch (its unfaulted rollouts included: a fault may hit them
    from beside, as an engine restart does). `fault` None (a mixed batch, one fault kind per rollout
    group): one row per plan, `pass` the control group."""
    rows: dict[str, Row] = {}

    def row_of(plan: str) -> Row:
        name = fault or plan
        if name not in rows:
            rows[name] = Row(name, faults_injected=sum(i.ok for i in policy.injections if i.fault == name))
        return rows[name]

    for plan in dict.fromkeys(sorted(policy.plan_names())):
        row_of(plan)
    lines = [json.loads(x) for x in out.read_text().splitlines() if x.strip()] if out.exists() else []
    side = out.with_name(out.stem + "_failures.jsonl")
    failed = [json.loads(x) for x in side.read_text().splitlines() if x.strip()] if side.exists() else []
    kinds: dict[str, Counter] = {}
    for doc in lines:
        if doc.get("mask_sample") and doc.get("failure_stage") == "seed" and not doc["response"]["output"]:
            # A seed the server refused for infrastructure (503), answered masked by the workspace's
            # agent: it never reached the policy, so it drew no plan.
            row = row_of(fault or "unattributed")
            row.rollouts += 1
            kind = str(doc.get("failure_kind") or "")
            kinds.setdefault(row.fault, Counter())[kind] += 1
            row.masked_gym_kind += int(is_gym_kind(kind))
            continue
        plan = plan_of(doc["response"]["output"])
        row = row_of(plan)
        row.rollouts += 1
        faulted = plan != "pass"
        if doc.get("mask_sample"):
            kind = str(doc.get("failure_kind") or "")
            kinds.setdefault(row.fault, Counter())[kind] += 1
            if is_gym_kind(kind):
                row.masked_gym_kind += 1
            want = EXPECTED.get(plan)
            code = str(doc.get("failure_reason") or "").split(":", 1)[0]
            if faulted and want is not None and (kind, code) != want:
                row.wrong_kind.append(f"{kind} / {code}")
        else:
            row.scored += 1
            # Any score of a faulted rollout is a fault scored as the policy's; so is less than full
            # marks for a rollout that ran the task's solution (a fault hit it from beside: a restart).
            if faulted or float(doc.get("reward") or 0.0) < 1.0:
                row.scored_zero_by_fault += 1
    for doc in failed:
        # Gym recorded an attempt without a rollout: its conversation is not there to name a plan.
        row = row_of(fault or "unattributed")
        row.rollouts += 1
        cls = str(doc.get("_ng_failure_class") or "")
        kinds.setdefault(row.fault, Counter())[cls] += 1
        if cls in GYM_FAILURE_KINDS:
            row.failed_gym_class += 1
    for name, counter in kinds.items():
        rows[name].kinds = dict(counter)
    return list(rows.values())


def leftovers(pids: set[int], engine: tuple[str, ...] = (), networks: bool = True) -> int:
    """Fork and pool containers, and shinken networks (unless `networks` is False), owned by these
    (server) pids: what a batch left behind (`engine`: ("-H", socket) for an engine other than the
    shared one)."""
    host = socket.gethostname()

    def owned(what: str, *filters: str) -> int:
        out = docker(*engine, what, "ls", *(["-a"] if what == "container" else []), *filters, "--format",
                     '{{.ID}} {{.Label "shinken.owner"}}').stdout.splitlines()
        n = 0
        for line in out:
            parts = line.partition(" ")[2].rsplit("/", 2)
            n += len(parts) == 3 and parts[0] == host and parts[1].isdigit() and int(parts[1]) in pids
        return n

    return (owned("container", "--filter", "label=shinken.kind=fork") + owned("container", "--filter", "label=shinken.kind=pool")
            + (owned("network", "--filter", "label=shinken.managed=1") if networks else 0))


def gc_owners(pids: set[int], engine_host: str) -> list[str]:
    """`shinken gc --force` against that engine (a process of its own: DOCKER_HOST) for every owner
    label on its containers and networks that names one of `pids` (a label is host/pid/start, so
    it is read from the resources, not made up); the owner labels reclaimed for."""
    from cli_runner import run_cli

    host = socket.gethostname()
    owners: set[str] = set()
    for what in ("container", "network"):
        out = docker("-H", engine_host, what, "ls", *(["-a"] if what == "container" else []), "--format",
                     '{{.Label "shinken.owner"}}').stdout
        for label in out.split():
            parts = label.rsplit("/", 2)
            if len(parts) == 3 and parts[0] == host and parts[1].isdigit() and int(parts[1]) in pids:
                owners.add(label)
    for owner in sorted(owners):
        r = run_cli("gc", "--force", "--label", f"shinken.owner={owner}", env={**os.environ, "DOCKER_HOST": engine_host},
                    timeout=600)
        assert r.returncode == 0, r.stdout + r.stderr
    return sorted(owners)


def run_batch(c: Any, ws: Path, server: sp.PolicyServer, task_row: dict[str, Any], fault: str, rollouts: int,
              faults: int, seed: int, concurrency: int = 2, engine: tuple[str, ...] = (),
              restart: Callable[[], None] | None = None) -> Row:
    """One batch of one fault kind (see run_plan); its one row."""
    (row,) = run_plan(c, ws, server, task_row, plans(fault, rollouts, faults, seed), f"{fault}-{rollouts}-{seed}",
                      fault=fault, concurrency=concurrency, engine=engine, restart=restart)
    return row


def run_plan(c: Any, ws: Path, server: sp.PolicyServer, task_row: dict[str, Any], plan: list[str], name: str, *,
             fault: str | None = None, concurrency: int = 2, engine: tuple[str, ...] = (),
             restart: Callable[[], None] | None = None, disk: Path | None = None,
             sidecar: bool = False, count_networks: bool = True, hub_pids: set[int] | None = None) -> list[Row]:
    """One `gym eval run` batch (`len(plan)` rollouts, the i-th rollout handed out getting plan[i])
    in runner `c` (its servers started), `server` the policy the workspace points at; the rows
    read back from the rollout files (read_batch: one row when `fault` is set, else one per plan).
    Every row's leftovers are those of the whole batch (`count_networks` False: forks only, for a
    server whose web run network lives as long as it does).
    `sidecar`: Gym's route_failures_to_sidecar, as a trainer runs it: a rollout whose /run failed is
    a failures-sidecar row instead of the end of the whole batch. A seed answered 503 while the
    engine restarted or the disk was full is a masked rollout (the workspace's agent answers it so);
    either never reached the policy, so it drew no plan."""
    import gym_harness as gh

    task = task_row["task_id"]
    rel = f"results/chaos/{name}"
    (ws / rel).mkdir(parents=True, exist_ok=True)
    for old in (ws / rel).glob("rollouts*"):
        old.unlink()
    (ws / rel / "inputs.jsonl").write_text(json.dumps(task_row) + "\n")
    policy = ChaosPolicy({task: list(plan)}, engine=engine, restart=restart, disk=disk, hub_pids=set(hub_pids or ()))
    server.decide = policy
    t0 = time.monotonic()
    try:
        r = c.exec(f"gym eval run --no-serve --agent {gh.AGENT} --input {rel}/inputs.jsonl --output "
                   f"{rel}/rollouts.jsonl --num-repeats {len(plan)} --concurrency {concurrency}"
                   + (" ++route_failures_to_sidecar=true" if sidecar else ""), timeout=3600)
    finally:
        server.decide = sp.next_call
        policy.wait()
    assert r.returncode == 0, (r.stdout + r.stderr)[-6000:]
    assert not server.errors, server.errors
    rows = read_batch(ws / rel / "rollouts.jsonl", fault, policy)
    # Every planned rollout came back: scored, masked (a seed refused for infrastructure too), or
    # (sidecar) a failed attempt Gym recorded.
    assert sum(row.rollouts for row in rows) == len(plan), [row.to_json() for row in rows]
    if not sidecar:
        assert dict(policy.handed) == {task: len(plan)}, policy.handed  # every planned rollout ran
    left = leftovers(c.pids(), engine, networks=count_networks)
    for row in rows:
        row.seconds = round(time.monotonic() - t0, 1)
        row.left_after_gc = left
        row.injections = [f"{i.ok}: {i.detail}" for i in policy.injections if fault or i.fault == row.fault]
    return rows


MARKDOWN_HEAD = ("| fault | rollouts | faults injected | masked (Gym kind) | failed attempts (Gym class) | scored by the "
                 "task's reward | **scored 0 because of a fault** | containers + networks left after gc | kinds |\n"
                 "|---|---|---|---|---|---|---|---|---|")


def markdown(rows: list[Row]) -> str:
    lines = [MARKDOWN_HEAD]
    for r in rows:
        kinds = ", ".join(f"{k} {v}" for k, v in sorted(r.kinds.items()))
        lines.append(f"| {r.fault} | {r.rollouts} | {r.faults_injected} | {r.masked_gym_kind} | {r.failed_gym_class} | "
                     f"{r.scored} | **{r.scored_zero_by_fault}** | {r.left_after_gc} | {kinds} |")
    return "\n".join(lines)


# ---------------------------------------------------------------- the resources server SIGKILLed


def _server_pid(c: Any) -> int:
    for pid in c.pids():
        try:
            if b"launch.py" in Path(f"/proc/{pid}/cmdline").read_bytes():
                return pid
        except OSError:
            continue
    raise LookupError(f"no server process in {c.name}")


def _empty_response() -> dict[str, Any]:
    return {"id": "resp_chaos", "object": "response", "created_at": int(time.time()), "model": "scripted",
            "output": [], "parallel_tool_calls": False, "tool_choice": "auto", "tools": []}


def server_sigkill(ws: Any, tmp: Path, task_row: dict[str, Any], in_flight: int = 2) -> Row:
    """The generated server (alone in a runner container) with `in_flight` hello-file rollouts one
    tool call in is killed with SIGKILL and started again on the same port: the old cookies must
    answer 409 stale_session (Gym's session_lost) on tools and on verify, never a score; a new
    rollout scores; `shinken gc` (for the dead server's owner label) leaves none of its forks."""
    import gym_harness as gh

    port = gh.free_port()
    t0 = time.monotonic()
    row = Row("server_sigkill")
    # Demand pools off: this counts every container the servers' pids own after their stop, and a
    # warm computer still being made when `docker stop` kills the server (30 s; seen at load 32)
    # outlives it until a gc reclaims it as a dead owner's pool (docs/fleet.md).
    nopools = {"SHINKEN_DEMAND_POOLS": "false"}
    first = gh.resources_server(tmp / "s1", ws, port, env=nopools)
    second = None
    try:
        live = []
        for _ in range(in_flight):
            live.append(_seed_one(port, task_row))
        owner = docker("inspect", "-f", '{{index .Config.Labels "shinken.owner"}}', live[0][1]).stdout.strip()
        assert owner, "the fork names its owner"
        import signal

        os.kill(_server_pid(first), signal.SIGKILL)  # no cleanup at all
        row.rollouts, row.faults_injected = len(live), 1
        deadline = time.monotonic() + 60
        while first.running() and time.monotonic() < deadline:
            time.sleep(0.5)
        first.stop()
        assert all(docker("inspect", cid).returncode == 0 for _, cid in live), "a SIGKILL cleans nothing up"
        second = gh.resources_server(tmp / "s2", ws, port, env=nopools)  # started again: same port, same config
        kinds: Counter = Counter()
        for cookies, _ in live:
            r = gh.post(port, "/computer_exec", {"command": "true"}, cookies)
            assert r.status == 409 and r.json()["error"] == "stale_session", r.text
            v = gh.post(port, "/verify", {**task_row, "response": _empty_response()}, cookies)
            assert v.status == 409 and v.json()["error"] == "stale_session", v.text  # never a score
            if "reward" in v.json():
                row.scored_zero_by_fault += 1
            kind = v.json().get("failure_kind", "")
            kinds[f"{kind} (409 stale_session)"] += 1
            row.masked_gym_kind += is_gym_kind(kind)
        seed = gh.post(port, "/seed_session", task_row)  # the restarted server serves new rollouts
        assert seed.status == 200, seed.text
        cookies = dict(seed.cookies)
        r = gh.post(port, "/computer_exec", {"command": "printf 'hello shinken' > /home/user/hello.txt"}, cookies)
        assert r.status == 200, r.text
        cookies.update(r.cookies)
        v = gh.post(port, "/verify", {**task_row, "response": _empty_response()}, cookies)
        assert v.status == 200 and v.json()["reward"] == 1.0 and v.json()["mask_sample"] is False, v.text
        row.rollouts += 1
        row.scored += 1
        gc = gh.shinken("gc", "--force", "--label", f"shinken.owner={owner}", "--json")
        assert gc.returncode == 0, gc.stdout + gc.stderr
        row.left_after_gc = sum(docker("inspect", cid).returncode == 0 for _, cid in live)
        row.kinds = dict(kinds)
    finally:
        if second is not None:
            left = second.stop()
            row.left_after_gc += len(left)  # the restarted server released its own forks
        first.stop()
    row.seconds = round(time.monotonic() - t0, 1)
    return row


# ---------------------------------------------------------------- the engine restarted, the disk full

SOLVE = "printf 'hello shinken' > /home/user/hello.txt"


def _seed_one(port: int, task_row: dict[str, Any]) -> tuple[dict[str, str], str]:
    """A hello-file rollout one tool call in: (its cookies, its fork's container id)."""
    import gym_harness as gh

    seed = gh.post(port, "/seed_session", task_row)
    assert seed.status == 200, seed.text
    cookies = dict(seed.cookies)
    r = gh.post(port, "/computer_exec", {"command": CONTAINER_ID}, cookies)
    assert r.status == 200, r.text
    cookies.update(r.cookies)
    return cookies, r.text.split()[-1]


def _finish(row: Row, port: int, task_row: dict[str, Any], cookies: dict[str, str], faulted: bool,
            kinds: Counter) -> dict[str, Any]:
    """The policy's solution, then /verify, counted into `row`; the verify answer."""
    import gym_harness as gh

    r = gh.post(port, "/computer_exec", {"command": SOLVE}, cookies)
    assert r.status in (200, 409), r.text
    cookies.update(r.cookies)
    v = gh.post(port, "/verify", {**task_row, "response": _empty_response()}, cookies)
    assert v.status in (200, 409), v.text
    doc = v.json()
    row.rollouts += 1
    if v.status == 409 or doc.get("mask_sample"):
        kind = str(doc.get("failure_kind") or "")
        kinds[kind] += 1
        row.masked_gym_kind += is_gym_kind(kind)
        want = EXPECTED.get(row.fault)
        code = str(doc.get("failure_reason") or doc.get("error") or "").split(":", 1)[0]
        if faulted and want is not None and (kind, code) != want:
            row.wrong_kind.append(f"{kind} / {code}")
    else:
        row.scored += 1
        if faulted or float(doc.get("reward") or 0.0) < 1.0:
            row.scored_zero_by_fault += 1
    return doc


def engine_faults(ws: Any, tmp: Path, task_row: dict[str, Any], in_flight: int = 2,
                  disk_mib: int = 4096) -> list[Row]:
    """The generated server (alone in a runner container, driven over HTTP as Gym's agent drives
    it) forking on a private engine whose data root is a small loop-mounted file system:
    - engine_restart: `in_flight` rollouts one tool call in, the engine stopped and started again;
      their solution and verify must come back masked (session_lost), a new rollout scores 1.0;
    - disk_full: a rollout one tool call in, the file system filled to its last block, then the
      solution (its write fails: ENOSPC) and verify: masked (provider_quota_exhausted), never a
      0.0; a seed on the full disk answers 503 or a masked rollout, never a task error; the disk
      freed, a new rollout scores 1.0.
    Containers and networks left on the engine once the server stopped and `shinken gc` ran: 0."""
    import gym_harness as gh
    from private_dockerd import fill, loop_fs, private_engine

    image = gh.sandbox_image("linux")  # hello-file needs no desktop
    t0 = time.monotonic()
    restart, disk = Row("engine_restart"), Row("disk_full")
    with loop_fs(tmp / "disk.img", disk_mib) as mnt, \
            private_engine("i21d", "shinken-i21-disk", (image,), data_root=mnt / "docker") as eng:
        port = gh.free_port()
        server = gh.resources_server(tmp / "srv", ws, port, binds=[(eng.base, "/engine")],
                                     env={"DOCKER_HOST": "unix:///engine/d.sock", "SHINKEN_IMAGE": image})
        engine = ("-H", eng.host)
        try:
            # -- the engine restarted under rollouts in flight
            kinds: Counter = Counter()
            live = [_seed_one(port, task_row) for _ in range(in_flight)]
            t1 = time.monotonic()
            eng.stop()
            eng.start()
            restart.faults_injected = 1
            restart.injections = [f"True: engine restarted in {time.monotonic() - t1:.1f} s"]
            for cookies, _ in live:
                _finish(restart, port, task_row, cookies, True, kinds)
            _finish(restart, port, task_row, _seed_one(port, task_row)[0], False, kinds)
            restart.kinds = dict(kinds)
            # -- the disk full
            kinds = Counter()
            cookies, _ = _seed_one(port, task_row)
            filler = fill(mnt)
            disk.faults_injected = 1
            disk.injections = [f"True: {mnt} filled, {os.statvfs(mnt).f_bfree} blocks free"]
            _finish(disk, port, task_row, cookies, True, kinds)
            seed = gh.post(port, "/seed_session", task_row)  # a seed on the full disk
            if seed.status == 200:
                _finish(disk, port, task_row, {**seed.cookies}, True, kinds)
            else:
                doc = seed.json()
                assert seed.status == 503 and doc["error"] == "infra_error", seed.text  # never bad_task
                kinds[f"{doc.get('failure_kind')} (seed: 503 infra_error)"] += 1
                disk.masked_gym_kind += is_gym_kind(str(doc.get("failure_kind") or ""))
                disk.rollouts += 1
            filler.unlink()
            _finish(disk, port, task_row, _seed_one(port, task_row)[0], False, kinds)
            disk.kinds = dict(kinds)
        finally:
            pids = server.pids()
            server.stop()
        gc_owners(pids, eng.host)
        left = leftovers(pids, engine)
        restart.left_after_gc = disk.left_after_gc = left
    restart.seconds = disk.seconds = round(time.monotonic() - t0, 1)
    return [restart, disk]


# ---------------------------------------------------------------- one Gym session on a private engine


def web_and_hello_workspace(tmp: Path, image: str, hub_image: str | None) -> tuple[Path, list[str]]:
    """A workspace of hello-file and (with `hub_image`) the web task, made the way a user makes
    one (`make-workspace [--hub]`; no probe: the batches need no verifier cases). The web task's
    setup opens a browser the linux image does not have; the copy here drops that one line (the
    batch needs no screen, only the hub state the reward reads)."""
    import shutil

    import gym_harness as gh

    root = tmp / "tasks"
    root.mkdir(parents=True)
    shutil.copytree(gh.DEMO / "hello-file", root / "hello-file")
    ids = tmp / "ids.txt"
    ids.write_text("hello-file\n")
    if hub_image:
        web = root / WEB_TASK
        shutil.copytree(gh.TESTS / "data" / "web_tasks" / WEB_TASK, web)
        setup = (web / "initial_setup.py").read_text()
        gui = "launch_gui(f'google-chrome \"{BASE_URL}/?sid={sid}\"', delay_sec=2.0)\n"
        assert gui in setup, "the web task's setup changed: update the headless copy"
        (web / "initial_setup.py").write_text(setup.replace(gui, ""))
        ids.write_text(f"hello-file\n{WEB_TASK}\n")
    ws = tmp / "ws"
    r = gh.shinken("make-workspace", "--dest", str(ws), "--task-root", str(root), "--ids", str(ids), "--image", image,
                   *(["--hub", hub_image] if hub_image else []), "--license", "Apache-2.0", "--json")
    assert r.returncode == 0, r.stdout + r.stderr
    return ws, json.loads(r.stdout)["commands"]


def rows_of(ws: Path) -> dict[str, dict[str, Any]]:
    """One dataset row per task of a workspace."""
    import gym_harness as gh

    out: dict[str, dict[str, Any]] = {}
    for f in ("example.jsonl", "train.jsonl", "validation.jsonl"):
        path = ws / "resources_servers" / gh.NAME / "data" / f
        for line in path.read_text().splitlines() if path.exists() else []:
            if line.strip():
                row = json.loads(line)
                out.setdefault(row["task_id"], row)
    return out


@dataclass
class EnginePlans:
    """The rollout groups of one Gym session on a private engine, in the order they run: the web
    task with its hub killed (last web group: the server's hub does not come back), hello-file with
    the disk filled, hello-file across an engine restart (last: it kills every container)."""

    hub_killed: list[str]  # empty: no web task, no hub (the workspace and the engine without them)
    disk_full: list[str]
    engine_restart: list[str]
    concurrency: dict[str, int] = field(default_factory=lambda: {"hub_killed": 2, "disk_full": 1, "engine_restart": 2})
    # Untouched rollouts in a `gym eval run` of their own once the restart batch is over, counted
    # into its row: whatever a restart hit in flight, the server must serve (and score) again.
    after_restart: int = 1


def merged(a: Row, b: Row) -> Row:
    """Row `a` with batch `b`'s rollouts counted in (b injected nothing)."""
    kinds = Counter(a.kinds)
    kinds.update(b.kinds)
    return Row(a.fault, a.rollouts + b.rollouts, a.faults_injected + b.faults_injected,
               a.masked_gym_kind + b.masked_gym_kind, a.failed_gym_class + b.failed_gym_class, a.scored + b.scored,
               a.scored_zero_by_fault + b.scored_zero_by_fault, a.left_after_gc + b.left_after_gc, dict(kinds),
               a.wrong_kind + b.wrong_kind, a.injections + b.injections, round(a.seconds + b.seconds, 1))


def private_engine_gym(tmp: Path, image: str, hub_image: str | None, plans_: EnginePlans, disk_mib: int = 5120,
                       seed_tag: str = "ci") -> tuple[list[Row], dict[str, Any]]:
    """ONE `gym env start` whose resources server forks on a private dockerd (its own data root on
    a loop-mounted ext4 of `disk_mib`, its own network namespace; the shared engine is never
    stopped), then one `gym eval run` per rollout group (EnginePlans), the faults injected by the
    policy mid-batch. Afterwards the servers are stopped (Ctrl-C, as a user stops them), `shinken
    gc` runs against that engine for the servers' owner labels, and every row's `left_after_gc` is
    what is left on the engine then: any container, and any shinken network (must be 0).
    Returns the rows and {ready_s, load, seconds}."""
    import gym_harness as gh
    from private_dockerd import loop_fs, private_engine

    register_web_task()
    t0 = time.monotonic()
    hub_image = hub_image if plans_.hub_killed else None
    ws, commands = web_and_hello_workspace(tmp / "made", image, hub_image)
    tasks = rows_of(ws)
    info: dict[str, Any] = {"load": [os.getloadavg()[0]]}
    rows: list[Row] = []
    with loop_fs(tmp / "disk.img", disk_mib) as mnt, \
            private_engine("k21g", "shinken-i21-gym", (hub_image,) if hub_image else (),
                           data_root=mnt / "docker") as eng:
        # The server needs the hub image when it starts (it starts the hub), the task image only at
        # the first seed: that (1.2 GB) loads while Gym starts.
        info["engine_up_s"] = round(time.monotonic() - t0, 1)
        engine = ("-H", eng.host)
        load_errors: list[BaseException] = []

        def load_task_image() -> None:
            try:
                eng.load(image)
                info["task_image_loaded_s"] = round(time.monotonic() - t0, 1)
            except BaseException as exc:  # noqa: BLE001 - reported by the main thread
                load_errors.append(exc)

        loader = threading.Thread(target=load_task_image, daemon=True)
        loader.start()

        def restart() -> None:
            eng.stop()
            eng.start()

        policy = sp.PolicyServer().start()
        gh.point_at_policy(ws, policy.base_url)
        pids: set[int] = set()
        with gh.gym_session(ws, tmp / "venvs", policy, binds=[(eng.base, "/engine")],
                            env={"DOCKER_HOST": "unix:///engine/d.sock", "SHINKEN_IMAGE": image}) as session:
            log, ready_s = session.start(next(x for x in commands if x.startswith("gym env start ")))
            info["ready_s"] = round(ready_s, 1)
            loader.join(1800)
            assert not loader.is_alive() and not load_errors, f"loading {image} into the private engine: {load_errors}"
            info["load"].append(os.getloadavg()[0])
            c = session.container
            info["left_at_batch_end"] = {}
            for fault, plan in (("hub_killed", plans_.hub_killed), ("disk_full", plans_.disk_full),
                                ("engine_restart", plans_.engine_restart)):
                if not plan:
                    continue
                task = WEB_TASK if fault == "hub_killed" else "hello-file"
                try:
                    (row,) = run_plan(c, ws, policy, tasks[task], plan, f"{fault}-{seed_tag}", fault=fault,
                                      concurrency=plans_.concurrency[fault], engine=engine,
                                      restart=restart if fault == "engine_restart" else None,
                                      disk=mnt if fault == "disk_full" else None, sidecar=True, count_networks=False)
                    if fault == "engine_restart" and plans_.after_restart:
                        (after,) = run_plan(c, ws, policy, tasks[task], ["pass"] * plans_.after_restart,
                                            f"after-restart-{seed_tag}", fault=fault, engine=engine, sidecar=True,
                                            count_networks=False)
                        row = merged(row, after)
                except AssertionError as exc:
                    raise AssertionError(f"{fault} batch: {exc}\nserver log:\n{c.exec(f'tail -c 6000 {log}').stdout}") from None
                # Forks the server had not removed yet when the batch ended (a removal the engine
                # retries after a restart); what counts is what is left once the servers stopped and gc ran.
                info["left_at_batch_end"][fault] = row.left_after_gc
                row.left_after_gc = 0
                rows.append(row)
                info["load"].append(os.getloadavg()[0])
            pids = c.pids()
            session.stop_servers()
        # Gym gives a server 1 s after Ctrl-C: what its engine did not close is a dead owner's, gc's to
        # reclaim (the runner container is gone by now: every process of it has exited).
        info["gc_owners"] = gc_owners(pids, eng.host)
        left_containers = eng.docker("ps", "-a", "--format", "{{.ID}} {{.Status}} {{.Labels}}").stdout.splitlines()
        left_networks = eng.docker("network", "ls", "--filter", "label=shinken.managed=1", "--format",
                                   "{{.ID}} {{.Labels}}").stdout.splitlines()
        info["left"] = {"containers": left_containers, "networks": left_networks}
        for row in rows:
            row.left_after_gc += len(left_containers) + len(left_networks)
    info["seconds"] = round(time.monotonic() - t0, 1)
    return rows, info

