"""Verifier cases for `gym env test` built from evidence, never written by hand.

- zero_reward: tasks whose untouched start scored 0.0 on every no-op fork of the probe (the
  receipt's `rewards`); the case is the row with an empty response.
- full_reward: recorded rollouts (`--rollouts`, Gym rollout JSONL) that `shinken probe --replay`
  replayed on a real fork with reward 1.0 (the receipt's `replay` entries); the case is the
  row with the recorded tool calls, which the fixture replays on a fresh fork.
- full_reward from an oracle: tasks whose reference solution (golden_patch.py, or a script of
  `shinken probe --oracle DIR`) the probe ran on a real fork through `computer_exec` with reward
  1.0 (the receipt line's `oracle`); the case is the row with those same calls (the script is
  written into the fork by the command itself), so a workspace passes `gym env test` with no
  recorded rollouts.
- determinism (only when the probe's evidence says the start state is seeded): one of the
  above, run twice on fresh verifiers.
- malformed: verify calls Gym must see refused (no response, no task_id, a task not in the
  workspace).

The probe's evidence also decides the manifest's `determinism`: `seeded` when every task's
start was forked from a checked golden and repeated no-op forks agreed, else `unknown`.
"""

from __future__ import annotations

import hashlib
import json
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from shinken.errors import ShinkenError
from shinken.probes.oracle import Oracle, read_oracle
from shinken.probes.rollouts import Rollout, load_rollouts
from shinken.probes.runner import REWARD_TOLERANCE

MAX_ZERO = 3  # each case is a real fork + reward run in `gym env test`: a few, spread over app types
MAX_FULL = 3
UNCHECKED_TIERS = {"filesystem"}  # start state not checked against the golden's (fidelity tiers)


@dataclass
class Evidence:
    cases: list[dict[str, Any]] = field(default_factory=list)
    determinism: str = "unknown"
    notes: list[str] = field(default_factory=list)  # what is missing, for the user
    sources: dict[str, Any] = field(default_factory=dict)  # for the workspace manifest

    def counts(self) -> dict[str, int]:
        out = {"zero_reward": 0, "full_reward": 0, "determinism": 0, "malformed": 0}
        for case in self.cases:
            out[case["kind"]] += 1
        return out


def _response(calls: list[tuple[str, dict[str, Any]]], rid: str) -> dict[str, Any]:
    """A Responses API output holding exactly these tool calls (what the fixture replays)."""
    return {
        "id": f"resp_{rid}", "object": "response", "created_at": 0, "model": "recorded",
        "output": [{"type": "function_call", "id": f"fc_{i}", "call_id": f"call_{i}", "name": name,
                    "arguments": json.dumps(args, sort_keys=True), "status": "completed"}
                   for i, (name, args) in enumerate(calls)],
        "parallel_tool_calls": False, "tool_choice": "auto", "tools": [],
    }


def _spread(items: list[tuple[str, str]], limit: int) -> list[str]:
    """Up to `limit` task ids from (app_type, task_id) pairs, one app type after another."""
    by_app: dict[str, list[str]] = {}
    for app, tid in sorted(items):
        by_app.setdefault(app, []).append(tid)
    out: list[str] = []
    while len(out) < limit and any(by_app.values()):
        for app in sorted(by_app):
            if by_app[app] and len(out) < limit:
                out.append(by_app[app].pop(0))
    return out


def _is(value: Any, target: float) -> bool:
    return isinstance(value, (int, float)) and not isinstance(value, bool) and abs(float(value) - target) <= REWARD_TOLERANCE


def _sha256(path: Path) -> str:
    return hashlib.sha256(path.read_bytes()).hexdigest()


