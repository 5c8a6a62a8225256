"""Read NeMo Gym 0.7.0 rollout files into one `Outcome` per rollout.

`gym eval run` / `ng_collect_rollouts` write, next to `<out>.jsonl` (one verify response per
finished rollout: the row's fields, `reward`, `mask_sample`, `failure_kind`, `response` with
`output` items and accumulated `usage`, `_ng_task_index`, `_ng_rollout_index`; a masked one names
its failure in Gym's vocabulary, shinken/failure_kinds.py, and older files' shinken codes are read
as those names):
`<out>_failures.jsonl` (attempts that produced no rollout, `_ng_failure_class` set; one row per
attempt, a later success of the same slot supersedes them) and
`<out>_materialized_inputs.jsonl` (the input rows with their indices, read here only to name
the task of a rollout that does not carry `task_id`).
"""

from __future__ import annotations

import hashlib
import json
from dataclasses import asdict, dataclass
from pathlib import Path
from typing import Any, Iterator

import orjson

from shinken.errors import ShinkenError
from shinken.failure_kinds import gym_kind
from shinken.schemas import validation_error

FAILURES_SUFFIX = "_failures"
INPUTS_SUFFIX = "_materialized_inputs"
TASK_INDEX = "_ng_task_index"
ROLLOUT_INDEX = "_ng_rollout_index"
FAILURE_CLASS = "_ng_failure_class"


@dataclass(frozen=True, slots=True)  # slots: a release-sized profile holds ~100k of them
class Outcome:
    """What one rollout says about its task. `status`: `scored` (the reward measures the
    policy), `masked` (the server set mask_sample: its reward measures nothing) or `failed`
    (Gym recorded an attempt that produced no rollout)."""

    key: str  # identity across files and runs: the final response id, else a hash of the line
    slot: str | None  # "<rollouts file>#<task index>#<rollout index>": a failure and a later success share it
    task_id: str
    bundle_hash: str | None
    status: str
    reward: float | None
    failure_kind: str | None
    turns: int | None
    tool_calls: int | None
    input_tokens: int | None
    output_tokens: int | None
    total_tokens: int | None
    source: str
    line: int
    # The observation/action profile of the row (canonical JSON of shinken.computer.profiles.Profile;
    # rows without `shinken_profile` are the default's); None when the line carries no row fields.
    policy_profile: str | None = None

    def to_json(self) -> dict[str, Any]:
        return asdict(self)

    @classmethod
    def from_json(cls, doc: dict[str, Any]) -> "Outcome":
        values: dict[str, Any] = {k: doc.get(k) for k in cls.__dataclass_fields__}
        return cls(**values)


def main_file_of(path: Path) -> Path:
    """The rollouts file a sidecar belongs to (`x_failures.jsonl` -> `x.jsonl`)."""
    for suffix in (FAILURES_SUFFIX, INPUTS_SUFFIX):
        if path.stem.endswith(suffix):
            return path.with_name(path.stem.removesuffix(suffix) + path.suffix)
    return path


def _is_rollouts_file(path: Path) -> bool:
    """In a folder, a rollouts file is one Gym wrote its materialized inputs or metrics beside
    (the folder also holds other JSONL, e.g. rollout_verdicts.jsonl)."""
    return any(path.with_name(path.stem + tail).is_file()
               for tail in (INPUTS_SUFFIX + ".jsonl", "_aggregate_metrics.json"))


def expand_inputs(paths: list[Path]) -> list[Path]:
    """Rollout files from the command line: files as given, folders searched for the rollouts
    files Gym wrote; a main file brings its `_failures` sidecar. Materialized inputs are
    never rollouts."""
    found: list[Path] = []
    for p in paths:
        if p.is_dir():
            found += sorted(q for q in p.rglob("*.jsonl") if q.is_file() and _is_rollouts_file(q))
        elif p.is_file():
            found.append(p)
        else:
            raise ShinkenError(f"{p}: no such rollouts file or folder; pass the JSONL `gym eval run` wrote")
    out: list[Path] = []
    for p in found:
        p = p.resolve()
        if p.stem.endswith(INPUTS_SUFFIX):
            continue
        out.append(p)
        side = p.with_name(p.stem + FAILURES_SUFFIX + p.suffix)
        if not p.stem.endswith(FAILURES_SUFFIX) and side.is_file():
            out.append(side)
    return list(dict.fromkeys(out))


def _lines(path: Path) -> Iterator[tuple[int, bytes, dict[str, Any]]]:
    """(line number, raw bytes, document) per non-blank line, streamed: rollout files of a
    release-sized run are gigabytes."""
    try:
        fh = path.open("rb")
    except OSError as exc:
        raise ShinkenError(f"{path}: cannot read the rollouts file ({exc.strerror})") from None
    with fh:
        for n, raw in enumerate(fh, 1):
            if not raw.strip():
                continue
            try:
                doc = orjson.loads(raw)
            except orjson.JSONDecodeError as exc:
                raise ShinkenError(f"{path}:{n}: not JSON ({exc}); pass the rollouts JSONL `gym eval run` wrote") from None
            problem = validation_error("gym_rollout", doc)
            if problem:
                raise ShinkenError(f"{path}:{n}: not a NeMo Gym rollout ({problem}); pass the rollouts JSONL "
                                   "`gym eval run` wrote")
            yield n, raw.rstrip(b"\r\n"), doc


