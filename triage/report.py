"""The triage report (schemas/triage.schema.json) and its human summary."""

from __future__ import annotations

from collections import Counter
from typing import Any

from rich.console import Console
from rich.table import Table

from shinken.schemas import check_own, validation_error
from shinken.triage.codes import CLASSES, CODES, VERDICTS
from shinken.triage.evaluate import Capabilities
from shinken.triage.hygiene import families_summary, overlap_summary
from shinken.triage.run import RunStats

SCHEMA_TAG = "shinken.triage/1"
_TASK_KEYS = frozenset({"id", "path", "class", "verdict", "reasons", "app_type", "difficulty", "bundle_hash",
                        "family", "benchmark_matches"})
_MATCH_KEYS = frozenset({"benchmark", "task_id", "score", "slots_differ"})
_REASON_KEYS = (frozenset({"code", "detail", "severity"}), frozenset({"code", "detail", "severity", "subject"}))
_SEVERITIES = frozenset({"defect", "blocker", "note"})
_HEX = frozenset("0123456789abcdef")


def _plainly_valid_tasks(tasks: Any) -> bool:
    """Stricter than the task entries of schemas/triage.schema.json, in plain Python (the
    compiled validator spent ~0.15 CPU-s on the 10,910 tasks of every run, a cached re-run's
    largest single step): True means the schema accepts every task; False means "ask the
    schema", which decides and explains."""
    if type(tasks) is not list:
        return False
    classes, verdicts, codes = frozenset(CLASSES), frozenset(VERDICTS), CODES
    for t in tasks:
        if type(t) is not dict or t.keys() != _TASK_KEYS:
            return False
        tid, h, diff = t["id"], t["bundle_hash"], t["difficulty"]
        if type(tid) is not str or not tid or type(t["path"]) is not str or type(t["app_type"]) is not str:
            return False
        cls, verdict = t["class"], t["verdict"]
        if type(cls) is not str or cls not in classes or type(verdict) is not str or verdict not in verdicts:
            return False
        if diff is not None and type(diff) is not str:
            return False
        if type(h) is not str or (h and (len(h) != 64 or not _HEX.issuperset(h))):
            return False
        reasons = t["reasons"]
        if type(reasons) is not list:
            return False
        for r in reasons:
            if type(r) is not dict or r.keys() not in _REASON_KEYS:
                return False
            code, severity = r["code"], r["severity"]
            if type(code) is not str or code not in codes or type(severity) is not str or severity not in _SEVERITIES:
                return False
            if type(r["detail"]) is not str:
                return False
            if type(r.get("subject", "")) is not str:
                return False
        if type(t["family"]) is not str or not t["family"] or type(t["benchmark_matches"]) is not list:
            return False
        for m in t["benchmark_matches"]:  # rare: checked by the schema's own rules
            if type(m) is not dict or m.keys() != _MATCH_KEYS:
                return False
            if validation_error("triage", {"schema": SCHEMA_TAG, "image": {"ref": "", "id": ""}, "task_root": "",
                                           "summary": _EMPTY_SUMMARY, "tasks": [t]}):
                return False
    return True


_EMPTY_SUMMARY: dict[str, Any] = {"total": 0, "by_verdict": {"runnable": 0, "blocked": 0, "defective": 0}, "by_class": {},
                                  "by_reason": {}, "top_missing": [], "by_difficulty": {}, "by_app_type": {},
                                  "examples": {}}


def check_report(report: dict[str, Any]) -> None:
    """`check_own` for a triage report (InternalError if it fails its schema): the tasks by
    the plain check when it passes them, the rest of the document by the schema."""
    if isinstance(report, dict) and _plainly_valid_tasks(report.get("tasks")):
        check_own("triage", {**report, "tasks": []}, "the triage report")
    else:
        check_own("triage", report, "the triage report")


