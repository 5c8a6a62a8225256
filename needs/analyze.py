"""Per-bundle static analysis, independent of the capability manifest except for the
image's Python version: loader defects, reward contract, and a list of *needs*
(executables, modules, apps, network, mock web) that `evaluate` matches later.

The result is a plain JSON-able dict so it can be cached by bundle hash and sent
back from worker processes cheaply."""

from __future__ import annotations

import os
import re
from pathlib import Path
from typing import Any

import orjson

from shinken.bundles.loader import read_bundle
from shinken.bundles.model import Bundle, SetupStep
from shinken.needs import pyscan, shell
from shinken.needs.oracle_file import ORACLE_NAME, oracle_problem
from shinken.needs.urls import fetched_url_needs, file_url_needs, instruction_url_needs, mock_needs
from shinken.needs.vocab import DISPLAY_MODULES, DISPLAY_PROGRAMS, OPEN_SUFFIX, AppTypeReading, app_type_needs

# GUI program names anywhere in a setup script (heredocs included) mark a desktop task;
# a hint for the class only, never a requirement (it may be a comment).
_GUI_WORDS = (b"zenity", b"soffice", b"libreoffice", b"gimp", b"vlc", b"google-chrome", b"chromium", b"firefox",
              b"blender", b"openshot", b"thunderbird", b"xterm", b"gedit", b"evince", b"okular", b"inkscape",
              b"pyautogui", b"xdotool", b"gnome-terminal", b"nautilus", b"xfce4-terminal")
# The LLM judge module rewards import (upstream places it at /tmp/reward_judge.py). Found by
# its import anywhere, guarded or not: upstream wraps the call in try/except, so without a
# judge the reward silently loses that component instead of failing.
JUDGE_MODULE = "reward_judge"
_JUDGE_IMPORT = re.compile(rb"""(?m)^[ \t]*(?:from[ \t]+reward_judge[ \t]+import|import[ \t]+reward_judge\b)"""
                           rb"""|import_module\(\s*["']reward_judge["']|__import__\(\s*["']reward_judge["']""")


def _read_capped(path: str, size: int, cap: int) -> bytes | None:
    # Read exactly what is there (size from the loader's scan): `read(cap)` would
    # allocate a cap-sized buffer per file, which costs more than the parse.
    try:
        with open(path, "rb", buffering=0) as fh:
            return fh.read(min(size, cap) + 1)
    except OSError:
        return None  # the loader has already reported it unreadable


def _py_needs(name: str, facts: pyscan.PyFacts, reasons: list[list[str]], reward: bool) -> list[list[Any]]:
    needs: list[list[Any]] = []
    if facts.syntax in ("binary", "too_large"):
        code = ("reward_not_text" if facts.syntax == "binary" else "reward_too_large") if reward else "setup_not_text"
        reasons.append([code, f"{name}: {facts.syntax_detail}"])
    elif facts.syntax == "error" and reward:
        # Setup scripts are scanned, not always parsed, so their syntax is left to the probe.
        reasons.append(["reward_syntax_error", f"{name}: {facts.syntax_detail}"])
    elif facts.syntax == "unchecked" and reward:
        reasons.append(["syntax_unchecked", f"{name}: {facts.syntax_detail}"])
    elif facts.syntax == "newer":
        needs.append(["newer_python", [facts.syntax_detail], name])
    for alts, line in facts.imports:
        if JUDGE_MODULE in alts:
            continue  # not a module the image lacks: shinken places its own (see _judge_needs)
        needs.append(["module", alts, f"{name}:{line}"])
        if any(a in DISPLAY_MODULES for a in alts):
            needs.append(["display", ["display"], f"{name}:{line}"])
    for cmd, line in facts.programs:
        where = f"{name}:{line}"
        found = shell.argv_needs(cmd, where) if isinstance(cmd, list) else shell.command_needs(cmd, where)
        needs.extend(found)
    for url, line in facts.fetches:
        needs.extend(fetched_url_needs(url, f"{name}:{line}"))
    if facts.unresolved_fetch:  # a computed URL: the URLs the file binds to names are the candidates
        for url, line in facts.url_constants:
            needs.extend(fetched_url_needs(url, f"{name}:{line}"))
    if reward and facts.marker:
        code = {"no_marker": "reward_no_marker", "unreachable": "reward_marker_unreachable",
                "bare_number": "reward_bare_number", "total_score": "reward_total_score",
                "lowercase": "reward_lowercase_marker"}[facts.marker]
        reasons.append([code, f"{name}: {facts.marker_detail}"])
    return needs


