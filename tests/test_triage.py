"""`shinken triage`: a generated corpus with every reason code, checked task by task,
against a capability-manifest fixture (tests/data/triage_manifest.json) and, once, the
real manifest of shinken/sandbox-linux:latest."""

from __future__ import annotations

import copy
import os
import shutil
import subprocess
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

import orjson
import pytest

from shinken.schemas import check_with_jsonschema, validation_error
from shinken.triage.codes import CODES
from shinken.triage.evaluate import Capabilities
from shinken.errors import ShinkenError
from shinken.mockweb.runs import web_plan
from shinken.triage.manifest import load_manifest_file
from shinken.triage.report import build_report
from shinken.triage.run import triage_root
from shinken.needs.shell import command_needs, script_needs
from tests.cli_runner import SHINKEN, run_cli
from tests.variant_cases import VARIANT_CASES

DATA = Path(__file__).parent / "data"
MANIFEST = DATA / "triage_manifest.json"

OK_REWARD = 'import os\nscore = 1.0 if os.path.exists("/home/user/out.txt") else 0.0\nprint(f"REWARD: {score}")\n'
PY_SETUP = [
    {"type": "download", "parameters": {"files": [{"url": "./initial_setup.py", "path": "/home/user/initial_setup.py"}]}},
    {"type": "execute", "parameters": {"command": "python3 /home/user/initial_setup.py"}},
]
SH_SETUP = [
    {"type": "download", "parameters": {"files": [{"url": "./initial_setup.sh", "path": "/home/user/initial_setup.sh"}]}},
    {"type": "execute", "parameters": {"command": ["bash", "/home/user/initial_setup.sh"]}},
]


def task(tid: str, app_type: str = "os", config: list | None = None, **extra: Any) -> bytes:
    doc = {"id": tid, "instruction": f"do the thing for {tid}", "app_type": app_type,
           "config": config if config is not None else [], "evaluator": {"type": "python", "url": "./reward.py"}}
    doc.update(extra)
    return orjson.dumps(doc, option=orjson.OPT_INDENT_2)


