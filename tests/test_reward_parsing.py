"""Reward output parsing and run classification: pure functions, every variant seen in
the release (REWARD lines, lower case, bare numbers, `Total score:`, garbage)."""

from __future__ import annotations

import math

import pytest

from shinken.sandbox.api import tail
from shinken.needs.reward import classify_reward_run, parse_reward_output


@pytest.mark.parametrize(
    "text, exit_code, expected",
    [
        ("REWARD: 1.0\n", 0, (1.0, None, None)),
        ("REWARD: 0\n", 0, (0.0, None, None)),
        ("REWARD: 1\n", 0, (1.0, None, None)),
        ("checking...\n3/4 ok\nREWARD: 0.75\n", 0, (0.75, None, None)),
        # the LAST match wins, even when diagnostics follow it
        ("REWARD: 0.0\nretrying\nREWARD: 0.5\ndone\n", 0, (0.5, None, None)),
        ("  REWARD:   .25  \n", 0, (0.25, None, None)),
        ("REWARD: 5e-1\n", 0, (0.5, None, None)),
        ("REWARD=0.3\n", 0, (0.3, None, None)),
        # printed after other text on the same line
        ("final REWARD: 0.4\n", 0, (0.4, None, None)),
        # lower/mixed case accepted but flagged
        ("reward: 0.3\n", 0, (0.3, None, "lowercase")),
        ("Reward: 1.0\n", 0, (1.0, None, "lowercase")),
        # bare number on the last non-empty line
        ("computing\n0.7\n\n", 0, (0.7, None, "bare_number")),
        ("1\n", 0, (1.0, None, "bare_number")),
        # Total score
        ("Total score: 0.6\n", 0, (0.6, None, "total_score")),
        ("a\ntotal score: 1.0\nbye\n", 0, (1.0, None, "total_score")),
        # REWARD wins over Total score and bare numbers
        ("Total score: 0.2\nREWARD: 0.9\n", 0, (0.9, None, None)),
        # out of range
        ("REWARD: 1.5\n", 0, (None, "out_of_range", None)),
        ("REWARD: -0.1\n", 0, (None, "out_of_range", None)),
        ("REWARD: nan\n", 0, (None, "out_of_range", None)),
        ("REWARD: inf\n", 0, (None, "out_of_range", None)),
        ("Total score: 7\n", 0, (None, "out_of_range", "total_score")),
        ("42\n", 0, (None, "out_of_range", "bare_number")),  # the shape is still reported
        # nothing parseable
        ("", 0, (None, "no_reward_line", None)),
        ("status file present\n", 0, (None, "no_reward_line", None)),
        ("0.5\nstill working\n", 0, (None, "no_reward_line", None)),  # bare number not last
        ("REWARD: high\n", 0, (None, "no_reward_line", None)),
        # a crash: non-zero exit and no value
        ("Traceback (most recent call last):\nZeroDivisionError\n", 1, (None, "crash", None)),
        # a value printed before a non-zero exit still counts (scripts exit(1) on a zero score)
        ("REWARD: 0.0\n", 1, (0.0, None, None)),
    ],
)
def test_parse_reward_output(text: str, exit_code: int, expected: tuple) -> None:
    assert parse_reward_output(text, exit_code) == expected


def test_parse_returns_float_in_unit_interval() -> None:
    reward, error, _ = parse_reward_output("REWARD: 0.333333\n", 0)
    assert error is None and isinstance(reward, float) and math.isclose(reward, 0.333333)


def test_classify_timeout_and_limits_take_precedence() -> None:
    # killed at the timeout: whatever was printed before does not count
    assert classify_reward_run("REWARD: 1.0\n", None, timed_out=True, limit_hit=False) == (None, "timeout", None)
    # a fork bomb usually ends at the timeout with the pids limit hit
    assert classify_reward_run("", None, timed_out=True, limit_hit=True) == (None, "resource_limit", None)
    # OOM-killed (exit 137) before the timeout
    assert classify_reward_run("", 137, timed_out=False, limit_hit=True) == (None, "resource_limit", None)
    # limits were hit by something else but the script finished cleanly: its value stands
    assert classify_reward_run("REWARD: 0.5\n", 0, timed_out=False, limit_hit=True) == (0.5, None, None)
    assert classify_reward_run("oops\n", 2, timed_out=False, limit_hit=False) == (None, "crash", None)
    assert classify_reward_run("reward: 1\n", 0, timed_out=False, limit_hit=False) == (1.0, None, "lowercase")


def test_tail_keeps_the_end() -> None:
    text = "x" * 5000 + "END"
    t = tail(text, 100)
    assert len(t) == 100 and t.endswith("END")
    assert tail("short", 100) == "short"


# One grammar, two readers: triage reads reward.py source, the sandbox reads its output.
# Each variant is a print statement and exactly what it prints; both must reach the same
# verdict (ok, flagged with the same deviation, or no marker at all).
MARKER_VARIANTS = [
    ('print(f"REWARD: {0.5}")', "REWARD: 0.5", None),
    ('print("REWARD:", 0.5)', "REWARD: 0.5", None),
    ('print(f"REWARD={0.5}")', "REWARD=0.5", None),  # was defective in triage, fine at run time
    ('print(f"REWARD = {0.5}")', "REWARD = 0.5", None),
    ('print(f"checked 3 files, REWARD: {0.5}")', "checked 3 files, REWARD: 0.5", None),
    ('print(f"reward: {0.5}")', "reward: 0.5", "lowercase"),
    ('print(f"Reward={0.5}")', "Reward=0.5", "lowercase"),
    ('print(f"Total score: {0.5}")', "Total score: 0.5", "total_score"),
    ('print(f"Total_Score: {0.5}")', "Total_Score: 0.5", "total_score"),  # was fine in triage, no_reward_line at run time
    ('print(f"TOTAL SCORE={0.5}")', "TOTAL SCORE=0.5", "total_score"),
    ("print(0.5)", "0.5", "bare_number"),
    ('print(f"FINAL_REWARD: {0.5}")', "FINAL_REWARD: 0.5", "none"),
    ('print(f"score: {0.5}")', "score: 0.5", "none"),
    ('print(f"REWARD {0.5}")', "REWARD 0.5", "none"),
]


@pytest.mark.parametrize("source, output, verdict", MARKER_VARIANTS, ids=[v[1] for v in MARKER_VARIANTS])
def test_triage_and_sandbox_read_the_marker_alike(source: str, output: str, verdict: str | None) -> None:
    from shinken.needs.pyscan import analyze

    static = analyze(f"import sys\n{source}\n".encode(), (3, 11), reward=True).marker
    assert {"no_marker": "none"}.get(static, static) == verdict, static
    reward, error, deviation = parse_reward_output(output + "\n", 0)
    if verdict == "none":
        assert (reward, error) == (None, "no_reward_line")
    else:
        assert (reward, error, deviation) == (0.5, None, verdict)