def _judge_needs(data: bytes, name: str) -> list[list[Any]]:
    m = _JUDGE_IMPORT.search(data)
    if m is None:
        return []
    line = data.count(b"\n", 0, m.start()) + 1
    where = f"{name}:{line}"
    needs: list[list[Any]] = [["judge", ["llm"], where]]
    if b"call_video_vision_judge" in data:
        needs.append(["exe", ["ffmpeg"], f"{name}: call_video_vision_judge extracts frames with ffmpeg"])
    return needs


# The `/go` fields of a mock's State API a reward reads (as string literals: data["state_diff"],
# .get('current_state')); `shinken hub check` says which of them an app serves wrong.
_STATE_FIELDS = re.compile(rb"""["'](state_diff|current_state|initial_state)["']""")


def _state_api_needs(data: bytes, name: str) -> list[list[Any]]:
    """One `state_api` need per State API field the reward reads, where it first does."""
    out: list[list[Any]] = []
    seen: set[bytes] = set()
    for m in _STATE_FIELDS.finditer(data):
        field = m.group(1)
        if field not in seen:
            seen.add(field)
            line = data.count(b"\n", 0, m.start()) + 1
            out.append(["state_api", [field.decode()], f"{name}:{line}"])
    return out


def _classify(needs: list[list[Any]]) -> str:
    kinds = {n[0] for n in needs}
    if kinds & {"placeholder", "mock", "mock_host"}:
        return "mock_web"
    if "app" in kinds or "hint" in kinds:
        return "desktop_app"
    return "file_cli"


def _may_name_mocks(task_bytes: bytes | None) -> bool:
    """Whether the parsed task file can hold a placeholder or hosted mock host: the task
    file's own bytes show it unless a `\\u` escape spells one (placeholder and host
    characters are never JSON syntax). Saves re-serializing every task file to look."""
    return task_bytes is None or b"__CUA_GYM_" in task_bytes or b"xlang.ai" in task_bytes or b"\\u" in task_bytes


# Pure functions of a step's command and an app_type string, which repeat across a
# release's bundles (the same postconfig save, the same `python3 initial_setup.py`):
# computed once per worker. Bounded, so a corpus of unique commands costs no memory.
_MEMO_MAX = 4096
_command_memo: dict[tuple[str | tuple[Any, ...], str], list[list[Any]]] = {}
_app_type_memo: dict[str, AppTypeReading] = {}


def _command_needs(cmd: str | list[Any], where: str) -> list[list[Any]]:
    key = (cmd if isinstance(cmd, str) else tuple(cmd), where)
    try:
        hit = _command_memo[key]
    except (KeyError, TypeError):  # TypeError: an unhashable word (the shell reader skips it)
        hit = shell.command_needs(cmd, where)
        try:
            if len(_command_memo) >= _MEMO_MAX:
                _command_memo.clear()
            _command_memo[key] = hit
        except TypeError:
            pass
    return [[kind, list(alts), w] for kind, alts, w in hit]  # callers own their needs


def _app_type_reading(app_type: str) -> AppTypeReading:
    hit = _app_type_memo.get(app_type)
    if hit is None:
        if len(_app_type_memo) >= _MEMO_MAX:
            _app_type_memo.clear()
        hit = _app_type_memo[app_type] = app_type_needs(app_type)
    return hit


