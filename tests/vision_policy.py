"""A stub vision-language policy for the screenshot workspaces: an OpenAI-compatible Responses
server (tests/scripted_policy.PolicyServer with another `decide`) that checks, on every turn,
that the screen reached it as a real image in the message the workspace's vision agent promises
(a `role: "user"` message with an `input_image` data URL after the instruction, and one after
every GUI action's function_call_output, which itself carries no base64), and that acts on
zenity-entry like a GUI policy: it tries the shell first (and must be told there is no such
tool), then clicks the pixel of the dialog's entry, computed from the accessibility tree of the
rollout's fork (read with `docker exec`, outside the workspace's tools), types, confirms, done.
"""

from __future__ import annotations

import base64
import hashlib
import json
import subprocess
from dataclasses import dataclass, field
from typing import Any, Callable

import png
import scripted_policy as sp

GUI_TOOLS = {"computer_click", "computer_double_click", "computer_right_click", "computer_drag", "computer_scroll",
             "computer_move", "computer_type_text", "computer_key", "computer_wait", "computer_pyautogui"}
MIME_OK = ("image/png", "image/jpeg")
MAX_CALLS = 24
# Tool results that come without a screenshot: a refused call, pyautogui's DONE and FAIL.
NO_SCREEN = ("error", "done", "recorded")


def _image_parts(item: dict[str, Any]) -> list[dict[str, Any]]:
    content = item.get("content")
    if item.get("role") != "user" or not isinstance(content, list):
        return []
    return [p for p in content if isinstance(p, dict) and p.get("type") == "input_image"]


def entry_point(fork: str) -> tuple[int, int] | None:
    """The centre of zenity's entry in the fork's accessibility tree, once its dialog is active."""
    from shinken.computer import a11y

    from shinken.sandbox import guest

    env = [a for k, v in guest.session_env(1000).items() for a in ("-e", f"{k}={v}")]
    r = subprocess.run(["docker", "exec", "-u", "user", *env, fork, "bash", "-c",
                        "PYTHONWARNINGS=ignore shinken-a11y-dump --showing-only"],
                       capture_output=True, text=True, timeout=60)
    text = r.stdout.strip()
    if r.returncode != 0 or not text:
        return None
    nodes = a11y.parse_dump(json.loads(text[text.rfind("\n{") + 1:] if "\n{" in text else text))
    active = any(n.role == "dialog" and n.name == "Shinken" and "active" in n.states for n in nodes)
    entry = next((n for n in nodes if n.role == "text" and "editable" in n.states), None)
    return entry.center() if active and entry is not None else None


