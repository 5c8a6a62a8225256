"""The tools of a profile (shinken.computer.profiles) and their execution: shinken's element tools
(computer.tools), pixel tools in the shape of the common computer-use schemas, or one pyautogui
tool (OSWorld's action space); with screenshot observations every GUI action answers with a
screenshot of the moment after it, taken in the same guest exec as the action.

Bad arguments (a point off the screen, an unknown tool, a forbidden pyautogui statement) come
back as `error: ...` text the model reads, never as an exception; InfraError propagates so the
engine masks the sample."""

from __future__ import annotations

import ast
import time
from dataclasses import dataclass
from typing import Any

from shinken import pyast
from shinken.computer import screen, tools
from shinken.computer.profiles import Profile
from shinken.computer.screen import Screenshot, ScreenshotError
from shinken.computer.tools import ToolArgError, ToolContext, _tool

CLICK, DOUBLE_CLICK, RIGHT_CLICK, DRAG, SCROLL, MOVE, WAIT, PYAUTOGUI = (
    "computer_click", "computer_double_click", "computer_right_click", "computer_drag", "computer_scroll",
    "computer_move", "computer_wait", "computer_pyautogui",
)
MAX_WAIT_S = 10
MAX_SCROLL = 50
PYAUTOGUI_TIMEOUT_S = 20  # the program's own run, counted from after pyautogui's import
# Starting python and importing pyautogui, before the program's bound starts: ~0.3 s of CPU, but a
# fork may get 1/25 of a core on a loaded machine. A start past it is told as text too.
PYAUTOGUI_START_S = 60
TIMED_OUT = "SHINKEN-PROGRAM-TIMEOUT"
PYAUTOGUI_OUTPUT = 4_000
PYAUTOGUI_MAX_CHARS = 4_000
WAIT_DEFAULT_S = 1.0  # WAIT in a pyautogui program


def _xy(what: str) -> dict[str, Any]:
    return {
        "x": {"type": "integer", "description": f"{what} x in screenshot pixels (0 = left edge)"},
        "y": {"type": "integer", "description": f"{what} y in screenshot pixels (0 = top edge)"},
    }


PIXEL_SCHEMAS: list[dict[str, Any]] = [
    _tool(CLICK, "Left-click at a point of the screen (coordinates in the screenshot's pixels).", _xy("point")),
    _tool(DOUBLE_CLICK, "Double-click with the left button at a point of the screen.", _xy("point")),
    _tool(RIGHT_CLICK, "Right-click at a point of the screen (opens context menus).", _xy("point")),
    _tool(DRAG, "Press the left button at (start_x, start_y), move to (end_x, end_y) and release.", {
        "start_x": {"type": "integer", "description": "start x in screenshot pixels"},
        "start_y": {"type": "integer", "description": "start y in screenshot pixels"},
        "end_x": {"type": "integer", "description": "end x in screenshot pixels"},
        "end_y": {"type": "integer", "description": "end y in screenshot pixels"},
    }),
    _tool(SCROLL, "Scroll the mouse wheel at a point: direction up/down/left/right, amount in wheel clicks.", {
        **_xy("point"),
        "direction": {"type": "string", "enum": ["up", "down", "left", "right"], "description": "wheel direction"},
        "amount": {"type": "integer", "minimum": 1, "maximum": MAX_SCROLL, "description": "wheel clicks (1-50)"},
    }),
    _tool(MOVE, "Move the mouse pointer to a point without clicking (hover).", _xy("point")),
    tools.TOOLS_BY_NAME[tools.TYPE_TEXT],
    tools.TOOLS_BY_NAME[tools.KEY],
    _tool(WAIT, "Wait for the screen to change (an application starting, a page loading), then look again.", {
        "seconds": {"type": "number", "minimum": 0, "maximum": MAX_WAIT_S, "description": "seconds to wait (0-10)"},
    }),
]

