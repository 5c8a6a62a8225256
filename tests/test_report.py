"""`shinken report` without Docker: the page and the Markdown from a real triage of the demo
bundles (against the recorded capability manifest), a probe receipt recorded from the demo run
and a profile of rollouts recorded from the real NeMo Gym; the page opened in headless
Chromium."""

from __future__ import annotations

import json
import re
import sys
from collections import Counter
from pathlib import Path

import pytest

from tests.cli_runner import CliResult, run_cli as shinken

sys.path.insert(0, str(Path(__file__).resolve().parent))
import report_check  # noqa: E402

from shinken.report import html as report_html  # noqa: E402
from shinken.report.markdown import render_markdown  # noqa: E402
from shinken.report.svg import PATTERNS  # noqa: E402

REPO = Path(__file__).resolve().parent.parent
DATA = REPO / "tests" / "data"
RUNS = DATA / "gym_rollouts"




@pytest.fixture(scope="module")
def inputs(tmp_path_factory) -> dict:
    tmp = tmp_path_factory.mktemp("report")
    triage = tmp / "triage.json"
    r = shinken("triage", str(REPO / "demo"), "--manifest", str(DATA / "triage_manifest.json"), "--report", str(triage),
                "--no-cache")
    assert r.returncode == 0, r.stderr
    r = shinken("profile", str(RUNS), "--task-root", str(REPO / "demo"), "--out", str(tmp / "profile"))
    assert r.returncode == 0, r.stderr
    paths = {"triage": triage, "receipt": DATA / "demo_receipt.json", "profile": tmp / "profile" / "profile.json"}
    return {"tmp": tmp, "paths": paths, **{k: json.loads(p.read_text()) for k, p in paths.items()}}


def _report(inputs: dict, *extra: str) -> CliResult:
    p = inputs["paths"]
    return shinken("report", "--triage", str(p["triage"]), "--receipt", str(p["receipt"]),
                   "--profile", str(p["profile"].parent), *extra)


def test_page_is_self_contained(inputs: dict) -> None:
    page = inputs["tmp"] / "r.html"
    r = _report(inputs, "--html", str(page))
    assert r.returncode == 0, r.stderr
    text = page.read_text()
    assert "<script" not in text and "@import" not in text and "src=" not in text
    assert not re.search(r"(href|url)\(?=?\"?'?(https?:|//)", text)
    assert re.findall(r"<link[^>]*>", text) == ['<link rel="icon" href="data:,">']
    assert text.count("<figure") == len(re.findall(r"Figure \d+\.", text)) >= 9


def test_page_in_headless_chromium(inputs: dict) -> None:
    page = inputs["tmp"] / "r.html"
    assert _report(inputs, "--html", str(page)).returncode == 0
    report_check.check_page(page, inputs["triage"], inputs["receipt"], inputs["profile"],
                            png_out=inputs["tmp"] / "r.png")


def test_each_figure_tells_its_series_apart_without_colour() -> None:
    for series in (report_html.VERDICT_SERIES, report_html.BAND_SERIES, report_html.OUTCOME_SERIES):
        drawings = [PATTERNS[s.pattern][1] for s in series]
        assert len(set(drawings)) == len(drawings), series


def test_markdown_has_the_numbers(inputs: dict) -> None:
    md = inputs["tmp"] / "r.md"
    r = _report(inputs, "--md", str(md))
    assert r.returncode == 0, r.stderr
    text = md.read_text()
    t, rc, pr = inputs["triage"]["summary"], inputs["receipt"]["summary"], inputs["profile"]
    assert f"| **all** | {t['by_verdict']['runnable']} | {t['by_verdict']['blocked']} | " \
           f"{t['by_verdict']['defective']} | {t['total']} |" in text
    assert f"# Probe: {rc['total']} tasks, {rc['kept']} kept, {rc['dropped']} dropped" in text
    for band, n in pr["counts"].items():
        assert f"| {band} | {n} |" in text
    assert text == render_markdown(inputs["triage"], inputs["receipt"], inputs["profile"])
    # the library call for dataset cards: headings one level down
    card = render_markdown(profile=pr, level=2)
    assert card.startswith("## shinken report") and "### Profile" in card and "Triage" not in card
    assert shinken("report", "--profile", str(inputs["paths"]["profile"]), "--md", "-").stdout == render_markdown(profile=pr)


def test_tiers_are_counted_when_the_receipt_has_them(inputs: dict, tmp_path: Path) -> None:
    receipt = json.loads(json.dumps(inputs["receipt"]))
    for line in receipt["tasks"]:
        line["tier"] = {"kept": "relaunch"}.get(line["outcome"])
    path = tmp_path / "receipt.json"
    path.write_text(json.dumps(receipt))
    r = shinken("report", "--receipt", str(path), "--md", "-")
    kept = receipt["summary"]["kept"]
    assert f"| relaunch | {kept} |" in r.stdout and f"| none | {receipt['summary']['dropped']} |" in r.stdout
    # The recorded demo receipt (a default-flags probe) carries its own tiers; one without any says so.
    shown = shinken("report", "--receipt", str(inputs["paths"]["receipt"]), "--md", "-").stdout
    recorded = Counter(t.get("tier") or "none" for t in inputs["receipt"]["tasks"])
    assert {"snapshot", "relaunch", "reprovision"} <= set(recorded)
    assert all(f"| {tier} | {n} |" in shown for tier, n in recorded.items()), shown
    for line in receipt["tasks"]:
        del line["tier"]
    path.write_text(json.dumps(receipt))
    assert "not recorded" in shinken("report", "--receipt", str(path), "--md", "-").stdout