@dataclass
class VisionPolicy:
    """`decide` for PolicyServer. `fork_of()` names the container of the rollout in progress."""

    fork_of: Callable[[], str]
    actions: str  # "pixel" or "pyautogui"
    size: tuple[int, int] = (1920, 1080)
    checked: dict[str, tuple[int, int]] = field(default_factory=dict)  # image sha256 -> size
    turns: int = 0
    images_per_turn: list[int] = field(default_factory=list)
    clicked: list[tuple[int, int]] = field(default_factory=list)
    no_such_tool: list[str] = field(default_factory=list)

    def _check_image(self, part: dict[str, Any]) -> None:
        url = part.get("image_url")
        assert isinstance(url, str) and url.startswith("data:") and ";base64," in url, f"not a data URL: {str(url)[:80]}"
        mime, b64 = url[5:].split(";base64,", 1)
        assert mime in MIME_OK, f"unexpected image type {mime}"
        digest = hashlib.sha256(b64.encode()).hexdigest()
        if digest not in self.checked:
            self.checked[digest] = png.image_size(base64.b64decode(b64, validate=True), mime)
        assert self.checked[digest] == self.size, f"image is {self.checked[digest]}, the screen {self.size}"

    def check(self, items: list[dict[str, Any]]) -> None:
        """The screen arrived where the agent puts it, as a valid image, every turn."""
        names = {i.get("call_id"): i.get("name") for i in items if i.get("type") == "function_call"}
        first_user = next(k for k, i in enumerate(items) if i.get("role") == "user")
        seed = _image_parts(items[first_user + 1]) if first_user + 1 < len(items) else []
        assert len(seed) == 1, "no screenshot message right after the instruction (the seed observation)"
        images = 0
        for k, item in enumerate(items):
            for part in _image_parts(item):
                self._check_image(part)
                images += 1
            if item.get("type") != "function_call_output":
                continue
            out = str(item.get("output", ""))
            assert "base64" not in out and len(out) < 20_000, "the tool result text carries the image"
            if names.get(item.get("call_id")) in GUI_TOOLS and not out.startswith(NO_SCREEN):
                nxt = items[k + 1] if k + 1 < len(items) else {}
                assert len(_image_parts(nxt)) == 1, f"no screenshot message after {names.get(item.get('call_id'))}"
        self.images_per_turn.append(images)

    def __call__(self, items: list[dict[str, Any]]) -> tuple[str, sp.Call | None]:
        task = sp.task_of(items)
        assert task == "zenity-entry", task
        self.check(items)
        self.turns += 1
        history = sp.history(items)
        calls = [n for n, _ in history]
        if not history:
            return task, ("computer_exec", {"command": "id"})
        if calls == ["computer_exec"]:
            self.no_such_tool.append(history[0][1])
        if len(history) >= MAX_CALLS:
            return task, self._done(calls)
        if self.actions == "pixel":
            return task, self._pixel(calls)
        return task, self._pyautogui(history)

    def _done(self, calls: list[str]) -> sp.Call | None:
        if self.actions == "pixel":
            return None if calls[-1] == "computer_done" else ("computer_done", {})
        return None if calls and calls[-1] == "computer_pyautogui" and self._last_code == "DONE" else (
            "computer_pyautogui", {"code": "DONE"})

    _last_code = ""

    def _pixel(self, calls: list[str]) -> sp.Call | None:
        if "computer_click" not in calls:
            point = entry_point(self.fork_of())
            if point is None:
                return ("computer_wait", {"seconds": 0.5})
            self.clicked.append(point)
            return ("computer_click", {"x": point[0], "y": point[1]})
        if "computer_type_text" not in calls:
            return ("computer_type_text", {"text": "Ada Lovelace"})
        if "computer_key" not in calls:
            return ("computer_key", {"keys": "Return"})
        if calls[-1] == "computer_key":
            return ("computer_wait", {"seconds": 1})
        return None if calls[-1] == "computer_done" else ("computer_done", {})

    def _pyautogui(self, history: sp.History) -> sp.Call | None:
        # The stub remembers its own programs (self._last_code); history is only for the turn count.
        def code(c: str) -> sp.Call:
            self._last_code = c
            return ("computer_pyautogui", {"code": c})

        if not self.clicked:
            point = entry_point(self.fork_of())
            if point is None:
                return code("WAIT")
            self.clicked.append(point)
            x, y = point
            return code(f"pyautogui.click({x}, {y})\npyautogui.write('Ada Lovelace', interval=0.02)\n"
                        "pyautogui.press('enter')")
        if self._last_code.startswith("pyautogui.click"):
            return code("WAIT")
        if self._last_code == "WAIT":
            return code("DONE")
        return None


@dataclass
class ByProfile:
    """`decide` for one PolicyServer serving rollouts of several workspaces at once: each request
    goes to the stub of the profile whose tools the system prompt names (computer_pyautogui or
    the pixel tools)."""

    stubs: dict[str, VisionPolicy]

    def __call__(self, items: list[dict[str, Any]]) -> tuple[str, sp.Call | None]:
        system = next((i for i in items if i.get("role") in ("system", "developer")), {})
        text = json.dumps(system.get("content", ""))
        return self.stubs["pyautogui" if "computer_pyautogui" in text else "pixel"](items)
