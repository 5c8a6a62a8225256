"""Bundles shaped the way real pipelines and hand-written projects write them (written for
these tests in the shapes of a third-party CUA-Gym generation-pipeline export and of
hand-written CUA-Gym-format tasks; nothing copied), each with the verdict, class and reason
codes a careful manual reading gives against tests/data/triage_manifest.json (display,
zenity/xterm/evince, LibreOffice Calc/Writer; no browser, no VS Code).

name -> (files, verdict, class, codes, {code: subjects}) ; test_triage.py adds them to its
corpus and checks every field."""

from __future__ import annotations

from typing import Any

import orjson


def config(tid: str, instruction: str, app_type: Any, steps: list, evaluator: dict | None = None, **extra) -> bytes:
    doc = {"id": tid, "instruction": instruction, "app_type": app_type, "config": steps,
           "evaluator": evaluator or {"type": "python", "url": "reward.py"}, **extra}
    return orjson.dumps(doc, option=orjson.OPT_INDENT_2)


# The pipeline export's setup step: no `parameters`, the script named relative to the bundle.
PIPELINE_STEP = [{"type": "execute", "command": ["python3", "initial_setup.py"]}]
GOLDEN = b"import requests\n# reference solution (never run by shinken)\n"

GMAIL_SETUP = b'''"""Initial setup: a draft to the vendor, not sent.
Mock: gmail
"""
import os
import shlex
import subprocess
import time
import uuid

import requests

BASE_URL = 'https://cua-gym-gmail.xlang.ai'
sid = str(uuid.uuid4())
with open('/tmp/task_web_sid', 'w') as f:
    f.write(sid)

state = {
    'user': {'userId': 'u1', 'email': 'me@example.net', 'avatar': 'https://avatars.examplecdn.net/u1.png'},
    'emails': [
        {'id': 'email_1', 'from': {'name': 'Ana', 'email': 'ana@corp.example'},
         'subject': 'Budget', 'body': 'Numbers are in https://sheets.partner-corp.net/d/42 as discussed.',
         'folder': 'inbox', 'labels': []},
    ],
    'drafts': [],
}
resp = requests.post(f'{BASE_URL}/post?sid={sid}', json={'action': 'set', 'state': state}, timeout=30)
assert resp.status_code == 200


def launch_gui(command, delay_sec=1.0):
    env = os.environ.copy()
    env['DISPLAY'] = ':0'
    subprocess.Popen(shlex.split(command), stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL, env=env)
    time.sleep(delay_sec)


launch_gui(f'google-chrome "{BASE_URL}/?sid={sid}"', delay_sec=2.0)
print(f'GUI_READY: {BASE_URL}/?sid={sid}')
'''

GMAIL_REWARD = b'''"""Reward: a draft to procurement@supplies.example exists and nothing was sent.
Docs of the state API: https://github.com/example/hub#state-api
"""
import json
import urllib.request

BASE_URL = "https://cua-gym-gmail.xlang.ai"


def _state():
    sid = open("/tmp/task_web_sid").read().strip()
    url = BASE_URL + "/go?sid=" + sid
    with urllib.request.urlopen(url, timeout=30) as resp:
        return json.loads(resp.read())


def main():
    cur = _state().get("current_state") or {}
    drafts = [d for d in cur.get("drafts", []) if "procurement@supplies.example" in json.dumps(d.get("to"))]
    print("REWARD: {:.1f}".format(1.0 if drafts else 0.0))


if __name__ == "__main__":
    main()
'''

DOCS_SETUP = b'''import json, os, subprocess, uuid
import requests

BASE = "https://cua-gym-google-docs.xlang.ai"
sid = uuid.uuid4().hex
open("/tmp/task_web_sid", "w").write(sid)
requests.post(BASE + "/post?sid=" + sid, json={"action": "set", "state": {"documents": [
    {"id": "doc-1", "title": "Handbook", "shareLink": "https://docs.example.net/d/doc-1"}]}})
env = dict(os.environ, DISPLAY=":0")
subprocess.Popen(["google-chrome", f"{BASE}/?sid={sid}"], env=env, start_new_session=True)
'''

DOCS_REWARD = b'''import json
import sys
import urllib.request

BASE_URL = "https://cua-gym-google-docs.xlang.ai"
sid = open("/tmp/task_web_sid").read().strip()
state = json.loads(urllib.request.urlopen(BASE_URL + "/go?sid=" + sid, timeout=30).read())
reply = (state.get("current_state") or {}).get("reply", "")
score = 0.6 if reply else 0.0
if reply:
    # JUSTIFICATION: the reply's wording is a judgement call.
    try:
        sys.path.insert(0, "/tmp")
        from reward_judge import call_llm_judge
        score += 0.4 * call_llm_judge("Reply that it is done.", "The reply says the change is done.",
                                      json.dumps({"reply": reply}))
    except Exception as exc:
        print("judge unavailable:", exc)
print(f"REWARD: {score:.2f}")
'''

