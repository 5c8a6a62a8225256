"""Accessibility tree -> numbered text with stable element ids, and diffs between observations.

Input is the JSON that the guest script `shinken-a11y-dump` prints (see /work/notes/images.md):
`{"ok": true, "nodes": [{"path", "parent", "role", "name", "value", "states", "bbox", "app",
"actions"}]}`. Pure code: no Docker, so it is unit-tested on canned dumps.

Ids: an element keeps its `e<N>` across observations. AT-SPI gives no persistent object id that
survives a fresh dump, so identity is inferred: the same (app, path inside the app, role, name) is
the same element; failing that, a unique (app, role, name) or (app, path, role) seen in the previous
observation is taken as the element having moved or been renamed. Paths are taken relative to the
application because the desktop's application order changes when other apps start or quit.
"""

from __future__ import annotations

import json
from dataclasses import dataclass, field
from typing import Any, Iterable

# States worth a model's attention; AT-SPI reports many more (enabled, sensitive, visible, ...).
SHOWN_STATES = (
    "focused", "selected", "checked", "pressed", "expanded", "collapsed", "editable", "active",
    "indeterminate", "modal", "multi-line", "read-only", "required", "invalid", "disabled",
)
# Containers that carry no meaning of their own unless named; their children are still shown.
STRUCTURAL_ROLES = frozenset(
    {"filler", "panel", "section", "redundant object", "unknown", "layered pane", "scroll pane",
     "viewport", "split pane", "grouping", "form", "invalid"}
)
# Roles whose numeric value means something (others report 0.0 through the Value interface).
VALUE_ROLES = frozenset({"scroll bar", "slider", "spin button", "progress bar", "level bar", "dial", "text",
                         "entry", "table cell", "password text", "combo box"})
MAX_TEXT = 160  # a name/value longer than this is cut (document bodies can be megabytes)
MAX_RENDER_CHARS = 48_000  # cap of one rendered observation
HISTORY_MAX = 50_000  # identities remembered per session (ids of elements seen long ago may be reused)


class DumpError(ValueError):
    """The guest's a11y dump was not the JSON we expect."""


@dataclass(frozen=True)
class Node:
    path: str
    parent: str | None
    role: str
    name: str
    value: str
    states: tuple[str, ...]
    bbox: tuple[int, int, int, int] | None
    app: str
    actions: tuple[str, ...]

    @property
    def depth(self) -> int:
        return self.path.count("/")

    @property
    def rel_path(self) -> str:
        """The path below the application node (the first component is the app's index)."""
        head, _, rest = self.path.partition("/")
        return rest

    def center(self) -> tuple[int, int] | None:
        if not self.bbox:
            return None
        x, y, w, h = self.bbox
        if w <= 0 or h <= 0:
            return None
        return x + w // 2, y + h // 2


def _text(v: Any) -> str:
    if v is None:
        return ""
    return v if isinstance(v, str) else str(v)


def parse_dump(data: str | bytes | dict[str, Any]) -> list[Node]:
    """Nodes of one dump, in document order. Raises DumpError for anything malformed."""
    if isinstance(data, (str, bytes)):
        try:
            data = json.loads(data)
        except ValueError as exc:
            raise DumpError(f"a11y dump is not JSON: {exc}") from None
    if not isinstance(data, dict) or not isinstance(data.get("nodes"), list):
        raise DumpError("a11y dump has no `nodes` list")
    if data.get("ok") is False:
        raise DumpError(f"a11y dump failed in the guest: {_text(data.get('error')) or 'no detail'}")
    nodes: list[Node] = []
    seen: set[str] = set()
    for raw in data["nodes"]:
        if not isinstance(raw, dict) or not isinstance(raw.get("path"), str):
            raise DumpError(f"a11y dump node without a path: {str(raw)[:120]}")
        path = raw["path"]
        if path in seen:
            continue  # a node reported twice (AT-SPI can list a child under two parents)
        seen.add(path)
        bbox = raw.get("bbox")
        box: tuple[int, int, int, int] | None = None
        if isinstance(bbox, (list, tuple)) and len(bbox) == 4:
            try:
                box = (int(bbox[0]), int(bbox[1]), int(bbox[2]), int(bbox[3]))
            except (TypeError, ValueError):
                box = None
        states = raw.get("states") or []
        actions = raw.get("actions") or []
        nodes.append(
            Node(
                path=path,
                parent=raw.get("parent") if isinstance(raw.get("parent"), str) else None,
                role=_text(raw.get("role")) or "unknown",
                name=_text(raw.get("name")),
                value=_text(raw.get("value")),
                states=tuple(_text(s) for s in states) if isinstance(states, list) else (),
                bbox=box,
                app=_text(raw.get("app")),
                actions=tuple(_text(a) for a in actions) if isinstance(actions, list) else (),
            )
        )
    return nodes


def _quote(s: str) -> str:
    s = s.replace("\n", "\\n").replace("\r", "")
    if len(s) > MAX_TEXT:
        s = s[:MAX_TEXT] + "…"
    return json.dumps(s, ensure_ascii=False)


def render_line(eid: str, node: Node) -> str:
    """`[e7] text "Your name:" value="Ada" (focused, editable)` — no indentation, so a line
    compares equal across observations when only the tree around it moved."""
    parts = [f"[{eid}]", node.role]
    if node.name:
        parts.append(_quote(node.name))
    if node.value and node.value != node.name and not (node.value == "0.0" and node.role not in VALUE_ROLES):
        # labels repeat their name as text; buttons and panels report a meaningless numeric 0.0
        parts.append(f"value={_quote(node.value)}")
    states = [s for s in SHOWN_STATES if s in node.states]
    if node.states and "enabled" not in node.states and "sensitive" not in node.states and node.role != "application":
        states.append("disabled")  # AT-SPI reports the positive state; its absence is what matters
    if states:
        parts.append("(" + ", ".join(states) + ")")
    return " ".join(parts)


