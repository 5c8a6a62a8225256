"""Per-task pass rates from rollout outcomes, and the band a task falls in.

A task is `too_easy` when the policy passes it at `max_pass` or more often, `too_hard` at
`min_pass` or less, `band` strictly in between (so a task always or never solved is never in
the band, whatever the edges: its rollouts all score alike and give GRPO no signal), and
`insufficient` when fewer than
`min_rollouts` rollouts measured it: masked and failed rollouts measure nothing, so they are
never counted as failures and may leave a task unmeasured.
"""

from __future__ import annotations

import random
from collections import Counter
from dataclasses import dataclass
from statistics import fmean, pvariance
from typing import Any, Iterable

from shinken.errors import ShinkenError
from shinken.profiles.rollouts import Outcome

BANDS = ("too_easy", "band", "too_hard", "insufficient")
PASS_TOLERANCE = 1e-6  # rewards are printed with a few decimals; 0.9999995 passes a 1.0 threshold


@dataclass(frozen=True)
class Settings:
    min_pass: float = 0.1
    max_pass: float = 0.9
    pass_threshold: float = 1.0
    min_rollouts: int = 4
    seed: int = 0
    control: bool = True

    def check(self) -> None:
        if not 0.0 <= self.min_pass < self.max_pass <= 1.0:
            raise ShinkenError(f"--min-pass {self.min_pass} / --max-pass {self.max_pass}: need "
                               "0 <= min-pass < max-pass <= 1")
        if self.min_rollouts < 1:
            raise ShinkenError(f"--min-rollouts {self.min_rollouts}: must be at least 1")

    def to_json(self) -> dict[str, Any]:
        return {"min_pass": self.min_pass, "max_pass": self.max_pass, "pass_threshold": self.pass_threshold,
                "min_rollouts": self.min_rollouts, "seed": self.seed, "control": self.control}


@dataclass(frozen=True)
class TaskInfo:
    """What the task root (and the probe receipt, when given) says about a task."""

    app_type: str
    difficulty: str | None
    bundle_hash: str | None
    tier: str | None = None


def band_of(scored: int, pass_rate: float | None, s: Settings) -> str:
    if scored < s.min_rollouts or pass_rate is None:
        return "insufficient"
    if pass_rate >= s.max_pass - PASS_TOLERANCE:
        return "too_easy"
    if pass_rate <= s.min_pass + PASS_TOLERANCE:
        return "too_hard"
    return "band"


def _mean(values: Iterable[int | float | None]) -> float | None:
    got = [v for v in values if v is not None]
    return round(fmean(got), 6) if got else None


def task_profile(task_id: str, info: TaskInfo, outcomes: list[Outcome], s: Settings) -> dict[str, Any]:
    # A rollout of another version of the bundle measures a task that no longer exists.
    stale = [o for o in outcomes if info.bundle_hash and o.bundle_hash and o.bundle_hash != info.bundle_hash]
    current = [o for o in outcomes if o not in stale]
    scored = [o for o in current if o.status == "scored"]
    excluded = Counter(o.failure_kind or o.status for o in current if o.status != "scored")
    if stale:
        excluded["stale_bundle"] = len(stale)
    rewards = [float(o.reward) for o in scored if o.reward is not None]
    passed = sum(r >= s.pass_threshold - PASS_TOLERANCE for r in rewards)
    rate = round(passed / len(rewards), 6) if rewards else None
    return {
        "task_id": task_id,
        "app_type": info.app_type,
        "difficulty": info.difficulty,
        "tier": info.tier,
        "rollouts": len(outcomes),
        "scored": len(scored),
        "masked": sum(o.status == "masked" for o in current),
        "failed": sum(o.status == "failed" for o in current),
        "stale": len(stale),
        "excluded_by_kind": dict(sorted(excluded.items())),
        "passed": passed,
        "pass_rate": rate,
        "mean_reward": _mean(rewards),
        "reward_variance": round(pvariance(rewards), 6) if rewards else None,
        "mean_turns": _mean(o.turns for o in scored),
        "mean_tool_calls": _mean(o.tool_calls for o in scored),
        "mean_input_tokens": _mean(o.input_tokens for o in scored),
        "mean_output_tokens": _mean(o.output_tokens for o in scored),
        "mean_total_tokens": _mean(o.total_tokens for o in scored),
        "band": band_of(len(scored), rate, s),
    }


def control_sample(profiled: list[str], size: int, seed: int) -> list[str]:
    """A seeded uniform sample of the measured tasks, as many as the band holds: the
    unfiltered baseline a band is compared against (same size, same population)."""
    pool = sorted(profiled)
    return sorted(random.Random(seed).sample(pool, min(size, len(pool))))


def profile_tasks(outcomes: list[Outcome], infos: dict[str, TaskInfo], universe: Iterable[str],
                  s: Settings) -> tuple[list[dict[str, Any]], list[str], list[str] | None]:
    """(per-task profiles sorted by id, band ids, control ids or None without --control)."""
    by_task: dict[str, list[Outcome]] = {t: [] for t in universe}
    for o in outcomes:
        by_task.setdefault(o.task_id, []).append(o)
    tasks = [task_profile(t, infos[t], by_task[t], s) for t in sorted(by_task)]
    band = [t["task_id"] for t in tasks if t["band"] == "band"]
    measured = [t["task_id"] for t in tasks if t["band"] != "insufficient"]
    control = control_sample(measured, len(band), s.seed) if s.control else None
    return tasks, band, control
