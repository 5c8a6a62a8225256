"""Screenshot observations and the pixel / pyautogui action profiles on real forks of
shinken/sandbox-linux (Xvfb + zenity): the screenshot shows the window the accessibility tree
describes, the policy's pixels reach the right widget (scaled screenshots included), bad calls
come back as text, and --no-exec leaves no way to a shell."""

from __future__ import annotations

import shutil
import time
import uuid
from pathlib import Path

import pytest

import png
from shinken.computer import actions, tools
from shinken.computer.contract import EngineConfig
from shinken.computer.engine import ComputerEngine
from shinken.computer.profiles import Profile

pytestmark = pytest.mark.docker

DEMO = Path(__file__).resolve().parent.parent / "demo"


@pytest.fixture(scope="module")
def task_root(tmp_path_factory) -> Path:
    root = tmp_path_factory.mktemp("screen-tasks")
    salt = uuid.uuid4().hex
    for name in ("zenity-entry", "hello-file"):
        shutil.copytree(DEMO / name, root / name)
        with open(root / name / "reward.py", "a", encoding="utf-8") as fh:
            fh.write(f"\n# test salt {salt}\n")
    return root


@pytest.fixture(scope="module")
def engines(task_root, linux_image):
    made: list[ComputerEngine] = []

    def make(profile: Profile) -> ComputerEngine:
        # Goldens are kept for the next engine of the module (the provider's label cache finds them).
        eng = ComputerEngine(EngineConfig(task_root, linux_image, accept_filesystem=True, profile=profile),
                             gc_interval_s=None, keep_goldens_on_close=True)
        made.append(eng)
        return eng

    yield make
    for eng in made:
        eng.close()
    ComputerEngine(EngineConfig(task_root, linux_image, accept_filesystem=True),
                   gc_interval_s=None).close()  # drops the goldens


def _ready_dialog(eng: ComputerEngine, session: str, gen: str) -> tuple[tools.a11y.Node, tools.a11y.Node]:
    """(the dialog, its entry) once the window manager placed and focused it."""

    deadline = time.monotonic() + 60
    while True:
        nodes = eng.in_rollout(session, gen, "dump", tools._dump)
        dialog = next((n for n in nodes if n.role == "dialog" and n.name == "Shinken" and "active" in n.states), None)
        entry = next((n for n in nodes if n.role == "text" and "editable" in n.states), None)
        if dialog is not None and entry is not None and dialog.bbox and entry.center():
            return dialog, entry
        assert time.monotonic() < deadline, "the zenity dialog never became active"
        time.sleep(0.5)


def _scaled(point: tuple[int, int], profile: Profile, screen: tuple[int, int]) -> tuple[int, int]:
    if profile.size is None:
        return point
    return point[0] * profile.size[0] // screen[0], point[1] * profile.size[1] // screen[1]


@pytest.mark.parametrize("size", [None, (960, 540)], ids=["display-size", "scaled-960x540"])
def test_screenshot_shows_the_window_the_tree_describes(engines, size) -> None:
    profile = Profile(observation="both", actions="pixel", exec=False, size=size)
    eng = engines(profile)
    gen = eng.seed("pos", "zenity-entry")
    dialog, _ = _ready_dialog(eng, "pos", gen)
    out = eng.step("pos", gen, "computer_wait", {"seconds": 0})
    shot = out.screenshot
    assert shot is not None and shot.mime == "image/png"
    raster = png.decode_png(shot.data)
    assert (raster.width, raster.height) == (shot.width, shot.height) == (size or (1920, 1080))
    assert (shot.screen_width, shot.screen_height) == (1920, 1080)
    assert 'dialog "Shinken"' in out.text  # `both`: the tree of the same moment follows the text
    # The desktop is black except for the dialog: the bright area is the window the tree names.
    x, y, w, h = dialog.bbox
    fx, fy = shot.width / 1920, shot.height / 1080
    box = raster.bbox()
    assert box is not None
    tol = 4
    assert abs(box[0] - x * fx) <= tol and abs(box[2] - (x + w) * fx) <= tol, (box, dialog.bbox)
    assert abs(box[3] - (y + h) * fy) <= tol, (box, dialog.bbox)
    assert -tol <= y * fy - box[1] <= 40 * fy, (box, dialog.bbox)  # the window manager's title bar is above it
    eng.end("pos", gen)


