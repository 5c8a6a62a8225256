"""The numbers each report figure shows, computed from the triage report, the probe receipt and
the profile (each already checked against its schema). Both renderers (HTML, Markdown) draw
from here, so the page and the text always agree."""

from __future__ import annotations

import math
from collections import Counter
from dataclasses import dataclass, field
from typing import Any

from shinken.profiles.bands import BANDS

VERDICTS = ("runnable", "blocked", "defective")
CLASSES = ("file_cli", "desktop_app", "mock_web")
STAGES = (("golden_build_s", "golden build"), ("fork_s", "fork"), ("reward_s", "reward"))
BLOCKING = {"blocked": "blocker", "defective": "defect"}  # verdict -> the severity that causes it
ORACLE_ROWS = (("oracle_passes", "oracle passes"), ("oracle_partial", "oracle partial"),
               ("oracle_fails", "oracle fails"), ("none", "no oracle run"))
# vandal outcome -> series of the checks figure
VANDAL_PARTS = {"vandal_resists": "resists", "vandal_passes_remove": "passes_one", "vandal_passes_garbage": "passes_one",
                "reward_passes_vandalism": "passes_both"}
VANDAL_SERIES = ("resists", "passes_one", "passes_both", "not_run")


@dataclass(frozen=True)
class Row:
    """One bar of a stacked bar chart: a label and a count per series."""

    key: str
    label: str
    parts: dict[str, int]

    @property
    def total(self) -> int:
        return sum(self.parts.values())


@dataclass(frozen=True)
class Reason:
    code: str
    verdict: str
    tasks: int
    meaning: str


@dataclass(frozen=True)
class Timing:
    stage: str
    label: str
    values: list[float]
    empty: str = "no measurements"  # what the figure says when there are none

    @property
    def n(self) -> int:
        return len(self.values)

    def quantile(self, q: float) -> float:
        """Nearest-rank quantile (a value that occurred, so the page shows real timings)."""
        v = sorted(self.values)
        return v[max(0, math.ceil(q * len(v)) - 1)]


@dataclass(frozen=True)
class Bin:
    lo: float
    hi: float
    parts: dict[str, int]

    @property
    def total(self) -> int:
        return sum(self.parts.values())


@dataclass
class TriageFigures:
    total: int
    image: str
    by_verdict: dict[str, int]
    by_class: list[Row]
    by_app_type: list[Row]
    other_app_types: int  # app types folded into the last row
    reasons: list[Reason]
    # Dataset hygiene (reports of triage runs that had it): the summary's benchmark_overlap
    # and families as they are (per benchmark, size distribution, the checks' settings).
    overlap: dict[str, Any] | None = None
    families: dict[str, Any] | None = None


@dataclass
class ProbeFigures:
    total: int
    kept: int
    dropped: int
    by_reason: dict[str, int]
    timings: list[Timing]
    tiers: dict[str, int] | None  # None: the receipt's lines carry no tier yet
    state_fidelity: str | None
    # Kept tasks whose start state shows an alert, per (app, alert title); None: not named
    # (the probe ran with --alerts keep)
    alerts: list[Row] | None = None
    with_alerts: int = 0
    checks: list[Row] | None = None  # tasks by oracle outcome (rows) and vandal outcome (parts); None: neither ran


@dataclass
class ProfileFigures:
    settings: dict[str, Any]
    totals: dict[str, Any]
    counts: dict[str, int]
    histogram: list[Bin]
    unmeasured: int  # tasks without a pass rate (no scored rollout): not in the histogram
    control_size: int | None
    tasks: list[dict[str, Any]] = field(default_factory=list)
    policy_profile: str | None = None  # the observation/action profile's name when not the default


def triage_figures(doc: dict[str, Any], top_apps: int = 12, top_reasons: int = 10) -> TriageFigures:
    from shinken.triage.codes import CODES

    s = doc["summary"]
    by_class = [Row(c, c, {v: s["by_class"][c][v] for v in VERDICTS}) for c in CLASSES if c in s["by_class"]]
    apps: dict[str, Counter[str]] = {}
    reasons: Counter[tuple[str, str]] = Counter()
    for t in doc["tasks"]:
        apps.setdefault(t["app_type"] or "(none)", Counter())[t["verdict"]] += 1
        want = BLOCKING.get(t["verdict"])
        for code in {r["code"] for r in t["reasons"] if r.get("severity", CODES.get(r["code"], ("",))[0]) == want}:
            reasons[(code, t["verdict"])] += 1
    ranked = sorted(apps.items(), key=lambda kv: (-sum(kv[1].values()), kv[0]))
    rows = [Row(a, a, {v: c[v] for v in VERDICTS}) for a, c in ranked[:top_apps]]
    rest = ranked[top_apps:]
    if rest:
        folded = {v: sum(c[v] for _, c in rest) for v in VERDICTS}
        rows.append(Row("(other)", f"{len(rest)} other app types", folded))
    top = sorted(reasons.items(), key=lambda kv: (-kv[1], kv[0]))[:top_reasons]
    return TriageFigures(
        total=s["total"], image=doc["image"]["ref"], by_verdict={v: s["by_verdict"][v] for v in VERDICTS},
        by_class=by_class, by_app_type=rows, other_app_types=len(rest),
        reasons=[Reason(code, verdict, n, CODES.get(code, ("", ""))[1]) for (code, verdict), n in top],
        overlap=s.get("benchmark_overlap"), families=s.get("families"))