def _determinism(receipt: dict[str, Any], lines: dict[str, dict[str, Any]], ids: list[str]) -> tuple[str, str]:
    summary = receipt.get("summary", {})
    if int(summary.get("repeats") or 1) < 2:
        return "unknown", "the probe ran one no-op probe per task (--repeats 1): start-state determinism unchecked"
    missing = [i for i in ids if i not in lines]
    if missing:
        return "unknown", f"{len(missing)} task(s) have no receipt line (e.g. {missing[0]})"
    unchecked = [i for i in ids if lines[i].get("tier") in UNCHECKED_TIERS
                 or ("tier" not in lines[i] and summary.get("state_fidelity") == "filesystem")]
    if unchecked:
        return "unknown", (f"{len(unchecked)} task(s) (e.g. {unchecked[0]}) were probed with --state-fidelity "
                           "filesystem: their start state was not checked")
    return "seeded", (f"every task forks a golden; {summary.get('repeats')} no-op probes per task agreed "
                      "(a fork's and the golden's own computer's or another fork's)")


def _passing_oracles(lines: dict[str, dict[str, Any]], ids: list[str], notes: list[str]) -> dict[str, Oracle]:
    """Task id -> the oracle its receipt line says scored 1.0, read again from where the probe read
    it; a script changed or gone since the probe gives no case (and a note)."""
    out: dict[str, Oracle] = {}
    for tid in ids:
        rec = (lines.get(tid) or {}).get("oracle")
        if not rec or rec.get("outcome") != "oracle_passes":
            continue
        try:
            orc = read_oracle(tid, Path(rec["path"]), rec["source"])
        except ShinkenError as exc:
            notes.append(f"{tid}: the oracle the probe ran is not readable now ({exc}): no full_reward case from it")
            continue
        if orc.sha256 != rec["sha256"]:
            notes.append(f"{tid}: {rec['path']} changed since the probe ran it: no full_reward case from it "
                         "(probe again)")
            continue
        out[tid] = orc
    return out


def in_profile(calls: list[tuple[str, dict[str, Any]]], tools: set[str]) -> list[tuple[str, dict[str, Any]]] | None:
    """Recorded calls as the profile's tools make them, or None when one has no counterpart. The
    pyautogui profile has no computer_done: a policy ends with the program `DONE`, which does
    the same (marks the rollout done; the reward reads the fork either way)."""
    out = []
    for name, args in calls:
        if name == "computer_done" and name not in tools and "computer_pyautogui" in tools:
            name, args = "computer_pyautogui", {"code": "DONE"}
        if name not in tools:
            return None
        out.append((name, args))
    return out