def _step_needs(steps: list[SetupStep], where: str) -> list[list[Any]]:
    needs: list[list[Any]] = []
    for st in steps:
        w = f"{where}[{st.index}] {st.type}"
        p = st.parameters
        if st.type in ("execute", "launch"):
            cmd = st.command()
            if cmd is not None:
                needs.extend(_command_needs(cmd, w))
        elif st.type == "open":
            path = p.get("path")
            if isinstance(path, str):
                apps = OPEN_SUFFIX.get(os.path.splitext(path)[1].lower())
                if apps:
                    needs.append(["app", list(apps), f"{w} {os.path.basename(path)}"])
        elif st.type == "download":
            for f in p.get("files") or []:
                url = f.get("url") if isinstance(f, dict) else None
                if isinstance(url, str) and not url.startswith("./"):
                    b = url.encode()
                    needs.extend(mock_needs(b, w) or fetched_url_needs(b, w))
    return needs


def analyze_folder(folder: str, py: tuple[int, int]) -> dict[str, Any]:
    """Everything triage needs from one bundle folder. Never raises for a bad bundle."""
    bundle, contents = read_bundle(folder)
    reasons: list[list[str]] = []
    seen: set[tuple[str, str]] = set()
    listed = not any(d.code == "unreadable" and d.path == str(bundle.path) for d in bundle.defects)
    unreadable = {d.path for d in bundle.defects if d.code == "unreadable"}
    for d in bundle.defects:
        if d.code == "missing_task_file" and not listed:
            continue  # the folder could not be listed; "no task file" would mislead
        if d.code == "empty_reward" and d.path in unreadable:
            continue  # unread, not empty
        key = (d.code, d.detail)
        if key not in seen:
            seen.add(key)
            where = os.path.basename(d.path) if d.path != folder else ""
            reasons.append([d.code, f"{where}: {d.detail}" if where and where not in d.detail else d.detail])
    needs: list[list[Any]] = []
    raw = bundle.raw
    generic_mock = False
    if raw:
        task_name = bundle.task_file.name if bundle.task_file else "task"
        if _may_name_mocks(contents.get(task_name)):
            needs.extend(mock_needs(orjson.dumps(raw), task_name))
        needs.extend(_step_needs(bundle.setup, "config"))
        needs.extend(_step_needs(bundle.postconfig, "evaluator.postconfig"))
        needs.extend(_step_needs(bundle.post_fork, "shinken_post_fork"))
        reading = _app_type_reading(bundle.app_type)
        generic_mock = reading.generic_mock
        needs.extend(["app", list(a), "app_type"] for a in reading.apps)
        needs.extend(["mock", [m], "app_type"] for m in reading.mocks)
        if reading.gui:
            needs.append(["hint", ["gui"], "app_type"])
            needs.append(["display", ["display"], "app_type gui"])
        reasons.extend(["normalized", n] for n in reading.notes)
        if reading.unknown:
            reasons.append(["unknown_app_type", f"app_type {', '.join(reading.unknown)!r} has no desktop_apps mapping"])
    sources = []
    if bundle.reward_name in bundle.files:  # Bundle.reward_path is not None
        sources.append((bundle.reward_name, True))
    for name in sorted(bundle.files):
        # The reference solution (pipeline exports) runs in the task machine too, so its needs
        # count like a setup file's; it is never placed there as part of the start (the loader).
        if (name.startswith("initial_setup") and name.endswith((".py", ".sh"))) or name == ORACLE_NAME:
            sources.append((name, False))
    if sources and sources[0][1]:
        needs.append(["exe", ["python3"], f"{sources[0][0]} runs with the system python3"])
    for name, is_reward in sources:
        data = contents.get(name)  # read once, by the loader (files up to 60 KiB)
        if data is None:
            data = _read_capped(os.path.join(folder, name), bundle.files[name], pyscan.PARSE_CAP)
        if data is None or (is_reward and any(r[0] == "empty_reward" for r in reasons)):
            continue  # unreadable / empty_reward already reported by the loader
        if name == ORACLE_NAME:
            problem = oracle_problem(data, bundle.files[name])
            if problem is not None:  # not part of the task's start: a note, never a defect
                reasons.append(["oracle_unusable", f"{name}: {problem}; the probe runs no oracle for this task"])
                continue
        if not is_reward:
            for w in _GUI_WORDS:
                if w in data:
                    needs.append(["hint", [w.decode()], name])
                    break
        needs.extend(mock_needs(data, name))
        if name.endswith(".sh"):
            if len(data) > pyscan.PARSE_CAP or b"\0" in data:
                reasons.append(["setup_not_text", f"{name}: binary or over {pyscan.PARSE_CAP} bytes"])
                continue
            needs.extend(shell.script_needs(data.decode("utf-8", "replace"), name))
            continue
        facts = pyscan.analyze(data, py, reward=is_reward)
        needs.extend(_py_needs(name, facts, reasons, is_reward))
        if facts.network_text:  # the file does not parse: every URL in it counts
            needs.extend(file_url_needs(data, name))
        if b"reward_judge" in data:
            needs.extend(_judge_needs(data, name))
        if is_reward:
            needs.extend(_state_api_needs(data, name))
    mocky = any(n[0] in ("mock", "mock_host", "placeholder") for n in needs)
    if not mocky and not generic_mock:
        needs = [n for n in needs if n[0] != "state_api"]  # field names alone do not make a web task
    if generic_mock and not mocky:
        # app_type says mock websites, but nothing names the app: a mock is still needed.
        needs.append(["mock", ["mock_websites"], "app_type"])
    instr = raw.get("instruction") if raw else None
    if isinstance(instr, str) and "://" in instr:
        # Where the agent is told to go (not a link it is to type in); in a mock web task the
        # mock stands in for the site, so there only the mock's need counts.
        needs.extend(n for n in instruction_url_needs(instr) if not (n[0] == "network" and (mocky or generic_mock)))
    if any(n[0] == "exe" and n[1][0] in DISPLAY_PROGRAMS for n in needs):
        needs.append(["display", ["display"], "GUI automation program"])
    if any(n[0] == "app" for n in needs):
        needs.append(["display", ["display"], "desktop app"])
    return {
        "id": bundle.id,
        "path": str(bundle.path),
        "app_type": bundle.app_type,
        "difficulty": bundle.difficulty,
        "bundle_hash": bundle.bundle_hash,
        "class": _classify(needs),
        "reasons": reasons,
        "needs": _dedupe(needs),
        # For the benchmark-overlap check and task families (triage/hygiene.py), run over the whole root.
        "instruction": instr if isinstance(instr, str) else None,
    }