@pytest.mark.parametrize("size", [None, (960, 540)], ids=["display-size", "scaled-960x540"])
def test_pixel_profile_solves_zenity_by_clicking_the_entry(engines, size) -> None:
    profile = Profile(observation="screenshot", actions="pixel", exec=False, size=size)
    eng = engines(profile)
    gen = eng.seed("px", "zenity-entry")
    first = eng.first_observation("px", gen)
    assert first is not None and first.screenshot is not None
    assert png.image_size(first.screenshot.data, "image/png") == (size or (1920, 1080))
    _, entry = _ready_dialog(eng, "px", gen)
    assert eng.step("px", gen, "computer_click", {"x": 3, "y": 3}).text.startswith("clicked")  # focus elsewhere
    point = _scaled(entry.center(), profile, (1920, 1080))
    out = eng.step("px", gen, "computer_click", {"x": point[0], "y": point[1]})
    assert out.text == f"clicked at ({point[0]}, {point[1]})" and out.screenshot is not None
    assert eng.step("px", gen, "computer_type_text", {"text": "Ada Lovelace"}).text == "typed 12 characters"
    assert eng.step("px", gen, "computer_key", {"keys": "Return"}).text == "pressed Return"
    res = eng.verify("px", gen)
    assert (res.reward, res.mask_sample) == (1.0, False), res
    eng.end("px", gen)


def test_pixel_profile_refuses_bad_calls_as_text(engines) -> None:
    profile = Profile(observation="screenshot", actions="pixel", exec=False, size=(960, 540))
    eng = engines(profile)
    gen = eng.seed("bad", "hello-file")
    step = lambda name, args: eng.step("bad", gen, name, args).text  # noqa: E731
    assert step("computer_exec", {"command": "id"}).startswith("error: unknown tool 'computer_exec' (no such tool")
    assert step("computer_click", {"x": 960, "y": 10}) == (
        "error: point (960, 10) is off the screen; x must be 0..959 and y 0..539")
    assert step("computer_drag", {"start_x": 1, "start_y": 1, "end_x": -1, "end_y": 5}).startswith(
        "error: end (-1, 5) is off the screen")
    assert step("computer_scroll", {"x": 5, "y": 5, "direction": "sideways", "amount": 1}).startswith(
        "error: argument 'direction' must be one of")
    assert step("computer_scroll", {"x": 5, "y": 5, "direction": "down", "amount": 500}).startswith(
        "error: argument 'amount' must be within 1..50")
    assert step("computer_wait", {"seconds": 99}).startswith("error: argument 'seconds' must be within 0..10")
    assert step("computer_click", {"x": "10", "y": 5}) == "error: argument 'x' must be integer"
    assert step("computer_click", {"element": "e1", "x": 1, "y": 1}).startswith("error: unexpected argument(s) element")
    out = eng.step("bad", gen, "computer_scroll", {"x": 5, "y": 5, "direction": "down", "amount": 2})
    assert out.text == "scrolled down 2 at (5, 5)" and out.screenshot is not None
    res = eng.verify("bad", gen)  # the shell was never reachable: the file was not written
    assert (res.reward, res.mask_sample) == (0.0, False)
    eng.end("bad", gen)


def test_pyautogui_profile_solves_zenity_and_keeps_no_exec_closed(engines) -> None:
    profile = Profile(observation="screenshot", actions="pyautogui", exec=False, image_format="jpeg", quality=70)
    eng = engines(profile)
    assert [t["name"] for t in actions.tool_schemas(profile)] == ["computer_pyautogui"]
    gen = eng.seed("pg", "zenity-entry")
    first = eng.first_observation("pg", gen)
    assert first is not None and first.screenshot is not None and first.screenshot.mime == "image/jpeg"
    assert png.jpeg_size(first.screenshot.data) == (1920, 1080)
    step = lambda code: eng.step("pg", gen, "computer_pyautogui", {"code": code})  # noqa: E731
    for code, why in [("import os\nos.system('id')", "only `import pyautogui` and `import time` are allowed"),
                      ("pyautogui.platformModule._moveTo(1, 1)", "is not allowed"),
                      ("open('/etc/passwd').read()", "is not allowed"), ("open('/etc/passwd')", "name `open` is not allowed"),
                      ("__import__('os')", "name `__import__` is not allowed"),
                      ("while True: pass", "is not allowed"),
                      ("pyautogui.click(", "not valid Python")]:
        out = step(code)
        assert out.text.startswith("error: ") and why in out.text, (code, out.text)
    assert eng.step("pg", gen, "computer_exec", {"command": "id"}).text.startswith("error: unknown tool")
    _, entry = _ready_dialog(eng, "pg", gen)
    x, y = entry.center()
    out = step(f"pyautogui.click({x}, {y})\npyautogui.write('Ada Lovelace', interval=0.01)\npyautogui.press('enter')")
    assert out.text == "ran the program" and out.screenshot is not None, out.text
    assert step("WAIT").text == "waited 1 s"
    assert step("DONE").text.startswith("done")
    res = eng.verify("pg", gen)
    assert (res.reward, res.mask_sample) == (1.0, False), res
    eng.end("pg", gen)


