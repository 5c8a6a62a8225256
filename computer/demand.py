"""Demand-sized warm pools: how many ready computers to keep per task, from the seeds observed.

Per task the sizer keeps two figures of its requests:
- `group`: the size of its last group of seeds (seeds within `group_gap_s` of the group's first: a
  GRPO group asks for N computers of one task at once; a steady trickle makes small groups), or of
  the group arriving now if larger. It does not fade while the task is in use (a GRPO step may last
  many minutes): the next group of the task is expected to be as large as the last, until the task
  is idle.
- `interval`: the time between the starts of its groups (a moving average, weight
  `interval_weight` for the newest), so its request `rate` is `group / interval` seeds per second;
  once a group is later than that, the rate falls as the wait grows (`group / time since the
  last group's start`). Until a task's second group there is no rate, only its first group.

A task's target (ready computers plus those being made) follows Little's law: the computers being
made at any time are `rate x make time` (the refill time, measured per pool), and the next group's
burst of N must find its computers ready on top of that:
`ceil(group + rate x refill_s x headroom)`. So the first group of a task pre-warms N for the next,
and a rate the pool keeps up with holds N ready whenever a group arrives. A task with no seed and no
live rollout for `idle_s` wants none (its pool shrinks back to 0). The targets of all tasks together
are bounded by a budget the caller passes (the host's free slots and the memory it has for
desktops): tasks with the highest rate are served first.

What this cannot change is how fast computers are made: a host makes `parallel` at once per task
(and its cores bound all makes together), so it serves a task's groups warm only while
`rate x make time <= parallel` (the host's rated load, docs/fleet.md "Rated load").

Pure arithmetic, no Docker: the engine (computer/engine.py) feeds it seeds and applies its targets to
its pools; tests and the capacity model (docs/fleet.md) read it directly."""

from __future__ import annotations

import math
from dataclasses import dataclass, field


@dataclass(frozen=True)
class DemandPolicy:
    group_gap_s: float = 5.0  # seeds of a task within this of a group's first seed belong to that group
    idle_s: float = 300.0  # no seed of a task this long: its pool goes back to 0
    headroom: float = 1.0  # on the computers being made (rate x refill time)
    interval_weight: float = 0.3  # moving average of the time between a task's groups: the newest's weight
    max_per_task: int = 64
    parallel: int = 2  # refill threads per pool (app starts at once for one task)
    default_refill_s: float = 3.0  # refill time assumed before one was measured


@dataclass
class _TaskDemand:
    last_group: int = 0  # size of the task's last complete group
    group: int = 0  # seeds in the group now arriving
    group_start: float = -math.inf  # when its first seed came
    interval: float | None = None  # mean time between the starts of the task's groups
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
        if now - d.group_start <= p.group_gap_s:  # within the window of the group's first seed
            d.group += 1
        else:  # a new group; after an idle spell the task starts from nothing
            if d.seeds and now - d.last <= p.idle_s:
                d.last_group = d.group
                gap = now - d.group_start
                d.interval = gap if d.interval is None else (1 - p.interval_weight) * d.interval + p.interval_weight * gap
            else:
                d.last_group, d.interval = 0, None
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
        """Seeds per second: a group per interval (0 before the task's second group)."""
        d = self._tasks.get(task_id)
        if d is None or d.interval is None:
            return 0.0
        return self._group(d) / max(d.interval, now - d.group_start, 1e-3)

    def want(self, task_id: str, now: float, refill_s: float | None) -> int:
        """Ready computers (and being made) this task's pool should hold, before the budget."""
        p = self.policy
        d = self._tasks.get(task_id)
        if d is None or now - max(d.last, d.active) > p.idle_s:
            return 0
        making = self.rate(task_id, now) * (refill_s or p.default_refill_s) * p.headroom
        return min(p.max_per_task, math.ceil(self._group(d) + making - 1e-9))

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

    def snapshot(self, now: float) -> dict[str, dict[str, float | None]]:
        """Per task: rate (seeds/min), group size, interval between groups, seconds since its last
        seed (for status pages)."""
        return {t: {"rate_per_min": round(self.rate(t, now) * 60, 2), "group": self._group(d),
                    "interval_s": round(d.interval, 1) if d.interval is not None else None,
                    "idle_s": round(now - d.last, 1)} for t, d in self._tasks.items()}