# name -> (files, expected verdict, expected class, expected set of reason codes).
# Files map a name to bytes; the value None makes special entries (see build_corpus).
CASES: dict[str, tuple[dict[str, Any], str, str, set[str]]] = {
    "ok-file-cli": ({"task.json": task("ok-file-cli", difficulty="easy", config=PY_SETUP),
                     "initial_setup.py": b"import os\nimport openpyxl\nopen('/home/user/in.txt','w').write('x')\n",
                     "reward.py": OK_REWARD}, "runnable", "file_cli", set()),
    "ok-calc": ({"task.json": task("ok-calc", "libreoffice_calc", [
                    {"type": "download", "parameters": {"files": [{"url": "./initial_setup.xlsx", "path": "/home/user/a.xlsx"}]}},
                    {"type": "open", "parameters": {"path": "/home/user/a.xlsx"}},
                    {"type": "sleep", "parameters": {"seconds": 2}}], difficulty="medium",
                    evaluator={"type": "python", "url": "./reward.py", "postconfig": [
                        {"type": "execute", "parameters": {"command": ["python3", "-c", "import pyautogui; pyautogui.hotkey('ctrl', 's')"]}}]}),
                 "initial_setup.xlsx": b"PK\x03\x04" + bytes(range(256)) * 4,
                 "reward.py": "from openpyxl import load_workbook\n\ndef main():\n    wb = load_workbook('/home/user/a.xlsx')\n"
                              "    print('REWARD: 1.0' if wb else 'REWARD: 0.0')\n\nif __name__ == '__main__':\n    main()\n"},
                "runnable", "desktop_app", set()),
    "ok-import-fallback": ({"task.json": task("ok-import-fallback", "pdf"),
                            "reward.py": "try:\n    from PyPDF2 import PdfReader\nexcept ImportError:\n    from pypdf import PdfReader\n"
                                         "try:\n    import torch\nexcept ImportError:\n    torch = None\n"
                                         "import sys\nfrom typing import TYPE_CHECKING\nif TYPE_CHECKING:\n    import pandas\n"
                                         "if sys.version_info >= (3, 8):\n    from importlib import metadata\n"
                                         "else:\n    import importlib_metadata as metadata\nprint('REWARD: 0.0')\n"},
                           "runnable", "desktop_app", set()),
    "missing-exe": ({"task.json": task("missing-exe", config=[
                        {"type": "execute", "parameters": {"command": "sudo -u user DISPLAY=:0 bash -c 'xdotool key ctrl+s && convert a.png b.jpg' 2>&1 | grep -q ok"}},
                        {"type": "execute", "parameters": {"command": ["/usr/bin/ffmpeg", "-i", "a.mp4"]}}]),
                     "reward.py": "import subprocess\nsubprocess.run(['xcf2png', 'a.xcf'])\nprint('REWARD: 1')\n"},
                    "blocked", "file_cli", {"missing_executable"}),
    "missing-module": ({"task.json": task("missing-module", config=SH_SETUP),
                        "initial_setup.sh": b"#!/bin/bash\nset -e\nmkdir -p /home/user/w\ncat > /home/user/w/x.py <<'EOF'\nimport nothing_here\nrunme --now\nEOF\necho ok > /home/user/w/a.txt\n",
                        "reward.py": "import torch\nfrom skimage import io\nimport docx.shared\nimport os, json\n\n"
                                     "def load():\n    import cv2\n    return cv2\n\nprint('REWARD: 0.5')\n"},
                       "blocked", "file_cli", {"missing_python_module"}),
    "missing-app": ({"task.json": task("missing-app", "gimp,libreoffice_impress", [
                        {"type": "download", "parameters": {"files": [{"url": "./initial_setup.pptx", "path": "/home/user/s.pptx"}]}},
                        {"type": "open", "parameters": {"path": "/home/user/s.pptx"}},
                        {"type": "launch", "parameters": {"command": ["vlc", "/home/user/v.mp4"]}}]),
                     "initial_setup.pptx": b"PK\x03\x04pptx", "reward.py": OK_REWARD},
                    "blocked", "desktop_app", {"missing_app"}),
    "needs-network": ({"task.json": task("needs-network", instruction="Fetch https://data.example.org/x.csv", config=[
                          {"type": "download", "parameters": {"files": [{"url": "https://files.example.net/data.xlsx", "path": "/home/user/d.xlsx"}]}},
                          {"type": "execute", "parameters": {"command": "pip install tabulate"}}]),
                       "reward.py": "\"\"\"Checks the export.\n\nSee https://docs.example.io/guide for the format.\"\"\"\n"
                                    "import requests  # mirrors https://cdn.example.io/x\n"
                                    "NS = 'http://schemas.openxmlformats.org/wordprocessingml/2006/main'\n"
                                    "r = requests.get('https://api.github.com/x')\nprint('REWARD: 0')\n"},
                      "blocked", "file_cli", {"needs_network"}),
    "private-host": ({"task.json": task("private-host"),
                      "reward.py": "import requests\nr = requests.get('http://192.168.7.20:8080/state')\n"
                                   "ok = requests.get('http://127.0.0.1:9000/x')\nprint('REWARD: 0')\n"},
                     "blocked", "file_cli", {"private_host"}),
    "mock-web": ({"task.json": task("mock-web", "gmail_mock", PY_SETUP, instruction="Reply in https://mail.google.com"),
                  "initial_setup.py": b"import requests\nrequests.post('__CUA_GYM_GMAIL_URL__/post', json={})\n",
                  "reward.py": "import requests\nsid = open('/tmp/task_web_sid').read()\n"
                               "s = requests.get(f'http://__CUA_GYM_GMAIL_HOST__/go?sid={sid}').json()\nprint('REWARD: 1.0')\n"},
                 "blocked", "mock_web", {"needs_mock_web"}),
    "newer-python": ({"task.json": task("newer-python"),
                      "reward.py": "import tomllib\ntry:\n    pass\nexcept* ValueError:\n    pass\nprint('REWARD: 1')\n"},
                     "blocked", "file_cli", {"needs_newer_python"}),
    "no-marker": ({"task.json": task("no-marker"),
                   "reward.py": "import os\n# prints the state, never a REWARD line\nprint('present' if os.path.exists('/x') else 'absent')\n"},
                  "defective", "file_cli", {"reward_no_marker"}),
    "unreachable-marker": ({"task.json": task("unreachable-marker"),
                            "reward.py": "import sys\n\ndef report(x):\n    print(f'REWARD: {x}')\n\nscore = 1.0\nprint('done')\n"},
                           "defective", "file_cli", {"reward_marker_unreachable"}),
    "marker-after-exit": ({"task.json": task("marker-after-exit"),
                           "reward.py": "import sys\nprint('checking')\nsys.exit(0)\nprint('REWARD: 1.0')\n"},
                          "defective", "file_cli", {"reward_marker_unreachable"}),
    "bare-number": ({"task.json": task("bare-number"), "reward.py": "score = 0.5\nprint(round(score, 2))\n"},
                    "runnable", "file_cli", {"reward_bare_number"}),
    "total-score": ({"task.json": task("total-score"), "reward.py": "s = 1\nprint(f'Total score: {s}')\n"},
                    "runnable", "file_cli", {"reward_total_score"}),
    "lowercase": ({"task.json": task("lowercase"), "reward.py": "reward: float = 1.0\nprint(f'Reward: {reward}')\n"},
                  "runnable", "file_cli", {"reward_lowercase_marker"}),
    # A reference solution the probe cannot run (binary): named, never a defect of the task.
    "oracle-binary": ({"task.json": task("oracle-binary"), "reward.py": OK_REWARD,
                       "golden_patch.py": b"\x7fELF\x02\x01\x01\x00" + bytes(range(256))},
                      "runnable", "file_cli", {"oracle_unusable"}),
    "syntax-error": ({"task.json": task("syntax-error"), "reward.py": "import numpy\ndef f(:\n    print('REWARD: 1')\n"},
                     "defective", "file_cli", {"reward_syntax_error"}),
    "deep-nesting": ({"task.json": task("deep-nesting"), "reward.py": "x = " + "-" * 120000 + "1\nprint('REWARD: 1')\n"},
                     "defective", "file_cli", {"reward_syntax_error"}),
    "binary-reward": ({"task.json": task("binary-reward"), "reward.py": b"\x7fELF\x02\x01\x00\x00" + bytes(range(256)) * 8},
                      "defective", "file_cli", {"reward_not_text"}),
    "huge-reward": ({"task.json": task("huge-reward"), "reward.py": "# pad\n" * 200_000 + "print('REWARD: 1')\n"},
                    "defective", "file_cli", {"reward_too_large"}),
    "binary-setup": ({"task.json": task("binary-setup", config=SH_SETUP), "initial_setup.sh": b"\x00\x01\x02garbage\xff",
                      "reward.py": OK_REWARD}, "defective", "file_cli", {"setup_not_text"}),
    # An OSWorld test task with its parameter changed (the shipped index): kept out of training.
    "benchmark-overlap": ({"task.json": task("benchmark-overlap", instruction='Could you change the display language '
                                                                              'of VS Code to "Japanese" for me?'),
                           "reward.py": OK_REWARD}, "blocked", "file_cli", {"benchmark_overlap"}),
    "unknown-app-type": ({"task.json": task("unknown-app-type", "spotify"), "reward.py": OK_REWARD},
                         "runnable", "file_cli", {"unknown_app_type"}),
    # --- loader defects ---
    "invalid-json": ({"task.json": b'{"id": "invalid-json", "instruction": "caf\xe9"}', "reward.py": OK_REWARD},
                     "defective", "file_cli", {"invalid_json"}),
    "schema": ({"task.json": orjson.dumps({"id": "schema", "config": {"type": "download"}}), "reward.py": OK_REWARD},
               "defective", "file_cli", {"schema"}),
    "missing-task-file": ({"reward.py": OK_REWARD, "initial_setup.py": b"print(1)\n"},
                          "defective", "file_cli", {"missing_task_file"}),
    "missing-reward": ({"task.json": task("missing-reward")}, "defective", "file_cli", {"missing_reward"}),
    "empty-reward": ({"task.json": task("empty-reward"), "reward.py": "# nothing yet\n\n"},
                     "defective", "file_cli", {"empty_reward"}),
    "missing-setup-file": ({"task.json": task("missing-setup-file", config=PY_SETUP), "reward.py": OK_REWARD},
                           "defective", "file_cli", {"missing_setup_file"}),
    "too-large": ({"task.json": task("too-large"), "reward.py": OK_REWARD, "big.bin": None},
                  "defective", "file_cli", {"too_large"}),
    "unsafe-link": ({"task.json": task("unsafe-link"), "reward.py": OK_REWARD, "loop": None, "passwd": None},
                    "defective", "file_cli", {"unsafe_link"}),
    "notes": ({"task.json": task("not-the-folder-name", config=[{"type": "keyboard", "parameters": {"keys": "a"}}],
                                 instruction="  ", foo=1), "reward.py": OK_REWARD},
              "runnable", "file_cli", {"unknown_step", "extra_fields", "id_mismatch", "empty_instruction"}),
}
# Real-bundle variants (pipeline exports, hand-written tasks): tests/variant_cases.py.
CASES.update({name: case[:4] for name, case in VARIANT_CASES.items()})
# Task-folder entries that are themselves symlinks (to a folder, and a loop).
LINK_CASES = {"linked-task": "ok-file-cli", "looped-task": "looped-task"}


def build_corpus(dest: Path) -> Path:
    dest.mkdir(parents=True, exist_ok=True)
    for name, (files, *_rest) in CASES.items():
        folder = dest / name
        folder.mkdir()
        for fname, data in files.items():
            p = folder / fname
            if fname == "big.bin":
                with open(p, "wb") as fh:  # sparse: over the loader's 512 MiB cap, no disk used
                    fh.truncate(600 * 1024 * 1024)
            elif fname == "loop":
                os.symlink("loop", p)
            elif fname == "passwd":
                os.symlink("/etc/passwd", p)
            else:
                p.write_bytes(data.encode() if isinstance(data, str) else data)
    for link, target in LINK_CASES.items():
        os.symlink(target, dest / link)
    return dest


def codes(t: dict[str, Any]) -> set[str]:
    return {r["code"] for r in t["reasons"]}


@pytest.fixture(scope="module")
def corpus(tmp_path_factory) -> Path:
    return build_corpus(tmp_path_factory.mktemp("triage") / "tasks")


@pytest.fixture(scope="module")
def caps() -> Capabilities:
    return Capabilities.from_manifest(load_manifest_file(MANIFEST))


def run(root: Path, caps: Capabilities, **kw) -> dict[str, dict[str, Any]]:
    kw.setdefault("use_cache", False)
    result = triage_root(root, caps, **kw)
    return {Path(t["path"]).name: t for t in result.tasks}


def test_corpus_task_by_task(corpus: Path, caps: Capabilities) -> None:
    tasks = run(corpus, caps)
    assert set(tasks) == set(CASES) | set(LINK_CASES)
    for name, (_files, verdict, cls, want) in CASES.items():
        t = tasks[name]
        assert (t["verdict"], t["class"], codes(t)) == (verdict, cls, want), (name, t["reasons"])
    for link in LINK_CASES:
        assert tasks[link]["verdict"] == "defective" and codes(tasks[link]) == {"unsafe_link"}
        assert "not followed" in tasks[link]["reasons"][0]["detail"]


