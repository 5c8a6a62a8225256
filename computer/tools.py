"""The computer-use tools: JSON schemas (identical in engine, dataset rows and server) and their
execution against one fork. Bad arguments become error text the model sees, never exceptions;
InfraError from the sandbox propagates so the engine can mask the sample."""

from __future__ import annotations

import json
import re
import time
from dataclasses import dataclass, field
from typing import Any

from shinken.computer import a11y
from shinken.sandbox.api import ExecResult, Fork, InfraError

OBSERVE, CLICK, TYPE_TEXT, KEY, EXEC, DONE = (
    "computer_observe", "computer_click", "computer_type_text", "computer_key", "computer_exec",
    "computer_done",
)
TOOL_NAMES = (OBSERVE, CLICK, TYPE_TEXT, KEY, EXEC, DONE)


def _tool(name: str, description: str, properties: dict[str, Any]) -> dict[str, Any]:
    # Strict mode: every property required, no extras; optional fields are nullable.
    return {
        "type": "function",
        "name": name,
        "description": description,
        "parameters": {
            "type": "object",
            "properties": properties,
            "required": list(properties),
            "additionalProperties": False,
        },
        "strict": True,
    }


TOOL_SCHEMAS: list[dict[str, Any]] = [
    _tool(
        OBSERVE,
        "Read the desktop's accessibility tree as numbered text, one element per line: "
        "`[e<N>] role \"name\" value=\"...\" (states)`. Ids stay the same for the same element across "
        "observations. mode \"tree\" returns the whole tree; mode \"diff\" returns only lines that changed "
        "since your last observation (`~` changed, `+` added, `-` removed).",
        {"mode": {"type": "string", "enum": ["tree", "diff"],
                  "description": "\"tree\" for the full tree, \"diff\" for changes since the last observation"}},
    ),
    _tool(
        CLICK,
        "Click an element by its id from the last observation (e.g. \"e7\"), or a screen point. "
        "Give either element, or both x and y; set the others to null.",
        {
            "element": {"type": ["string", "null"], "description": "element id like \"e7\", or null"},
            "x": {"type": ["integer", "null"], "description": "screen x in pixels, or null"},
            "y": {"type": ["integer", "null"], "description": "screen y in pixels, or null"},
        },
    ),
    _tool(
        TYPE_TEXT,
        "Type text into the focused element, as keystrokes.",
        {"text": {"type": "string", "description": "the text to type"}},
    ),
    _tool(
        KEY,
        "Press a key or key combination, xdotool syntax: \"Return\", \"Tab\", \"ctrl+s\", \"alt+F4\". "
        "Several combinations may be separated by spaces.",
        {"keys": {"type": "string", "description": "key names joined by + for chords"}},
    ),
    _tool(
        EXEC,
        "Run a shell command (bash) in the computer as the desktop user and return its exit code and "
        "output (long output is cut, the tail is kept).",
        {"command": {"type": "string", "description": "the bash command line"}},
    ),
    _tool(
        DONE,
        "Say that the task is finished. Call it once, when you are done; the result is then checked.",
        {},
    ),
]

TOOLS_BY_NAME = {t["name"]: t for t in TOOL_SCHEMAS}


# Guest commands get the desktop's session settings (DISPLAY, D-Bus) in their environment from the
# sandbox (guest.session_env), never from a file. The desktop is started on demand so a task without
# a GUI can still be observed; shinken-desktop-up is idempotent (its fast path: the display answers).
# Both prefixes send stdout into stderr: the sandbox's end-of-exec marker travels on stderr, and
# Docker reads the two pipes independently, so stdout frames could arrive after the marker (and
# be dropped, or push the marker out of a capped tail). One pipe keeps the order.
# _SESSION_PREFIX alone (stdout kept) is for long-lived guest processes that answer on stdout.
_SESSION_PREFIX = '[ -S /tmp/.X11-unix/X0 ] || shinken-desktop-up >/dev/null 2>&1; exec "$@"'
_GUEST_PREFIX = 'exec 1>&2; ' + _SESSION_PREFIX
# computer_exec never starts the desktop (most exec-only tasks have no GUI, and starting one costs
# ~0.3 s).
_EXEC_PREFIX = 'exec 1>&2; exec "$@"'
# After an input event, wait so the next observation sees the app's reaction; one exec, not two.
_SETTLE = 'rc=0; "$@" || rc=$?; sleep {s}; exit $rc'
EXEC_TIMEOUT_S = 60.0
GUI_TIMEOUT_S = 30.0
DUMP_TIMEOUT_S = 40.0
EXEC_OUTPUT_CHARS = 8_000  # what the model sees of a command's output (the tail)
DUMP_MAX_BYTES = 32_000_000
SETTLE_S = 0.15  # let the app process an input event before the next observation
MAX_TEXT = 10_000
MAX_KEY_CHORDS = 16
_KEY_RE = re.compile(r"^[A-Za-z0-9_]+(\+[A-Za-z0-9_]+)*$")
_ELEMENT_RE = re.compile(r"^e[1-9][0-9]{0,6}$")
SCREEN_MAX = 16_384