def test_oracle_and_vandal_outcomes_figure(inputs: dict, tmp_path: Path) -> None:
    """Tasks by oracle outcome (rows) and vandal outcome (parts), in the Markdown and on the page."""
    receipt = json.loads(json.dumps(inputs["receipt"]))
    kept = [t for t in receipt["tasks"] if t["outcome"] == "kept"]
    sha = "0" * 64
    oracle = {"source": "bundle", "path": "/x/golden_patch.py", "sha256": sha, "reward": 1.0, "reward_error": None,
              "exit_code": 0, "script_tail": "", "reward_tail": "", "s": 1.0}
    kept[0]["oracle"] = {**oracle, "outcome": "oracle_passes"}
    kept[0]["vandal"] = {"outcome": "vandal_resists", "files": ["/home/user/a"], "rewards": {}, "errors": {}, "s": 1.0}
    kept[1]["oracle"] = {**oracle, "outcome": "oracle_partial", "reward": 0.5}
    kept[1]["vandal"] = {**kept[0]["vandal"], "outcome": "vandal_passes_remove"}
    kept[2]["vandal"] = {**kept[0]["vandal"], "outcome": "reward_passes_vandalism"}
    path = tmp_path / "receipt.json"
    path.write_text(json.dumps(receipt))
    md = shinken("report", "--receipt", str(path), "--md", "-")
    assert md.returncode == 0, md.stderr
    assert "| oracle passes | 1 | 0 | 0 | 0 | 1 |" in md.stdout
    assert "| oracle partial | 0 | 1 | 0 | 0 | 1 |" in md.stdout
    assert "| no oracle run | 0 | 0 | 1 | 0 | 1 |" in md.stdout and "oracle fails" not in md.stdout
    page = shinken("report", "--receipt", str(path), "--html", str(tmp_path / "r.html"))
    assert page.returncode == 0, page.stderr
    assert "oracle and vandal outcome" in (tmp_path / "r.html").read_text()
    # A receipt without either probe has no such figure.
    assert "oracle and vandal" not in shinken("report", "--receipt", str(inputs["paths"]["receipt"]), "--md", "-").stdout


def test_long_bar_labels_are_not_cut(inputs: dict, tmp_path: Path) -> None:
    """Every drop reason the probe has (the longest, reward_passes_vandalism, was cut on the left)
    and a long app type, drawn in Chromium: every chart text inside its chart (check_page)."""
    from shinken.probes.runner import REASONS

    receipt = json.loads(json.dumps(inputs["receipt"]))
    lines = receipt["tasks"]
    for i, reason in enumerate(REASONS):
        if i >= len(lines):
            lines.append({**lines[0], "task_id": f"extra-{reason}"})
        lines[i]["outcome"], lines[i]["reason"] = "dropped", reason
    receipt["summary"]["total"] = len(lines)
    receipt["summary"]["by_reason"] = dict(Counter(t["reason"] for t in lines if t["reason"]))
    receipt["summary"]["dropped"] = sum(receipt["summary"]["by_reason"].values())
    receipt["summary"]["kept"] = len(lines) - receipt["summary"]["dropped"]
    triage = json.loads(json.dumps(inputs["triage"]))
    triage["tasks"][0]["app_type"] = "libreoffice_impress_with_a_long_name"
    paths = report_check.write_inputs(tmp_path, receipt=receipt, triage=triage)
    page = tmp_path / "r.html"
    r = shinken("report", "--triage", str(paths["triage"]), "--receipt", str(paths["receipt"]), "--html", str(page))
    assert r.returncode == 0, r.stderr
    assert "reward_passes_vandalism" in page.read_text()
    report_check.check_page(page, triage, receipt, None, png_out=tmp_path / "r.png")


def test_a_label_longer_than_its_column_is_shortened_with_its_full_text_on_hover() -> None:
    from shinken.report.figures import Row
    from shinken.report.svg import MAX_LABEL_SHARE, CHAR_W, stacked_bars

    label = "thunderbird: " + "a very long alert title " * 5
    chart = stacked_bars([Row("a", label, {"n": 3})], report_html.COUNT_SERIES, "alert", "alerts", width=760)
    shown = re.search(r"</title>([^<]*)</text>", chart)
    assert f"<title>{label}</title>" in chart and shown and shown.group(1).endswith("…")
    assert len(shown.group(1)) * CHAR_W <= 760 * MAX_LABEL_SHARE


@pytest.mark.parametrize("args,message", [
    (["--html", "{tmp}/r.html"], "nothing to report"),
    (["--triage", "{triage}"], "no output"),
    (["--triage", "{tmp}/missing.json", "--md", "-"], "cannot read the triage report"),
    (["--triage", "{profile}", "--md", "-"], "not a triage report"),
    (["--profile", "{triage}", "--md", "-"], "not a profile"),
    (["--receipt", "{demo}/hello-file/reward.py", "--md", "-"], "not JSON"),
    (["--bogus"], "No such option"),
])
def test_bad_input_is_one_line_and_exit_2(inputs: dict, tmp_path: Path, args: list[str], message: str) -> None:
    subst = {"tmp": str(tmp_path), "triage": str(inputs["paths"]["triage"]), "profile": str(inputs["paths"]["profile"]),
             "demo": str(REPO / "demo")}
    r = shinken("report", *(a.format(**subst) for a in args))
    assert r.returncode == 2, (r.stdout, r.stderr)
    assert message in r.stderr and "Traceback" not in r.stderr, r.stderr