def test_reasons_name_the_missing_things(corpus: Path, caps: Capabilities) -> None:
    tasks = run(corpus, caps)

    def subjects(name: str, code: str) -> set[str]:
        return {r["subject"] for r in tasks[name]["reasons"] if r["code"] == code}

    # convert (bash -c inside sudo, after env assignment), ffmpeg (argv, /usr/bin path), xcf2png (subprocess);
    # sudo, bash, xdotool, grep are on the image.
    assert subjects("missing-exe", "missing_executable") == {"convert", "ffmpeg", "xcf2png"}
    # docx is on the image (import docx.shared -> docx); os/json are stdlib; heredoc body not scanned.
    assert subjects("missing-module", "missing_python_module") == {"torch", "skimage", "cv2"}
    assert any("scikit-image" in r["detail"] for r in tasks["missing-module"]["reasons"])
    assert subjects("missing-app", "missing_app") == {"gimp", "libreoffice_impress", "vlc"}
    assert subjects("needs-network", "needs_network") == {
        "files.example.net", "pip install", "api.github.com", "data.example.org"}
    assert subjects("private-host", "private_host") == {"192.168.7.20"}  # loopback is the task's own
    assert subjects("mock-web", "needs_mock_web") == {
        "__CUA_GYM_GMAIL_URL__", "__CUA_GYM_GMAIL_HOST__", "gmail_mock"}
    assert subjects("newer-python", "needs_newer_python") == {"tomllib", "syntax"}
    # The optional torch import (no fallback import) and the TYPE_CHECKING-only pandas are not required;
    # PyPDF2 | pypdf is satisfied by pypdf, importlib | importlib_metadata by the stdlib.
    assert tasks["ok-import-fallback"]["reasons"] == []


def test_real_bundle_variants_name_what_they_need(corpus: Path, caps: Capabilities) -> None:
    """Pipeline exports and hand-written tasks: the subjects of each blocker are the ones a
    careful reading names (the mock's host, the launched app, the fetched site), and
    URLs that are data never become network needs."""
    tasks = run(corpus, caps)
    for name, (_files, _verdict, _cls, _codes, subjects) in VARIANT_CASES.items():
        got = {code: {r["subject"] for r in tasks[name]["reasons"] if r["code"] == code} for code in subjects}
        assert got == subjects, (name, tasks[name]["reasons"])
    assert not any(r["code"] == "needs_network" for n in ("gmail_draft_007", "docs_reply_012", "hw-cli-notes",
                                                           "data-urls-only") for r in tasks[n]["reasons"])
    notes = " | ".join(r["detail"] for r in tasks["gmail_draft_007"]["reasons"] if r["code"] == "normalized")
    assert "fields beside `type`" in notes and "initial_setup.py relative to the bundle" in notes
    assert "evaluator.url 'reward.py'" in notes and "'mock_websites' read as a mock web task" in notes


def test_the_sandbox_starts_a_desktop_on_the_same_evidence(corpus: Path) -> None:
    """sandbox.policy.task_needs: a setup that launches Chrome or VS Code (app_type `os`,
    `mock_websites`) gets a display; GUI automation (xdotool) too; a file task does not."""
    from shinken.bundles.loader import load_bundle
    from shinken.sandbox.policy import task_needs

    desktop = {name: task_needs(load_bundle(corpus / name)).desktop
               for name in ("gmail_draft_007", "launch-helper-vscode", "browser-opens-site", "missing-exe",
                            "hw-gui-entry", "data-urls-only", "ok-file-cli", "judge-bug-report")}
    assert desktop == {"gmail_draft_007": True, "launch-helper-vscode": True, "browser-opens-site": True,
                       "missing-exe": True, "hw-gui-entry": True, "data-urls-only": False, "ok-file-cli": False,
                       "judge-bug-report": False}
    assert "vscode (initial_setup.py:14: code)" in task_needs(load_bundle(corpus / "launch-helper-vscode")).reasons


def test_a_configured_judge_unblocks_judged_rewards(corpus: Path, caps: Capabilities) -> None:
    tasks = run(corpus, caps, judge=True)
    assert tasks["judge-bug-report"]["verdict"] == "runnable" and tasks["judge-bug-report"]["reasons"] == []
    assert "needs_judge" not in codes(tasks["docs_reply_012"])
    assert tasks["docs_reply_012"]["verdict"] == "blocked"  # still the mock and the browser


def test_every_reason_code_is_exercised(corpus: Path, caps: Capabilities, tmp_path: Path) -> None:
    seen = set().union(*(codes(t) for t in run(corpus, caps).values()))
    # Two codes need another image: no display, and a Python newer than the host's.
    manifest = load_manifest_file(MANIFEST)
    no_display = Capabilities.from_manifest({**manifest, "display": False})
    t = run(corpus, no_display)
    assert "missing_display" in codes(t["ok-calc"]) and t["ok-calc"]["verdict"] == "blocked"
    assert "missing_display" not in codes(t["ok-file-cli"])
    seen |= codes(t["ok-calc"])
    future = copy.deepcopy(manifest)
    future["python"]["version"] = f"3.{sys.version_info[1] + 2}.0"
    t = run(corpus, Capabilities.from_manifest(future))
    assert codes(t["syntax-error"]) == {"syntax_unchecked"} and t["syntax-error"]["verdict"] == "runnable"
    assert "needs_newer_python" not in codes(t["newer-python"])
    seen |= codes(t["syntax-error"])
    # A hub whose mailbox app failed a State API check the web task's reward depends on.
    seen |= codes(run(WEB_TASKS, caps, mock_urls=WEB_MOCK, state_defects=MAILBOX_DEFECT)["mailbox-zero-signal"])
    # `unreadable` needs a reader without root's DAC override: test_unreadable_folder_without_root_privileges.
    assert seen | {"unreadable"} == set(CODES), set(CODES) ^ seen


def load_mock_urls(path: Path) -> dict[str, str]:
    """The flat map triage matches against, read by the one --mock-urls reader (mockweb)."""
    plan = web_plan(None, path)
    assert plan is not None
    return plan.mock_urls()


WEB_TASKS = Path(__file__).resolve().parent / "data" / "web_tasks"
WEB_MOCK = {"__CUA_GYM_MAILBOX_URL__": "http://cua-gym-mailbox"}
MAILBOX_DEFECT = {"MAILBOX": ("mailbox", {"reset": ("current_state", "state_diff")})}


def test_a_task_whose_reward_reads_a_field_its_app_serves_wrong_is_blocked(caps: Capabilities) -> None:
    """Triage reads which /go fields a reward reads; with a hub's check results, a task is
    blocked (mock_state_api_defect: which app, check and field) exactly when its reward reads a
    field a failed check of its app found wrong."""
    star, zero = "8b2f7c1e-4a3d-5e6f-9a0b-1c2d3e4f5a6b", "mailbox-zero-signal"  # reads all three / current_state
    clean = run(WEB_TASKS, caps, mock_urls=WEB_MOCK)
    assert "mock_state_api_defect" not in codes(clean[star]) | codes(clean[zero])
    diff_only = {"MAILBOX": ("mailbox", {"change_shows": ("state_diff", "initial_state"), "dual_stack": ()})}
    t = run(WEB_TASKS, caps, mock_urls=WEB_MOCK, state_defects=diff_only)
    got = {r["subject"] for r in t[star]["reasons"] if r["code"] == "mock_state_api_defect"}
    assert got == {"mailbox:change_shows:state_diff", "mailbox:change_shows:initial_state"}
    assert t[star]["verdict"] == "blocked" and "reward.py:15" in next(
        r["detail"] for r in t[star]["reasons"] if r["subject"] == "mailbox:change_shows:state_diff")
    assert "mock_state_api_defect" not in codes(t[zero])  # it reads current_state only
    t = run(WEB_TASKS, caps, mock_urls=WEB_MOCK, state_defects=MAILBOX_DEFECT)
    assert {r["subject"] for r in t[zero]["reasons"] if r["code"] == "mock_state_api_defect"} == \
        {"mailbox:reset:current_state"}
    # Another app's defects do not touch the mailbox's tasks.
    t = run(WEB_TASKS, caps, mock_urls=WEB_MOCK, state_defects={"GMAIL": ("gmail", {"reset": ("current_state",)})})
    assert "mock_state_api_defect" not in codes(t[star]) | codes(t[zero])