@dataclass
class ToolContext:
    """Per-rollout state: the fork, the a11y id map and the last observation (for diffs)."""

    fork: Fork
    ids: a11y.IdMap = field(default_factory=a11y.IdMap)
    last_lines: dict[str, str] | None = None  # id -> rendered line of the last observation
    done: bool = False
    steps: int = 0
    extra: dict[str, Any] = field(default_factory=dict)
    # Long-lived things the rollout opened in its fork (the capture channel): closed with it.
    resources: dict[str, Any] = field(default_factory=dict)

    def close(self) -> None:
        """Close what the rollout opened (idempotent; the fork itself is the engine's)."""
        while self.resources:
            _, res = self.resources.popitem()
            try:
                res.close()
            except Exception:  # noqa: BLE001 - closing is best effort: it dies with the fork anyway
                pass


def new_context(fork: Fork) -> ToolContext:
    return ToolContext(fork=fork)


class ToolArgError(ValueError):
    """Bad arguments: reported to the model as text."""


def _args(name: str, arguments: Any, tools: dict[str, dict[str, Any]] = TOOLS_BY_NAME) -> dict[str, Any]:
    """Check arguments against the tool's schema shape (from `tools`): no extras, required
    non-null present, types right, numbers within minimum/maximum. Missing nullable fields count
    as null (lenient to non-strict callers)."""
    if arguments is None:
        arguments = {}
    if isinstance(arguments, str):  # Responses-API function calls carry arguments as a JSON string
        try:
            arguments = json.loads(arguments or "{}")
        except ValueError:
            raise ToolArgError("arguments are not valid JSON") from None
    if not isinstance(arguments, dict):
        raise ToolArgError(f"arguments must be a JSON object, got {type(arguments).__name__}")
    props = tools[name]["parameters"]["properties"]
    extra = sorted(set(arguments) - set(props))
    if extra:
        raise ToolArgError(f"unexpected argument(s) {', '.join(extra)}; {name} takes {', '.join(props) or 'none'}")
    out: dict[str, Any] = {}
    for key, spec in props.items():
        types = spec["type"] if isinstance(spec["type"], list) else [spec["type"]]
        value = arguments.get(key)
        if value is None:
            if "null" not in types:
                raise ToolArgError(f"missing argument {key!r}")
            out[key] = None
            continue
        if "integer" in types and isinstance(value, float) and value.is_integer():
            value = int(value)
        ok = ("string" in types and isinstance(value, str)) or (
            "integer" in types and isinstance(value, int) and not isinstance(value, bool)) or (
            "number" in types and isinstance(value, (int, float)) and not isinstance(value, bool))
        if not ok:
            raise ToolArgError(f"argument {key!r} must be {' or '.join(t for t in types if t != 'null')}")
        if isinstance(value, (int, float)) and not (spec.get("minimum", value) <= value <= spec.get("maximum", value)):
            raise ToolArgError(f"argument {key!r} must be within {spec.get('minimum')}..{spec.get('maximum')}")
        if "enum" in spec and value not in spec["enum"]:
            raise ToolArgError(f"argument {key!r} must be one of {', '.join(spec['enum'])}")
        out[key] = value
    return out


def _guest(ctx: ToolContext, argv: list[str], timeout: float = GUI_TIMEOUT_S, max_output: int = 64_000,
           settle: bool = False) -> ExecResult:
    """Run argv in the fork with the desktop session env; no shell parsing of the arguments."""
    if settle:
        argv = ["bash", "-c", _SETTLE.format(s=SETTLE_S), "shinken-settle", *argv]
    return ctx.fork.exec(["bash", "-c", _GUEST_PREFIX, "shinken-guest", *argv], timeout=timeout,
                         max_output=max_output)


def _check_gui(res: ExecResult, what: str) -> str | None:
    if res.exit_code == 127:
        raise InfraError(f"{what}: the sandbox image lacks a guest tool: {res.output[-300:]}")
    if res.timed_out:
        return f"error: {what} timed out"
    if res.exit_code != 0:
        return f"error: {what} failed (exit {res.exit_code}): {res.output.strip()[-500:]}"
    return None


