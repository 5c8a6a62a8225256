"""A scripted policy: an OpenAI-compatible Responses API server (stdlib HTTP) that replays a
fixed tool-call sequence per task, so a real NeMo Gym loop can be driven without a model.

NeMo Gym's openai_model server POSTs `<policy_base_url>/responses` with the whole
conversation so far (`input`: the row's messages, then every `function_call` and
`function_call_output`) and validates the reply as an OpenAI `Response`. This server finds
the task by its instruction, counts the tool results already in `input`, and answers with
the next scripted call (whose arguments may read earlier tool output, e.g. an element id),
or a final assistant message when the script is done.

Run standalone: `python tests/scripted_policy.py --port 8123`.
"""

from __future__ import annotations

import argparse
import json
import re
import shlex
import threading
import time
import uuid
from dataclasses import dataclass, field
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from typing import Any, Callable

Call = tuple[str, dict[str, Any]]
History = list[tuple[str, str]]  # (tool name, tool output) of the calls made so far

_ENTRY = re.compile(r"^\s*\[(e\d+)\] text\b.*\beditable\b", re.M)
MAX_CALLS = 28  # below the workspace's default max_steps (30)


def entry_id(outputs: list[str]) -> str:
    """The id of the editable text field in the latest observation that shows one."""
    for text in reversed(outputs):
        m = _ENTRY.search(text)
        if m:
            return m.group(1)
    raise LookupError("no editable text element in any observation so far")


def hello_file(history: History) -> Call | None:
    steps: list[Call] = [("computer_exec", {"command": "printf 'hello shinken' > /home/user/hello.txt"}),
                         ("computer_done", {})]
    return steps[len(history)] if len(history) < len(steps) else None


def _ready(observation: str) -> bool:
    """A full tree in which the dialog is active (placed and focused by the window manager)
    and shows its entry: clicking earlier may hit a window that is still moving."""
    return observation.lstrip().startswith("[e") and 'dialog "Shinken" (active' in observation \
        and bool(_ENTRY.search(observation))


def zenity_entry(history: History) -> Call | None:
    # Observe until the dialog is ready (the app may still be starting, as for a real model),
    # act on its entry by id, check the diff (retry from a fresh observation if the text did
    # not land), confirm, and wait for the dialog to close (the app saves on exit).
    if len(history) >= MAX_CALLS:
        return ("computer_done", {}) if history[-1][0] != "computer_done" else None
    ready = [i for i, (name, out) in enumerate(history) if name == "computer_observe" and _ready(out)]
    if not ready:
        if history and history[-1][0] == "computer_observe":
            return ("computer_exec", {"command": "sleep 0.5"})
        return ("computer_observe", {"mode": "tree"})
    found = ready[-1]
    rest: list[Call] = [
        ("computer_click", {"element": entry_id([history[found][1]]), "x": None, "y": None}),
        ("computer_type_text", {"text": "Ada Lovelace"}),
        ("computer_observe", {"mode": "diff"}),
        ("computer_key", {"keys": "Return"}),
    ]
    k = len(history) - found - 1
    if k == 3 and "Ada Lovelace" not in history[found + 3][1]:
        return ("computer_observe", {"mode": "tree"})  # the text did not land: look again
    if k < len(rest):
        return rest[k]
    after = history[found + 1 + len(rest):]
    if any(_closed(out) for name, out in after if name == "computer_observe"):
        return ("computer_done", {}) if after[-1][0] != "computer_done" else None
    if after and after[-1][0] == "computer_observe":
        return ("computer_exec", {"command": "sleep 0.2"})
    return ("computer_observe", {"mode": "diff"})


def _closed(observation: str) -> bool:
    return "no accessible elements" in observation or any(
        line.lstrip().startswith("-") and 'dialog "Shinken"' in line for line in observation.splitlines())


def zero_signal(history: History) -> Call | None:
    # The set-up state already scores 1.0: nothing to do.
    return None if history else ("computer_done", {})


SPREADSHEET = "9a1f6c2e-5b3d-4e8a-9c71-2f0d4b6a8e13"