def test_mock_urls_unblock_web_tasks(corpus: Path, caps: Capabilities, tmp_path: Path, monkeypatch) -> None:
    f = tmp_path / "mock.json"
    f.write_bytes(orjson.dumps({"__CUA_GYM_GMAIL_URL__": "http://127.0.0.1:8001"}))
    t = run(corpus, caps, mock_urls=load_mock_urls(f))["mock-web"]
    assert t["verdict"] == "runnable" and t["reasons"] == [], t["reasons"]  # HOST follows from URL
    # url_variables.json's shape (docs/mock-web.md): the env var's value is the address; the
    # hosted default is never used as one.
    f.write_bytes(orjson.dumps({"__CUA_GYM_GMAIL_URL__": {"env": "SHINKEN_TEST_GMAIL_URL", "kind": "url",
                                                          "default": "http://127.0.0.1:8002"}}))
    monkeypatch.delenv("SHINKEN_TEST_GMAIL_URL", raising=False)
    assert load_mock_urls(f) == {}
    assert run(corpus, caps, mock_urls=load_mock_urls(f))["mock-web"]["verdict"] == "blocked"
    monkeypatch.setenv("SHINKEN_TEST_GMAIL_URL", "http://10.0.0.5:8006")
    assert load_mock_urls(f) == {"__CUA_GYM_GMAIL_URL__": "http://10.0.0.5:8006",
                                 "__CUA_GYM_GMAIL_HOST__": "10.0.0.5:8006"}
    # A hosted mock host is the same app: the app's placeholder mapping covers it.
    f.write_bytes(orjson.dumps({"__CUA_GYM_GMAIL_URL__": "http://127.0.0.1:8001"}))
    t = run(corpus, caps, mock_urls=load_mock_urls(f))["gmail_draft_007"]
    assert "needs_mock_web" not in codes(t) and codes(t) == {"normalized", "missing_app"}, t["reasons"]
    f.write_bytes(b'{"GMAIL": "x"}')
    with pytest.raises(ShinkenError, match="mock URL map"):
        load_mock_urls(f)


def test_triage_and_probe_read_mock_urls_alike(tmp_path: Path, shinken_cli) -> None:
    """`shinken triage --mock-urls` counts what the probe's reader makes of the file: an entry
    whose env var is unset gives no address, whatever its hosted default says."""
    f = tmp_path / "url_variables.json"
    f.write_bytes(orjson.dumps({"variables": {
        "__CUA_GYM_GMAIL_URL__": {"env": "SHINKEN_TEST_UNSET_URL", "kind": "url", "default": "https://cua-gym-gmail.xlang.ai"},
        "__CUA_GYM_SLACK_URL__": "http://10.0.0.5:8006"}}))
    r = shinken_cli("triage", DATA.parent.parent / "demo", "--manifest", MANIFEST, "--mock-urls", f, "--no-cache", "--json",
                    setenv={"SHINKEN_TEST_UNSET_URL": ""})
    assert r.returncode == 0, r.stderr
    assert orjson.loads(r.stdout)["summary"]["mock_urls"] == len(load_mock_urls(f)) == 2  # SLACK's URL and HOST


def test_report_validates_against_schema(corpus: Path, caps: Capabilities) -> None:
    result = triage_root(corpus, caps, use_cache=False)
    report = build_report(result.tasks, caps, "fixture", str(corpus), result.stats, show=3)
    assert validation_error("triage", report) is None
    assert check_with_jsonschema("triage", report) == []
    s = report["summary"]
    assert s["total"] == len(CASES) + len(LINK_CASES) == sum(s["by_verdict"].values())
    assert s["by_class"]["mock_web"]["total"] == 1 + sum(1 for c in VARIANT_CASES.values() if c[2] == "mock_web")
    assert s["by_difficulty"] == {"none": s["total"] - 2, "easy": 1, "medium": 1}
    assert {"code": "missing_executable", "subject": "convert", "tasks": 1} in s["top_missing"]
    assert len(s["examples"]["defective"]) == 3
    broken = copy.deepcopy(report)
    broken["tasks"][0]["verdict"] = "maybe"
    assert validation_error("triage", broken) is not None


def test_plain_task_check_never_accepts_what_the_schema_refuses(corpus: Path, caps: Capabilities) -> None:
    """The report's tasks are checked in plain Python when that check passes them (the
    compiled schema cost ~0.15 CPU-s per run at release scale); it must be stricter than
    schemas/triage.schema.json: every field of a real task and of its reasons is varied over
    JSON values of every type, and the schema's enums are the vocabularies the check uses."""
    from shinken.schemas import load_schema
    from shinken.triage.codes import CLASSES, VERDICTS
    from shinken.errors import InternalError
    from shinken.triage.report import _plainly_valid_tasks, check_report

    d = load_schema("triage")["definitions"]
    assert set(d["task"]["properties"]) == set(d["task"]["required"])  # a new field fails here first
    assert d["task"]["properties"]["class"]["enum"] == list(CLASSES)
    assert d["task"]["properties"]["verdict"]["enum"] == list(VERDICTS)
    assert set(CODES) <= set(d["reason"]["properties"]["code"]["enum"])  # the schema also keeps retired codes
    assert set(d["reason"]["properties"]) == {"code", "detail", "severity", "subject"}
    result = triage_root(corpus, caps, use_cache=False)
    report = build_report(result.tasks, caps, "fixture", str(corpus), result.stats, show=3)
    assert _plainly_valid_tasks(report["tasks"])
    check_report(report)
    base = next(t for t in report["tasks"] if any("subject" in r for r in t["reasons"]))
    values: list[Any] = [None, True, 0, 1.5, "", "x", "a" * 64, "0" * 64, "A" * 64, [], ["x"], {}, {"code": "x"},
                         "runnable", "desktop_app", "needs_network", "blocker"]
    variants = []
    for key in list(base):
        variants += [{**base, key: v} for v in values]
        variants.append({k: v for k, v in base.items() if k != key})
    variants.append({**base, "extra": 1})
    reason = next(r for r in base["reasons"] if "subject" in r)
    for key in list(reason):
        for v in values:
            variants.append({**base, "reasons": [{**reason, key: v}]})
        variants.append({**base, "reasons": [{k: v for k, v in reason.items() if k != key}]})
    variants += [{**base, "reasons": [reason, 3]}, {**base, "reasons": [{**reason, "extra": 1}]}]
    plain = 0
    for t in variants:
        doc = {**report, "tasks": [t]}
        if _plainly_valid_tasks([t]):
            plain += 1
            assert validation_error("triage", doc) is None, t
        elif validation_error("triage", doc) is not None:
            with pytest.raises(InternalError):
                check_report(doc)
    assert plain >= 3  # the ordinary shapes (another verdict, class, a hex hash) do pass
    assert not _plainly_valid_tasks("tasks") and not _plainly_valid_tasks([[]])