CLI_SETUP = b'''#!/bin/bash
set -e
mkdir -p /home/user/notes
echo "See https://wiki.internal-example.net/Runbook for the runbook" > /home/user/notes/readme.txt
cat > /home/user/notes/links.md <<'EOF'
- https://status.example-vendor.net
EOF
'''

CLI_REWARD = b'''import os
ok = os.path.exists("/home/user/notes/summary.txt")
print("REWARD:", 1.0 if ok else 0.0)
'''

LAUNCH_HELPER_SETUP = b'''import os
import shlex
import subprocess

OUTPUT = "/home/user/report.py"
with open(OUTPUT, "w") as fh:
    fh.write("def total(xs):\\n    return sum(xs)\\n")


def launch_gui(cmd):
    subprocess.Popen(shlex.split(cmd), env={**os.environ, "DISPLAY": ":0"}, start_new_session=True)


launch_gui(f'code "{OUTPUT}"')
'''

BROWSER_SETUP = b'''import shlex
import subprocess

URL = "https://en.wikipedia.org/wiki/Kyoto"
subprocess.Popen(shlex.split(f'google-chrome --remote-debugging-port=9222 "{URL}"'))
'''

CDP_REWARD = b'''import json
import urllib.request

tabs = json.loads(urllib.request.urlopen("http://localhost:9222/json").read())
print("REWARD:", 1.0 if any("Kyoto" in t.get("title", "") for t in tabs) else 0.0)
'''

DATA_URL_SETUP = b'''import json
import urllib.parse

contacts = [{"name": "Ana", "avatar": "https://avatars.examplecdn.net/a.png",
             "profile": "https://social.example-network.net/ana?ref=" + urllib.parse.quote("x y")}]
json.dump(contacts, open("/home/user/contacts.json", "w"))
'''

DATA_URL_REWARD = b'''import json
import requests

# The task's own service on loopback is fine to fetch.
state = requests.get("http://127.0.0.1:8765/state", timeout=5).json() if False else {}
events = json.load(open("/home/user/events.json"))
ok = any("https://meet.example-video.net/abc-defg" in e.get("description", "") for e in events)
print("REWARD:", 1.0 if ok else 0.0)
'''

JUDGE_REWARD = b'''import os
import sys

sys.path.insert(0, "/tmp")
from reward_judge import call_llm_judge

text = open("/home/user/bug_report.txt").read() if os.path.exists("/home/user/bug_report.txt") else ""
score = call_llm_judge("Write a bug report.", "It names the bad commit.", text) if text else 0.0
print(f"REWARD: {score}")
'''

OK_REWARD = b'import os\nprint("REWARD:", 1.0 if os.path.exists("/home/user/out.txt") else 0.0)\n'

