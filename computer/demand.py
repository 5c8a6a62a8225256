"""Demand-sized warm pools: how many ready computers to keep per task, from the seeds observed.

Per task the sizer keeps two decayed figures of its requests:
- `rate`: seeds per second, an exponentially decayed count (time constant `rate_tau_s`), and
A task is idle when it had no seed and no live rollout for `idle_s`.

- `group`: the size of its last group of seeds (seeds within `group_gap_s` of the group's first: a
  GRPO group asks for N computers of one task at once; a steady trickle makes small groups), or of the group arriving now if larger.
  It does not fade while the task is in use (a GRPO step may last many minutes): the next group
  of the task is expected to be as large as the last, until the task is idle.

A task's target is `ceil(max(group, rate x refill_s x headroom))`: enough ready computers for the
next group, and for a steady trickle as many as arrive while one is being made. A task with no seed
for `idle_s` wants none (its pool shrinks back to 0). The targets of all tasks together are bounded
by a budget the caller passes (the host's free slots and the memory it has for desktops): tasks
with the highest rate are served first.

Pure arithmetic, no Docker: the engine (computer/engine.py) feeds it seeds and applies its targets to
its pools; tests and the capacity model (docs/fleet.md) read it directly."""

from __future__ import annotations

import math
from dataclasses import dataclass, field


@dataclass(frozen=True)
class DemandPolicy:
    rate_tau_s: float = 120.0  # time constant of the seed rate
    group_gap_s: float = 5.0  # seeds of a task within this of a group's first seed belong to that group
    idle_s: float = 300.0  # no seed of a task this long: its pool goes back to 0
    headroom: float = 1.5  # on rate x refill time
    max_per_task: int = 64
    parallel: int = 2  # refill threads per pool (app starts at once for one task)
    default_refill_s: float = 3.0  # refill time assumed before one was measured


@dataclass
class _TaskDemand:
    rate: float = 0.0  # seeds/s, decayed
    last_group: int = 0  # size of the task's last complete group
    group: int = 0  # seeds in the group now arriving
    group_start: float = -math.inf  # when its first seed came
    last: float = -math.inf  # monotonic time of the last seed
    active: float = -math.inf  # last time a rollout of the task was seen live (in_use)
    seeds: int = 0


@dataclass
class DemandSizer:
    policy: DemandPolicy = field(default_factory=DemandPolicy)
    _tasks: dict[str, _TaskDemand] = field(default_factory=dict)

    def seen(self, task_id: str, now: float) -> None:
        """One seed of `task_id` at monotonic time `now`."""
        p = self.policy
        d = self._tasks.setdefault(task_id, _TaskDemand())
        dt = now - d.last
        d.rate = (d.rate * math.exp(-dt / p.rate_tau_s) if d.seeds else 0.0) + 1.0 / p.rate_tau_s
        if now - d.group_start <= p.group_gap_s:  # within the window of the group's first seed
            d.group += 1
        else:  # a new group; after an idle spell the task starts from nothing
            d.last_group = d.group if d.seeds and dt <= p.idle_s else 0
            d.group, d.group_start = 1, now
        d.last = now
        d.seeds += 1

    @staticmethod
    def _group(d: _TaskDemand) -> int:
        return max(d.last_group, d.group)

    def in_use(self, task_id: str, now: float) -> None:
        """A rollout of the task is live now: the task is not idle (a step may outlast idle_s)."""
        d = self._tasks.get(task_id)
        if d is not None:
            d.active = now

    def rate(self, task_id: str, now: float) -> float:
        d = self._tasks.get(task_id)
        if d is None or not d.seeds:
            return 0.0
        return d.rate * math.exp(-max(0.0, now - d.last) / self.policy.rate_tau_s)

    def want(self, task_id: str, now: float, refill_s: float | None) -> int:
        """Ready computers this task's pool should hold, before the budget."""
        p = self.policy
        d = self._tasks.get(task_id)
        if d is None or now - max(d.last, d.active) > p.idle_s:
            return 0
        steady = self.rate(task_id, now) * (refill_s or p.default_refill_s) * p.headroom
        return min(p.max_per_task, math.ceil(max(float(self._group(d)), steady) - 1e-9))

    def targets(self, refill_s: dict[str, float | None], now: float, budget: int) -> dict[str, int]:
        """Per task (the keys of refill_s: the tasks with a pool) its pool size, all together
        within `budget`; the busiest tasks (highest rate) first."""
        wants = {t: self.want(t, now, r) for t, r in refill_s.items()}
        left = max(0, int(budget))
        out: dict[str, int] = {}
        for t in sorted(wants, key=lambda t: (-self.rate(t, now), t)):
            out[t] = min(wants[t], left)
            left -= out[t]
        return out

    def forget(self, task_id: str) -> None:
        self._tasks.pop(task_id, None)

    def snapshot(self, now: float) -> dict[str, dict[str, float]]:
        """Per task: rate (seeds/min), group size, seconds since its last seed (for status pages)."""
        return {t: {"rate_per_min": round(self.rate(t, now) * 60, 2), "group": self._group(d),
                    "idle_s": round(now - d.last, 1)} for t, d in self._tasks.items()}
