"""Pure tests of the a11y layer and tool argument handling on canned dumps (no Docker)."""

from __future__ import annotations

import copy
import json
import re

import pytest

from shinken.computer import a11y
from shinken.computer.tools import TOOL_SCHEMAS, ToolContext, _args, ToolArgError, run_tool


def _node(path, role, name="", value="", states=("enabled", "sensitive", "showing", "visible"), bbox=(0, 0, 10, 10),
          app="zenity"):
    parent = path.rsplit("/", 1)[0] if "/" in path else None
    return {"path": path, "parent": parent, "role": role, "name": name, "value": value,
            "states": list(states), "bbox": list(bbox), "app": app, "actions": []}


def zenity_dump(value: str = "", focused: bool = False) -> dict:
    entry_states = ["editable", "enabled", "focusable", "sensitive", "showing", "single-line", "visible"] + (["focused"] if focused else [])
    return {"ok": True, "nodes": [
        _node("0", "application", "zenity", states=()),
        _node("0/0", "dialog", "Shinken", states=("active", "enabled", "sensitive", "showing", "visible")),
        _node("0/0/0", "filler"),
        _node("0/0/0/0", "label", "Your name:"),
        _node("0/0/0/1", "text", "", value, states=entry_states, bbox=(800, 500, 300, 30)),
        _node("0/0/0/2", "filler"),
        _node("0/0/0/2/0", "push button", "Cancel"),
        _node("0/0/0/2/1", "push button", "OK"),
        _node("0/0/0/3", "menu item", "Hidden", states=("enabled",)),  # not showing
    ]}


# Captured from shinken-a11y-dump --showing-only with zenity --entry running in the sandbox image.
REAL_ZENITY = '{"ok": true, "nodes": [{"path": "0", "parent": null, "role": "application", "name": "zenity", "value": null, "states": [], "bbox": null, "app": "zenity", "actions": []}, {"path": "0/0", "parent": "0", "role": "dialog", "name": "Shinken", "value": null, "states": ["active", "enabled", "resizable", "sensitive", "showing", "visible"], "bbox": [863, 480, 196, 144], "app": "zenity", "actions": []}, {"path": "0/0/0", "parent": "0/0", "role": "filler", "name": "", "value": null, "states": ["enabled", "sensitive", "showing", "vertical", "visible"], "bbox": [871, 507, 180, 105], "app": "zenity", "actions": []}, {"path": "0/0/0/0", "parent": "0/0/0", "role": "filler", "name": "", "value": null, "states": ["enabled", "horizontal", "sensitive", "showing", "visible"], "bbox": [877, 513, 168, 57], "app": "zenity", "actions": []}, {"path": "0/0/0/0/0", "parent": "0/0/0/0", "role": "filler", "name": "", "value": null, "states": ["enabled", "sensitive", "showing", "vertical", "visible"], "bbox": [877, 513, 168, 57], "app": "zenity", "actions": []}, {"path": "0/0/0/0/0/0", "parent": "0/0/0/0/0", "role": "label", "name": "Your name:", "value": "Your name:", "states": ["enabled", "multi-line", "sensitive", "showing", "visible"], "bbox": [877, 513, 168, 17], "app": "zenity", "actions": []}, {"path": "0/0/0/0/0/1", "parent": "0/0/0/0/0", "role": "text", "name": "", "value": "", "states": ["editable", "enabled", "focusable", "focused", "sensitive", "showing", "single-line", "visible"], "bbox": [877, 536, 168, 34], "app": "zenity", "actions": ["activate"]}, {"path": "0/0/0/1", "parent": "0/0/0", "role": "filler", "name": "", "value": null, "states": ["enabled", "horizontal", "sensitive", "showing", "visible"], "bbox": [871, 578, 180, 34], "app": "zenity", "actions": []}, {"path": "0/0/0/1/0", "parent": "0/0/0/1", "role": "filler", "name": "", "value": null, "states": ["enabled", "horizontal", "sensitive", "showing", "visible"], "bbox": [871, 578, 180, 34], "app": "zenity", "actions": []}, {"path": "0/0/0/1/0/0", "parent": "0/0/0/1/0", "role": "push button", "name": "Cancel", "value": null, "states": ["enabled", "focusable", "sensitive", "showing", "visible"], "bbox": [875, 578, 86, 34], "app": "zenity", "actions": ["click"]}, {"path": "0/0/0/1/0/1", "parent": "0/0/0/1/0", "role": "push button", "name": "OK", "value": null, "states": ["enabled", "focusable", "is-default", "sensitive", "showing", "visible"], "bbox": [965, 578, 86, 34], "app": "zenity", "actions": ["click"]}], "truncated": false, "elapsed_s": 0.009}'


def _ids_by(obs: a11y.Observation, role: str, name: str = "") -> str:
    return next(eid for eid, n in obs.nodes.items() if n.role == role and n.name == name)