VARIANT_CASES: dict[str, tuple[dict[str, Any], str, str, set[str], dict[str, set[str]]]] = {
    # A pipeline export (`output/final/<id>/`): mock web against the hub's hosted gmail mock.
    # Blocked by the mock (named by its host) and by the browser the setup opens; the avatar
    # URL, the link in the email body and the docstring link are data, not network needs.
    "gmail_draft_007": ({"config.json": config("gmail_draft_007", "Draft an email to procurement@supplies.example "
                                               "asking for a quote, but don't send it.", "mock_websites", PIPELINE_STEP),
                         "initial_setup.py": GMAIL_SETUP, "reward.py": GMAIL_REWARD, "golden_patch.py": GOLDEN,
                         "REVIEW.md": b"PASS\n"},
                        "blocked", "mock_web", {"normalized", "needs_mock_web", "missing_app"},
                        {"needs_mock_web": {"cua-gym-gmail.xlang.ai"}, "missing_app": {"chrome"}}),
    # Pipeline export whose reward also asks an LLM judge (its own reason, not a missing module).
    "docs_reply_012": ({"config.json": config("docs_reply_012", "Reply 'Done' to the comment on the Handbook.",
                                              "mock_websites", PIPELINE_STEP),
                        "initial_setup.py": DOCS_SETUP, "reward.py": DOCS_REWARD, "golden_patch.py": GOLDEN},
                       "blocked", "mock_web", {"normalized", "needs_mock_web", "needs_judge", "missing_app"},
                       {"needs_mock_web": {"cua-gym-google-docs.xlang.ai"}, "needs_judge": {"reward_judge"},
                        "missing_app": {"chrome"}}),
    # Hand-written: app_type `cli`, `script` evaluator, a shell setup named relative to the
    # bundle; URLs written into files are data.
    "hw-cli-notes": ({"config.json": config("hw-cli-notes", "Summarise the notes into /home/user/notes/summary.txt.",
                                            "cli", [{"type": "execute", "command": "bash initial_setup.sh"}],
                                            {"type": "python", "script": "reward.py"}),
                      "initial_setup.sh": CLI_SETUP, "reward.py": CLI_REWARD},
                     "runnable", "file_cli", {"normalized"}, {}),
    # Hand-written: app_type `gui`, a launch step in the pipeline's flat shape.
    "hw-gui-entry": ({"config.json": config("hw-gui-entry", "Type your name into the dialog.", "gui",
                                            [{"type": "launch", "command": ["zenity", "--entry", "--text", "Name?"]}],
                                            {"type": "python", "url": "reward.py"}),
                      "reward.py": OK_REWARD},
                     "runnable", "desktop_app", {"normalized"}, {}),
    # Hand-written: app_type a JSON list, an `open` step in the flat shape.
    "hw-calc-and-browser": ({"config.json": config("hw-calc-and-browser", "Copy the table into the sheet.",
                                                   ["libreoffice_calc", "chrome"], [
                                                       {"type": "open", "path": "/home/user/t.xlsx"}])
                             , "reward.py": b"import openpyxl\nprint('REWARD: 0')\n"},
                            "blocked", "desktop_app", {"missing_app", "normalized"}, {"missing_app": {"chrome"}}),
    # Release-shaped desktop task whose app is only known from what its setup launches
    # through a helper taking a command string (app_type says `os`).
    "launch-helper-vscode": ({"task.json": config("launch-helper-vscode", "Fix the bug in report.py.", "os", [
                                  {"type": "download", "parameters": {"files": [
                                      {"url": "./initial_setup.py", "path": "/home/user/initial_setup.py"}]}},
                                  {"type": "execute", "parameters": {"command": "python3 /home/user/initial_setup.py"}}],
                                  {"type": "python", "url": "./reward.py"}),
                              "initial_setup.py": LAUNCH_HELPER_SETUP, "reward.py": OK_REWARD},
                             "blocked", "desktop_app", {"missing_app"}, {"missing_app": {"vscode"}}),
    # A browser opened on a real site: the internet is needed (and a browser); the CDP fetch
    # on localhost:9222 is the task's own.
    "browser-opens-site": ({"task.json": config("browser-opens-site", "Which prefecture is this city in?", "os", [
                                {"type": "download", "parameters": {"files": [
                                    {"url": "./initial_setup.py", "path": "/home/user/initial_setup.py"}]}},
                                {"type": "execute", "parameters": {"command": "python3 /home/user/initial_setup.py"}}],
                                {"type": "python", "url": "./reward.py"}),
                            "initial_setup.py": BROWSER_SETUP, "reward.py": CDP_REWARD},
                           "blocked", "desktop_app", {"missing_app", "needs_network"},
                           {"missing_app": {"chrome"}, "needs_network": {"en.wikipedia.org"}}),
    # URLs that are data: a meeting link in the instruction, avatar/profile URLs in seeded
    # state, a link the reward looks for in a file. Runnable.
    "data-urls-only": ({"task.json": config("data-urls-only", "Add the meeting link "
                                            "https://meet.example-video.net/abc-defg to Friday's event description.",
                                            "os", [
                                                {"type": "download", "parameters": {"files": [
                                                    {"url": "./initial_setup.py", "path": "/home/user/initial_setup.py"}]}},
                                                {"type": "execute", "parameters": {"command": "python3 /home/user/initial_setup.py"}}],
                                            {"type": "python", "url": "./reward.py"}),
                        "initial_setup.py": DATA_URL_SETUP, "reward.py": DATA_URL_REWARD},
                       "runnable", "file_cli", set(), {}),
    # A file task whose reward asks the LLM judge.
    "judge-bug-report": ({"task.json": config("judge-bug-report", "Write /home/user/bug_report.txt.", "os", [],
                                              {"type": "python", "url": "./reward.py"}),
                          "reward.py": JUDGE_REWARD},
                         "blocked", "file_cli", {"needs_judge"}, {"needs_judge": {"reward_judge"}}),
    # app_type says mock websites but nothing names the app.
    "mock-unnamed": ({"config.json": config("mock-unnamed", "Archive the newsletter.", "mock_websites", [],
                                            {"type": "python", "url": "./reward.py"}), "reward.py": OK_REWARD},
                     "blocked", "mock_web", {"normalized", "needs_mock_web"}, {"needs_mock_web": {"mock_websites"}}),
}
