"""The report as one self-contained static HTML page: inline CSS and SVG, no script, no
request at view time (so it can be attached to a mail or an issue and opened anywhere)."""

from __future__ import annotations

import datetime as _dt
from html import escape
from typing import Any, Sequence

from shinken import __version__
from shinken.profiles.bands import BANDS
from shinken.report import svg
from shinken.report.figures import VERDICTS, Figures, Row, TriageFigures, family_size_rows, figures, hygiene_settings_text
from shinken.report.svg import Series

VERDICT_SERIES = [Series("runnable", "runnable", "solid-green"), Series("blocked", "blocked", "hatch-amber"),
                  Series("defective", "defective", "dots-red")]
BAND_SERIES = [Series("too_hard", "too hard", "cross-red"), Series("band", "band", "solid-blue"),
               Series("too_easy", "too easy", "hatch-amber"), Series("insufficient", "insufficient", "empty")]
OUTCOME_SERIES = [Series("kept", "kept", "solid-green"), Series("dropped", "dropped", "hatch-amber")]
COUNT_SERIES = [Series("n", "tasks", "solid-slate")]
VANDAL_SERIES = [Series("resists", "vandal resists", "solid-green"), Series("passes_one", "passes one variant", "hatch-amber"),
                 Series("passes_both", "passes both (dropped)", "dots-red"), Series("not_run", "vandal not run", "empty")]
ROLLOUT_SERIES = [Series("n", "rollouts", "hatch-grey")]
MAX_TASK_ROWS = 200

CSS = """
body{font-family:system-ui,-apple-system,"Segoe UI",Roboto,"DejaVu Sans",sans-serif;color:#1a202c;margin:0;background:#fff}
main{max-width:960px;margin:0 auto;padding:24px}
h1{font-size:26px;margin:0 0 4px}h2{font-size:20px;border-bottom:2px solid #1a202c;padding-bottom:4px;margin-top:36px}
figure{margin:18px 0 26px}figcaption{font-weight:600;margin-bottom:6px}
.meta{color:#4a5568;font-size:13px;margin:0}
.cards{display:flex;flex-wrap:wrap;gap:12px;margin:18px 0}
.card{border:1.5px solid #1a202c;border-radius:6px;padding:8px 14px;min-width:120px}
.card b{display:block;font-size:24px}.card span{font-size:13px;color:#4a5568}
svg.chart{max-width:100%;height:auto;display:block}svg.chart text{fill:#1a202c}
svg.chart text.in{font-weight:700;paint-order:stroke;stroke:#fff;stroke-width:3px}
svg.chart .total{font-weight:700}svg.chart text.edge{font-size:11px;font-weight:600}
svg.chart .stat{fill:#4a5568}svg.defs{position:absolute}
.legend{font-size:13px;margin:4px 0}.key{margin-right:14px;white-space:nowrap}.key svg{vertical-align:-2px;margin-right:4px}
table{border-collapse:collapse;font-size:13px;margin:6px 0}th,td{border:1px solid #cbd5e0;padding:3px 8px;text-align:left}
td.n,th.n{text-align:right;font-variant-numeric:tabular-nums}th{background:#edf2f7}
.note{font-size:13px;color:#4a5568}code{font-size:12px}
footer{margin-top:40px;font-size:12px;color:#4a5568;border-top:1px solid #cbd5e0;padding-top:8px}
"""


def _num(key: str, value: Any) -> str:
    return f'<span data-k="{escape(key)}">{escape(str(value))}</span>'


def _table(head: Sequence[str], rows: Sequence[Sequence[tuple[str | None, Any]]], numeric: Sequence[int] = ()) -> str:
    """Cells are (data-k key or None, value); `numeric` columns (default: all but the first)
    are right-aligned numbers."""
    num = set(numeric or range(1, len(head)))
    th = "".join(f'<th class="{"n" if i in num else ""}">{escape(h)}</th>' for i, h in enumerate(head))
    body = []
    for r in rows:
        tds = []
        for i, (k, v) in enumerate(r):
            cls = ' class="n"' if i in num else ""
            tds.append(f"<td{cls}>{_num(k, v) if k else escape(str(v))}</td>")
        body.append("<tr>" + "".join(tds) + "</tr>")
    return f"<table><thead><tr>{th}</tr></thead><tbody>{''.join(body)}</tbody></table>"