def test_cache_rerun_and_invalidation(corpus: Path, caps: Capabilities, tmp_path: Path) -> None:
    root = tmp_path / "tasks"
    shutil.copytree(corpus / "ok-file-cli", root / "ok-file-cli")
    shutil.copytree(corpus / "bare-number", root / "bare-number")
    shutil.copytree(corpus / "missing-reward", root / "missing-reward")
    cdir = tmp_path / "cache"
    first = triage_root(root, caps, cache_directory=cdir)
    assert (first.stats.cache_hits, first.stats.analysed) == (0, 3)
    # The fixture image's Python: its analyses, and the last run's evaluated tasks; the last
    # hygiene pass over the root (families, benchmark matches).
    assert sorted(p.name for p in cdir.iterdir()) == ["hygiene.json", "py3.10.json", "py3.10.results.json"]
    again = triage_root(root, caps, cache_directory=cdir)
    assert (again.stats.cache_hits, again.stats.analysed) == (3, 0)
    assert again.tasks == first.tasks
    # Edit one bundle: only it is re-analysed, and its verdict follows the new content.
    (root / "bare-number" / "reward.py").write_text("import nope_mod\nprint('REWARD: 1')\n")
    edited = triage_root(root, caps, cache_directory=cdir)
    assert (edited.stats.cache_hits, edited.stats.analysed) == (2, 1)
    t = {x["id"]: x for x in edited.tasks}["bare-number"]
    assert t["verdict"] == "blocked" and codes(t) == {"missing_python_module"}
    assert t["bundle_hash"] != {x["id"]: x for x in first.tasks}["bare-number"]["bundle_hash"]
    # A file added to a bundle: the folder's mtime moves, so it is re-read (and re-hashed).
    (root / "ok-file-cli" / "notes.txt").write_text("new")
    added = triage_root(root, caps, cache_directory=cdir)
    assert (added.stats.cache_hits, added.stats.analysed) == (2, 1)
    assert {x["id"]: x for x in added.tasks}["ok-file-cli"]["bundle_hash"] != \
        {x["id"]: x for x in first.tasks}["ok-file-cli"]["bundle_hash"]
    # Another image with the same Python (a rebuild): the analysis is reused, the match is
    # redone against the new image's capabilities (the remembered tasks were for the old one).
    m = load_manifest_file(MANIFEST)
    rebuilt = Capabilities.from_manifest({**m, "image": {"ref": "x", "id": "sha256:" + "b" * 64},
                                          "python_modules": [x for x in m["python_modules"] if x != "openpyxl"]})
    again = triage_root(root, rebuilt, cache_directory=cdir)
    assert (again.stats.cache_hits, again.stats.analysed) == (3, 0) and len(list(cdir.iterdir())) == 3
    assert codes({x["id"]: x for x in again.tasks}["ok-file-cli"]) == {"missing_python_module"}
    assert codes({x["id"]: x for x in triage_root(root, caps, cache_directory=cdir).tasks}["ok-file-cli"]) == set()
    # A judge or a mock map changes the match too: never a remembered task of another setting.
    (root / "judged").mkdir()
    (root / "judged" / "task.json").write_bytes(task("judged"))
    (root / "judged" / "reward.py").write_text("from reward_judge import call_llm_judge\nprint('REWARD: 1')\n")
    judged = lambda **kw: {x["id"]: x for x in triage_root(root, caps, cache_directory=cdir, **kw).tasks}["judged"]
    assert codes(judged()) == {"needs_judge"} and codes(judged()) == {"needs_judge"}
    assert codes(judged(judge=True)) == set() and codes(judged()) == {"needs_judge"}
    # A folder removed: forgotten by both files, so it never comes back from them.
    shutil.rmtree(root / "judged")
    gone = triage_root(root, caps, cache_directory=cdir)
    assert (gone.stats.folders, gone.stats.cache_hits, gone.stats.analysed) == (3, 3, 0)
    for p in cdir.iterdir():
        assert b"judged" not in p.read_bytes(), p.name
    # Another Python version: other files, nothing reused (syntax is checked with its grammar).
    other = Capabilities.from_manifest({**m, "python": {**m["python"], "version": "3.9.2"}})
    assert triage_root(root, other, cache_directory=cdir).stats.cache_hits == 0
    assert len(list(cdir.iterdir())) == 5


def test_unreadable_folder_without_root_privileges(tmp_path: Path) -> None:
    """As root every file is readable; drop CAP_DAC_OVERRIDE/READ_SEARCH to see what a
    user sees when a bundle folder or file is not readable. The run must not crash."""
    root = tmp_path / "tasks"
    build_corpus_subset(root, ["ok-file-cli", "bare-number"])
    (root / "locked").mkdir()
    (root / "locked" / "task.json").write_bytes(task("locked"))
    (root / "locked").chmod(0)
    (root / "bare-number" / "reward.py").chmod(0)
    out = tmp_path / "r.json"
    try:
        # A non-root user is subject to permissions already.
        drop = ["setpriv", "--bounding-set", "-dac_override,-dac_read_search", "--"] if os.geteuid() == 0 else []
        proc = subprocess.run(
            [*drop, str(SHINKEN), "triage", str(root), "--manifest", str(MANIFEST), "--report", str(out), "--no-cache"],
            capture_output=True, text=True, timeout=120)
    finally:
        (root / "locked").chmod(0o755)
        (root / "bare-number" / "reward.py").chmod(0o644)
    assert proc.returncode == 0, proc.stderr
    tasks = {Path(t["path"]).name: t for t in orjson.loads(out.read_bytes())["tasks"]}
    assert tasks["locked"]["verdict"] == "defective" and codes(tasks["locked"]) == {"unreadable"}, tasks["locked"]
    assert "cannot list folder" in tasks["locked"]["reasons"][0]["detail"]
    assert codes(tasks["bare-number"]) == {"unreadable"}
    assert tasks["ok-file-cli"]["verdict"] == "runnable"


def build_corpus_subset(root: Path, names: list[str]) -> None:
    with tempfile.TemporaryDirectory() as d:
        full = build_corpus(Path(d) / "all")
        for n in names:
            shutil.copytree(full / n, root / n)


def test_a_pipeline_export_is_mock_web_and_blocked_by_its_hosts(tmp_path: Path) -> None:
    """`output/final/<id>/` as the generation pipeline exports it, through the CLI: the
    web tasks are mock_web and blocked by the hosted mocks they name, never `schema`; the
    judge flag lifts only the judge."""
    final = tmp_path / "run" / "output" / "final"
    for name in ("gmail_draft_007", "docs_reply_012"):
        folder = final / name
        folder.mkdir(parents=True)
        for fname, data in VARIANT_CASES[name][0].items():
            (folder / fname).write_bytes(data)
    (final / "broken_003").mkdir()  # a folder the export left without a task file
    (final / "broken_003" / "reward.py").write_text("print('REWARD: 0')\n")
    env = {"SHINKEN_CACHE_DIR": str(tmp_path / "cache")}
    for extra, judge_blocked in (([], True), (["--judge-url", "http://127.0.0.1:8000/v1"], False)):
        p = run_cli("triage", tmp_path / "run", "--manifest", MANIFEST, "--json", *extra, setenv=env)
        assert p.returncode == 0, p.stderr
        tasks = {t["id"]: t for t in orjson.loads(p.stdout)["tasks"]}
        assert set(tasks) == {"gmail_draft_007", "docs_reply_012", "broken_003"}
        assert codes(tasks["broken_003"]) == {"missing_task_file"}
        for name, host in (("gmail_draft_007", "cua-gym-gmail.xlang.ai"), ("docs_reply_012", "cua-gym-google-docs.xlang.ai")):
            t = tasks[name]
            assert (t["class"], t["verdict"]) == ("mock_web", "blocked") and "schema" not in codes(t), t
            assert {r["subject"] for r in t["reasons"] if r["code"] == "needs_mock_web"} == {host}
        assert ("needs_judge" in codes(tasks["docs_reply_012"])) is judge_blocked
    p = run_cli("triage", tmp_path / "run", "--manifest", MANIFEST, "--judge-url", "localhost:8000", setenv=env)
    assert p.returncode == 2 and "not an http" in p.stderr and "Traceback" not in p.stderr


