"""A scripted policy that solves each demo task with a known probability, for profiling tests.

Each rollout draws its outcome when the conversation starts, from a per-task list made with a
seeded generator: `pass` (the task's script from scripted_policy), `fail` (a script that does
the task wrongly, with partial credit where the reward gives it) or `kill` (the policy kills
the rollout's fork container, so the server masks the rollout as an infrastructure failure).
The first call of every rollout is `echo plan=<outcome>; <the container's id>`: the conversation
carries its own plan, and the id names the fork (read from the engine's bind mounts in
/proc/self/mountinfo: a fork's host name is its golden's, not its own short id).
Whatever order Gym runs rollouts in, each task gets exactly its list of outcomes, so the pass
counts a profile must find are known before the run.
"""

from __future__ import annotations

import json
import random
import re
import threading
from collections import Counter
from dataclasses import dataclass, field
from typing import Any

import scripted_policy as sp

OUTCOMES = ("pass", "fail", "kill")
CONTAINER_ID = r"sed -n 's|.*/containers/\([0-9a-f]\{64\}\)/.*|\1|p' /proc/self/mountinfo | head -n1"
_PLAN = re.compile(r"echo plan=(pass|fail|kill); sed ")


def _fail_hello(history: sp.History) -> sp.Call | None:
    # "hello world" contains "hello": the reward gives 0.5, which a 1.0 threshold fails.
    steps: list[sp.Call] = [("computer_exec", {"command": "printf 'hello world' > /home/user/hello.txt"}),
                            ("computer_done", {})]
    return steps[len(history)] if len(history) < len(steps) else None


def _fail_sheet(history: sp.History) -> sp.Call | None:
    # Two of the four totals right: reward 0.50.
    steps: list[sp.Call] = [("computer_exec", {"command": sp.fill_totals("q * p if r < 4 else 0")}),
                            ("computer_done", {})]
    return steps[len(history)] if len(history) < len(steps) else None


def _give_up(history: sp.History) -> sp.Call | None:
    return None if history else ("computer_done", {})


FAIL_SCRIPTS = {"hello-file": _fail_hello, sp.SPREADSHEET: _fail_sheet, "zenity-entry": _give_up}
# Reward of a failed rollout per task (what the reward prints for the failing script).
FAIL_REWARD = {"hello-file": 0.5, sp.SPREADSHEET: 0.5, "zenity-entry": 0.0}


def seeded_plans(probabilities: dict[str, float], repeats: int, seed: int,
                 kills: dict[str, int] | None = None) -> dict[str, list[str]]:
    """Per task: `kills` kills, then `repeats - kills` draws that pass with the task's probability."""
    plans = {}
    for task, p in probabilities.items():
        rng = random.Random(f"{seed}:{task}")
        k = (kills or {}).get(task, 0)
        plans[task] = ["kill"] * k + ["pass" if rng.random() < p else "fail" for _ in range(repeats - k)]
    return plans


@dataclass
class ChancePolicy:
    plans: dict[str, list[str]]
    handed: Counter = field(default_factory=Counter)
    killed: list[str] = field(default_factory=list)
    _lock: threading.Lock = field(default_factory=threading.Lock)

    def _draw(self, task: str) -> str:
        with self._lock:
            i = self.handed[task]
            plan = self.plans[task]
            if i >= len(plan):
                raise LookupError(f"{task}: more rollouts than planned ({len(plan)})")
            self.handed[task] += 1
            return plan[i]

    def _kill(self, task: str, cid: str) -> None:
        import docker

        c = docker.from_env().containers.get(cid)
        labels = c.labels or {}
        # Only ever the fork of this rollout: a shinken fork of this task.
        if labels.get("shinken.kind") != "fork" or labels.get("shinken.task") != task:
            raise LookupError(f"{cid} is not a fork of {task}: {labels}")
        c.kill()
        with self._lock:
            self.killed.append(c.id)

    def __call__(self, input_items: list[dict[str, Any]]) -> tuple[str, sp.Call | None]:
        task = sp.task_of(input_items)
        history = sp.history(input_items)
        if not history:
            return task, ("computer_exec", {"command": f"echo plan={self._draw(task)}; {CONTAINER_ID}"})
        first = next(i for i in input_items if i.get("type") == "function_call")
        m = _PLAN.search(json.loads(first.get("arguments") or "{}").get("command", ""))
        if m is None:
            raise LookupError(f"{task}: the conversation does not start with a plan call")
        plan, rest = m.group(1), history[1:]
        if plan == "pass":
            return task, sp.SCRIPTS[task](rest)
        if plan == "fail":
            return task, FAIL_SCRIPTS[task](rest)
        # kill: the fork dies between two tool calls, as when a node or the daemon loses it.
        if not rest:
            self._kill(task, history[0][1].split()[-1])
            return task, ("computer_exec", {"command": "echo after the kill"})
        return task, (("computer_done", {}) if len(rest) == 1 else None)