def observe(ctx: ToolContext) -> a11y.Observation:
    """Dump the tree in the guest, assign ids. Raises ToolArgError for an unusable dump."""
    return ctx.ids.observe(_dump(ctx))


def _observe_tool(ctx: ToolContext, mode: str) -> str:
    before = ctx.last_lines
    obs = observe(ctx)
    ctx.last_lines = obs.lines
    if mode == "tree" or before is None:
        note = "" if mode == "tree" else "(no earlier observation; full tree)\n"
        cut = ("\n(the application exposes more elements than one observation lists; scroll or use the "
               "keyboard to bring others into view)") if ctx.extra.get("truncated") else ""
        return note + obs.text() + cut
    changes = a11y.diff(before, obs.lines)
    if not changes:
        return "(no changes)"
    if len(changes) > a11y.MAX_RENDER_CHARS:
        changes = changes[: a11y.MAX_RENDER_CHARS] + "\n... diff cut; observe the tree"
    return changes


def _dump(ctx: ToolContext) -> list[a11y.Node]:
    res = _guest(ctx, ["env", "PYTHONWARNINGS=ignore", "shinken-a11y-dump", "--showing-only"],
                 timeout=DUMP_TIMEOUT_S, max_output=DUMP_MAX_BYTES)
    err = _check_gui(res, "reading the accessibility tree")
    if err:
        raise ToolArgError(err.removeprefix("error: "))
    if res.truncated:
        raise ToolArgError("the accessibility tree is too large to read")
    # Output is stdout+stderr combined: warnings may precede the JSON, which is the last line.
    text = res.output.rstrip()
    start = text.rfind("\n{")
    try:
        data = json.loads(text[start + 1:] if start >= 0 else text)
    except ValueError:
        raise ToolArgError(f"the accessibility tree could not be read: {text[-300:]}") from None
    try:
        nodes = a11y.parse_dump(data)
    except a11y.DumpError as exc:
        raise ToolArgError(str(exc)) from None
    ctx.extra["truncated"] = bool(data.get("truncated"))
    return nodes


def _locate(ctx: ToolContext, old: a11y.Node) -> a11y.Node | None:
    """Where the element is now: positions in the model's last observation may be stale (a window
    placed by the window manager after it was read, a scrolled list)."""
    nodes = _dump(ctx)
    same_place = [n for n in nodes if (n.app, n.rel_path, n.role) == (old.app, old.rel_path, old.role)]
    for n in same_place:
        if n.name == old.name:
            return n
    if old.name:
        named = [n for n in nodes if (n.app, n.role, n.name) == (old.app, old.role, old.name)]
        if len(named) == 1:
            return named[0]
    return same_place[0] if same_place else None


def _ere(text: str) -> str:
    return "".join("\\" + c if c in ".[]()*+?{}|^$\\" else c for c in text)


def _activate_window(ctx: ToolContext, node: a11y.Node) -> None:
    """Give the element's top-level window the focus first, as a person's click would; a click
    that lands while the window manager is still placing a new window focuses nothing."""
    top_path = "/".join(node.path.split("/")[:2])
    top = next((n for n in ctx.ids.previous.values() if n.path == top_path), None)
    if top is None or not top.name or "active" in top.states:
        return
    _guest(ctx, ["xdotool", "search", "--sync", "--onlyvisible", "--limit", "1", "--name", f"^{_ere(top.name)}$",
                 "windowactivate", "--sync"], timeout=5)


# Move, and click only if the pointer is over a window: a point over the bare root window means
# the target was not placed yet (exit 3: the caller looks again and retries).
_CLICK = r"""xdotool mousemove --sync "$1" "$2" || exit 2
if [ "$3" = check ]; then
  eval "$(xdotool getmouselocation --shell)"
  root=$(xwininfo -root | sed -n 's/.*Window id: \(0x[0-9a-fA-F]*\).*//p')
  [ -n "$root" ] && [ "$WINDOW" = "$((root))" ] && exit 3
fi
xdotool click 1"""
CLICK_RETRY_S = 6.0  # a starved app can report its pre-placement position for seconds