def fill_totals(formula: str) -> str:
    """A shell command that sets column D of /home/user/sales.xlsx to `formula` (Python over
    the row's quantity q and unit price p) in every data row."""
    code = ('from openpyxl import load_workbook; wb = load_workbook("/home/user/sales.xlsx"); ws = wb["Sales"]\n'
            "for r in range(2, ws.max_row + 1):\n"
            f"    q, p = ws.cell(r, 2).value, ws.cell(r, 3).value; ws.cell(r, 4).value = {formula}\n"
            'wb.save("/home/user/sales.xlsx")')
    return f"python3 -c {shlex.quote(code)}"


def spreadsheet(history: History) -> Call | None:
    steps: list[Call] = [("computer_exec", {"command": fill_totals("q * p")}), ("computer_done", {})]
    return steps[len(history)] if len(history) < len(steps) else None


SCRIPTS = {"hello-file": hello_file, "zenity-entry": zenity_entry, "zero-signal": zero_signal,
           SPREADSHEET: spreadsheet}
# The calls each script makes when nothing needs waiting for (what tests expect at least).
FINAL_CALLS = {
    "hello-file": ["computer_exec", "computer_done"],
    "zero-signal": ["computer_done"],
    SPREADSHEET: ["computer_exec", "computer_done"],
    "zenity-entry": ["computer_click", "computer_type_text", "computer_observe", "computer_key", "computer_observe",
                     "computer_done"],
}

# Instruction fragments that identify each demo task in a conversation.
MATCH = {
    "hello-file": "/home/user/hello.txt",
    "zenity-entry": "Ada Lovelace",
    "zero-signal": "/home/user/readme.txt",
    SPREADSHEET: "/home/user/sales.xlsx",
}


def follows_script(task: str, names: list[str]) -> bool:
    """True when `names` holds the task's essential calls in order and ends with computer_done
    (extra observe/wait calls in between are how the script waits for the app)."""
    it = iter(names)
    return all(n in it for n in FINAL_CALLS[task]) and names[-1:] == ["computer_done"]


def task_of(input_items: list[dict[str, Any]]) -> str:
    for item in input_items:
        if item.get("role") == "user":
            content = item.get("content")
            text = content if isinstance(content, str) else json.dumps(content)
            for task, frag in MATCH.items():
                if frag in text:
                    return task
    raise LookupError("no scripted task matches the user message")


def history(input_items: list[dict[str, Any]]) -> History:
    """(tool name, output) per completed call, pairing function_call and its output by call_id."""
    names = {i.get("call_id"): i.get("name") for i in input_items if i.get("type") == "function_call"}
    return [(str(names.get(i.get("call_id"), "")), str(i.get("output", "")))
            for i in input_items if i.get("type") == "function_call_output"]


def next_call(input_items: list[dict[str, Any]]) -> tuple[str, Call | None]:
    """(task, next tool call) or (task, None) when the script is finished."""
    task = task_of(input_items)
    return task, SCRIPTS[task](history(input_items))


# A decision: a tool call, None (the script is done: a final message), or the text of an
# assistant message (agents that parse the reply's text, like Terminus 2, instead of tool calls).
Decide = Callable[[list[dict[str, Any]]], tuple[str, "Call | str | None"]]

# Terminus 2's JSON replies (harbor's terminus_json_plain_parser) per task: each turn's keystrokes
# for its tmux shell; after the last, task_complete twice (Terminus asks once to confirm).
TERMINUS_KEYS = {"hello-file": ["printf 'hello shinken' > /home/user/hello.txt\n"]}


def terminus_reply(input_items: list[dict[str, Any]]) -> tuple[str, "Call | str | None"]:
    """The next Terminus 2 turn: the script's keystrokes, then the two task_complete replies."""
    task = task_of(input_items)
    turn = sum(1 for i in input_items if i.get("role") == "assistant")
    keys = TERMINUS_KEYS[task]
    commands = [{"keystrokes": keys[turn], "duration": 0.5}] if turn < len(keys) else []
    return task, json.dumps({"analysis": f"turn {turn} of {task}", "plan": "scripted",
                             "commands": commands, "task_complete": turn >= len(keys)})


