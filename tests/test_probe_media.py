"""The probe's media (probes/media.py, media_store.py, terminal_recording.py): what the driver
stores from a receipt line (real WebPs a probe recorded, tests/data/media/), what it refuses, and
the terminal recording of a task without a desktop. The capture in a fork is exercised by tests/test_task_browser_probe.py (Docker)."""

from __future__ import annotations

import base64
import hashlib
import re
from pathlib import Path

from shinken.probes import media, media_store, terminal_recording as term
from shinken.schemas import validation_error

DATA = Path(__file__).resolve().parent / "data"
START = (DATA / "media" / "zenity-start.webp").read_bytes()
RECORDING = (DATA / "media" / "zenity-oracle.webp").read_bytes()


def _line(**media_doc: object) -> dict:
    return {"schema": "shinken.probe.line/1", "task_id": "t", "bundle_hash": "0" * 64, "image_id": "sha256:" + "0" * 64,
            "config_hash": "x", "outcome": "kept", "reason": None, "detail": "", "rewards": [0.0],
            "timings": {"golden_build_s": 0.0, "golden_reused": True, "fork_s": [], "reward_s": [], "total_s": 0.0},
            "attempts": 1, "finished_at": "2026-01-01T00:00:00Z",
            "media": {"desktop": True, "start": None, "recordings": [], "errors": [], **media_doc}}


def _entry(data: bytes, mime: str = "image/webp", **extra: object) -> dict:
    return {"mime": mime, "width": 640, "height": 360, "data": base64.b64encode(data).decode(), **extra}


def test_store_writes_images_by_their_hash_and_keeps_paths_in_the_line(tmp_path: Path) -> None:
    svg = term.terminal_svg([("$ echo hi", "exit code 0\nhi", 0.1)], 1.0, "REWARD: 1.0").encode()
    line = media_store.store(tmp_path, _line(start=_entry(START, waited_s=1.1), recordings=[
        _entry(RECORDING, of="oracle", kind="screen", seconds=3.9, frames=9),
        _entry(svg, "image/svg+xml", of="replay 0", kind="terminal", seconds=0.1, frames=2)]))
    m = line["media"]
    for entry, data in ((m["start"], START), (m["recordings"][0], RECORDING), (m["recordings"][1], svg)):
        assert "data" not in entry and entry["sha256"] == hashlib.sha256(data).hexdigest()
        assert (tmp_path / entry["path"]).read_bytes() == data and entry["bytes"] == len(data)
    assert validation_error("receipt_line", line) is None
    assert media_store.store(tmp_path, line) == line  # stored once; a line read back stays as it is


def test_store_refuses_what_is_not_a_bounded_webp_or_svg(tmp_path: Path) -> None:
    html = b"<html><script>alert(1)</script></html>"
    line = media_store.store(tmp_path, _line(start=_entry(html), recordings=[
        _entry(b"RIFF\0\0\0\0WEBP" + b"\0" * (media.MAX_BYTES + 1)), _entry(START, "text/html")]))
    assert line["media"]["start"] is None and line["media"]["recordings"] == []
    assert len(line["media"]["errors"]) == 3 and not (tmp_path / "media").exists()
    assert validation_error("receipt_line", line) is None


def test_collect_keeps_pictures_and_says_why_one_is_missing() -> None:
    assert media.collect(None) is None  # media off: the line carries none
    m = media.collect(None, start={"error": "start screenshot: the screen could not be read"}, desktop=True)
    m = media.collect(m, recording={"mime": "image/webp", "data": "", "of": "oracle"})
    assert m == {"desktop": True, "start": None, "errors": ["start screenshot: the screen could not be read"],
                 "recordings": [{"mime": "image/webp", "data": "", "of": "oracle"}]}


def test_webp_frames_counts_the_animation() -> None:
    assert media.is_webp(RECORDING) and media.webp_frames(RECORDING) == 9
    assert media.webp_frames(START) == 1


def test_terminal_recording_shows_each_step_in_turn_and_escapes_text() -> None:
    steps = [("$ printf '<b>x</b>' > /home/user/a.txt", "exit code 0", 0.2),
             ("▸ computer_done {}", "done", 0.0)]
    svg = term.terminal_svg(steps, 1.0, "/home/user/a.txt: '<b>x</b>'\nREWARD: 1.0")
    assert "<b>" not in svg and "&lt;b&gt;x&lt;/b&gt;" in svg and "<script" not in svg
    groups = re.findall(r'<g class="s(\d+)">', svg)
    assert groups == ["0", "1", "2"]  # the two steps, then the reward
    starts = [float(x) for x in re.findall(r"@keyframes s\d+\{0%,([0-9.]+)%", svg)]
    assert len(starts) == 2 and 0 < starts[0] < starts[1] < 100  # the first step shows at once, the rest in turn
    assert "reward: 1" in svg and term.svg_height(svg) == 16 + 8 * term.LINE_H  # 2 + 2 lines of steps, 4 of the reward