def desktop_evidence(bundle: Bundle) -> list[str]:
    """Why a task needs a display, from what its bundle says and does: an app_type naming a
    desktop app or `gui`, a step, setup script or reward that starts a GUI program (from
    Python too, through helpers), GUI automation (pyautogui, xdotool). Empty: no display.
    The sandbox starts the desktop for a golden and its forks on this evidence."""
    if not bundle.raw:
        return []
    needs = analyze_folder(str(bundle.path), pyscan.HOST_PY)["needs"]
    # multi_apps names no one app (no requirement) but is always worked in the GUI.
    out = ["app_type multi_apps"] if "multi_apps" in bundle.app_type else []
    for kind, alts, where in needs:
        if kind == "app":
            out.append(f"{' | '.join(alts)} ({where})")
        elif kind == "display" and where not in ("desktop app",):
            out.append(f"a display ({where})")
        elif kind == "hint" and alts == ["gui"]:
            out.append("app_type gui")
    return out


def _dedupe(needs: list[list[Any]]) -> list[list[Any]]:
    out, seen = [], set()
    for kind, alts, where in needs:
        key = (kind, tuple(alts))
        if key not in seen:
            seen.add(key)
            out.append([kind, alts, where])
    return out


def symlink_folder_result(path: str) -> dict[str, Any]:
    """A task folder that is itself a symlink: reported, never followed."""
    p = Path(path)
    try:
        target = os.readlink(p)
    except OSError as exc:
        target = f"? ({exc.strerror})"
    return {
        "id": p.name, "path": path, "app_type": "", "difficulty": None, "bundle_hash": "",
        "class": "file_cli", "reasons": [["unsafe_link", f"task folder is a symlink to {target} (not followed)"]],
        "needs": [],
    }


def _name(e: os.DirEntry[str]) -> str:
    return e.name
