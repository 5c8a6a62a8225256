"""What a curator sees of a probed task besides numbers: a small screenshot of a desktop task's
start state (taken on the first no-op computer of the tier the task was kept at: what a rollout's
computer shows when it starts) and a short recording of each solution that ran (the oracle, a
replayed rollout). On a desktop the recording is the screen, grabbed in the fork by a background
process a few times a second and encoded there as one animated WebP; a task without a desktop
has no screen, so its recording is the terminal: the commands run and what they printed, drawn
here as an animated SVG, timed as they ran.

The images travel in the receipt line as base64 (a line comes back from a Ray worker as it does
from a thread); the driver stores them in the run dir, named by their sha256, and the line keeps
their paths (probes/media_store.py; the terminal's drawing: probes/terminal_recording.py). Best effort: a capture that fails is named in the line's `media.errors` and
never changes the probe's outcome. What the fork hands back is untrusted (the solution runs there
as the same user): it is kept only when it is a WebP of bounded size."""

from __future__ import annotations

import base64
import json
import shlex
import time
import uuid
from dataclasses import dataclass, field
from typing import Any

from shinken.computer.screen import CAPTURE_LIB
from shinken.computer.tools import _SESSION_PREFIX, EXEC
from shinken.probes.terminal_recording import TERM_W, svg_height, terminal_svg
from shinken.sandbox.api import Fork, Golden, InfraError

START_SIZE = (640, 360)
START_QUALITY = 70
# The start screenshot waits for the screen to hold still this long (a window a post-fork step
# launched may still be mapping), from START_MIN_S after the computer is ready, START_MAX_S at most
# (also while it stays one flat colour when a window is expected: a desktop with no window yet).
START_STILL_S = 0.5
START_MIN_S = 0.5
START_MAX_S = 8.0
RECORD_SIZE = (640, 360)
RECORD_FPS = 4.0
# Frames are grabbed this long, and this many changed ones kept, at most (~0.7 MB each in the
# fork's memory until encoded); the end state is always the last frame.
RECORD_MAX_S = 30.0
RECORD_MAX_FRAMES = 90
RECORD_QUALITY = 50
MAX_BYTES = 8_000_000  # of one stored image (a recording of RECORD_MAX_S is far below)

# The recorder: argv = out stop fps max_s WxH quality max_frames. Grabs the screen (CAPTURE_LIB's grab) until
# the stop file appears, keeps a frame only when the picture changed, writes one animated WebP.
RECORD_PY = CAPTURE_LIB + r"""
import os
out, stop, fps, max_s, size, quality, max_frames = (sys.argv[1], sys.argv[2], float(sys.argv[3]), float(sys.argv[4]),
                                                   sys.argv[5], int(sys.argv[6]), int(sys.argv[7]))
w, h = (int(v) for v in size.split("x"))
frames, stamps = [], []
t0 = time.monotonic()
def small(im):  # an exact integer downscale (1920x1080 -> 640x360) is far cheaper than a resize
    f = im.size[0] // w
    return im.reduce(f) if im.size == (w * f, h * f) else im.resize((w, h), Image.BOX)
def take():
    im = small(grab()[0])
    if not frames or im.tobytes() != frames[-1].tobytes():
        frames.append(im)
        stamps.append(time.monotonic())
while not os.path.exists(stop) and time.monotonic() - t0 < max_s and len(frames) < max_frames:
    t = time.monotonic()
    take()
    time.sleep(max(0.0, 1.0 / fps - (time.monotonic() - t)))
while not os.path.exists(stop) and time.monotonic() - t0 < 2 * max_s:
    time.sleep(0.1)
take()
end = time.monotonic()
# Each frame shows until the next change (a still stretch at most 3 s); the end state holds 2 s.
marks = stamps[1:] + [end]
durations = [max(40, min(3000, int((b - a) * 1000))) for a, b in zip(stamps, marks)]
durations[-1] += 2000
tmp = out + ".part"
frames[0].save(tmp, "WEBP", save_all=True, append_images=frames[1:], duration=durations, loop=0, quality=quality, method=0)
os.rename(tmp, out)
print(json.dumps({"frames": len(frames), "seconds": round(end - t0, 2)}))
"""
# The start screenshot: argv = WxH quality min_s still_s max_s expect. Grabs the screen every 0.25 s until
# it held still for still_s (and min_s passed; a blinking caret counts as still), and when `expect`
# (the start state has a window) until it shows something (a screen of one flat colour waits, up to
# max_s), then prints a JSON header line and the WebP's base64.
STILL_PY = CAPTURE_LIB + r"""
size, quality, min_s, still_s, max_s = sys.argv[1], int(sys.argv[2]), float(sys.argv[3]), float(sys.argv[4]), float(sys.argv[5])
expect = sys.argv[6] == "1"  # a window is to show: a screen of one flat colour is not the start state yet
w, h = (int(v) for v in size.split("x"))
def small(im):
    f = im.size[0] // w
    return im.reduce(f) if im.size == (w * f, h * f) else im.resize((w, h), Image.BOX)
from PIL import ImageChops
t0 = time.monotonic()
last, since = None, t0
def changed(a, b):  # more than a blinking caret's worth of pixels differ (0.05% of the image)
    if a is None:
        return True
    moved = ImageChops.difference(a, b).convert("L").point(lambda v: 255 if v > 24 else 0).histogram()[255]
    return moved > w * h // 2000
while True:
    im = small(grab()[0])
    now = time.monotonic()
    if changed(last, im):
        since = now
    last = im
    lo, hi = im.convert("L").getextrema()
    waiting = expect and lo == hi  # one flat colour: the window is not up yet
    if (now - t0 >= min_s and now - since >= still_s and not waiting) or now - t0 >= max_s:
        break
    time.sleep(0.25)
buf = io.BytesIO()
im.save(buf, "WEBP", quality=quality, method=4)
print(json.dumps({"width": w, "height": h, "waited_s": round(now - t0, 2), "still": now - since >= still_s}))
print(base64.b64encode(buf.getvalue()).decode())
"""
# Detached from the exec that starts it (stdio on /dev/null), so the exec returns at once.
_DETACH = 'exec "$@" </dev/null >/dev/null 2>&1'
# Touch the stop file, wait for the recorder's file, print it (base64, one line) and remove its folder.
_STOP = ('touch "$1"; for _ in $(seq 1200); do [ -s "$2" ] && break; sleep 0.05; done; [ -s "$2" ] || exit 1; '
         'base64 -w0 "$2"; echo; rm -rf "$(dirname "$2")"')