def test_render_numbers_one_line_per_node_and_hides_noise():
    ids = a11y.IdMap()
    obs = ids.observe(a11y.parse_dump(zenity_dump()))
    text = obs.text()
    lines = text.splitlines()
    assert lines[0] == '[e1] application "zenity"'
    assert ' [e2] dialog "Shinken" (active)' in lines
    entry = _ids_by(obs, "text")
    assert f'[{entry}] text (editable)' in text
    assert "filler" not in text  # unnamed structural containers are not shown
    assert "Hidden" not in text  # not showing
    assert all(line.strip().startswith("[e") for line in lines)
    # children are indented under their parent
    assert lines[-1].startswith("  [e") and '"OK"' in lines[-1]


def test_ids_stable_and_diff_shows_value_change():
    ids = a11y.IdMap()
    first = ids.observe(a11y.parse_dump(zenity_dump()))
    second = ids.observe(a11y.parse_dump(zenity_dump("Ada Lovelace", focused=True)))
    assert first.nodes.keys() == second.nodes.keys()
    entry = _ids_by(first, "text")
    assert _ids_by(second, "text") == entry
    d = a11y.diff(first.lines, second.lines)
    assert d == f'~ [{entry}] text value="Ada Lovelace" (focused, editable)'
    assert len(d.encode()) < 200


def test_ids_survive_app_reorder_and_sibling_insertion():
    ids = a11y.IdMap()
    base = zenity_dump()
    first = ids.observe(a11y.parse_dump(base))
    ok_id = _ids_by(first, "push button", "OK")
    entry = _ids_by(first, "text")
    moved = copy.deepcopy(base)
    # another app registers first: every zenity path gets a new first component
    for n in moved["nodes"]:
        n["path"] = "1" + n["path"][1:]
        if n["parent"]:
            n["parent"] = "1" + n["parent"][1:]
    moved["nodes"][:0] = [_node("0", "application", "xterm", app="xterm", states=())]
    # a new button is inserted before OK: OK's index shifts
    idx = next(i for i, n in enumerate(moved["nodes"]) if n["name"] == "OK")
    moved["nodes"][idx]["path"] = "1/0/0/2/2"
    moved["nodes"].insert(idx, _node("1/0/0/2/1", "push button", "Help"))
    second = ids.observe(a11y.parse_dump(moved))
    assert _ids_by(second, "push button", "OK") == ok_id
    assert _ids_by(second, "text") == entry
    d = a11y.diff(first.lines, second.lines).splitlines()
    assert sorted(line[:2] for line in d) == ["+ ", "+ "]  # xterm app and the Help button
    assert any('"Help"' in line for line in d)


def test_diff_reports_removed_and_renamed():
    ids = a11y.IdMap()
    first = ids.observe(a11y.parse_dump(zenity_dump()))
    gone = zenity_dump()
    gone["nodes"] = [n for n in gone["nodes"] if n["name"] != "Cancel"]
    gone["nodes"][1]["name"] = "Shinken (busy)"  # dialog retitled in place keeps its id
    second = ids.observe(a11y.parse_dump(gone))
    d = a11y.diff(first.lines, second.lines).splitlines()
    assert '- [' in d[-1] and '"Cancel"' in d[-1]
    assert d[0] == '~ [e2] dialog "Shinken (busy)" (active)'
    assert a11y.diff(second.lines, second.lines) == ""


def test_reappearing_element_gets_its_old_id():
    ids = a11y.IdMap()
    first = ids.observe(a11y.parse_dump(zenity_dump()))
    ids.observe(a11y.parse_dump({"ok": True, "nodes": []}))
    third = ids.observe(a11y.parse_dump(zenity_dump()))
    assert first.nodes.keys() == third.nodes.keys()


def test_long_values_are_cut_and_render_is_capped():
    dump = zenity_dump("x" * 5000)
    obs = a11y.IdMap().observe(a11y.parse_dump(dump))
    assert len(obs.text()) < 1000
    big = {"ok": True, "nodes": [_node("0", "application", "big", app="big", states=())] + [
        _node(f"0/{i}", "push button", f"button number {i}", app="big") for i in range(5000)]}
    text = a11y.IdMap().observe(a11y.parse_dump(big)).text(limit=10_000)
    assert len(text) <= 10_100 and "more elements cut" in text


@pytest.mark.parametrize("bad", ["not json", json.dumps({"nodes": "x"}), json.dumps({"ok": False, "nodes": [],
                                                                                      "error": "no bus"}),
                                 json.dumps({"ok": True, "nodes": [{"role": "x"}]})])
def test_malformed_dumps_raise_dump_error(bad):
    with pytest.raises(a11y.DumpError):
        a11y.parse_dump(bad)