def _figure(n: int, caption: str, *parts: str) -> str:
    return f'<figure id="fig{n}"><figcaption>Figure {n}. {escape(caption)}</figcaption>{"".join(parts)}</figure>'


def _card(key: str, value: Any, label: str) -> str:
    return f'<div class="card"><b data-k="{escape(key)}">{escape(str(value))}</b><span>{escape(label)}</span></div>'


def _verdict_table(rows: Sequence[Row], key: str, first: str) -> str:
    return _table([first, *VERDICTS, "total"],
                  [[(None, r.label), *((f"{key}.{r.key}.{v}", r.parts[v]) for v in VERDICTS),
                    (f"{key}.{r.key}.total", r.total)] for r in rows])


class _Page:
    def __init__(self, f: Figures) -> None:
        self.f = f
        self.n = 0
        self.cards: list[str] = []
        self.sections: list[str] = []

    def fig(self, caption: str, *parts: str) -> str:
        self.n += 1
        return _figure(self.n, caption, *parts)

    def triage(self) -> None:
        t = self.f.triage
        if t is None:
            return
        self.cards += [_card("triage.total", t.total, "tasks triaged"),
                       _card("triage.all.runnable", t.by_verdict["runnable"], "runnable")]
        rows = [*t.by_class, Row("all", "all classes", dict(t.by_verdict))]
        parts = [f'<h2 id="triage">Triage <span class="note">on <code>{escape(t.image)}</code></span></h2>',
                 self.fig("Verdicts by task class", svg.legend(VERDICT_SERIES, t.by_verdict, "legend.verdict"),
                          svg.stacked_bars(rows, VERDICT_SERIES, "triage", "verdicts by class"),
                          _verdict_table(rows, "triage", "class")),
                 self.fig("Verdicts by app_type" + (f" (the {len(t.by_app_type) - 1} largest, the rest folded)"
                                                    if t.other_app_types else ""),
                          svg.legend(VERDICT_SERIES),
                          svg.stacked_bars(t.by_app_type, VERDICT_SERIES, "app", "verdicts by app type"),
                          _verdict_table(t.by_app_type, "app", "app_type"))]
        if t.reasons:
            rrows = [Row(f"{r.code}.{r.verdict}", r.code, {r.verdict: r.tasks}) for r in t.reasons]
            parts.append(self.fig(
                "Top reasons for blocked and defective tasks (tasks per reason; a task may have several)",
                svg.legend(VERDICT_SERIES[1:]), svg.stacked_bars(rrows, VERDICT_SERIES[1:], "reason", "top reasons"),
                _table(["reason", "verdict", "tasks", "meaning"],
                       [[(None, r.code), (None, r.verdict), (f"reason.{r.code}.{r.verdict}.total", r.tasks),
                         (None, r.meaning)] for r in t.reasons], numeric=(2,))))
        else:
            parts.append('<p class="note">No task is blocked or defective.</p>')
        parts += self._hygiene(t)
        self.sections.append("".join(parts))

    def _hygiene(self, t: TriageFigures) -> list[str]:
        parts = []
        if t.overlap:
            ov = t.overlap
            parts.append(self.fig(
                f"Benchmark overlap: {ov['flagged']} task(s) are an evaluation benchmark's test task",
                _table(["benchmark", "its tasks", "tasks matching", "its tasks matched"],
                       [[(None, b["name"]), (f"overlap.{b['name']}.tasks", b["tasks"]),
                         (f"overlap.{b['name']}.flagged", b["flagged"]),
                         (f"overlap.{b['name']}.matched", b["benchmark_tasks_matched"])] for b in ov["benchmarks"]])))
        if t.families:
            fam = t.families
            parts.append(self.fig(
                f"Task families: {fam['families']}, {fam['with_variants']} with variants "
                f"(largest {fam['largest']['tasks']} tasks)",
                _table(["family size", "families", "tasks"],
                       [[(None, size), (f"families.{size}", n), (f"families.{size}.tasks", tasks)]
                        for size, n, tasks in family_size_rows(fam)])))
        if parts:
            parts.append(f'<p class="note">{escape(hygiene_settings_text(t))}</p>')
        return parts

    def probe(self) -> None:
        p = self.f.probe
        if p is None:
            return
        self.cards.append(_card("probe.kept", p.kept, "kept by the probe"))
        parts = ['<h2 id="probe">Probe</h2>',
                 self.fig("Probe outcomes", svg.legend(OUTCOME_SERIES, {"kept": p.kept, "dropped": p.dropped}, "legend.probe"),
                          svg.stacked_bars([Row("all", "probed tasks", {"kept": p.kept, "dropped": p.dropped})],
                                           OUTCOME_SERIES, "probe", "probe outcomes"))]
        if p.by_reason:
            rows = [Row(k, k, {"n": n}) for k, n in p.by_reason.items()]
            parts.append(self.fig("Drop reasons (tasks)", svg.stacked_bars(rows, COUNT_SERIES, "drop", "drop reasons")))
        parts.append(self.fig(
            "Seconds per stage: each tick one measurement, the box spans p50 to p90, the thick line is p50 "
            "(golden builds: only the goldens built in this run, not reused ones)",
            svg.timing_strips(p.timings, "time", "time per stage")))
        if p.checks is not None:
            parts.append(self.fig(
                "Tasks by oracle outcome (rows) and vandal outcome (parts): can the work pass the reward, can damage",
                svg.legend(VANDAL_SERIES, {s.key: sum(r.parts[s.key] for r in p.checks) for s in VANDAL_SERIES},
                           "legend.checks"),
                svg.stacked_bars(p.checks, VANDAL_SERIES, "checks", "oracle and vandal outcomes")))
        if p.tiers is not None:
            rows = [Row(k, k, {"n": n}) for k, n in p.tiers.items()]
            parts.append(self.fig("Start-state tiers (tasks; none = dropped before a tier was given)",
                                  svg.stacked_bars(rows, COUNT_SERIES, "tier", "tiers")))
        else:
            fid = f" (the probe ran with --state-fidelity {p.state_fidelity})" if p.state_fidelity else ""
            parts.append(f'<p class="note">Start-state tiers: this receipt records none{escape(fid)}.</p>')
        if p.alerts:
            parts.append(self.fig(f"Kept tasks whose start state shows an alert or first-run wizard: {p.with_alerts} "
                                  "(tasks per app and alert title)",
                                  svg.stacked_bars(p.alerts, COUNT_SERIES, "alert", "alerts")))
        elif p.alerts is not None:
            parts.append('<p class="note">Alerts: no kept task\'s start state shows an alert or first-run wizard.</p>')
        self.sections.append("".join(parts))

    def profile(self) -> None:
        pr = self.f.profile
        if pr is None:
            return
        s, tot = pr.settings, pr.totals
        self.cards.append(_card("profile.band", pr.counts["band"], "tasks in the band"))
        if pr.control_size is not None:
            self.cards.append(_card("profile.control", pr.control_size, "control sample"))
        excluded = [Row(k, k, {"n": n}) for k, n in tot["excluded_by_kind"].items()]
        parts = [
            '<h2 id="profile">Profile</h2>',
            f'<p class="note">{_num("profile.rollouts", tot["rollouts"])} rollouts of '
            f'{_num("profile.tasks", tot["tasks"])} tasks: {_num("profile.scored", tot["scored"])} scored, '
            f'{_num("profile.masked", tot["masked"])} masked by the server, {_num("profile.failed", tot["failed"])} '
            f'failed in Gym, {_num("profile.stale", tot["stale"])} of older bundles. A pass is a reward of at least '
            f'{escape(str(s["pass_threshold"]))}; a task needs {escape(str(s["min_rollouts"]))} scored rollouts to be '
            f'measured.'
            + (f' Measured with the observation/action profile <code>{escape(pr.policy_profile)}</code>: the band '
               'holds for that profile only.' if pr.policy_profile else '') + '</p>',
            self.fig(f"Pass rate per task, the band ({s['min_pass']:g} < pass rate < {s['max_pass']:g}) shaded",
                     svg.legend(BAND_SERIES, pr.counts, "legend.band"),
                     svg.histogram(pr.histogram, BAND_SERIES, (s["min_pass"], s["max_pass"]), "hist",
                                   "pass-rate histogram"),
                     f'<p class="note">{pr.unmeasured} task(s) without a scored rollout are not drawn.</p>'
                     if pr.unmeasured else ""),
            self.fig("Tasks per band", svg.legend(BAND_SERIES),
                     svg.stacked_bars([Row(b, b.replace("_", " "), {b: pr.counts[b]}) for b in BANDS], BAND_SERIES,
                                      "band", "tasks per band")),
        ]
        if excluded:
            parts.append(self.fig("Rollouts excluded from scoring, by kind",
                                  svg.stacked_bars(excluded, ROLLOUT_SERIES, "excluded", "excluded rollouts")))
        order = {b: i for i, b in enumerate(BANDS)}
        tasks = sorted(pr.tasks, key=lambda t: (order[t["band"]], -(t["pass_rate"] or 0), t["task_id"]))
        fmt = lambda v, spec: "-" if v is None else format(v, spec)  # noqa: E731
        rows = [[(None, t["task_id"]), (None, t["app_type"]), (None, t["band"]),
                 (f"task.{t['task_id']}.pass_rate", fmt(t["pass_rate"], ".2f")),
                 (f"task.{t['task_id']}.passed", t["passed"]), (f"task.{t['task_id']}.scored", t["scored"]),
                 (f"task.{t['task_id']}.excluded", t["masked"] + t["failed"] + t["stale"]),
                 (f"task.{t['task_id']}.mean_reward", fmt(t["mean_reward"], ".2f")),
                 (None, fmt(t["mean_turns"], ".1f")), (None, fmt(t["mean_total_tokens"], ".0f"))]
                for t in tasks[:MAX_TASK_ROWS]]
        more = (f'<p class="note">{len(tasks) - MAX_TASK_ROWS} more task(s) in the profile.</p>'
                if len(tasks) > MAX_TASK_ROWS else "")
        parts.append(self.fig("Tasks", _table(["task", "app_type", "band", "pass rate", "passed", "scored", "excluded",
                                               "mean reward", "turns", "tokens"], rows, numeric=range(3, 10)), more))
        self.sections.append("".join(parts))


