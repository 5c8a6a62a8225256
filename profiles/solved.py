"""The rollouts a profile saw solve their task (reward 1.0, scored, with tool calls), one per task,
as a replay file: `shinken probe --replay <out>/solved.jsonl` re-runs each on a fresh fork, and
`make-workspace --rollouts <out>/solved.jsonl` turns those the probe reproduced into `full_reward`
verifier cases. Lines are the rollouts exactly as `gym eval run` wrote them (task_id added when
only the materialized inputs named it)."""

from __future__ import annotations

from collections import defaultdict
from pathlib import Path

import orjson

from shinken.profiles.rollouts import Outcome

SOLVED_FILE = "solved.jsonl"
PER_TASK = 1  # each is a fork + replay + reward in the probe: one solution per task is the evidence
SOLVED_AT = 1.0 - 1e-6


def solved_lines(outcomes: list[Outcome]) -> list[bytes]:
    """One JSONL line per solved task, in task id order; rollouts whose file is gone are skipped."""
    picked: dict[str, list[Outcome]] = defaultdict(list)
    for o in sorted(outcomes, key=lambda o: (o.task_id, o.source, o.line)):
        if (o.status == "scored" and o.reward is not None and o.reward >= SOLVED_AT and (o.tool_calls or 0) > 0
                and len(picked[o.task_id]) < PER_TASK):
            picked[o.task_id].append(o)
    wanted: dict[str, dict[int, Outcome]] = defaultdict(dict)
    for group in picked.values():
        for o in group:
            wanted[o.source][o.line] = o
    found: dict[tuple[str, int], bytes] = {}
    for source, lines in wanted.items():
        try:
            fh = Path(source).open("rb")
        except OSError:
            continue
        with fh:
            for n, raw in enumerate(fh, 1):
                hit = lines.get(n)
                if hit is None:
                    continue
                doc = orjson.loads(raw)
                if doc.get("task_id") != hit.task_id:
                    doc["task_id"] = hit.task_id
                found[(source, n)] = orjson.dumps(doc)
    return [found[(o.source, o.line)] for tid in sorted(picked) for o in picked[tid] if (o.source, o.line) in found]
