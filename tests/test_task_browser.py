"""The task browser (`shinken report --tasks DIR`): a folder that opens from disk, one row per task.
A release-sized run (10,910 tasks: the synthetic triage and receipt of benchmarks/synthetic_reports.py
with WebP media a real probe recorded) is written by the command and driven in headless Chromium:
it draws one page, filters, opens a task with its start screenshot and recording; then a real
probe of demo tasks (Docker) shows every kept desktop task's start state and the oracle's recording."""

from __future__ import annotations

import json
import math
import sys
from collections import Counter
from pathlib import Path

import pytest

from tests.cli_runner import run_cli as shinken

sys.path.insert(0, str(Path(__file__).resolve().parent))
import browser as br  # noqa: E402
import report_check  # noqa: E402
import task_browser_check as tbc  # noqa: E402

from benchmarks.synthetic_reports import synthetic_receipt, synthetic_triage  # noqa: E402
from shinken.report.task_page import PAGE_ROWS  # noqa: E402
from shinken.report.task_rows import task_rows  # noqa: E402

REPO = Path(__file__).resolve().parent.parent
DATA = REPO / "tests" / "data"
MEDIA = DATA / "media"
RELEASE = 10_910


def _chromium() -> str:
    binary = br.chromium_path()
    assert binary, "chromium is not installed; run scripts/setup.sh (it installs Debian's chromium)"
    return binary


@pytest.fixture(scope="module")
def release(tmp_path_factory) -> dict:
    tmp = tmp_path_factory.mktemp("release")
    triage = synthetic_triage(tmp / "tasks", RELEASE)
    receipt = synthetic_receipt(triage, tmp / "run", (MEDIA / "zenity-start.webp").read_bytes(),
                                (MEDIA / "zenity-oracle.webp").read_bytes())
    paths = report_check.write_inputs(tmp, triage=triage, receipt=receipt)
    site = tmp / "site"
    r = shinken("report", "--triage", str(paths["triage"]), "--receipt", str(paths["receipt"]), "--tasks", str(site))
    assert r.returncode == 0, r.stderr
    assert f"{RELEASE} tasks" in r.stderr
    return {"tmp": tmp, "site": site, "triage": triage, "receipt": receipt}


def test_release_sized_browser_draws_one_page_filters_and_opens_a_task(release: dict) -> None:
    triage, receipt, site = release["triage"], release["receipt"], release["site"]
    lines = {t["task_id"]: t for t in receipt["tasks"]}
    with br.Browser(_chromium()) as b:
        tab = tbc.open_browser(b, site, height=5200)  # tall: every thumbnail of the page is in view and loads
        first = tab.shown()
        assert len(first["rows"]) == PAGE_ROWS and first["shown"] == f"{RELEASE} of {RELEASE} tasks"
        assert first["pages"] == f"page 1 of {math.ceil(RELEASE / PAGE_ROWS)}"
        assert tab.eval("document.querySelectorAll('#rows tr').length") == PAGE_ROWS  # only one page in the DOM
        for row in tab.thumbs():  # every probed desktop task on the page shows its start state, decoded
            desktop = (lines.get(row["task"]) or {}).get("media", {}).get("desktop")
            assert (row["width"] == 640) == bool(desktop), row
        tab.screenshot(release["tmp"] / "page1.png")

        tab.choose("outcome", "dropped")
        dropped = tab.shown()
        assert dropped["shown"] == f"{receipt['summary']['dropped']} of {RELEASE} tasks"
        assert all("dropped" in r["tags"] for r in dropped["rows"]) and len(dropped["rows"]) == PAGE_ROWS
        tab.choose("reasons", "probe: zero_signal")
        assert tab.shown()["shown"] == f"{receipt['summary']['by_reason']['zero_signal']} of {RELEASE} tasks"

        tab.eval("location.hash = ''")
        tab.wait("document.getElementById('shown').textContent.startsWith('10910 of')")
        tab.choose("overlap", "yes")
        overlapping = sum(bool(t.get("benchmark_matches")) for t in triage["tasks"])
        assert overlapping and tab.shown()["shown"] == f"{overlapping} of {RELEASE} tasks"
        family = Counter(t["family"] for t in triage["tasks"]).most_common(1)[0]
        tab.eval("location.hash = ''")
        tab.wait("document.getElementById('shown').textContent.startsWith('10910 of')")
        tab.choose("family", family[0])
        assert tab.shown()["shown"] == f"{family[1]} of {RELEASE} tasks"

        # A task from the last details file, with an oracle recording: linked, opened, its images decoded.
        solved = [t for t in receipt["tasks"] if t["media"]["recordings"]][-1]
        shown = tab.open_task(solved["task_id"])
        kinds = {(i["media"], i["width"]) for i in shown["images"]}
        assert kinds == {("start", 640), ("recording", 640)}, shown["images"]
        assert shown["tails"]["oracle-tail"] == solved["oracle"]["reward_tail"]
        assert shown["tails"]["noop-tail"] == solved["reward_tail"]
        instruction = json.loads((Path(triage["task_root"]) / solved["task_id"] / "task.json").read_text())["instruction"]
        assert instruction in shown["text"]
        tab.screenshot(release["tmp"] / "task.png")
        problems, requests = tab.problems()
    assert problems == [], problems
    assert tbc.only_local(requests, site) == [], requests[:5]
    assert len({u for u in requests if "/data/details-" in u}) == 1  # details load when a task opens, not before