def test_schemas_are_strict_mode_valid():
    names = [t["name"] for t in TOOL_SCHEMAS]
    assert names == ["computer_observe", "computer_click", "computer_type_text", "computer_key",
                     "computer_exec", "computer_done"]
    for t in TOOL_SCHEMAS:
        p = t["parameters"]
        assert t["type"] == "function" and t["strict"] is True and t["description"]
        assert p["type"] == "object" and p["additionalProperties"] is False
        assert sorted(p["required"]) == sorted(p["properties"])
    click = TOOL_SCHEMAS[1]["parameters"]["properties"]
    assert click["element"]["type"] == ["string", "null"] and click["x"]["type"] == ["integer", "null"]


def test_argument_validation_is_text_not_exception():
    ctx = ToolContext(fork=None)  # validation fails before anything touches the fork
    assert run_tool(ctx, "computer_rm", {}).startswith("error: unknown tool")
    assert "unexpected argument" in run_tool(ctx, "computer_done", {"why": 1})
    assert "missing argument 'text'" in run_tool(ctx, "computer_type_text", {})
    assert "must be one of" in run_tool(ctx, "computer_observe", {"mode": "pixels"})
    assert "not both" in run_tool(ctx, "computer_click", {"element": "e1", "x": 1, "y": 2})
    assert "last observation" in run_tool(ctx, "computer_click", {"element": "e1", "x": None, "y": None})
    assert "not a key name" in run_tool(ctx, "computer_key", {"keys": "ctrl+s;reboot"})
    assert "must be integer" in run_tool(ctx, "computer_click", {"element": None, "x": "1", "y": 2})
    assert run_tool(ctx, "computer_done", {}).startswith("done") and ctx.done
    with pytest.raises(ToolArgError):
        _args("computer_exec", ["ls"])
    assert _args("computer_key", '{"keys": "Return"}') == {"keys": "Return"}  # Responses-API string form
    assert "not valid JSON" in run_tool(ctx, "computer_key", '{"keys": ')


def test_real_zenity_dump_renders_compactly():
    obs = a11y.IdMap().observe(a11y.parse_dump(REAL_ZENITY))
    lines = [line.strip() for line in obs.text().splitlines()]
    assert lines[0] == '[e1] application "zenity"'
    assert any(re.fullmatch(r'\[e\d+\] label "Your name:" \(multi-line\)', line) for line in lines)  # no repeated value
    assert any(re.fullmatch(r'\[e\d+\] text \(focused, editable\)', line) for line in lines)
    assert [line.split("] ", 1)[1] for line in lines[-2:]] == ['push button "Cancel"', 'push button "OK"']
    assert len(lines) == 6  # five fillers hidden
    entry = next(eid for eid, n in obs.nodes.items() if n.role == "text")
    assert obs.nodes[entry].center() == (877 + 84, 536 + 17)


def test_missing_enabled_state_renders_disabled():
    dump = zenity_dump()
    dump["nodes"][-2]["states"] = ["showing", "visible", "focusable"]  # OK button greyed out
    text = a11y.IdMap().observe(a11y.parse_dump(dump)).text()
    assert 'push button "OK" (disabled)' in text and 'push button "Cancel"\n' in text


def test_id_history_is_bounded(monkeypatch):
    monkeypatch.setattr(a11y, "HISTORY_MAX", 100)
    ids = a11y.IdMap()

    def dump(round_):
        return a11y.parse_dump({"ok": True, "nodes": [
            _node(f"0/{i}", "push button", f"b{round_}-{i}") for i in range(30)]})

    seen = []
    for round_ in range(10):
        seen.append(ids.observe(dump(round_)).nodes.keys())
        assert len(ids.history) <= 100
    assert ids.observe(dump(9)).nodes.keys() == seen[-1]  # recent identities are still known


def test_spreadsheet_noise_is_hidden():
    dump = {"ok": True, "nodes": [
        _node("0", "application", "soffice", app="soffice", states=()),
        _node("0/0", "table", "Sheet Sales", app="soffice"),
        _node("0/0/0", "table cell", "A1", "Item", app="soffice"),
        _node("0/0/1", "table cell", "B1", "", app="soffice"),  # empty: hidden
        _node("0/0/2", "table cell", "C1", "", app="soffice", states=("enabled", "showing", "selected")),
        _node("0/1", "push button", "Save", "0.0", app="soffice"),  # Value iface noise
        _node("0/2", "scroll bar", "Vertical", "0.0", app="soffice"),  # a real position
    ]}
    text = a11y.IdMap().observe(a11y.parse_dump(dump)).text()
    assert 'table cell "A1" value="Item"' in text and '"B1"' not in text
    assert 'table cell "C1" (selected)' in text
    assert 'push button "Save"\n' in text and 'scroll bar "Vertical" value="0.0"' in text