def test_golden_patch_needs_count_but_it_is_never_part_of_the_start(tmp_path: Path, caps: Capabilities) -> None:
    """A pipeline export's reference solution runs in the task machine (the oracle probe), so what it
    needs counts like a setup file's; but no setup step places it, and the loader never does."""
    from shinken.bundles.loader import load_bundle
    from shinken.sandbox.policy import split_setup

    folder = tmp_path / "run" / "output" / "final" / "calc_fix_001"
    folder.mkdir(parents=True)
    (folder / "config.json").write_bytes(orjson.dumps({
        "id": "calc_fix_001", "instruction": "Fix the sum in /home/user/a.txt", "app_type": "os",
        "config": [{"type": "execute", "parameters": {"command": "python3 golden_patch.py; echo 1 > /home/user/a.txt"}}],
        "evaluator": {"type": "python", "url": "./reward.py"}}))
    (folder / "reward.py").write_text("print('REWARD: 0.0')\n")
    (folder / "golden_patch.py").write_text("import torch_nonexistent_module\n")
    t = {x["id"]: x for x in triage_root(tmp_path / "run", caps, use_cache=False).tasks}["calc_fix_001"]
    missing = {(r["code"], r["subject"]) for r in t["reasons"] if r["code"] == "missing_python_module"}
    assert missing == {("missing_python_module", "torch_nonexistent_module")} and t["verdict"] == "blocked", t
    b = load_bundle(folder)
    placed = [f["url"] for s in b.setup if s.type == "download" for f in s.parameters.get("files", [])]
    assert "./golden_patch.py" not in placed and not any("golden_patch" in str(s.parameters) for s in split_setup(b.setup)[1])


def test_cli_json_class_filter_and_bad_input(corpus: Path, tmp_path: Path) -> None:
    out = tmp_path / "report.json"
    env = {"SHINKEN_CACHE_DIR": str(tmp_path / "cache")}
    p = run_cli("triage", corpus, "--manifest", MANIFEST, "--report", out, "--show", "2", setenv=env)
    assert p.returncode == 0, p.stderr
    assert "defective" in p.stdout and "top missing things" in p.stdout
    report = orjson.loads(out.read_bytes())
    assert validation_error("triage", report) is None
    assert report["image"] == {"ref": "shinken/sandbox-linux:fixture", "id": load_manifest_file(MANIFEST)["image"]["id"]}
    p = run_cli("triage", corpus, "--manifest", MANIFEST, "--report", out, "--class", "desktop_app", setenv=env)
    assert p.returncode == 0, p.stderr
    report = orjson.loads(out.read_bytes())
    assert {t["class"] for t in report["tasks"]} == {"desktop_app"}
    assert report["summary"]["total"] == sum(1 for c in CASES.values() if c[2] == "desktop_app")
    for args, needle in (
        ([str(tmp_path / "nope"), "--manifest", str(MANIFEST)], "no such task root"),
        ([str(corpus), "--manifest", str(DATA)], "cannot read the manifest"),
        ([str(corpus), "--manifest", str(corpus / "ok-file-cli" / "task.json")], "not a valid capability manifest"),
        ([str(corpus), "--manifest", str(MANIFEST), "--class", "web"], "unknown class"),
    ):
        p = run_cli("triage", *args, setenv=env)
        assert p.returncode == 2 and needle in p.stderr and "Traceback" not in p.stderr, (args, p.stderr)


def test_shell_forms() -> None:
    def exes(cmd, f=command_needs):
        return [n[1][0] for n in f(cmd, "t") if n[0] == "exe"]

    assert exes("A=1 B=2 nohup foo --x | bar && (baz; qux) || env C=3 quux &") == \
        ["nohup", "foo", "bar", "baz", "qux", "env", "quux"]
    assert exes(["sh", "-c", "timeout 5 wget -q http://x; echo $(date +%s) > /tmp/t"]) == ["sh", "timeout", "wget", "date"]
    assert exes("cd /tmp && ./run.sh && /home/user/tool && /usr/local/bin/jq . a.json") == ["jq"]
    assert exes("if [ -f a ]; then\n  rsync a b\nfi\nfor f in *.txt; do gzip $f; done\nx() { tar c .; }\nx\n",
                script_needs) == ["rsync", "gzip", "tar"]
    assert [n[:2] for n in command_needs("soffice --impress /home/user/a.pptx", "t")] == [["app", ["libreoffice_impress"]]]
    assert ["module", ["http"], "t: -m http.server"] in command_needs("python3 -m http.server 8000", "t")


def test_terminal_and_file_manager_launches_are_the_manifest_apps(tmp_path: Path, caps: Capabilities) -> None:
    """gnome-terminal is the manifest's desktop app `gnome_terminal`; nautilus, thunar and
    pcmanfm are `file_manager` (the task image's capability manifest names them so), whether
    a step, a shell setup or Python (a helper taking a command string) launches them."""
    launch_gui = ("import shlex, subprocess\n\ndef launch_gui(command):\n"
                  "    subprocess.Popen(shlex.split(command), start_new_session=True)\n\n")
    bundles: dict[str, tuple[dict[str, Any], str]] = {
        "term-step": ({"task.json": task("term-step", config=[{"type": "launch", "parameters": {
            "command": ["gnome-terminal", "--", "bash", "-c", "cat /home/user/notes.txt; exec bash"]}}])},
            "gnome_terminal"),
        "term-py": ({"task.json": task("term-py", config=PY_SETUP),
                     "initial_setup.py": launch_gui + "launch_gui('gnome-terminal --working-directory=/home/user')\n"},
                    "gnome_terminal"),
        "nautilus-py": ({"task.json": task("nautilus-py", config=PY_SETUP), "initial_setup.py":
                         "import subprocess\nsubprocess.Popen(['nautilus', '/home/user/Documents'])\n"},
                        "file_manager"),
        "thunar-sh": ({"task.json": task("thunar-sh", config=SH_SETUP),
                       "initial_setup.sh": "#!/bin/bash\nmkdir -p /home/user/Pictures\nthunar /home/user/Pictures &\n"},
                      "file_manager"),
        "pcmanfm-py": ({"task.json": task("pcmanfm-py", config=PY_SETUP), "initial_setup.py":
                        launch_gui + "DIR = '/home/user/Downloads'\nlaunch_gui(f'pcmanfm \"{DIR}\"')\n"},
                       "file_manager"),
    }
    root = tmp_path / "tasks"
    for name, (files, _app) in bundles.items():
        (root / name).mkdir(parents=True)
        for fname, data in {"reward.py": OK_REWARD, **files}.items():
            (root / name / fname).write_bytes(data if isinstance(data, bytes) else data.encode())
    lacking = run(root, caps)  # the fixture image has neither app
    m = load_manifest_file(MANIFEST)
    having = run(root, Capabilities.from_manifest(
        {**m, "desktop_apps": [*m["desktop_apps"], "gnome_terminal", "file_manager"]}))
    for name, (_files, app) in bundles.items():
        t = lacking[name]
        assert t["class"] == "desktop_app" and t["verdict"] == "blocked", (name, t)
        assert [r["subject"] for r in t["reasons"]] == [app], (name, t["reasons"])
        assert codes(t) == {"missing_app"}
        assert having[name]["verdict"] == "runnable" and having[name]["class"] == "desktop_app", (name, having[name])
    for program, app in (("gnome-terminal", "gnome_terminal"), ("nautilus", "file_manager"),
                         ("thunar", "file_manager"), ("pcmanfm", "file_manager")):
        assert [n[:2] for n in command_needs(f"{program} /home/user", "t")] == [["app", [app]]], program