PYAUTOGUI_SCHEMA = _tool(
    PYAUTOGUI,
    "Act on the screen with a short Python program using pyautogui (already imported, as is time), e.g. "
    "`pyautogui.click(640, 400)` or `pyautogui.write('hello'); pyautogui.press('enter')`. Coordinates are in the "
    "screenshot's pixels. Instead of a program, send exactly WAIT (wait and look again), DONE (the task is "
    f"finished) or FAIL (the task cannot be done). A program runs at most {PYAUTOGUI_TIMEOUT_S} s.",
    {"code": {"type": "string", "description": "a pyautogui program, or WAIT, DONE or FAIL"}},
)

# pyautogui calls a --no-exec program may make (the mouse and keyboard, nothing else).
PYAUTOGUI_CALLS = frozenset({
    "click", "doubleClick", "tripleClick", "rightClick", "middleClick", "moveTo", "moveRel", "move", "dragTo",
    "dragRel", "drag", "mouseDown", "mouseUp", "scroll", "hscroll", "vscroll", "typewrite", "write", "press",
    "keyDown", "keyUp", "hotkey", "position", "size", "sleep",
})
_SAFE_BUILTINS = frozenset({"range", "int", "round", "len", "min", "max", "abs"})

# Runs the program in the guest with pyautogui; with a scale, coordinates the program gives
# (screenshot pixels) are mapped to the display's, as are size() and position(). pyscreeze (imported
# by pyautogui) loads OpenCV when present, only for locate*(confidence=...), and the cua image has
# it: OpenCV and numpy were 5.2 s of a 5.5 s cold import (1.0 s warm against 0.27 s without), which
# under load ate the program's whole bound. The bound is an alarm set after the imports, so it
# counts the program only; the outer `timeout` catches a start past PYAUTOGUI_START_S.
PYAUTOGUI_PY = r"""
import os, signal, sys, time
sys.modules["cv2"] = None  # pyscreeze: ImportError -> no OpenCV (locate* without confidence=)
import pyautogui
def _stop(*_):
    sys.stdout.flush()
    os.write(2, b"\nSHINKEN-PROGRAM-TIMEOUT\n")
    os._exit(124)
pyautogui.FAILSAFE = False
pyautogui.PAUSE = 0.05
sx, sy = float(sys.argv[2]), float(sys.argv[3])
if (sx, sy) != (1.0, 1.0):
    _norm, _size, _pos = pyautogui._normalizeXYArgs, pyautogui.size, pyautogui.position
    def _scaled(first=None, second=None):
        if first is None and second is None:
            return _norm(first, second)
        p = _norm(first, second)
        return pyautogui.Point(round(p.x * sx), round(p.y * sy))
    pyautogui._normalizeXYArgs = _scaled
    pyautogui.size = lambda: pyautogui.Size(round(_size()[0] / sx), round(_size()[1] / sy))
    pyautogui.position = lambda *a, **k: pyautogui.Point(round(_pos()[0] / sx), round(_pos()[1] / sy))
code = compile(sys.argv[1], "<action>", "exec")
signal.signal(signal.SIGALRM, _stop)
signal.setitimer(signal.ITIMER_REAL, float(sys.argv[4]))
exec(code, {"pyautogui": pyautogui, "time": time, "__name__": "__action__"})
"""


@dataclass
class ToolOutput:
    """What one tool call gives the policy: text (the function_call_output) and, in screenshot
    profiles, the screen after it."""

    text: str
    screenshot: Screenshot | None = None

    def to_json(self) -> dict[str, Any]:
        return {"output": self.text, "screenshot": self.screenshot.to_json() if self.screenshot else None}


def tool_schemas(profile: Profile) -> list[dict[str, Any]]:
    """The Responses-API function tools of a profile, in a fixed order (the rows carry them)."""
    if profile.actions == "shinken":
        out = [t for t in tools.TOOL_SCHEMAS if t["name"] != tools.DONE]
        if not profile.a11y:
            out = [t for t in out if t["name"] != tools.OBSERVE]
    else:
        out = [tools.TOOLS_BY_NAME[tools.OBSERVE]] if profile.a11y else []
        out += PIXEL_SCHEMAS if profile.actions == "pixel" else [PYAUTOGUI_SCHEMA]
    if not profile.exec:
        out = [t for t in out if t["name"] != tools.EXEC]
    elif all(t["name"] != tools.EXEC for t in out):
        out.append(tools.TOOLS_BY_NAME[tools.EXEC])
    if profile.actions != "pyautogui":
        out.append(tools.TOOLS_BY_NAME[tools.DONE])
    if profile.is_default:
        assert out == tools.TOOL_SCHEMAS  # the default rows stay byte-identical
    return out