def test_rows_read_family_and_benchmark_overlap_when_present_and_do_without(tmp_path: Path) -> None:
    triage = synthetic_triage(tmp_path / "tasks", 6, seed=3)
    plain = [{k: v for k, v in t.items() if k not in ("family", "benchmark_matches")} for t in triage["tasks"]]
    index, details = task_rows({**triage, "tasks": plain}, None, None)
    assert index.dicts["family"] == [""] and index.cols["overlap"] == [0] * 6
    assert all("family" in d["triage"] and d["triage"]["benchmark_matches"] == [] for d in details)
    plain[1] = {**plain[1], "family": "calc-totals",
                "benchmark_matches": [{"benchmark": "OSWorld", "task_id": "b2", "score": 0.93, "slots_differ": ["cell"]}]}
    plain[2] = {**plain[2], "reasons": [{"code": "benchmark_overlap", "detail": "OSWorld b7", "severity": "blocker"}]}
    index, details = task_rows({**triage, "tasks": plain}, None, None)
    assert index.cols["overlap"] == [0, 1, 1, 0, 0, 0]
    assert index.dicts["family"][index.cols["family"][1]] == "calc-totals"
    assert "triage: benchmark_overlap" in [index.dicts["reasons"][c] for c in index.cols["reasons"][2]]
    assert details[1]["triage"]["benchmark_matches"][0]["task_id"] == "b2"
    assert index.cols["instruction"][0] and index.cols["desktop"] == [-1] * 6  # read from task.json; not probed


@pytest.mark.parametrize("args,message", [
    (["--tasks", "{tmp}/site"], "nothing to report"),
    (["--profile", "{profile}", "--tasks", "{tmp}/site"], "--tasks needs the tasks"),
    (["--triage", "{triage}", "--tasks", "{triage}"], "not a folder"),
    (["--triage", "{triage}", "--tasks", "{tmp}/site", "--media", "{tmp}/nowhere"], "--media"),
])
def test_bad_input_is_one_line_and_exit_2(release: dict, tmp_path: Path, args: list[str], message: str) -> None:
    profile = tmp_path / "profile.json"
    r = shinken("profile", str(DATA / "gym_rollouts"), "--task-root", str(REPO / "demo"), "--out", str(tmp_path / "p"))
    assert r.returncode == 0, r.stderr
    profile = tmp_path / "p" / "profile.json"
    subst = {"tmp": str(tmp_path), "triage": str(release["tmp"] / "triage.json"), "profile": str(profile)}
    r = shinken("report", *(a.format(**subst) for a in args))
    assert r.returncode == 2 and message in r.stderr and "Traceback" not in r.stderr, (r.stdout, r.stderr)


# A desktop task relaunched at fork (evince), one whose post-fork step opens a dialog (its oracle from
# tests/data/oracles types into it: a screen recording), one without a desktop whose golden_patch.py
# solves it (a terminal recording), and one that probe drops.
DESKTOP_DEMOS = ("20ef0077-ea53-57ed-a5e1-41a934326e1e", "zenity-entry")
PROBED_DEMOS = (*DESKTOP_DEMOS, "oracle-solves", "zero-signal")