def _visible(node: Node, dump_has_showing: bool) -> bool:
    if node.role == "application":
        return True
    if dump_has_showing and "showing" not in node.states and "visible" not in node.states:
        return False  # e.g. closed menus of an office app: hundreds of items nobody can click
    if node.role in STRUCTURAL_ROLES and not node.name and not node.value:
        return False
    if node.role == "table cell" and not node.value and not {"focused", "selected"} & set(node.states):
        return False  # a spreadsheet shows hundreds of empty cells; their names are their coordinates
    return True


@dataclass
class Observation:
    """One rendered observation: id -> node, and id -> line for the nodes shown."""

    nodes: dict[str, Node]
    lines: dict[str, str]  # in document order
    depth: dict[str, int]

    def text(self, limit: int = MAX_RENDER_CHARS) -> str:
        if not self.lines:
            return "(the desktop has no accessible elements)"
        base = min(self.depth.values())
        out: list[str] = []
        size = 0
        items = list(self.lines.items())
        for i, (eid, line) in enumerate(items):
            row = " " * (self.depth[eid] - base) + line
            if size + len(row) + 1 > limit:
                out.append(f"... {len(items) - i} more elements cut; use mode \"diff\" after actions")
                break
            out.append(row)
            size += len(row) + 1
        return "\n".join(out)


@dataclass
class IdMap:
    """Assigns stable `e<N>` ids across the observations of one rollout."""

    next_id: int = 1
    # (app, rel_path, role, name) -> (id, observation number last seen)
    history: dict[tuple[str, str, str, str], tuple[str, int]] = field(default_factory=dict)
    previous: dict[str, Node] = field(default_factory=dict)  # id -> node of the last observation
    observations: int = 0

    def _new(self) -> str:
        eid = f"e{self.next_id}"
        self.next_id += 1
        return eid

    def assign(self, nodes: Iterable[Node]) -> dict[str, Node]:
        """id -> node for this observation (document order)."""
        nodes = list(nodes)
        self.observations += 1
        claimed: set[str] = set()
        ids: list[str | None] = [None] * len(nodes)

        # Pass 1: exact identity seen before (most recently seen first if two keys share an id).
        exact = []
        for i, n in enumerate(nodes):
            hit = self.history.get((n.app, n.rel_path, n.role, n.name))
            if hit:
                exact.append((-hit[1], i, hit[0]))
        for _, i, eid in sorted(exact):
            if eid not in claimed and ids[i] is None:
                ids[i] = eid
                claimed.add(eid)

        # Pass 2: moved — a unique (app, role, name) of the previous observation.
        by_name: dict[tuple[str, str, str], list[str]] = {}
        for eid, n in self.previous.items():
            if n.name and eid not in claimed:
                by_name.setdefault((n.app, n.role, n.name), []).append(eid)
        want_name: dict[tuple[str, str, str], list[int]] = {}
        for i, n in enumerate(nodes):
            if ids[i] is None and n.name:
                want_name.setdefault((n.app, n.role, n.name), []).append(i)
        for key, idx in want_name.items():
            cands = by_name.get(key, [])
            if len(idx) == 1 and len(cands) == 1 and cands[0] not in claimed:
                ids[idx[0]] = cands[0]
                claimed.add(cands[0])

        # Pass 3: renamed in place — same (app, path, role) as an unclaimed previous element.
        by_path = {(n.app, n.rel_path, n.role): eid for eid, n in self.previous.items() if eid not in claimed}
        for i, n in enumerate(nodes):
            if ids[i] is None:
                prev = by_path.get((n.app, n.rel_path, n.role))
                if prev and prev not in claimed:
                    ids[i] = prev
                    claimed.add(prev)

        result: dict[str, Node] = {}
        for i, n in enumerate(nodes):
            eid = ids[i] or self._new()
            result[eid] = n
            self.history[(n.app, n.rel_path, n.role, n.name)] = (eid, self.observations)
        self.previous = result
        if len(self.history) > HISTORY_MAX:  # a long rollout over a big app: forget the oldest
            keep = sorted(self.history.items(), key=lambda kv: kv[1][1])[-HISTORY_MAX // 2:]
            self.history = dict(keep)
        return result

    def observe(self, nodes: Iterable[Node]) -> Observation:
        assigned = self.assign(nodes)
        has_showing = any("showing" in n.states for n in assigned.values())
        lines = {eid: render_line(eid, n) for eid, n in assigned.items() if _visible(n, has_showing)}
        # Indent by shown ancestors only, so hidden containers do not push lines to the right.
        shown = {assigned[eid].path for eid in lines}
        depth = {}
        for eid in lines:
            parts = assigned[eid].path.split("/")
            depth[eid] = sum(1 for i in range(1, len(parts)) if "/".join(parts[:i]) in shown)
        return Observation(nodes=assigned, lines=lines, depth=depth)


def diff(before: dict[str, str] | None, after: dict[str, str]) -> str:
    """Lines that changed between two observations: `~` changed, `+` added, `-` removed."""
    if before is None:
        return ""
    out: list[str] = []
    for eid, line in after.items():
        old = before.get(eid)
        if old is None:
            out.append("+ " + line)
        elif old != line:
            out.append("~ " + line)
    for eid, line in before.items():
        if eid not in after:
            out.append("- " + line)
    return "\n".join(out)
