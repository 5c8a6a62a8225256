"""The report as Markdown: for terminals, and for embedding in a dataset card
(`render_markdown(triage, receipt, profile, level=2)` puts its headings under a card's own)."""

from __future__ import annotations

from typing import Any

from shinken.report.figures import VERDICTS, Figures, figures

BAR_WIDTH = 30


def _table(head: list[str], rows: list[list[Any]], numbers: tuple[int, ...] = ()) -> list[str]:
    """A pipe table; the `numbers` columns (default: all but the first and any bar) are right-aligned."""
    numbers = numbers or tuple(i for i, h in enumerate(head) if i and h)
    align = ["---:" if i in numbers else "---" for i in range(len(head))]
    lines = ["| " + " | ".join(head) + " |", "| " + " | ".join(align) + " |"]
    lines += ["| " + " | ".join(str(c).replace("|", "\\|") for c in r) + " |" for r in rows]
    return lines + [""]


def _bar(n: int, most: int) -> str:
    return "█" * (round(n / most * BAR_WIDTH) if most else 0) or ("▏" if n else "")


def _s(x: float) -> str:
    return f"{x:.2f}"


def render_figures(f: Figures, level: int = 1) -> str:
    h = "#" * level
    out = [f"{h} shinken report", ""]
    if f.triage:
        t = f.triage
        out += [f"{h}# Triage: {t.total} tasks on `{t.image}`", ""]
        out += _table(["class", *VERDICTS, "total"],
                      [[r.label, *(r.parts[v] for v in VERDICTS), r.total] for r in t.by_class]
                      + [["**all**", *(t.by_verdict[v] for v in VERDICTS), t.total]])
        out += [f"{h}## Verdicts by app type", ""]
        out += _table(["app type", *VERDICTS, "total"],
                      [[r.label, *(r.parts[v] for v in VERDICTS), r.total] for r in t.by_app_type])
        if t.reasons:
            out += [f"{h}## Top reasons for blocked and defective tasks", ""]
            out += _table(["reason", "verdict", "tasks", "meaning"],
                          [[f"`{r.code}`", r.verdict, r.tasks, r.meaning] for r in t.reasons], numbers=(2,))
        out += _hygiene(t, h)
    if f.probe:
        p = f.probe
        out += [f"{h}# Probe: {p.total} tasks, {p.kept} kept, {p.dropped} dropped", ""]
        if p.by_reason:
            most = max(p.by_reason.values())
            out += _table(["drop reason", "tasks", ""], [[f"`{k}`", n, _bar(n, most)] for k, n in p.by_reason.items()])
        out += [f"{h}## Time per stage (seconds)", ""]
        out += _table(["stage", "n", "p50", "p90", "max"],
                      [[x.label, x.n, *(_s(x.quantile(q)) for q in (0.5, 0.9, 1.0))] if x.n
                       else [f"{x.label}: {x.empty}", 0, "-", "-", "-"] for x in p.timings])
        if p.checks is not None:
            from shinken.report.figures import VANDAL_SERIES

            out += [f"{h}## Tasks by oracle and vandal outcome", ""]
            out += _table(["oracle", *(v.replace("_", " ") for v in VANDAL_SERIES), "tasks"],
                          [[r.label, *(r.parts[v] for v in VANDAL_SERIES), r.total] for r in p.checks])
        if p.tiers is not None:
            out += [f"{h}## Start-state tiers", ""]
            out += _table(["tier", "tasks"], [[k, n] for k, n in p.tiers.items()])
        else:
            out += ["Start-state tiers: not recorded by this probe receipt.", ""]
        if p.alerts:
            out += [f"{h}## Start states with alerts: {p.with_alerts} kept task(s)", ""]
            out += _table(["app: alert title", "tasks"], [[r.label, r.parts["n"]] for r in p.alerts], numbers=(1,))
        elif p.alerts is not None:
            out += ["Alerts: no kept task's start state shows an alert or first-run wizard.", ""]
    if f.profile:
        pr = f.profile
        s, tot = pr.settings, pr.totals
        out += [f"{h}# Profile: {tot['tasks']} tasks, {tot['rollouts']} rollouts", "",
                f"Band: {s['min_pass']} < pass rate < {s['max_pass']}, a pass is reward >= {s['pass_threshold']}, "
                f"a task is measured with {s['min_rollouts']}+ scored rollouts. "
                f"Scored {tot['scored']}, masked {tot['masked']}, failed {tot['failed']}, stale {tot['stale']}"
                + (f"; control sample {pr.control_size} tasks." if pr.control_size is not None else ".")
                + (f" Measured with the observation/action profile `{pr.policy_profile}`: the band holds for that "
                   "profile only." if pr.policy_profile else ""), ""]
        out += _table(["band", "tasks"], [[b, n] for b, n in pr.counts.items()])
        most = max((b.total for b in pr.histogram), default=0)
        out += [f"{h}## Pass-rate histogram", ""]
        out += _table(["pass rate", "tasks", ""],
                      [[f"{b.lo:.1f}–{b.hi:.1f}", b.total, _bar(b.total, most)] for b in pr.histogram])
        if pr.unmeasured:
            out += [f"{pr.unmeasured} task(s) have no scored rollout and no pass rate.", ""]
    return "\n".join(out).rstrip() + "\n"


def _hygiene(t: Any, h: str) -> list[str]:
    from shinken.report.figures import family_size_rows, hygiene_settings_text

    out: list[str] = []
    if t.overlap:
        out += [f"{h}## Benchmark overlap: {t.overlap['flagged']} task(s) are a benchmark's test task", ""]
        out += _table(["benchmark", "its tasks", "tasks matching", "its tasks matched"],
                      [[b["name"], b["tasks"], b["flagged"], b["benchmark_tasks_matched"]] for b in t.overlap["benchmarks"]])
    if t.families:
        f = t.families
        out += [f"{h}## Task families: {f['families']}, {f['with_variants']} with variants "
                f"(largest {f['largest']['tasks']} tasks, `{f['largest']['family']}`)", ""]
        out += _table(["family size", "families", "tasks"], [list(r) for r in family_size_rows(f)])
    if out:
        out += [f"Settings: {hygiene_settings_text(t)}.", ""]
    return out


def render_markdown(triage: dict | None = None, receipt: dict | None = None, profile: dict | None = None,
                    level: int = 1) -> str:
    """The report as Markdown from the documents themselves (each valid against its schema:
    triage, probe_receipt, profile). `level` is the heading level of the title."""
    return render_figures(figures(triage, receipt, profile), level)