def _click(ctx: ToolContext, element: str | None, x: int | None, y: int | None) -> str:
    if element is None:
        if x is None or y is None:
            raise ToolArgError("give element, or both x and y")
        if not (0 <= x < SCREEN_MAX and 0 <= y < SCREEN_MAX):
            raise ToolArgError("x and y must be screen pixels (0..16383)")
        res = _guest(ctx, ["bash", "-c", _CLICK, "shinken-click", str(x), str(y), "any"], settle=True)
        return _check_gui(res, "click") or f"clicked at ({x}, {y})"
    if x is not None or y is not None:
        raise ToolArgError("give either element or x and y, not both")
    if not _ELEMENT_RE.match(element):
        raise ToolArgError(f"element must look like \"e7\", got {element!r}")
    node = ctx.ids.previous.get(element)
    if node is None:
        raise ToolArgError(f"no element {element} in the last observation; call computer_observe")
    deadline = time.monotonic() + CLICK_RETRY_S
    _activate_window(ctx, node)
    while True:
        now = _locate(ctx, node)
        if now is None:
            raise ToolArgError(f"element {element} is no longer on screen; call computer_observe")
        point = now.center()
        if point is None:
            raise ToolArgError(f"element {element} ({node.role}) has no position on screen; "
                               "use the keyboard or another element")
        res = _guest(ctx, ["bash", "-c", _CLICK, "shinken-click", str(point[0]), str(point[1]), "check"],
                     settle=True)
        if res.exit_code != 3 or time.monotonic() >= deadline:
            break
        time.sleep(0.3)
    x, y = point
    if res.exit_code == 3:
        return (f"error: element {element} is reported at ({x}, {y}) but no window is there (it may still be "
                "opening); nothing was clicked. Observe again and retry.")
    return _check_gui(res, "click") or f"clicked {element} ({a11y.render_line(element, now)}) at ({x}, {y})"


def _type(ctx: ToolContext, text: str) -> str:
    if not text:
        raise ToolArgError("text is empty")
    if len(text) > MAX_TEXT:
        raise ToolArgError(f"text is longer than {MAX_TEXT} characters; type it in parts")
    res = _guest(ctx, ["xdotool", "type", "--delay", "8", "--", text],
                 timeout=GUI_TIMEOUT_S + len(text) * 0.02, settle=True)
    err = _check_gui(res, "typing")
    if err:
        return err
    return f"typed {len(text)} characters"


def _key(ctx: ToolContext, keys: str) -> str:
    chords = keys.split()
    if not chords:
        raise ToolArgError("keys is empty; e.g. \"Return\" or \"ctrl+s\"")
    if len(chords) > MAX_KEY_CHORDS:
        raise ToolArgError(f"at most {MAX_KEY_CHORDS} key combinations per call")
    bad = [c for c in chords if not _KEY_RE.match(c)]
    if bad:
        raise ToolArgError(f"not a key name: {bad[0]!r}; use xdotool names like Return, Tab, ctrl+s")
    res = _guest(ctx, ["xdotool", "key", "--clearmodifiers", "--", *chords], settle=True)
    err = _check_gui(res, "key press")
    if err:
        return err
    return f"pressed {' '.join(chords)}"


def _exec(ctx: ToolContext, command: str) -> str:
    if not command.strip():
        raise ToolArgError("command is empty")
    res = ctx.fork.exec(["bash", "-c", _EXEC_PREFIX, "shinken-exec", "bash", "-lc", command],
                        timeout=EXEC_TIMEOUT_S, max_output=EXEC_OUTPUT_CHARS)
    head = (f"timed out after {EXEC_TIMEOUT_S:.0f}s" if res.timed_out else f"exit code {res.exit_code}")
    if res.truncated:
        head += " (output cut; the tail is shown)"
    return head + ("\n" + res.output if res.output else "")


def run_tool(ctx: ToolContext, name: str, arguments: dict[str, Any]) -> str:
    """Text the model sees. Bad arguments or an unknown tool give an error text; InfraError
    (and SessionError from a closed fork) propagate."""
    if name not in TOOLS_BY_NAME:
        return f"error: unknown tool {name!r}; tools are {', '.join(TOOL_NAMES)}"
    try:
        args = _args(name, arguments)
        ctx.steps += 1
        if name == OBSERVE:
            return _observe_tool(ctx, args["mode"])
        if name == CLICK:
            return _click(ctx, args["element"], args["x"], args["y"])
        if name == TYPE_TEXT:
            return _type(ctx, args["text"])
        if name == KEY:
            return _key(ctx, args["keys"])
        if name == EXEC:
            return _exec(ctx, args["command"])
        ctx.done = True
        return "done; the result will be checked"
    except ToolArgError as exc:
        return f"error: {exc}"