def response_for(body: dict[str, Any], decide: Decide = next_call) -> dict[str, Any]:
    input_items = body.get("input") or []
    if isinstance(input_items, str):
        input_items = [{"role": "user", "content": input_items}]
    task, call = decide(input_items)
    if call is None or isinstance(call, str):
        text = f"{task}: done" if call is None else call
        item = {"type": "message", "id": f"msg_{uuid.uuid4().hex}", "role": "assistant", "status": "completed",
                "content": [{"type": "output_text", "text": text, "annotations": []}]}
    else:
        name, args = call
        item = {"type": "function_call", "id": f"fc_{uuid.uuid4().hex}", "call_id": f"call_{uuid.uuid4().hex}",
                "name": name, "arguments": json.dumps(args), "status": "completed"}
    n_in = len(json.dumps(input_items)) // 4
    n_out = len(json.dumps(item)) // 4
    return {
        "id": f"resp_{uuid.uuid4().hex}", "object": "response", "created_at": int(time.time()),
        "model": body.get("model") or "scripted", "status": "completed", "output": [item],
        "parallel_tool_calls": bool(body.get("parallel_tool_calls", False)),
        "tool_choice": body.get("tool_choice", "auto"), "tools": body.get("tools", []),
        "error": None, "incomplete_details": None, "instructions": None, "metadata": {},
        "temperature": body.get("temperature"), "top_p": body.get("top_p"),
        "usage": {"input_tokens": n_in, "output_tokens": n_out, "total_tokens": n_in + n_out,
                  "input_tokens_details": {"cached_tokens": 0}, "output_tokens_details": {"reasoning_tokens": 0}},
    }


@dataclass
class PolicyServer:
    """The HTTP server on 127.0.0.1; `calls` records (task, tool name or None) per request.
    `decide` picks each reply (the scripts above by default; a test may swap in another)."""

    port: int = 0
    decide: Decide = next_call
    calls: list[tuple[str, str | None]] = field(default_factory=list)
    errors: list[str] = field(default_factory=list)

    def __post_init__(self) -> None:
        policy = self

        class Handler(BaseHTTPRequestHandler):
            def log_message(self, *args: Any) -> None:
                pass

            def _send(self, code: int, doc: dict[str, Any]) -> None:
                data = json.dumps(doc).encode()
                self.send_response(code)
                self.send_header("Content-Type", "application/json")
                self.send_header("Content-Length", str(len(data)))
                self.end_headers()
                self.wfile.write(data)

            def do_GET(self) -> None:
                if self.path.rstrip("/") in ("/v1/models", "/models"):
                    self._send(200, {"object": "list", "data": [{"id": "scripted", "object": "model"}]})
                else:
                    self._send(200, {"status": "ok"})

            def do_POST(self) -> None:
                if self.path.rstrip("/") not in ("/v1/responses", "/responses"):
                    self._send(404, {"error": {"message": f"no route {self.path}"}})
                    return
                try:
                    body = json.loads(self.rfile.read(int(self.headers.get("Content-Length", 0))))
                    doc = response_for(body, policy.decide)
                    item = doc["output"][0]
                    policy.calls.append((task_of(body.get("input") or []), item.get("name")))
                    self._send(200, doc)
                except Exception as exc:  # reported to the caller and recorded for the test
                    policy.errors.append(repr(exc))
                    self._send(400, {"error": {"message": repr(exc), "type": "invalid_request_error"}})

        self.httpd = ThreadingHTTPServer(("127.0.0.1", self.port), Handler)
        self.port = self.httpd.server_address[1]
        self.thread = threading.Thread(target=self.httpd.serve_forever, daemon=True)

    @property
    def base_url(self) -> str:
        return f"http://127.0.0.1:{self.port}/v1"

    def start(self) -> "PolicyServer":
        self.thread.start()
        return self

    def stop(self) -> None:
        self.httpd.shutdown()
        self.httpd.server_close()


if __name__ == "__main__":
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--port", type=int, default=8123)
    ns = ap.parse_args()
    srv = PolicyServer(port=ns.port).start()
    print(f"scripted policy on {srv.base_url}", flush=True)
    srv.thread.join()
