"""Live progress on stderr while probing, and the final table on stdout."""

from __future__ import annotations

import threading
import time
from collections import Counter
from typing import Any

from rich.console import Console, Group
from rich.live import Live
from rich.progress import BarColumn, MofNCompleteColumn, Progress, TextColumn, TimeElapsedColumn
from rich.table import Table
from rich.text import Text

from shinken.probes.final_receipt import alerts_of


class ProbeDisplay:
    """A probe run's listener (probes.pipeline.ProbeListener) for a person: a live panel on
    a terminal, one log line per finished or retried task otherwise. Use it as a context
    manager around run_probe, so the panel is closed however the run ends."""

    def __init__(self, console: Console, live: bool = True) -> None:
        self.console = console
        self.enabled = live
        self.total = 0
        self.resumed = 0
        self.done = 0
        self.kept = 0
        self.reasons: Counter[str] = Counter()
        self.retries = 0
        self.started_at = time.monotonic()
        self._lock = threading.Lock()
        self._progress = Progress(TextColumn("probing"), BarColumn(), MofNCompleteColumn(), TimeElapsedColumn(),
                                  console=console, transient=False)
        self._task = self._progress.add_task("probe", total=1)
        self._live: Live | None = None

    def _render(self) -> Group:
        elapsed = max(time.monotonic() - self.started_at, 1e-6)
        rate = self.done / elapsed * 3600
        line = Text.assemble(
            ("kept ", "bold"), (str(self.kept), "green"), "  ",
            ("dropped ", "bold"), (str(sum(self.reasons.values())), "red"), "  ",
            (f"{rate:,.0f} tasks/h", "cyan"),
            f"  resumed {self.resumed}" if self.resumed else "",
            f"  infra retries {self.retries}" if self.retries else "",
        )
        reasons = Text("  ".join(f"{r}={n}" for r, n in sorted(self.reasons.items())), style="yellow")
        return Group(self._progress, line, reasons)

    def __enter__(self) -> "ProbeDisplay":
        return self

    def __exit__(self, *exc: Any) -> None:
        if self._live is not None:
            self._live.__exit__(*exc)
            self._live = None

    def started(self, total: int, resumed: int) -> None:
        self.total, self.resumed = total - resumed, resumed
        self.started_at = time.monotonic()
        self._progress.update(self._task, total=max(self.total, 1))
        if self.enabled:
            self._live = Live(self._render(), console=self.console, refresh_per_second=4, transient=False,
                              get_renderable=self._render)
            self._live.__enter__()
        if resumed:
            self.console.print(f"resuming: {resumed} of {total} task(s) already have receipts")

    def finished(self, line: dict[str, Any]) -> None:
        with self._lock:
            self.done += 1
            if line["outcome"] == "kept":
                self.kept += 1
            else:
                self.reasons[line["reason"]] += 1
            self._progress.advance(self._task)
        if not self.enabled:  # a log line per task when there is no live display
            self.console.print(f"{line['task_id']}: {line['outcome']}" + (f" ({line['reason']})" if line["reason"] else ""),
                               soft_wrap=True, markup=False, highlight=False)

    def retrying(self, task_id: str, attempt: int, why: str) -> None:
        with self._lock:
            self.retries += 1
        if not self.enabled:
            self.console.print(f"{task_id}: infrastructure failure on attempt {attempt}, retrying ({why})",
                               soft_wrap=True, markup=False, highlight=False)


def _fmt(xs: list[float]) -> str:
    return f"{sum(xs):.2f}" if xs else "-"


def final_table(doc: dict[str, Any]) -> Table:
    t = Table(title=f"shinken probe: {doc['summary']['kept']} kept, {doc['summary']['dropped']} dropped "
                    f"of {doc['summary']['total']}", title_justify="left")
    t.add_column("task", overflow="fold")
    t.add_column("outcome", no_wrap=True)
    t.add_column("tier", no_wrap=True)
    t.add_column("rewards", overflow="fold")
    for col in ("golden s", "forks s", "reward s"):
        t.add_column(col, justify="right", no_wrap=True)
    t.add_column("settled", no_wrap=True)
    named = doc["summary"].get("alerts") != "keep"
    if named:
        t.add_column("alerts", overflow="fold")
    for ln in doc["tasks"]:
        tm = ln["timings"]
        golden = f"{tm['golden_build_s']:.2f}" + ("*" if tm["golden_reused"] else "")
        alerts = "; ".join(f"{a['app']}: {a['title']}" for a in alerts_of(ln)) or "-"
        t.add_row(ln["task_id"], ln["reason"] or "kept", ln.get("tier") or "-",
                  " ".join("-" if r is None else f"{r:g}" for r in ln["rewards"]),
                  golden, _fmt(tm["fork_s"]), _fmt(tm["reward_s"]), settled_cell(ln), *([alerts] if named else []),
                  style="green" if ln["outcome"] == "kept" else None)
    t.caption = ("* golden reused from an earlier build; settled: the desktop the setup left stopped changing "
                 "before the golden was committed (busy: its windows did, its apps kept working; no: not kept)")
    return t


def settled_cell(line: dict[str, Any]) -> str:
    """The probe table's `settled` cell: yes / busy / no, `+N rebuilt` after golden builds thrown
    away because they did not settle, `-` without a desktop record (or an older receipt)."""
    st = line.get("start_state") or {}
    settled = st.get("settled")
    if settled is None:
        return "-"
    cell = "no" if settled is False else "busy" if st.get("busy") else "yes"
    n = int(st.get("unsettled_builds") or 0)
    return cell + (f" ({n} unsettled build{'s' if n > 1 else ''})" if n and settled else "")


def dropped_lines(doc: dict[str, Any]) -> list[str]:
    return [f"{d['id']}: {d['reason']}: {d['detail']}" for d in doc["dropped"]]


def summary_text(doc: dict[str, Any]) -> str:
    s = doc["summary"]
    reasons = ", ".join(f"{r} {n}" for r, n in s["by_reason"].items()) or "none"
    tiers = ", ".join(f"{t} {n}" for t, n in (s.get("by_tier") or {}).items())
    rate = s.get("tasks_per_hour")
    alerts = f", {s['with_alerts']} with alerts" if s.get("with_alerts") and s.get("alerts") != "keep" else ""
    if s.get("unsettled"):
        alerts += f"; {s['unsettled']} not kept: the desktop did not settle"
    checks = "".join(f"; {name} {', '.join(f'{o} {n}' for o, n in counts.items())}"
                     for name, counts in (("oracle:", s.get("by_oracle")), ("vandal:", s.get("by_vandal"))) if counts)
    return (f"kept {s['kept']}" + (f" ({tiers})" if tiers else "") + alerts + f", dropped {s['dropped']} ({reasons}){checks}; "
            f"probed {s.get('probed', 0)}, resumed {s.get('resumed', 0)}, infra retries {s.get('infra_retries', 0)}; "
            f"wall {s.get('wall_s', 0):.1f} s" + (f", {rate:,.0f} tasks/h" if rate else ""))
