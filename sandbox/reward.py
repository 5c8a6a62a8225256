"""Turning one reward run (output, exit status, limits hit) into a RewardResult verdict.
Pure, so every output variant is unit-tested without a container."""

from __future__ import annotations

from shinken.sandbox.api import parse_reward_output


def classify_reward_run(output: str, exit_code: int | None, *, timed_out: bool,
                        limit_hit: bool) -> tuple[float | None, str | None, str | None]:
    """(reward, error, deviation).

    Order matters: a run that hit the container's memory or pids limit and did not exit
    cleanly is `resource_limit` (even if it was then killed at the timeout, which is what a
    fork bomb looks like); a run killed at its timeout is `timeout`; everything else is
    decided by the output (see parse_reward_output)."""
    if limit_hit and (timed_out or exit_code != 0):
        return None, "resource_limit", None
    if timed_out:
        return None, "timeout", None
    return parse_reward_output(output, exit_code)