def gather(rows: dict[str, dict[str, Any]], ids: list[str], receipt: dict[str, Any] | None,
           rollout_files: list[Path]) -> Evidence:
    """Cases for the tasks `ids` (their rows in `rows`) from a probe receipt and rollout files."""
    ev = Evidence()
    lines = {ln["task_id"]: ln for ln in (receipt or {}).get("tasks", []) if ln.get("outcome") == "kept"}
    ev.sources = {"receipt": receipt is not None,
                  "rollouts": [{"path": str(p), "sha256": _sha256(p)} for p in rollout_files]}

    def case(name: str, kind: str, row: dict[str, Any], calls: list[tuple[str, dict[str, Any]]],
             expected: float, rid: str) -> dict[str, Any]:
        return {"name": name, "kind": kind, "request": {**row, "response": _response(calls, rid)},
                "expected_reward": expected}

    if receipt is None:
        ev.notes.append("no probe receipt (--ids-file is a plain list): no zero_reward verifier case")
    zero = [(rows[t].get("app_type") or "", t) for t in ids
            if t in lines and lines[t].get("rewards") and all(_is(r, 0.0) for r in lines[t]["rewards"])]
    for tid in _spread(zero, MAX_ZERO):
        n = len(lines[tid]["rewards"])
        ev.cases.append(case(f"{tid}: untouched start (probe: {n} no-op fork(s) scored 0.0)", "zero_reward",
                             rows[tid], [], 0.0, f"{tid}-untouched"))
    if receipt is not None and not zero:
        ev.notes.append("no task's untouched start scored 0.0 in the probe: no zero_reward verifier case")

    solved: list[tuple[str, str]] = []
    solutions: dict[str, tuple[Path, Rollout, list[tuple[str, dict[str, Any]]]]] = {}
    other_tools = 0
    for path in rollout_files:
        for tid, rollouts in load_rollouts(path).items():
            if tid not in rows or tid in solutions or tid not in lines:
                continue
            replays = {r["rollout"]: r for r in lines[tid].get("replay") or []}
            for ro in rollouts:
                rec = replays.get(ro.index)
                tools = {t["name"] for t in rows[tid]["responses_create_params"]["tools"]}
                calls = in_profile([(c.name, c.arguments) for c in ro.calls], tools)
                if calls is None:  # recorded with tools this profile lacks
                    other_tools += 1
                    continue
                if rec and rec["match"] and _is(rec["reward"], 1.0) and rec["calls"] == len(ro.calls):
                    solutions[tid] = (path, ro, calls)
                    solved.append((rows[tid].get("app_type") or "", tid))
                    break
    for tid in _spread(solved, MAX_FULL):
        path, ro, calls = solutions[tid]
        ev.cases.append(case(f"{tid}: recorded solution ({path.name} rollout {ro.index}, {len(calls)} calls) "
                             "replayed by the probe with reward 1.0", "full_reward", rows[tid], calls, 1.0,
                             f"{tid}-solution-{ro.index}"))
    # An oracle runs through computer_exec: a profile without the shell (--no-exec) cannot replay it.
    oracles = _passing_oracles(lines, [t for t in ids if t in rows and t not in solutions and "computer_exec" in
                                       {x["name"] for x in rows[t]["responses_create_params"]["tools"]}], ev.notes)
    taken = len([c for c in ev.cases if c["kind"] == "full_reward"])
    for tid in _spread([(rows[t].get("app_type") or "", t) for t in oracles], MAX_FULL - taken):
        orc = oracles[tid]
        oracle_calls = in_profile(orc.calls(), {x["name"] for x in rows[tid]["responses_create_params"]["tools"]})
        if oracle_calls is None:
            continue
        ev.cases.append(case(f"{tid}: reference solution ({orc.name}, run through computer_exec) scored 1.0 by "
                             "the probe", "full_reward", rows[tid], oracle_calls, 1.0, f"{tid}-oracle"))
    if other_tools:
        ev.notes.append(f"{other_tools} recorded rollout(s) call tools this workspace's profile does not have (e.g. "
                        "computer_exec with --no-exec): not used as full_reward cases; `gym env test` needs one recorded "
                        "with this profile's tools")
    if not solved and not oracles:
        ev.notes.append("no full_reward verifier case: no recorded rollout reproduced with reward 1.0 by `shinken "
                        "probe --replay` and no oracle (golden_patch.py, `--oracle DIR`) passed in the probe")

    if receipt is not None:
        ev.determinism, why = _determinism(receipt, lines, ids)
        ev.sources["determinism"] = why
        base = next((c for c in ev.cases if c["kind"] == "full_reward"), None) or next(iter(ev.cases), None)
        if ev.determinism == "seeded" and base is not None:
            ev.cases.append({**base, "name": f"{base['name'].split(':')[0]}: same reward on a fresh fork",
                             "kind": "determinism"})
        elif ev.determinism == "seeded":
            ev.determinism, ev.sources["determinism"] = "unknown", "no case to check determinism with"

    first = rows[ids[0]]
    no_task = {k: v for k, v in first.items() if k != "task_id"}
    ev.cases += [
        {"name": "verify without the model's response", "kind": "malformed", "request": dict(first),
         "expected_error": "response"},
        {"name": "verify of a row without task_id", "kind": "malformed",
         "request": {**no_task, "response": _response([], "no-task")}, "expected_error": "task_id"},
        {"name": "verify of a task this workspace does not hold", "kind": "malformed",
         "request": {**first, "task_id": f"{first['task_id']}-not-in-this-workspace",
                     "response": _response([], "unknown-task")}, "expected_error": "not found under"},
    ]
    return ev