def render_html_figures(f: Figures, generated_at: str | None = None) -> str:
    page = _Page(f)
    page.triage()
    page.probe()
    page.profile()
    when = generated_at or _dt.datetime.now(_dt.timezone.utc).strftime("%Y-%m-%d %H:%M UTC")
    sources = "".join(f"<li>{escape(k)}: <code>{escape(v)}</code></li>" for k, v in f.sources.items())
    return (
        '<!doctype html><html lang="en"><head><meta charset="utf-8">'
        '<meta name="viewport" content="width=device-width, initial-scale=1">'
        '<link rel="icon" href="data:,"><title>shinken report</title>'
        f"<style>{CSS}</style></head><body>{svg.DEFS}<main>"
        f'<h1>shinken report</h1><p class="meta">shinken {escape(__version__)}, {escape(when)}</p>'
        f'<div class="cards">{"".join(page.cards)}</div>{"".join(page.sections)}'
        f"<footer>Inputs:<ul>{sources}</ul>Every figure shows its numbers; series differ by pattern as well as hue."
        "</footer></main></body></html>\n")


def render_html(triage: dict | None = None, receipt: dict | None = None, profile: dict | None = None,
                sources: dict[str, str] | None = None) -> str:
    """The page from the documents themselves (each valid against its schema)."""
    return render_html_figures(figures(triage, receipt, profile, sources))