def _image(data: bytes, mime: str, width: int, height: int, **extra: Any) -> dict[str, Any]:
    return {"mime": mime, "width": width, "height": height, "data": base64.b64encode(data).decode(), **extra}


def expects_window(golden: Golden) -> bool:
    """Whether the start state shows a window: the golden's record has one, or a post-fork step
    starts a program (a dialog the setup leaves to each fork)."""
    return bool(golden.desktop is not None and golden.desktop.windows) or any(s.starts_process for s in golden.post_fork)


def start_screenshot(fork: Fork, expect_window: bool) -> dict[str, Any]:
    """The start state, small: a WebP of START_SIZE once the screen holds still (and shows
    something, when `expect_window`); {"error": why} when it cannot be read."""
    argv = ["bash", "-c", _SESSION_PREFIX, "shinken-start-shot", "python3", "-S", "-c", STILL_PY,
            f"{START_SIZE[0]}x{START_SIZE[1]}", str(START_QUALITY), str(START_MIN_S), str(START_STILL_S), str(START_MAX_S),
            "1" if expect_window else "0"]
    try:
        res = fork.exec(argv, timeout=START_MAX_S + 30, max_output=4 * MAX_BYTES // 3 + 1000)
    except InfraError as exc:
        return {"error": f"start screenshot: {exc}"}
    lines = res.output.strip().splitlines()
    try:
        if not res.ok or len(lines) < 2:
            raise ValueError(f"exit {res.exit_code}: {res.output[-200:]}")
        head, data = json.loads(lines[-2]), base64.b64decode(lines[-1], validate=True)
    except (ValueError, KeyError, TypeError) as exc:
        return {"error": f"start screenshot: the screen could not be read ({str(exc)[:300]})"}
    if not is_webp(data):
        return {"error": "start screenshot: the fork handed back something that is not a WebP"}
    return _image(data, "image/webp", *START_SIZE, waited_s=float(head.get("waited_s") or 0.0))


@dataclass
class Recording:
    """One solution's run, recorded (see the module's docstring): `start()` before its tool calls,
    `step()` after each, `stop()` after the last, `finish()` after the reward (the image entry for
    the line)."""

    fork: Fork
    desktop: bool
    of: str  # "oracle", "replay 0", ...
    steps: list[tuple[str, str, float]] = field(default_factory=list)  # (what ran, what it answered, seconds)
    error: str | None = None
    seconds: float = 0.0
    _paths: tuple[str, str] = ("", "")
    _t0: float = 0.0
    _data: bytes = b""

    def start(self) -> None:
        self._t0 = time.monotonic()
        if not self.desktop:
            return
        folder = f"/tmp/.shinken-record-{uuid.uuid4().hex[:12]}"
        self._paths = (f"{folder}/recording.webp", f"{folder}/stop")
        argv = ["bash", "-c", _SESSION_PREFIX, "shinken-record", "bash", "-c", f"mkdir -p {folder} && setsid -f \"$@\"",
                "shinken-record", "bash", "-c", _DETACH, "shinken-record", "python3", "-S", "-c", RECORD_PY,
                self._paths[0], self._paths[1], str(RECORD_FPS), str(RECORD_MAX_S),
                f"{RECORD_SIZE[0]}x{RECORD_SIZE[1]}", str(RECORD_QUALITY), str(RECORD_MAX_FRAMES)]
        try:
            res = self.fork.exec(argv, timeout=30)
            if not res.ok:
                self.error = f"recording ({self.of}): the recorder did not start (exit {res.exit_code}): {res.output[-200:]}"
        except InfraError as exc:
            self.error = f"recording ({self.of}): {exc}"

    def step(self, shown: str, answer: str, seconds: float) -> None:
        self.steps.append((shown, answer, seconds))

    def stop(self) -> None:
        """After the solution's last call, before the reward: the screen's end state is the last
        frame; the recorder's file is fetched and its folder removed (the reward sees the fork as
        the solution left it)."""
        self.seconds = time.monotonic() - self._t0
        if not self.desktop or self.error is not None:
            return
        out, stop = self._paths
        try:
            res = self.fork.exec(["bash", "-c", _STOP, "shinken-record", stop, out], timeout=90,
                                 max_output=4 * MAX_BYTES // 3 + 1000)
            if not res.ok or res.truncated:
                self.error = f"recording ({self.of}): the recorder wrote nothing (it may have been killed)"
                return
            data = base64.b64decode(res.output.strip().splitlines()[-1], validate=True)
        except (InfraError, ValueError, IndexError) as exc:
            self.error = f"recording ({self.of}): {exc}"
            return
        if not is_webp(data) or len(data) > MAX_BYTES:
            self.error = (f"recording ({self.of}): the fork handed back {len(data)} bytes that are not a WebP "
                          f"of at most {MAX_BYTES}")
            return
        self._data = data

    def finish(self, reward: float | None, reward_tail: str) -> dict[str, Any]:
        """The recording as an image entry, or {"error": why}."""
        if self.error is not None:
            return {"error": self.error}
        if not self.desktop:
            svg = terminal_svg(self.steps, reward, reward_tail)
            return _image(svg.encode(), "image/svg+xml", TERM_W, svg_height(svg), of=self.of, kind="terminal",
                          seconds=round(self.seconds, 2), frames=len(self.steps) + 1)
        return _image(self._data, "image/webp", *RECORD_SIZE, of=self.of, kind="screen",
                      seconds=round(self.seconds, 2), frames=webp_frames(self._data))


def is_webp(data: bytes) -> bool:
    return len(data) > 12 and data[:4] == b"RIFF" and data[8:12] == b"WEBP"


def webp_frames(data: bytes) -> int:
    """Frames of an animated WebP (its ANMF chunks; 1 for a still one)."""
    n, at = 0, 12
    while at + 8 <= len(data):
        kind, size = data[at:at + 4], int.from_bytes(data[at + 4:at + 8], "little")
        if kind == b"ANMF":
            n += 1
        at += 8 + size + (size & 1)
    return max(n, 1)


def described_call(name: str, arguments: dict[str, Any]) -> str:
    """A tool call as the terminal recording shows it: a command as typed, other tools by name."""
    command = arguments.get("command")
    if name == EXEC and isinstance(command, str):
        return "$ " + command
    return f"▸ {name} {json.dumps(arguments, ensure_ascii=False, separators=(', ', ': '))}"


def oracle_shown(oracle_name: str) -> str:
    """How the oracle's one command shows (its full text is a here-document carrying the script)."""
    run = "bash" if oracle_name.endswith(".sh") else "python3"
    return f"$ cd /home/user && {run} {shlex.quote(oracle_name)}"


def recording(fork: Fork, golden: Golden, enabled: bool, of: str) -> Recording | None:
    """A started recording of a solution's run on `fork` (None: media are off)."""
    if not enabled:
        return None
    rec = Recording(fork, golden.needs_desktop, of)
    rec.start()
    return rec


def collect(media: dict[str, Any] | None, *, start: dict[str, Any] | None = None,
            recording: dict[str, Any] | None = None, desktop: bool | None = None) -> dict[str, Any] | None:
    """A line's media with a screenshot or a recording (or why there is none) added; None stays None
    when there is nothing to add (media are off)."""
    if start is None and recording is None and desktop is None:
        return media
    m = media or {"desktop": False, "start": None, "recordings": [], "errors": []}
    if desktop is not None:
        m["desktop"] = desktop
    for entry, slot in ((start, "start"), (recording, "recordings")):
        if entry is None:
            continue
        if "error" in entry:
            m["errors"].append(entry["error"])
        elif slot == "start":
            m["start"] = entry
        else:
            m["recordings"].append(entry)
    return m
