"""The computer-use tools: JSON schemas (identical in engine, dataset rows and server) and their
execution against one fork. Bad arguments become error text the model sees, never exceptions;
InfraError from the sandbox propagates so the engine can mask the sample."""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

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


@dataclass
class ToolContext:
    """Per-rollout state: the fork, the a11y id map and the last observation (for diffs)."""

    fork: Any  # shinken.sandbox.docker_provider.DockerFork
    ids: Any = None  # shinken.computer.a11y.IdMap
    last_lines: dict[str, str] | None = None
    done: bool = False
    steps: int = 0
    extra: dict[str, Any] = field(default_factory=dict)


def new_context(fork: Any) -> ToolContext:
    from shinken.computer.a11y import IdMap

    return ToolContext(fork=fork, ids=IdMap())


def run_tool(ctx: ToolContext, name: str, arguments: dict[str, Any]) -> str:
    """Text the model sees. Filled in below once the a11y layer exists."""
    raise NotImplementedError