def test_pyautogui_program_is_bounded_in_time_and_output(engines, monkeypatch) -> None:
    monkeypatch.setattr(actions, "PYAUTOGUI_TIMEOUT_S", 8)
    profile = Profile(observation="screenshot", actions="pyautogui", exec=True, image_format="webp", size=(640, 360))
    eng = engines(profile)
    gen = eng.seed("bound", "hello-file")
    step = lambda code: eng.step("bound", gen, "computer_pyautogui", {"code": code})  # noqa: E731
    out = step("import time\ntime.sleep(30)")
    assert out.text == "error: the program ran longer than 8 s and was stopped", out.text
    out = step("print('x' * 100000)")
    assert out.text.startswith("ran the program\n(output cut; the tail is shown)") and len(out.text) < 4_200
    assert out.screenshot is not None and png.webp_size(out.screenshot.data) == (640, 360)
    size = eng.step("bound", gen, "computer_pyautogui", {"code": "print(pyautogui.size())"}).text.splitlines()[-1]
    assert "width=640, height=360" in size  # the program sees the screenshot's size, not the display's
    # OpenCV (pyscreeze loads it when present; ~4 s of a cold import) stays out of the program's python.
    out = step("import sys\nprint('cv2' in sys.modules, sys.modules.get('cv2'), 'numpy' in sys.modules)")
    assert out.text.splitlines()[-1] == "True None False", out.text  # blocked (a None entry), not just absent
    eng.end("bound", gen)


def test_both_with_shinken_tools_gives_tree_and_screen_of_each_step(engines) -> None:
    profile = Profile(observation="both", actions="shinken", image_format="jpeg")
    eng = engines(profile)
    gen = eng.seed("both", "zenity-entry")
    _ready_dialog(eng, "both", gen)
    out = eng.step("both", gen, "computer_observe", {"mode": "tree"})
    assert 'dialog "Shinken"' in out.text and out.screenshot is not None and out.screenshot.mime == "image/jpeg"
    entry = next(line.split("]")[0].strip(" [") for line in out.text.splitlines() if "editable" in line)
    out = eng.step("both", gen, "computer_click", {"element": entry, "x": None, "y": None})
    assert out.text.startswith(f"clicked {entry}") and 'dialog "Shinken"' in out.text, out.text
    assert out.screenshot is not None and png.jpeg_size(out.screenshot.data) == (1920, 1080)
    out = eng.step("both", gen, "computer_exec", {"command": "echo hi"})
    assert out.text.startswith("exit code 0") and out.screenshot is None  # not a GUI action: no screen
    eng.end("both", gen)


def _guest_pids(ctx, pattern: str, unless: str = "") -> list[str]:
    """Pids of the fork's processes whose command line matches `pattern` and not `unless` (grep
    regexes written so that they do not match themselves)."""
    script = ('for f in $(grep -l -a -s -- "$1" /proc/[0-9]*/cmdline); do '
              '[ -n "$2" ] && grep -q -a -- "$2" "$f" 2>/dev/null && continue; echo "$f"; done | cut -d/ -f3')
    res = ctx.fork.exec(["bash", "-c", script, "-", pattern, unless], timeout=30)
    return sorted(res.output.split())


def _capture_servers(ctx) -> list[str]:
    """Pids of the fork's capture servers (the python3 listening on the capture socket; the
    clients and the relay carry its code in their argv, after their own)."""
    return _guest_pids(ctx, "sock[.]listen(16)", unless="def ask[_]once")


def _relays(ctx) -> list[str]:
    """Pids of the fork's capture relays (the python3 on the capture channel's stdin)."""
    return _guest_pids(ctx, "SHINKEN-FRAME [%]d")