def test_python_launches_and_fetches_from_the_ast() -> None:
    import ast

    from shinken.needs.pyflow import scan

    src = b'''import os, shlex, subprocess, webbrowser
from subprocess import Popen
import requests

API = "https://api.example-data.net/v2"
STATE = {"avatar": "https://img.example-cdn.net/a.png", "link": "https://blog.example-news.net/p/1"}
CMD = ["vlc", "--fullscreen", "/home/user/clip.mp4"]


def run_cmd(command, wait=True):
    p = subprocess.Popen(shlex.split(command))
    return p.wait() if wait else p


def open_in(url):
    run_cmd(f"firefox {url}", wait=False)


run_cmd(f'google-chrome --new-window "{API}/docs"')
open_in("https://maps.example-geo.net/?q=kyoto")
Popen(CMD)
os.system("pdftk in.pdf cat 1 output out.pdf")
subprocess.run(["tesseract", "/tmp/shot.png", "stdout"], check=True)
requests.Session().get(API + "/items", timeout=5)
webbrowser.open("https://help.example-docs.net/start")
'''
    flow = scan(ast.parse(src), src)
    assert sorted(str(c) for c, _ in flow.launches) == sorted([
        'google-chrome --new-window "https://api.example-data.net/v2/docs"',
        "firefox https://maps.example-geo.net/?q=kyoto", "['vlc', '--fullscreen', '/home/user/clip.mp4']",
        "pdftk in.pdf cat 1 output out.pdf", "['tesseract', '/tmp/shot.png', 'stdout']"])
    assert sorted(u for u, _ in flow.fetches) == ["https://api.example-data.net/v2/items",
                                                   "https://help.example-docs.net/start"]
    assert not flow.unresolved_fetch  # the URLs in STATE are data: never fetched
    # A fetch whose URL is computed: the whole URLs the file binds to names are the candidates.
    src2 = b"import requests\nBASE = 'https://svc.example-data.net'\nurl = make()\nrequests.get(url)\n"
    flow2 = scan(ast.parse(src2), src2)
    assert flow2.unresolved_fetch and [u for u, _ in flow2.url_constants] == ["https://svc.example-data.net"]


def test_instruction_urls_count_only_where_the_agent_goes() -> None:
    from shinken.needs.urls import instruction_url_needs

    goes = ["Go to https://www.example-wiki.net and find the capital", "Open the page https://x.example.net/a",
            "Download the CSV from https://data.example-gov.net/x.csv", "Search https://scholar.example.net for it",
            "Read the article at https://news.example.net/a and summarise it", "Log in to https://crm.example.net"]
    data = ["Add the link https://meet.example-video.net/abc to the event",
            "Send Bob an email with the link https://docs.example.net/x", "Save https://a.example.net as a bookmark",
            "Open the spreadsheet and paste https://files.example.net/q3 into cell B2"]
    assert [bool(instruction_url_needs(t)) for t in goes] == [True] * len(goes)
    assert [bool(instruction_url_needs(t)) for t in data] == [False] * len(data)


def test_shell_urls_count_only_when_fetched_or_opened() -> None:
    def net(cmd, f=command_needs):
        return sorted({n[1][0] for n in f(cmd, "t") if n[0] in ("network", "mock_host")})

    script = ("#!/bin/bash\nURL=https://files.example-data.net/a.csv\ncurl -fsSL \"$URL\" -o /tmp/a.csv\n"
              "echo 'see https://wiki.example-docs.net/x' > notes.txt\ngit clone https://github.com/org/repo\n"
              "xdg-open https://cua-gym-slack.xlang.ai/?sid=1\n")
    assert net(script, script_needs) == ["cua-gym-slack.xlang.ai", "files.example-data.net", "github.com"]
    assert net("wget -q http://127.0.0.1:8000/x && echo https://a.example-news.net") == []
    assert ["app", ["chrome", "chromium", "firefox"]] in [n[:2] for n in command_needs("xdg-open https://x.example.net", "t")]


@pytest.mark.docker
def test_against_real_linux_image_manifest(linux_image: str, demo_root: Path, tmp_path: Path) -> None:
    """The live manifest of shinken/sandbox-linux (the fixture builds it for the current
    sources, also tagged :latest): the demo bundles' verdicts follow from what it has."""
    from shinken.images.capabilities import get_manifest

    ref = linux_image
    manifest = get_manifest(ref)
    caps = Capabilities.from_manifest(manifest)
    assert caps.python_version >= (3, 9) and "python3" in caps.executables
    tasks = {t["id"]: t for t in triage_root(demo_root, caps, use_cache=False).tasks}
    assert tasks["hello-file"]["verdict"] == "runnable", tasks["hello-file"]["reasons"]
    assert codes(tasks["broken-reward"]) == {"reward_no_marker"}
    calc = tasks["9a1f6c2e-5b3d-4e8a-9c71-2f0d4b6a8e13"]
    expect = set()
    if "libreoffice_calc" not in caps.desktop_apps:
        expect.add(("missing_app", "libreoffice_calc"))
    if "openpyxl" not in caps.python_modules:
        expect.add(("missing_python_module", "openpyxl"))
    assert {(r["code"], r["subject"]) for r in calc["reasons"]} == expect
    assert calc["verdict"] == ("blocked" if expect else "runnable")
    # The CLI path that asks Docker for the manifest (no --manifest).
    out = tmp_path / "r.json"
    p = run_cli("triage", demo_root, "--image", ref, "--report", out, "--no-cache")
    assert p.returncode == 0, p.stderr
    report = orjson.loads(out.read_bytes())
    assert report["image"] == {"ref": ref, "id": manifest["image"]["id"]}
    assert {t["id"]: t["verdict"] for t in report["tasks"]} == {k: v["verdict"] for k, v in tasks.items()}


def test_runnable_share_script_reports_before_and_after(repo_root: Path) -> None:
    """benchmarks/runnable_share.py on a small release-shaped corpus against the two pinned
    sandbox-cua manifests: before (no browser, VLC, ffmpeg, ...) and after the coverage work."""
    data = repo_root / "benchmarks" / "data"
    r = subprocess.run([sys.executable, str(repo_root / "benchmarks" / "runnable_share.py"), "--n", "300",
                        "--before", str(data / "sandbox-cua-889314ac40e1.manifest.json"),
                        "--after", str(data / "sandbox-cua-208cad1fcb31.manifest.json"), "--json"],
                       capture_output=True, text=True, timeout=300)
    assert r.returncode == 0, r.stderr
    doc = orjson.loads(r.stdout)
    assert doc["corpus"]["tasks"] == 300
    b, a = doc["before"], doc["after"]
    assert (b["image"], a["image"]) == ("shinken/sandbox-cua:889314ac40e1", "shinken/sandbox-cua:208cad1fcb31")
    for side in (b, a):
        for scenario in ("image_only", "with_hub_and_judge"):
            x = side[scenario]
            assert x["runnable"] + x["blocked"] + x["defective"] == 300
            assert sum(c["tasks"] for c in x["by_class"].values()) == 300
        # The hub and the judge only add runnable tasks.
        assert side["with_hub_and_judge"]["runnable"] >= side["image_only"]["runnable"]
    assert a["image_only"]["share"] > b["image_only"]["share"]
    before = {(x["code"], x["subject"]) for x in b["image_only"]["top_blockers"]}
    after = {(x["code"], x["subject"]) for x in a["image_only"]["top_blockers"]}
    assert ("missing_app", "chrome") in before and ("missing_app", "chrome") not in after
    assert ("missing_app", "vscode") in after  # not on these registries (image build --extra)
    assert a["with_hub_and_judge"]["by_class"]["mock_web"]["runnable"] == a["with_hub_and_judge"]["by_class"]["mock_web"]["tasks"]