def _task_index_names(main: Path) -> dict[int, str]:
    """task index -> task_id from the materialized inputs beside a rollouts file."""
    inputs = main.with_name(main.stem + INPUTS_SUFFIX + main.suffix)
    if not inputs.is_file():
        return {}
    names: dict[int, str] = {}
    for _, _, doc in _lines(inputs):
        ti, tid = doc.get(TASK_INDEX), doc.get("task_id")
        if isinstance(ti, int) and isinstance(tid, str) and tid:
            names[ti] = tid
    return names


def _usage(response: dict[str, Any]) -> tuple[int | None, int | None, int | None]:
    usage = response.get("usage")
    if not isinstance(usage, dict):
        return None, None, None

    def num(k: str) -> int | None:
        v = usage.get(k)
        return int(v) if isinstance(v, (int, float)) and not isinstance(v, bool) else None

    return num("input_tokens"), num("output_tokens"), num("total_tokens")


def _steps(output: list[Any]) -> tuple[int, int]:
    """(turns, tool calls) from a simple-agent response: every model reply adds its items to
    `output` and every tool result follows as a function_call_output, so a turn is a run of
    model items between tool results."""
    turns = calls = 0
    in_turn = False
    for item in output:
        kind = item.get("type") if isinstance(item, dict) else None
        if kind == "function_call_output":
            in_turn = False
            continue
        if kind == "function_call":
            calls += 1
        if not in_turn:
            turns += 1
            in_turn = True
    return turns, calls


def read_file(path: Path) -> list[Outcome]:
    """Every rollout in one file (a main rollouts file or a `_failures` sidecar)."""
    main = main_file_of(path)
    sidecar = path.stem.endswith(FAILURES_SUFFIX)
    names: dict[int, str] | None = None
    outcomes: list[Outcome] = []
    for n, raw, doc in _lines(path):
        ti, ri = doc.get(TASK_INDEX), doc.get(ROLLOUT_INDEX)
        slot = f"{main}#{ti}#{ri}" if isinstance(ti, int) and isinstance(ri, int) else None
        tid = doc.get("task_id")
        if not (isinstance(tid, str) and tid):
            if names is None:
                names = _task_index_names(main)
            tid = names.get(ti) if isinstance(ti, int) else None
        if not tid:
            raise ShinkenError(f"{path}:{n}: the rollout names no task_id and no materialized inputs beside it "
                               "do; profile rollouts of rows made by `shinken make-workspace`")
        got = doc.get("response")
        response: dict[str, Any] = got if isinstance(got, dict) else {}
        output = response.get("output") if isinstance(response.get("output"), list) else None
        turns, calls = _steps(output) if output is not None else (None, None)
        tin, tout, ttot = _usage(response)
        raw_reward = doc.get("reward")
        reward = float(raw_reward) if isinstance(raw_reward, (int, float)) and not isinstance(raw_reward, bool) else None
        kind: str | None
        if doc.get(FAILURE_CLASS) or sidecar:
            status, kind = "failed", gym_kind(str(doc.get(FAILURE_CLASS) or doc.get("failure_kind") or "failed"))
            key = f"fail:{slot}" if slot else "fail:" + hashlib.sha256(raw).hexdigest()
        else:
            if reward is None or output is None:
                raise ShinkenError(f"{path}:{n}: not a NeMo Gym rollout (a verify response has a reward and a "
                                   "response); is this a dataset file? pass the rollouts JSONL `gym eval run` wrote")
            masked = bool(doc.get("mask_sample"))
            status = "masked" if masked else "scored"
            # Gym's failure vocabulary; shinken's older codes ("infra", "reward_timeout") translated
            kind = gym_kind(str(doc.get("failure_kind") or "masked")) if masked else None
            rid = response.get("id")
            key = f"resp:{rid}" if isinstance(rid, str) and rid else "sha:" + hashlib.sha256(raw).hexdigest()
        bh = doc.get("bundle_hash")
        policy = _policy_profile(doc, path, n)
        outcomes.append(Outcome(
            key=key, slot=slot, task_id=tid, bundle_hash=bh if isinstance(bh, str) and bh else None,
            status=status, reward=reward, failure_kind=kind, turns=turns, tool_calls=calls,
            input_tokens=tin, output_tokens=tout, total_tokens=ttot, source=str(path), line=n,
            policy_profile=policy))
    return outcomes


def _policy_profile(doc: dict[str, Any], path: Path, n: int) -> str | None:
    """The row's `shinken_profile` as canonical JSON, `{}` for a row without one (the default
    profile); None when the line carries no row fields."""
    if "task_id" not in doc and "shinken_profile" not in doc:
        return None
    got = doc.get("shinken_profile")
    if got is not None and not isinstance(got, dict):
        raise ShinkenError(f"{path}:{n}: shinken_profile is not a profile; profile rollouts of rows made by "
                           "`shinken make-workspace`")
    return json.dumps(got or {}, sort_keys=True)


def merge(earlier: list[Outcome], new: list[Outcome]) -> tuple[list[Outcome], int]:
    """Earlier outcomes plus the new ones not seen before (a rollout read twice counts once);
    a failed attempt whose slot later produced a rollout is dropped, as Gym's resume does.
    Returns (outcomes, how many of `new` were not seen before)."""
    by_key = {o.key: o for o in earlier}
    added = 0
    for o in new:
        if o.key not in by_key:
            added += 1
        elif o.status != "failed":
            continue
        by_key[o.key] = o  # a failed slot keeps its latest attempt
    done_slots = {o.slot for o in by_key.values() if o.status != "failed" and o.slot}
    return [o for o in by_key.values() if not (o.status == "failed" and o.slot in done_slots)], added
