"""The REWARD marker grammar: how a reward script reports its score, and how one reward
run (output, exit status, limits hit) becomes a RewardResult verdict.

This module owns the grammar. The sandbox parses run output with it (parse_reward_output),
and triage's static check of reward.py source derives its patterns from the same pieces
(SOURCE_MARKER, SOURCE_MARKER_ANY_CASE, SOURCE_TOTAL_SCORE), so a script triage calls
fine is one the sandbox parses, and the other way round (tests/test_reward_parsing.py
pins every variant to the same verdict in both)."""

from __future__ import annotations

import math
import re

NUMBER = r"[-+]?(?:\d+(?:\.\d*)?|\.\d+)(?:[eE][-+]?\d+)?|[-+]?(?:nan|inf(?:inity)?)"
CANONICAL_WORD = "REWARD"  # `REWARD: 0.5` or `REWARD=0.5`; any other case is flagged `lowercase`


def _marker(word: str) -> str:
    return rf"\b{word}\s*[:=]"


_TOTAL_WORDS = r"total[\s_]*score"
_TOTAL_SCORE = rf"\b{_TOTAL_WORDS}\s*[:=]"  # `Total score: 0.5`, `Total_Score=0.5`: flagged `total_score`

# Any text the host's grammar could read as a score marker (REWARD/reward, Total score, then : or =):
# the verifier's runner (sandbox/reward_runner.py) defuses those its score statements did not print.
MARKER_PATTERN = rf"(?i)\b(reward|{_TOTAL_WORDS})(\s*[:=])"

_LINE_RE = re.compile(rf"(?im)^\s*({_marker('reward')})\s*({NUMBER})\s*$")
_ANY_RE = re.compile(rf"(?i)({_marker('reward')})\s*({NUMBER})")
_TOTAL_RE = re.compile(rf"(?i){_TOTAL_SCORE}\s*({NUMBER})")
_BARE_RE = re.compile(rf"(?i)^\s*({NUMBER})\s*$")

# In reward.py source: a string literal (plain or f-string) that begins a marker, i.e. what
# the script prints. Triage matches these; the number comes at run time.
_LITERAL = r"""["'][^"'\n]*"""
SOURCE_MARKER = re.compile(f"{_LITERAL}{_marker(CANONICAL_WORD)}".encode())
SOURCE_MARKER_ANY_CASE = re.compile(f"(?i){_LITERAL}{_marker('reward')}".encode())
SOURCE_TOTAL_SCORE = re.compile(f"(?i){_LITERAL}{_TOTAL_SCORE}".encode())


def _classify(value: float) -> tuple[float | None, str | None]:
    if math.isnan(value) or not 0.0 <= value <= 1.0:
        return None, "out_of_range"
    return value, None


def parse_reward_output(text: str, exit_code: int | None) -> tuple[float | None, str | None, str | None]:
    """(reward, error, deviation) from a reward script's output.

    The LAST `REWARD: <float>` (or `REWARD=<float>`) line wins (as every consumer of the
    release does). A lower-case `reward:`, a `Total score: X` (or `Total_Score: X`) or a
    bare number on the last non-empty line are accepted but flagged. No value is
    `no_reward_line` (or `crash` when the script exited non-zero); a value outside [0, 1]
    is `out_of_range`. A non-zero exit after a valid REWARD line keeps the reward (some
    scripts `sys.exit(1)` on a zero score)."""
    text = text or ""
    value: float | None = None
    deviation: str | None = None

    matches = list(_LINE_RE.finditer(text))
    if not matches:
        # `REWARD: 0.5` printed after other text on the same line still counts.
        matches = list(_ANY_RE.finditer(text))
    if matches:
        m = matches[-1]
        value = float(m.group(2))
        if not m.group(1).startswith(CANONICAL_WORD):
            deviation = "lowercase"
    else:
        totals = list(_TOTAL_RE.finditer(text))
        if totals:
            value = float(totals[-1].group(1))
            deviation = "total_score"
        else:
            lines = [ln for ln in text.splitlines() if ln.strip()]
            if lines:
                bm = _BARE_RE.match(lines[-1])
                if bm:
                    value = float(bm.group(1))
                    deviation = "bare_number"

    if value is None:
        return None, ("crash" if exit_code not in (0, None) else "no_reward_line"), None
    reward, err = _classify(value)
    return reward, err, deviation

JUDGE_ERROR_MARK = "SHINKEN_JUDGE_ERROR:"  # the line shinken's reward_judge prints when the judge failed


def classify_reward_run(output: str, exit_code: int | None, *, timed_out: bool,
                        limit_hit: bool) -> tuple[float | None, str | None, str | None]:
    """(reward, error, deviation).

    Order matters: a run that hit the container's memory or pids limit and did not exit
    cleanly is `resource_limit` (even if it was then killed at the timeout, which is what a
    fork bomb looks like); a run killed at its timeout is `timeout`; everything else is
    decided by the output (see parse_reward_output). A run in which shinken's judge module
    could not get an answer is `judge_error`: its score is missing a component, not low."""
    if limit_hit and (timed_out or exit_code != 0):
        return None, "resource_limit", None
    if timed_out:
        return None, "timeout", None
    if JUDGE_ERROR_MARK in output:
        return None, "judge_error", None
    return parse_reward_output(output, exit_code)