def test_docs_list_every_reason_code(repo_root: Path) -> None:
    text = (repo_root / "docs" / "triage.md").read_text()
    for code, (severity, _meaning) in CODES.items():
        assert f"| `{code}` | {severity} |" in text, code


def _children(pid: int) -> list[int]:
    out: list[int] = []
    for task_dir in Path(f"/proc/{pid}/task").glob("*"):
        try:
            out += [int(x) for x in (task_dir / "children").read_text().split()]
        except OSError:
            pass
    return out


def test_a_killed_worker_does_not_stop_the_run(tmp_path: Path, caps: Capabilities) -> None:
    """SIGKILL a real pool worker mid-run: the unfinished chunks are redone folder by
    folder and the report is complete and identical to an undisturbed run."""
    import signal
    import time

    sys.path.insert(0, str(Path(__file__).resolve().parent.parent))
    from benchmarks.synthetic_release import make_corpus

    root = make_corpus(tmp_path / "tasks", n=600, seed=7)
    expected = {Path(t["path"]).name: t["verdict"] for t in triage_root(root, caps, use_cache=False, workers=1).tasks}
    out = tmp_path / "r.json"
    proc = subprocess.Popen([str(SHINKEN), "triage", str(root), "--manifest", str(MANIFEST), "--report", str(out),
                             "--no-cache", "--workers", "2"], stdout=subprocess.DEVNULL, stderr=subprocess.PIPE, text=True)
    killed = None
    deadline = time.monotonic() + 60
    while killed is None and proc.poll() is None and time.monotonic() < deadline:
        kids = _children(proc.pid)
        if len(kids) >= 2:  # the pool is up: kill one worker
            os.kill(kids[-1], signal.SIGKILL)
            killed = kids[-1]
        time.sleep(0.01)
    _, stderr = proc.communicate(timeout=300)
    assert proc.returncode == 0, stderr
    assert killed is not None, "the run ended before a worker could be killed"
    tasks = {Path(t["path"]).name: t for t in orjson.loads(out.read_bytes())["tasks"]}
    assert {k: t["verdict"] for k, t in tasks.items()} == expected
    assert not any("killed the worker" in r["detail"] for t in tasks.values() for r in t["reasons"])


def test_an_unusable_golden_patch_is_named_by_triage_and_probe(tmp_path: Path, caps: Capabilities) -> None:
    """A golden_patch.py over 96 KiB or binary is no oracle: triage names it (a note, the task stays
    runnable) and the probe's plan says why on the task's receipt line instead of silently running none."""
    from shinken.probes.pipeline import ProbeRequest, plan

    root = tmp_path / "tasks"
    for tid, patch in (("big-oracle", b"# padding\n" * 10_000 + b"print('solved')\n"),
                       ("binary-oracle", b"\x00\x01binary"), ("fine-oracle", b"print('solved')\n")):
        (root / tid).mkdir(parents=True)
        (root / tid / "task.json").write_bytes(task(tid))
        (root / tid / "reward.py").write_text(OK_REWARD)
        (root / tid / "golden_patch.py").write_bytes(patch)
    t = run(root, caps)
    assert {k: (v["verdict"], codes(v)) for k, v in t.items()} == {
        "big-oracle": ("runnable", {"oracle_unusable"}), "binary-oracle": ("runnable", {"oracle_unusable"}),
        "fine-oracle": ("runnable", set())}
    detail = {k: v["reasons"][0]["detail"] for k, v in t.items() if v["reasons"]}
    assert "100016 bytes, over the 98304" in detail["big-oracle"] and "binary" in detail["binary-oracle"]
    report = tmp_path / "triage.json"  # the triage above, as a report (the probe's own would need the image)
    report.write_bytes(orjson.dumps({"tasks": [{"id": k, "verdict": v["verdict"], "reasons": []} for k, v in t.items()]}))
    p = plan(ProbeRequest(task_root=root, image="img", triage=report, probes=("noop", "oracle")))
    assert sorted(p.oracles) == ["fine-oracle"]
    assert set(p.oracle_notes) == {"big-oracle", "binary-oracle"}
    assert "over 98304" in p.oracle_notes["big-oracle"] and "binary" in p.oracle_notes["binary-oracle"]
    assert all(len(n.splitlines()) == 1 and n.startswith("no oracle run: ") for n in p.oracle_notes.values())
    assert plan(ProbeRequest(task_root=root, image="img", triage=report)).oracle_notes == {}  # without the oracle probe: nothing to say


def test_unwritable_cache_is_a_warning_not_a_failure(corpus: Path, caps: Capabilities, tmp_path: Path) -> None:
    blocker = tmp_path / "not-a-dir"
    blocker.write_text("a file where the cache folder should be")
    result = triage_root(corpus, caps, cache_directory=blocker / "triage")
    assert len(result.tasks) == len(CASES) + len(LINK_CASES)
    assert result.stats.cache_error and "not-a-dir" in result.stats.cache_error


@pytest.mark.docker
def test_missing_image_is_an_environment_problem(docker_client, demo_root: Path) -> None:
    p = run_cli("triage", demo_root, "--image", "shinken/no-such-image:latest")
    assert p.returncode == 3 and "not found" in p.stderr and "Traceback" not in p.stderr, p.stderr


def test_readahead_is_skipped_only_when_the_page_cache_holds_the_bundles(tmp_path: Path) -> None:
    """The readahead thread only costs CPU when the files are already cached; the check
    reads a sample with RWF_NOWAIT, so a bundle evicted from the page cache turns it on."""
    from shinken.triage.run import _page_cache_warm

    folders = []
    for i in range(40):
        f = tmp_path / f"t{i}"
        f.mkdir()
        (f / "reward.py").write_bytes(OK_REWARD.encode() * 50)
        folders.append(str(f))
    probe = os.open(os.path.join(folders[0], "reward.py"), os.O_RDONLY)
    try:
        os.preadv(probe, [bytearray(16)], 0, os.RWF_NOWAIT)
    except OSError as exc:
        if exc.errno != 11:
            pytest.skip(f"this file system does not read with RWF_NOWAIT ({exc})")
    finally:
        os.close(probe)
    for f in folders:
        (Path(f) / "reward.py").read_bytes()
    assert _page_cache_warm(folders)
    # Pages just read can still sit in another CPU's LRU batch, where FADV_DONTNEED (which drains
    # only its own CPU's) cannot drop them: ask again until they are gone (bounded). Each check is
    # made once right after the drop: a RWF_NOWAIT miss can start the readahead that warms it again.
    for _ in range(50):
        fd = os.open(os.path.join(folders[0], "reward.py"), os.O_RDONLY)
        try:
            os.fsync(fd)  # clean pages can be dropped
            os.posix_fadvise(fd, 0, 0, os.POSIX_FADV_DONTNEED)
        finally:
            os.close(fd)
        warm = _page_cache_warm(folders)
        if not warm:
            break
        time.sleep(0.1)
    assert not warm
    (Path(folders[0]) / "reward.py").read_bytes()
    assert _page_cache_warm(folders) and not _page_cache_warm([])