def _pixels_differ(a, b) -> int:
    return sum(1 for ra, rb in zip(a.rows, b.rows) if ra != rb for i in range(0, len(ra), a.bpp)
               if ra[i:i + a.bpp] != rb[i:i + a.bpp])


def test_capture_server_gives_the_one_shot_screenshot_and_restarts(engines) -> None:
    """Captures go through a server started by the first one (Pillow imported once per fork),
    asked through the fork's capture channel (one long-lived exec running the relay; no exec per
    capture); the image is the one a fresh exec's client and a process of its own take of the
    same screen. A killed relay is replaced by the next capture (the channel opened once more), a
    killed server is started again, and closing the rollout's context ends the relay."""
    from shinken.computer import screen

    profile = Profile(observation="screenshot", actions="pixel", exec=False, size=(1280, 800))
    eng = engines(profile)
    gen = eng.seed("srv", "zenity-entry")
    _ready_dialog(eng, "srv", gen)
    assert eng.step("srv", gen, "computer_click", {"x": 3, "y": 3}).text.startswith("clicked")  # no caret blinking
    cap = lambda fn: eng.in_rollout("srv", gen, "capture", lambda ctx: fn(ctx, profile))  # noqa: E731
    first = eng.in_rollout("srv", gen, "servers", _capture_servers)
    assert len(first) == 1, first  # started by the seed-time or step capture, one only
    served = [cap(screen.capture) for _ in range(3)]
    channel = eng.in_rollout("srv", gen, "channel", lambda ctx: ctx.resources.get(screen.CHANNEL))
    assert channel is not None and not channel.closed  # the captures went through the channel...
    assert eng.in_rollout("srv", gen, "off", lambda ctx: ctx.extra.get(screen.CHANNEL_OFF)) is None
    relay = eng.in_rollout("srv", gen, "relays", _relays)
    assert len(relay) == 1, relay  # ...served by one relay
    assert eng.in_rollout("srv", gen, "servers", _capture_servers) == first  # and the same server answered
    by_exec = cap(screen.capture_exec)
    alone = cap(screen.capture_oneshot)
    a, e, b = (png.decode_png(x.data) for x in (served[-1], by_exec, alone))
    assert (a.width, a.height) == (e.width, e.height) == (b.width, b.height) == (1280, 800)
    assert served[-1].mime == by_exec.mime == "image/png"
    for other, how in ((e, "a fresh exec's"), (b, "the one-shot")):
        differ = _pixels_differ(a, other)
        assert differ <= 50, f"{differ} pixels differ between the channel's and {how} screenshot"
        assert a.bbox() is not None and a.bbox() == other.bbox()  # the dialog, at the same place
    # The server's CPU per capture is what is left after Pillow's import; the one-shot pays it every time.
    assert min(s.cpu_ms for s in served) < alone.cpu_ms, ([s.cpu_ms for s in served], alone.cpu_ms)
    # The relay killed in the guest: the next capture opens the channel again and still answers.
    eng.in_rollout("srv", gen, "kill", lambda ctx: ctx.fork.exec(["kill", "-9", *relay], timeout=30))
    again = cap(screen.capture)
    assert png.png_size(again.data) == (1280, 800)
    reopened = eng.in_rollout("srv", gen, "channel", lambda ctx: ctx.resources.get(screen.CHANNEL))
    assert reopened is not None and reopened is not channel and channel.closed and not reopened.closed
    assert eng.in_rollout("srv", gen, "off", lambda ctx: ctx.extra.get(screen.CHANNEL_OFF)) is None
    relay2 = eng.in_rollout("srv", gen, "relays", _relays)
    assert len(relay2) == 1 and relay2 != relay, (relay, relay2)
    # The server killed: the relay starts a new one for the next capture.
    eng.in_rollout("srv", gen, "kill", lambda ctx: ctx.fork.exec(["kill", "-9", *first], timeout=30))
    again = cap(screen.capture)
    assert png.png_size(again.data) == (1280, 800)
    restarted = eng.in_rollout("srv", gen, "servers", _capture_servers)
    assert len(restarted) == 1 and restarted != first, (first, restarted)
    # The rollout's end closes the channel: the relay sees its stdin end and exits.
    eng.in_rollout("srv", gen, "close", lambda ctx: ctx.close())
    assert reopened.closed
    for _ in range(50):
        if not eng.in_rollout("srv", gen, "relays", _relays):
            break
        time.sleep(0.1)
    assert eng.in_rollout("srv", gen, "relays", _relays) == []
    eng.end("srv", gen)
