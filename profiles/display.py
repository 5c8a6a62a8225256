"""The profile as rich tables and lines (printed by the CLI)."""

from __future__ import annotations

from typing import Any

from rich.table import Table

from shinken.profiles.bands import BANDS


def _num(v: float | None, fmt: str = "{:.2f}") -> str:
    return "-" if v is None else fmt.format(v)


def render(doc: dict[str, Any], show: int = 20) -> list[Table | str]:
    """Tables and plain lines, in order, for the CLI to print."""
    parts: list[Table | str] = []
    s, totals, counts = doc["settings"], doc["totals"], doc["counts"]
    parts.append(f"{totals['tasks']} task(s); band: {s['min_pass']} < pass rate < {s['max_pass']}, "
                 f"pass: reward >= {s['pass_threshold']}, measured: {s['min_rollouts']}+ scored rollouts")
    summary = Table()
    summary.add_column("band")
    summary.add_column("tasks", justify="right")
    for b in BANDS:
        summary.add_row(b, str(counts[b]))
    parts.append(summary)
    excluded = ", ".join(f"{k} {n}" for k, n in totals["excluded_by_kind"].items()) or "none"
    parts.append(f"rollouts: {totals['rollouts']}  scored: {totals['scored']}  masked: {totals['masked']}  "
                f"failed: {totals['failed']}  stale: {totals['stale']}  (excluded: {excluded})")
    if doc["control_size"] is not None:
        parts.append(f"control: {doc['control_size']} task(s), seed {s['seed']}")
    if not show or not doc["tasks"]:
        return parts
    order = {b: i for i, b in enumerate(BANDS)}
    rows = sorted(doc["tasks"], key=lambda t: (order[t["band"]], -(t["pass_rate"] or 0), t["task_id"]))
    table = Table(title_justify="left")
    for col in ("task", "band", "pass rate", "passed/scored", "excluded", "mean reward", "var", "turns", "tokens"):
        table.add_column(col, justify="left" if col in ("task", "band") else "right", overflow="fold")
    for t in rows[:show]:
        table.add_row(t["task_id"], t["band"], _num(t["pass_rate"]), f"{t['passed']}/{t['scored']}",
                      str(t["masked"] + t["failed"] + t["stale"]), _num(t["mean_reward"]), _num(t["reward_variance"], "{:.3f}"),
                      _num(t["mean_turns"], "{:.1f}"), _num(t["mean_total_tokens"], "{:.0f}"))
    parts.append(table)
    if len(rows) > show:
        parts.append(f"... {len(rows) - show} more task(s) in profile.json (--show N)")
    return parts
