"""Read recorded NeMo Gym rollouts (the JSONL `gym eval run` writes) into the tool calls
to replay: every `function_call` item of `response.output`, in order, per `task_id`."""

from __future__ import annotations

from collections import defaultdict
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import orjson

from shinken.errors import ShinkenError


@dataclass(frozen=True)
class ToolCall:
    name: str
    arguments: dict[str, Any]


@dataclass(frozen=True)
class Rollout:
    """One recorded rollout to replay: its tool calls in order and the reward it got."""

    index: int  # position in the rollouts file (0-based line of this task's rollouts)
    task_id: str
    calls: tuple[ToolCall, ...]
    reward: float | None


def _task_id(doc: dict[str, Any]) -> str | None:
    # Row fields are passed through verify untouched, so task_id is top level; some
    # writers nest task data under metadata.
    meta = doc.get("metadata")
    for holder in (doc, meta if isinstance(meta, dict) else {}):
        v = holder.get("task_id")
        if isinstance(v, str) and v:
            return v
    return None


def load_rollouts(path: Path) -> dict[str, tuple[Rollout, ...]]:
    """task id -> its rollouts in file order. Bad lines are errors naming the line."""
    try:
        data = Path(path).read_bytes()
    except OSError as exc:
        raise ShinkenError(f"{path}: cannot read the rollouts file ({exc.strerror})") from None
    by_task: dict[str, list[Rollout]] = defaultdict(list)
    for n, raw in enumerate(data.splitlines(), 1):
        if not raw.strip():
            continue
        where = f"{path}:{n}"
        try:
            doc = orjson.loads(raw)
        except orjson.JSONDecodeError as exc:
            raise ShinkenError(f"{where}: not JSON ({exc}); pass a NeMo Gym rollouts JSONL") from None
        if not isinstance(doc, dict):
            raise ShinkenError(f"{where}: a rollout must be a JSON object")
        tid = _task_id(doc)
        if tid is None:
            raise ShinkenError(f"{where}: no task_id; rollouts are matched to tasks by their task_id field")
        response = doc.get("response")
        output = response.get("output") if isinstance(response, dict) else None
        if not isinstance(output, list):
            raise ShinkenError(f"{where}: no response.output list; is this a rollouts file from `gym eval run`?")
        calls: list[ToolCall] = []
        for i, item in enumerate(output):
            if not isinstance(item, dict) or item.get("type") != "function_call":
                continue
            name, args = item.get("name"), item.get("arguments", "{}")
            if not isinstance(name, str) or not name:
                raise ShinkenError(f"{where}: response.output[{i}] is a function_call without a name")
            if isinstance(args, str):
                try:
                    args = orjson.loads(args or "{}")
                except orjson.JSONDecodeError:
                    raise ShinkenError(f"{where}: response.output[{i}].arguments is not JSON") from None
            if not isinstance(args, dict):
                raise ShinkenError(f"{where}: response.output[{i}].arguments must be a JSON object")
            calls.append(ToolCall(name, args))
        reward = doc.get("reward")
        if reward is not None and (isinstance(reward, bool) or not isinstance(reward, (int, float))):
            raise ShinkenError(f"{where}: reward must be a number")
        by_task[tid].append(Rollout(len(by_task[tid]), tid, tuple(calls),
                                    None if reward is None else float(reward)))
    return {k: tuple(v) for k, v in by_task.items()}