def _by_name(profile: Profile) -> dict[str, dict[str, Any]]:
    return {t["name"]: t for t in tool_schemas(profile)}


def screen_size(ctx: ToolContext) -> tuple[int, int]:
    """The display's size (cached per rollout)."""
    cached = ctx.extra.get("screen")
    if cached:
        return cached  # type: ignore[no-any-return]
    res = tools._guest(ctx, ["xdotool", "getdisplaygeometry"], timeout=tools.GUI_TIMEOUT_S)
    err = tools._check_gui(res, "reading the screen size")
    parts = res.output.split()
    if err or len(parts) < 2 or not (parts[-2].isdigit() and parts[-1].isdigit()):
        raise ToolArgError(err.removeprefix("error: ") if err else f"the screen size could not be read: {res.output[-200:]}")
    size = (int(parts[-2]), int(parts[-1]))
    ctx.extra["screen"] = size
    return size


def image_size(ctx: ToolContext, profile: Profile) -> tuple[int, int]:
    """The size the policy's coordinates refer to: the screenshot's (the display's unless scaled)."""
    return profile.size or screen_size(ctx)


def _to_screen(ctx: ToolContext, profile: Profile, x: int, y: int, what: str = "point") -> tuple[int, int]:
    w, h = image_size(ctx, profile)
    if not (0 <= x < w and 0 <= y < h):
        raise ToolArgError(f"{what} ({x}, {y}) is off the screen; x must be 0..{w - 1} and y 0..{h - 1}")
    sw, sh = screen_size(ctx)
    return (x * sw // w, y * sh // h) if (w, h) != (sw, sh) else (x, y)


# One exec per step: the action, the settle pause, then (screenshot profiles) the capture.
_STEP = ('fmt=$1 q=$2 size=$3 server=$4 py=$5 settle=$6; shift 6; rc=0; "$@" || rc=$?; sleep "$settle"; '
         'echo "SHINKEN-ACTION-EXIT $rc"; [ "$py" = - ] && exit 0; '
         'exec python3 -S -c "$py" "$fmt" "$q" "$size" "$server"')


def _step(ctx: ToolContext, profile: Profile, argv: list[str], what: str, timeout: float = tools.GUI_TIMEOUT_S,
          settle: float = tools.SETTLE_S) -> tuple[str | None, str, Screenshot | None]:
    """(error text or None, the action's output, the screenshot after it)."""
    fmt, quality, size, server = screen.capture_argv(profile)
    py = screen.CAPTURE_PY if profile.screenshots else "-"
    res = tools._guest(ctx, ["bash", "-c", _STEP, "shinken-step", fmt, quality, size, server, py, f"{settle:.2f}",
                             *argv],
                       timeout=timeout + screen.CAPTURE_TIMEOUT_S, max_output=screen.MAX_OUTPUT)
    if res.exit_code == 127:
        raise tools.InfraError(f"{what}: the sandbox image lacks a guest tool: {res.output[-300:]}")
    text = res.output
    marker = text.rfind("SHINKEN-ACTION-EXIT ")
    if marker < 0:
        return (f"error: {what} timed out" if res.timed_out else
                f"error: {what} failed: {text.strip()[-500:]}"), "", None
    action_out = text[:marker]
    rc_text = text[marker:].split("\n", 1)[0].split()[-1]
    rc = int(rc_text) if rc_text.isdigit() else 1
    shot = None
    if profile.screenshots:
        shot = screen.parse(ctx, profile, res)
    if rc != 0:
        return f"error: {what} failed (exit {rc}): {action_out.strip()[-500:]}", action_out, shot
    return None, action_out, shot


def _observe_after(ctx: ToolContext, profile: Profile, text: str, shot: Screenshot | None) -> ToolOutput:
    """With `both`, the tree of the same moment follows the action's text."""
    if profile.observation == "both":
        try:
            text = text + "\n" + tools._observe_tool(ctx, "tree")
        except ToolArgError as exc:
            text = text + f"\n(accessibility tree: {exc})"
    return ToolOutput(text, shot)


def _pixel(ctx: ToolContext, profile: Profile, name: str, a: dict[str, Any]) -> ToolOutput:
    if name == WAIT:
        seconds = float(a["seconds"])
        err, _, shot = _step(ctx, profile, ["true"], "wait", settle=seconds, timeout=tools.GUI_TIMEOUT_S + seconds)
        return _observe_after(ctx, profile, err or f"waited {seconds:g} s", shot)
    if name == DRAG:
        x1, y1 = _to_screen(ctx, profile, a["start_x"], a["start_y"], "start")
        x2, y2 = _to_screen(ctx, profile, a["end_x"], a["end_y"], "end")
        argv = ["xdotool", "mousemove", "--sync", str(x1), str(y1), "mousedown", "1", "sleep", "0.1",
                "mousemove", "--sync", str(x2), str(y2), "sleep", "0.1", "mouseup", "1"]
        err, _, shot = _step(ctx, profile, argv, "drag")
        done = f"dragged from ({a['start_x']}, {a['start_y']}) to ({a['end_x']}, {a['end_y']})"
        return _observe_after(ctx, profile, err or done, shot)
    x, y = _to_screen(ctx, profile, a["x"], a["y"])
    move = ["xdotool", "mousemove", "--sync", str(x), str(y)]
    if name == SCROLL:
        button = {"up": "4", "down": "5", "left": "6", "right": "7"}[a["direction"]]
        argv = [*move, "click", "--repeat", str(a["amount"]), "--delay", "30", button]
        done = f"scrolled {a['direction']} {a['amount']} at ({a['x']}, {a['y']})"
    elif name == MOVE:
        argv, done = move, f"moved the pointer to ({a['x']}, {a['y']})"
    else:
        clicks = {CLICK: ["click", "1"], DOUBLE_CLICK: ["click", "--repeat", "2", "--delay", "80", "1"],
                  RIGHT_CLICK: ["click", "3"]}[name]
        argv = [*move, *clicks]
        done = {CLICK: "clicked", DOUBLE_CLICK: "double-clicked", RIGHT_CLICK: "right-clicked"}[name] \
            + f" at ({a['x']}, {a['y']})"
    err, _, shot = _step(ctx, profile, argv, name.removeprefix("computer_"))
    return _observe_after(ctx, profile, err or done, shot)


def check_program(code: str) -> None:
    """A --no-exec pyautogui program may only call pyautogui's mouse and keyboard functions and
    time.sleep with plain values: no import but pyautogui/time, no other attribute, no def."""
    try:
        tree = pyast.parse(code)
    except SyntaxError as exc:
        raise ToolArgError(f"the program is not valid Python: {exc.msg} (line {exc.lineno})") from None
    assigned: set[str] = set()
    for stmt in tree.body:
        if isinstance(stmt, ast.Import):
            if any(a.name not in ("pyautogui", "time") or a.asname for a in stmt.names):
                raise ToolArgError("only `import pyautogui` and `import time` are allowed (no shell in this workspace)")
            continue
        if isinstance(stmt, ast.Assign) and all(isinstance(t, ast.Name) for t in stmt.targets):
            _check_expr(stmt.value, assigned)
            assigned.update(t.id for t in stmt.targets if isinstance(t, ast.Name))
            continue
        if isinstance(stmt, ast.Expr):
            _check_expr(stmt.value, assigned)
            continue
        raise ToolArgError(f"`{ast.unparse(stmt).splitlines()[0][:80]}` is not allowed: use pyautogui calls, "
                           "time.sleep and plain values (no shell in this workspace)")


def _check_expr(node: ast.AST, assigned: set[str]) -> None:
    for sub in ast.walk(node):
        if isinstance(sub, ast.Attribute):
            base = sub.value
            ok = isinstance(base, ast.Name) and (
                (base.id == "pyautogui" and sub.attr in PYAUTOGUI_CALLS) or (base.id == "time" and sub.attr == "sleep"))
            if not ok:
                raise ToolArgError(f"`{ast.unparse(sub)[:80]}` is not allowed: only pyautogui's mouse and keyboard "
                                   "functions and time.sleep (no shell in this workspace)")
        elif isinstance(sub, ast.Name):
            if sub.id not in ("pyautogui", "time") and sub.id not in assigned and sub.id not in _SAFE_BUILTINS:
                raise ToolArgError(f"name `{sub.id}` is not allowed here")
        elif isinstance(sub, (ast.Lambda, ast.ListComp, ast.GeneratorExp, ast.DictComp, ast.SetComp, ast.Starred,
                              ast.NamedExpr, ast.Await, ast.Yield, ast.YieldFrom, ast.Subscript)):
            raise ToolArgError(f"`{ast.unparse(sub)[:80]}` is not allowed in a pyautogui program here")


def _pyautogui(ctx: ToolContext, profile: Profile, code: str) -> ToolOutput:
    word = code.strip()
    if word == "DONE":
        ctx.done = True
        return ToolOutput("done; the result will be checked")
    if word == "FAIL":
        ctx.done = True
        ctx.extra["declared_infeasible"] = True
        return ToolOutput("recorded: the task cannot be done; the result will be checked")
    if word == "WAIT":
        err, _, shot = _step(ctx, profile, ["true"], "wait", settle=WAIT_DEFAULT_S)
        return _observe_after(ctx, profile, err or f"waited {WAIT_DEFAULT_S:g} s", shot)
    if not word:
        raise ToolArgError("code is empty; send a pyautogui program, WAIT, DONE or FAIL")
    if len(code) > PYAUTOGUI_MAX_CHARS:
        raise ToolArgError(f"the program is longer than {PYAUTOGUI_MAX_CHARS} characters")
    if not profile.exec:
        check_program(code)
    else:
        try:
            compile(code, "<action>", "exec")
        except SyntaxError as exc:
            raise ToolArgError(f"the program is not valid Python: {exc.msg} (line {exc.lineno})") from None
    w, h = image_size(ctx, profile)
    sw, sh = screen_size(ctx)
    bound = PYAUTOGUI_TIMEOUT_S + PYAUTOGUI_START_S
    argv = ["timeout", "-k", "2", str(bound), "python3", "-c", PYAUTOGUI_PY, code,
            repr(sw / w), repr(sh / h), str(PYAUTOGUI_TIMEOUT_S)]
    err, out, shot = _step(ctx, profile, argv, "the program", timeout=bound + 5)
    stopped = TIMED_OUT in out
    # python-xlib's note that the display needs no cookie (Xvfb here) is noise to the model
    out = "\n".join(ln for ln in out.splitlines() if not ln.startswith("Xlib.xauth: warning") and ln != TIMED_OUT).strip()
    if len(out) > PYAUTOGUI_OUTPUT:
        out = "(output cut; the tail is shown)\n" + out[-PYAUTOGUI_OUTPUT:]
    if err and stopped:
        err = f"error: the program ran longer than {PYAUTOGUI_TIMEOUT_S} s and was stopped"
    elif err and " (exit 124)" in err:
        err = (f"error: the program was stopped after {bound} s in all (its start may take {PYAUTOGUI_START_S} s, "
               f"its run {PYAUTOGUI_TIMEOUT_S} s; the machine is busy)")
    text = err or ("ran the program" + (f"\n{out}" if out else ""))
    return _observe_after(ctx, profile, text, shot)


def _type(ctx: ToolContext, profile: Profile, text: str) -> ToolOutput:
    if not text:
        raise ToolArgError("text is empty")
    if len(text) > tools.MAX_TEXT:
        raise ToolArgError(f"text is longer than {tools.MAX_TEXT} characters; type it in parts")
    err, _, shot = _step(ctx, profile, ["xdotool", "type", "--delay", "8", "--", text], "typing",
                         timeout=tools.GUI_TIMEOUT_S + len(text) * 0.02)
    return _observe_after(ctx, profile, err or f"typed {len(text)} characters", shot)


def _key(ctx: ToolContext, profile: Profile, keys: str) -> ToolOutput:
    chords = keys.split()
    if not chords:
        raise ToolArgError("keys is empty; e.g. \"Return\" or \"ctrl+s\"")
    if len(chords) > tools.MAX_KEY_CHORDS:
        raise ToolArgError(f"at most {tools.MAX_KEY_CHORDS} key combinations per call")
    bad = [c for c in chords if not tools._KEY_RE.match(c)]
    if bad:
        raise ToolArgError(f"not a key name: {bad[0]!r}; use xdotool names like Return, Tab, ctrl+s")
    err, _, shot = _step(ctx, profile, ["xdotool", "key", "--clearmodifiers", "--", *chords], "key press")
    return _observe_after(ctx, profile, err or f"pressed {' '.join(chords)}", shot)


def _with_screenshot(ctx: ToolContext, profile: Profile, text: str) -> ToolOutput:
    """A shinken tool's text, plus the screen after it in screenshot profiles."""
    if not profile.screenshots:
        return ToolOutput(text)
    try:
        return ToolOutput(text, screen.capture(ctx, profile))
    except ScreenshotError as exc:
        return ToolOutput(f"{text}\n(screenshot: {exc})")


def run(ctx: ToolContext, profile: Profile, name: str, arguments: Any) -> ToolOutput:
    """What the policy gets for one call. Error texts for bad calls; InfraError propagates."""
    if profile.is_default:
        return ToolOutput(tools.run_tool(ctx, name, arguments))
    schemas = _by_name(profile)
    if name not in schemas:
        return ToolOutput(f"error: unknown tool {name!r} (no such tool in this workspace); "
                          f"tools are {', '.join(schemas)}")
    try:
        a = tools._args(name, arguments, schemas)
        if name in (tools.EXEC, tools.DONE):
            return ToolOutput(tools.run_tool(ctx, name, a))
        if name == tools.OBSERVE:  # the tree (and, with `both`, the screen of that moment)
            return _with_screenshot(ctx, profile, tools.run_tool(ctx, name, a))
        if profile.actions == "shinken":  # an element/point click, typing, a key: then the screen
            shot = _with_screenshot(ctx, profile, tools.run_tool(ctx, name, a))
            return _observe_after(ctx, profile, shot.text, shot.screenshot)
        ctx.steps += 1
        if name == tools.TYPE_TEXT:
            return _type(ctx, profile, a["text"])
        if name == tools.KEY:
            return _key(ctx, profile, a["keys"])
        if name == PYAUTOGUI:
            return _pyautogui(ctx, profile, a["code"])
        return _pixel(ctx, profile, name, a)
    except ToolArgError as exc:
        return ToolOutput(f"error: {exc}")
    except ScreenshotError as exc:
        return ToolOutput(f"error: {exc}")


def first_observation(ctx: ToolContext, profile: Profile) -> ToolOutput | None:
    """At seed time: the screen the policy starts from (screenshot profiles), else None."""
    if not profile.screenshots:
        return None
    started = time.monotonic()
    try:
        shot = screen.capture(ctx, profile)
    except ScreenshotError as exc:
        return ToolOutput(f"(screenshot: {exc})")
    text = f"the screen at the start ({shot.width}x{shot.height})"
    if profile.observation == "both":
        try:
            text += "\n" + tools._observe_tool(ctx, "tree")
        except ToolArgError as exc:
            text += f"\n(accessibility tree: {exc})"
    ctx.extra["first_observation_s"] = time.monotonic() - started
    return ToolOutput(text, shot)