def summarize(tasks: list[dict[str, Any]], show: int) -> dict[str, Any]:
    # One pass over the tasks (a cached re-run of the release spends its time here and in
    # the stat checks).
    by_verdict: Counter[str] = Counter()
    per_class: dict[str, Counter[str]] = {c: Counter() for c in CLASSES}
    by_reason: Counter[str] = Counter()
    missing: Counter[tuple[str, str]] = Counter()
    difficulties: Counter[str] = Counter()
    app_types: Counter[str] = Counter()
    examples: dict[str, list[str]] = {v: [] for v in VERDICTS}
    for t in tasks:
        verdict = t["verdict"]
        by_verdict[verdict] += 1
        counts = per_class.get(t["class"])
        if counts is not None:
            counts[verdict] += 1
        reasons = t["reasons"]
        if reasons:
            by_reason.update({r["code"] for r in reasons})
            missing.update({(r["code"], r["subject"]) for r in reasons if r.get("subject")})
        difficulties[t["difficulty"] or "none"] += 1
        app_types[t["app_type"] or "none"] += 1
        ex = examples.get(verdict)
        if ex is not None and len(ex) < show:
            ex.append(t["id"])
    by_class = {c: {"total": sum(cnt.values()), **{v: cnt.get(v, 0) for v in VERDICTS}} for c, cnt in per_class.items()}
    return {
        "total": len(tasks),
        "by_verdict": {v: by_verdict.get(v, 0) for v in VERDICTS},
        "by_class": by_class,
        "by_reason": dict(sorted(by_reason.items(), key=lambda kv: (-kv[1], kv[0]))),
        "top_missing": [{"code": c, "subject": s, "tasks": n}
                        for (c, s), n in sorted(missing.items(), key=lambda kv: (-kv[1], kv[0]))[: max(show, 10)]],
        "by_difficulty": dict(difficulties.most_common()),
        "by_app_type": dict(app_types.most_common()),
        "examples": examples,
    }


def _hub_checks(tasks: list[dict[str, Any]], hub: dict[str, Any]) -> dict[str, Any]:
    """Apps by failed State API check, and how many tasks each check blocked."""
    blocked: dict[str, set[str]] = {}
    for t in tasks:
        for r in t["reasons"]:
            if r["code"] == "mock_state_api_defect" and r.get("subject"):
                blocked.setdefault(r["subject"].split(":")[1], set()).add(t["id"])
    return {"image": hub["image"], "apps": hub["apps"], "unchecked": hub["unchecked"],
            "by_check": {c: {"apps": apps, "tasks": len(blocked.get(c, ()))} for c, apps in hub["failed_by_check"].items()}}


def build_report(
    tasks: list[dict[str, Any]], caps: Capabilities, image_ref: str, task_root: str, stats: RunStats, *,
    class_filter: str | None = None, show: int = 5, mock_urls: int = 0, hub_checks: dict[str, Any] | None = None,
    hygiene: dict[str, Any] | None = None,
) -> dict[str, Any]:
    """`hygiene`: the run's Hygiene.settings() (TriageRun.hygiene): the overlap and family
    summaries are made over the reported tasks with these settings."""
    if class_filter:
        tasks = [t for t in tasks if t["class"] == class_filter]
    summary = summarize(tasks, show)
    if hygiene:
        summary["benchmark_overlap"] = overlap_summary(tasks, hygiene)
        summary["families"] = families_summary(tasks, hygiene)
    if hub_checks is not None:
        summary["hub_checks"] = _hub_checks(tasks, hub_checks)
    summary.update({
        "class_filter": class_filter,
        "python": f"{caps.python_version[0]}.{caps.python_version[1]}",
        "mock_urls": mock_urls,
        "run": {"folders": stats.folders, "cache_hits": stats.cache_hits, "analysed": stats.analysed,
                "workers": stats.workers, "seconds": round(stats.seconds, 3),
                "hygiene_seconds": round(stats.hygiene_seconds, 3), "hygiene_reused": stats.hygiene_reused},
    })
    return {
        "schema": SCHEMA_TAG,
        "image": {"ref": image_ref, "id": caps.id},
        "task_root": task_root,
        "summary": summary,
        "tasks": tasks,
    }


