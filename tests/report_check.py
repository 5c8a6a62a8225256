"""What the report page must show, worked out from the JSON inputs themselves (not from the
renderer's figures), and the checks a rendered page must pass in a real browser."""

from __future__ import annotations

import json
import math
from collections import Counter
from pathlib import Path
from typing import Any

import browser as br

BANDS = ("too_easy", "band", "too_hard", "insufficient")


def _nearest_rank(values: list[float], q: float) -> float:
    v = sorted(values)
    return v[max(0, math.ceil(q * len(v)) - 1)]


def expected_numbers(triage: dict | None, receipt: dict | None, profile: dict | None) -> dict[str, float]:
    """data-k key -> the number the page must show for it."""
    exp: dict[str, float] = {}
    if triage:
        s = triage["summary"]
        exp["triage.total"] = s["total"]
        for v, n in s["by_verdict"].items():
            exp[f"triage.all.{v}"] = n
            exp[f"legend.verdict.{v}"] = n
        for c, row in s["by_class"].items():
            for v in ("runnable", "blocked", "defective", "total"):
                exp[f"triage.{c}.{v}"] = row[v]
        apps = Counter((t["app_type"] or "(none)", t["verdict"]) for t in triage["tasks"])
        for (app, verdict), n in apps.items():
            exp[f"app.{app}.{verdict}"] = n
        for app in {a for a, _ in apps}:
            exp[f"app.{app}.total"] = sum(n for (a, _), n in apps.items() if a == app)
        if len({a for a, _ in apps}) > 12:  # the page folds the smaller app types into one row
            exp = {k: v for k, v in exp.items() if not k.startswith("app.")}
    if receipt:
        s = receipt["summary"]
        exp |= {"probe.kept": s["kept"], "probe.all.total": s["total"], "legend.probe.kept": s["kept"],
                "legend.probe.dropped": s["dropped"]}
        for part in ("kept", "dropped"):  # a bar segment is drawn (with its number) only when it is not empty
            if s[part]:
                exp[f"probe.all.{part}"] = s[part]
        for r, n in s["by_reason"].items():
            exp[f"drop.{r}.total"] = n
        forks = [x for t in receipt["tasks"] for x in t["timings"]["fork_s"]]
        rewards = [x for t in receipt["tasks"] for x in t["timings"]["reward_s"]]
        builds = [t["timings"]["golden_build_s"] for t in receipt["tasks"]
                  if t.get("golden") and not t["timings"]["golden_reused"]]
        for stage, values in (("fork_s", forks), ("reward_s", rewards), ("golden_build_s", builds)):
            if values:
                exp[f"time.{stage}.n"] = len(values)
                exp[f"time.{stage}.p50"] = _nearest_rank(values, 0.5)
                exp[f"time.{stage}.max"] = max(values)
        if any("tier" in t for t in receipt["tasks"]):
            for tier, n in Counter(t.get("tier") or "none" for t in receipt["tasks"]).items():
                exp[f"tier.{tier}.total"] = n
    if profile:
        exp |= {f"profile.{k}": profile["totals"][k] for k in ("rollouts", "tasks", "scored", "masked", "failed")}
        exp["profile.band"] = profile["counts"]["band"]
        for b in BANDS:
            exp[f"band.{b}.total"] = profile["counts"][b]
            exp[f"legend.band.{b}"] = profile["counts"][b]
        bins = Counter(min(int(t["pass_rate"] * 10 + 1e-9), 9) for t in profile["tasks"] if t["pass_rate"] is not None)
        for i in range(10):
            exp[f"hist.bin.{i}"] = bins.get(i, 0)
        exp["hist.edge.min-pass"] = profile["settings"]["min_pass"]
        exp["hist.edge.max-pass"] = profile["settings"]["max_pass"]
        if profile["control_size"] is not None:
            exp["profile.control"] = profile["control_size"]
        for k, n in profile["totals"]["excluded_by_kind"].items():
            exp[f"excluded.{k}.total"] = n
        for t in profile["tasks"]:
            exp[f"task.{t['task_id']}.passed"] = t["passed"]
            exp[f"task.{t['task_id']}.scored"] = t["scored"]
            if t["pass_rate"] is not None:
                exp[f"task.{t['task_id']}.pass_rate"] = t["pass_rate"]
    return exp


def _number(text: str) -> float:
    return float(text.split()[-1])  # "max-pass 0.9" -> 0.9


def write_inputs(folder: Path, **docs: dict) -> dict[str, Path]:
    """Each document as `<name>.json` in `folder`, for the command line: name -> its path."""
    paths = {}
    for name, doc in docs.items():
        paths[name] = folder / f"{name}.json"
        paths[name].write_text(json.dumps(doc))
    return paths


# Every chart text's box as drawn, and the chart's own box: a label starting left of 0 or ending
# right of the width is cut off on the page (the viewBox clips it).
CLIPPED_TEXTS = """(() => { const out = [];
  for (const svg of document.querySelectorAll('svg.chart')) {
    const vb = svg.viewBox.baseVal;
    for (const t of svg.querySelectorAll('text')) {
      const b = t.getBBox();
      if (b.x < vb.x - 0.5 || b.x + b.width > vb.x + vb.width + 0.5)
        out.push({text: t.textContent, x: Math.round(b.x), right: Math.round(b.x + b.width), width: vb.width,
                  chart: svg.getAttribute('aria-label')});
    }
  }
  return out; })()"""


def check_page(html: Path, triage: dict | None, receipt: dict | None, profile: dict | None,
               png_out: Path | None = None) -> dict[str, Any]:
    """Open `html` in headless Chromium and check: no console errors or failed loads, no
    request but the page itself, every expected number in the DOM (rounded as shown), and a
    screenshot with real content. Returns the page facts for further checks."""
    binary = br.chromium_path()
    assert binary, "chromium is not installed; run scripts/setup.sh (it installs Debian's chromium)"
    with br.Browser(binary) as b:
        page = br.open_page(b, html, expression=CLIPPED_TEXTS)
        stats = br.image_stats(b, page.png)
    assert page.problems == [], page.problems
    assert page.evaluated == [], f"chart texts cut off at the chart's edge: {page.evaluated}"
    assert page.requests == [html.resolve().as_uri()], page.requests  # nothing fetched at view time
    for key, values in page.values.items():
        for v in values:
            _number(v)  # every marked element holds a number
    missing = sorted(set(expected_numbers(triage, receipt, profile)) - set(page.values))
    assert missing == [], missing
    for key, want in expected_numbers(triage, receipt, profile).items():
        for text in page.values[key]:
            shown = _number(text)
            decimals = len(text.split()[-1].partition(".")[2])
            assert abs(shown - want) <= 0.5 * 10 ** -decimals + 1e-9, (key, text, want)
    assert stats["width"] >= 800 and stats["height"] >= 600, stats
    assert stats["ink"] > 0.02 and stats["colours"] > 20, stats  # not a blank page
    if png_out:
        png_out.write_bytes(page.png)
    return {"page": page, "stats": stats}