@pytest.mark.docker
def test_demo_probe_keeps_start_screenshots_and_recordings_the_browser_shows(cua_image: str, tmp_path: Path) -> None:
    ids = tmp_path / "ids.txt"
    ids.write_text("\n".join(PROBED_DEMOS) + "\n")
    receipt, run_dir, triage = tmp_path / "receipt.json", tmp_path / "run", tmp_path / "triage.json"
    r = shinken("probe", str(REPO / "demo"), "--image", cua_image, "--ids", str(ids), "--probes", "noop,oracle",
                "--oracle", str(DATA / "oracles"), "--receipt", str(receipt), "--run-dir", str(run_dir),
                "--concurrency", "2")
    assert r.returncode == 0, r.stderr[-3000:]
    doc = json.loads(receipt.read_text())
    lines = {t["task_id"]: t for t in doc["tasks"]}
    assert {t: lines[t]["outcome"] for t in PROBED_DEMOS} == {**{t: "kept" for t in PROBED_DEMOS[:3]}, "zero-signal": "dropped"}
    for tid in DESKTOP_DEMOS:
        m = lines[tid]["media"]
        assert m["desktop"] and m["errors"] == [] and (run_dir / m["start"]["path"]).is_file(), m
    assert lines["oracle-solves"]["media"]["desktop"] is False and lines["oracle-solves"]["media"]["start"] is None
    (screen,) = lines["zenity-entry"]["media"]["recordings"]
    assert (screen["of"], screen["kind"]) == ("oracle", "screen") and screen["frames"] >= 3  # typed a key at a time
    (terminal,) = lines["oracle-solves"]["media"]["recordings"]
    assert (terminal["of"], terminal["kind"]) == ("oracle", "terminal")
    assert "REWARD: 1.0" in (run_dir / terminal["path"]).read_text()
    assert lines["zero-signal"]["reward_tail"].endswith("REWARD: 1.0")

    r = shinken("triage", str(REPO / "demo"), "--image", cua_image, "--report", str(triage))
    assert r.returncode == 0, r.stderr[-3000:]
    site = tmp_path / "site"
    r = shinken("report", "--triage", str(triage), "--receipt", str(receipt), "--tasks", str(site))
    assert r.returncode == 0 and "media file(s) not found" not in r.stderr, r.stderr
    with br.Browser(_chromium()) as b:
        tab = tbc.open_browser(b, site, height=1400)
        thumbs = {row["task"]: row for row in tab.thumbs()}
        assert all(thumbs[t]["width"] == 640 for t in DESKTOP_DEMOS), thumbs
        assert thumbs["oracle-solves"]["note"] == "no desktop"
        for tid in DESKTOP_DEMOS:  # every kept desktop task: its start state, decoded and not a blank screen
            shown = tab.open_task(tid)
            (start,) = [i for i in shown["images"] if i["media"] == "start"]
            assert (start["width"], start["height"]) == (640, 360)
            stats = br.image_stats(b, (site / start["src"]).read_bytes(), "image/webp")
            assert stats["colours"] > 3, (tid, stats)  # a window on the desktop, not one flat colour
            tab.screenshot(tmp_path / f"{tid}.png")
        for tid, kind in (("zenity-entry", "screen"), ("oracle-solves", "terminal")):
            shown = tab.open_task(tid)
            (rec,) = [i for i in shown["images"] if i["media"] == "recording"]
            assert rec["of"] == "oracle" and rec["width"] == (640 if kind == "screen" else 760), rec
            assert f"oracle: {kind} recording" in shown["text"]
        tab.screenshot(tmp_path / "oracle-solves.png")
        problems, requests = tab.problems()
    assert problems == [] and tbc.only_local(requests, site) == [], (problems, requests)

    # --no-media: the decision alone (the line carries no media; nothing new in the run dir)
    again = tmp_path / "ids-one.txt"
    again.write_text("oracle-solves\n")
    r = shinken("probe", str(REPO / "demo"), "--image", cua_image, "--ids", str(again), "--probes", "noop,oracle",
                "--run-dir", str(tmp_path / "run-plain"), "--no-media", "--json")
    assert r.returncode == 0, r.stderr[-3000:]
    plain = json.loads(r.stdout)["tasks"][0]
    assert plain["outcome"] == "kept" and "media" not in plain and not (tmp_path / "run-plain" / "media").exists()