def render(report: dict[str, Any], console: Console, show: int) -> None:
    s = report["summary"]
    img = report["image"]
    console.print(f"[bold]shinken triage[/] {report['task_root']}  image {img['ref']} ({img['id'][:19]})"
                  f"  python {s['python']}" + (f"  class={s['class_filter']}" if s["class_filter"] else ""))
    t = Table(title=f"{s['total']} tasks", title_justify="left")
    t.add_column("class")
    for v in VERDICTS:
        t.add_column(v, justify="right")
    t.add_column("total", justify="right")
    for c, row in s["by_class"].items():
        if row["total"]:
            t.add_row(c, *(str(row[v]) for v in VERDICTS), str(row["total"]))
    t.add_row("[bold]all[/]", *(f"[bold]{s['by_verdict'][v]}[/]" for v in VERDICTS), f"[bold]{s['total']}[/]")
    console.print(t)
    if s["by_reason"]:
        r = Table(title="reasons (tasks per code)", title_justify="left")
        r.add_column("code")
        r.add_column("severity")
        r.add_column("tasks", justify="right")
        for code, n in list(s["by_reason"].items())[: max(show, 10)]:
            r.add_row(code, CODES[code][0], str(n))
        console.print(r)
    if s["top_missing"]:
        m = Table(title="top missing things", title_justify="left")
        m.add_column("code")
        m.add_column("what")
        m.add_column("tasks", justify="right")
        for row in s["top_missing"][: max(show, 10)]:
            m.add_row(row["code"], row["subject"], str(row["tasks"]))
        console.print(m)
    hub = s.get("hub_checks")
    if hub:
        h = Table(title=f"hub State API checks ({hub['apps']} apps, {len(hub['unchecked'])} never checked)",
                  title_justify="left")
        h.add_column("check")
        h.add_column("apps that failed it")
        h.add_column("tasks blocked", justify="right")
        for check, row in hub["by_check"].items():
            h.add_row(check, ", ".join(row["apps"]) or "-", str(row["tasks"]))
        console.print(h)
        if hub["unchecked"]:
            console.print(f"[dim]never checked (run `shinken hub check`): {', '.join(hub['unchecked'][:12])}"
                          + (" ..." if len(hub["unchecked"]) > 12 else "") + "[/]")
    _render_hygiene(s, console, show)
    d = Table(title="difficulty / app_type", title_justify="left")
    d.add_column("difficulty")
    d.add_column("tasks", justify="right")
    d.add_column("app_type")
    d.add_column("tasks", justify="right")
    diffs = list(s["by_difficulty"].items())
    apps = list(s["by_app_type"].items())[: max(show, len(diffs))]
    for i in range(max(len(diffs), len(apps))):
        dd = diffs[i] if i < len(diffs) else ("", "")
        aa = apps[i] if i < len(apps) else ("", "")
        d.add_row(dd[0], str(dd[1]), aa[0], str(aa[1]))
    if len(s["by_app_type"]) > len(apps):
        d.add_row("", "", f"... {len(s['by_app_type']) - len(apps)} more", "")
    console.print(d)
    for v, ids in s["examples"].items():
        if ids:
            console.print(f"[bold]{v}[/] e.g. " + ", ".join(ids[:show]))
    run = s["run"]
    console.print(f"[dim]{run['folders']} folders, {run['cache_hits']} from cache, {run['analysed']} analysed "
                  f"with {run['workers']} worker(s) in {run['seconds']:.2f} s[/]")


def _render_hygiene(s: dict[str, Any], console: Console, show: int) -> None:
    ov = s.get("benchmark_overlap")
    if ov:
        b = Table(title=f"benchmark overlap: {ov['flagged']} task(s) match a benchmark test task "
                        f"({'kept, --keep-benchmark-overlap' if ov['policy'] == 'keep' else 'blocked'}; "
                        f"threshold {ov['settings']['threshold']})", title_justify="left")
        b.add_column("benchmark")
        b.add_column("its tasks", justify="right")
        b.add_column("tasks matching", justify="right")
        b.add_column("of its tasks matched", justify="right")
        for row in ov["benchmarks"]:
            b.add_row(row["name"], str(row["tasks"]), str(row["flagged"]), str(row["benchmark_tasks_matched"]))
        console.print(b)
    fam = s.get("families")
    if fam:
        sizes = ", ".join(f"{n} of size {k}" for k, n in list(fam["sizes"].items())[-max(show, 6):])
        console.print(f"families: {fam['families']} ({fam['with_variants']} with variants, holding "
                      f"{fam['tasks_in_variants']} tasks; largest {fam['largest']['tasks']}, {fam['largest']['family']}); "
                      f"families by size: {sizes}")