def family_size_rows(families: dict[str, Any]) -> list[tuple[str, int, int]]:
    """(family size, families of that size, tasks in them), smallest size first."""
    return [(size, n, int(size) * n) for size, n in families["sizes"].items()]


def hygiene_settings_text(t: TriageFigures) -> str:
    """One line naming the checks' settings, for both renderers."""
    parts = []
    if t.overlap:
        st = t.overlap["settings"]
        parts.append(f"overlap: score >= {st['threshold']} ({st['method']}), at least {st['min_shared_words']} shared "
                     f"words; flagged tasks {'kept (--keep-benchmark-overlap)' if t.overlap['policy'] == 'keep' else 'blocked'}")
    if t.families:
        st = t.families["settings"]
        parts.append(f"families: {st['method']}, threshold {st['threshold']}, shingles in more than "
                     f"{st['common_shingle_cap']} tasks propose no pairs")
    return "; ".join(parts)


def probe_figures(doc: dict[str, Any]) -> ProbeFigures:
    lines = doc["tasks"]
    timings = []
    for key, label in STAGES:
        values: list[float] = []
        for t in lines:
            v = t.get("timings", {}).get(key)
            if key == "golden_build_s":  # only real builds: a reused or never-built golden costs nothing
                if isinstance(v, (int, float)) and t.get("golden") and not t["timings"].get("golden_reused"):
                    values.append(float(v))
            elif isinstance(v, list):
                values += [float(x) for x in v]
        reused = sum(bool(t.get("timings", {}).get("golden_reused")) for t in lines)
        empty = (f"none built in this run; {reused} reused" if key == "golden_build_s" and reused
                 else "no measurements")
        timings.append(Timing(key, label, values, empty))
    has_tier = any("tier" in t for t in lines)
    tiers = dict(sorted(Counter(str(t.get("tier")) if t.get("tier") else "none" for t in lines).items())) \
        if has_tier else None
    s = doc["summary"]
    by_alert: Counter[tuple[str, str]] = Counter()
    with_alerts = 0
    for t in lines:
        found = {(a["app"], a["title"]) for a in (t.get("start_state") or {}).get("alerts") or []}
        if t.get("outcome") == "kept" and found:
            with_alerts += 1
            by_alert.update(found)
    alerts = None if s.get("alerts") == "keep" else [
        Row(f"{app}: {title}", f"{app}: {title}", {"n": n})
        for (app, title), n in sorted(by_alert.items(), key=lambda kv: (-kv[1], kv[0]))]
    return ProbeFigures(total=s["total"], kept=s["kept"], dropped=s["dropped"],
                        by_reason=dict(sorted(s["by_reason"].items(), key=lambda kv: (-kv[1], kv[0]))),
                        timings=timings, tiers=tiers, state_fidelity=s.get("state_fidelity"),
                        alerts=alerts, with_alerts=with_alerts,
                        checks=check_rows(lines))


def check_rows(lines: list[dict[str, Any]]) -> list[Row] | None:
    """Tasks by oracle outcome and vandal outcome (the tasks either probe ran on), or None."""
    ran = [t for t in lines if t.get("oracle") or t.get("vandal")]
    if not ran:
        return None
    grid: dict[str, Counter[str]] = {key: Counter() for key, _ in ORACLE_ROWS}
    for t in ran:
        row = (t.get("oracle") or {}).get("outcome") or "none"
        grid[row][VANDAL_PARTS.get((t.get("vandal") or {}).get("outcome") or "", "not_run")] += 1
    return [Row(key, label, {v: grid[key][v] for v in VANDAL_SERIES}) for key, label in ORACLE_ROWS
            if sum(grid[key].values())]


def bin_index(rate: float, bins: int) -> int:
    return min(int(rate * bins + 1e-9), bins - 1)  # 1.0 falls in the last bin


def profile_figures(doc: dict[str, Any], bins: int = 10) -> ProfileFigures:
    hist = [Bin(i / bins, (i + 1) / bins, {b: 0 for b in BANDS}) for i in range(bins)]
    unmeasured = 0
    for t in doc["tasks"]:
        if t["pass_rate"] is None:
            unmeasured += 1
            continue
        hist[bin_index(t["pass_rate"], bins)].parts[t["band"]] += 1
    return ProfileFigures(settings=doc["settings"], totals=doc["totals"], counts=dict(doc["counts"]),
                          histogram=hist, unmeasured=unmeasured, control_size=doc["control_size"],
                          tasks=doc["tasks"], policy_profile=_profile_name(doc.get("policy_profile")))


def _profile_name(doc: Any) -> str | None:
    """`screenshot+pixel-noexec` for a non-default profile; None for the default or none recorded."""
    from shinken.computer.profiles import Profile

    if not isinstance(doc, dict):
        return None
    try:
        profile = Profile.from_json(doc)
    except Exception:  # noqa: BLE001 - an unreadable profile is not shown rather than guessed
        return None
    return None if profile.is_default else profile.name


@dataclass
class Figures:
    triage: TriageFigures | None
    probe: ProbeFigures | None
    profile: ProfileFigures | None
    sources: dict[str, str]  # input name -> path, for the page's footer


def figures(triage: dict | None, receipt: dict | None, profile: dict | None,
            sources: dict[str, str] | None = None) -> Figures:
    return Figures(triage_figures(triage) if triage else None, probe_figures(receipt) if receipt else None,
                   profile_figures(profile) if profile else None, sources or {})
