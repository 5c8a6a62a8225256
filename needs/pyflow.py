"""What Python code launches and fetches, from its AST: programs started through
subprocess/os (including `shlex.split(f'google-chrome "{URL}"')` and helpers such as
`launch_gui(cmd)` that take a command string), and the URLs given to requests / urllib /
httpx / webbrowser. A light data flow resolves names assigned string values
(`BASE_URL = "https://..."`), f-strings, `+`, `%` and `.format`, so a URL counts where it
is fetched, not where it is data.

Only statements on lines holding a candidate word (or a helper's name) are walked: the big
literal of seeded state most setup scripts carry is skipped without visiting its nodes."""

from __future__ import annotations

import ast
import bisect
import re
from collections.abc import Callable
from dataclasses import dataclass, field

# Calls that start programs -> index of the command argument (-1: all positional args are
# the argv, -2: the second one). Bare names count when imported from subprocess.
_LAUNCH = {
    "subprocess.Popen": 0, "subprocess.run": 0, "subprocess.call": 0, "subprocess.check_call": 0,
    "subprocess.check_output": 0, "subprocess.getoutput": 0, "subprocess.getstatusoutput": 0,
    "os.system": 0, "os.popen": 0, "asyncio.create_subprocess_shell": 0, "asyncio.create_subprocess_exec": -1,
    "os.execvp": -2, "os.execv": -2, "os.spawnvp": -2,
}
_BARE_LAUNCH = frozenset({"Popen", "run", "call", "check_call", "check_output", "getoutput", "getstatusoutput"})
# URL-taking calls; the URL is the first argument or `url=` (`request(method, url)`: the second).
_HTTP_METHODS = frozenset({"get", "post", "put", "patch", "delete", "head", "options", "request", "stream"})
_HTTP_ROOTS = ("requests", "httpx", "aiohttp", "session", "client", "http")
_FETCH_FUNCS = frozenset({"urlopen", "Request", "urlretrieve", "goto", "create_connection", "ws_connect"})
_WEBBROWSER = frozenset({"open", "open_new", "open_new_tab"})
# Words a launch or fetch call cannot be written without, spelled as code (so prose in
# seeded state, "the client's session", does not make its statement a candidate).
_CANDIDATE_WORDS = ("subprocess", "Popen", "os.system", "os.popen", "os.exec", "os.spawn", "create_subprocess",
                    "requests.", "urlopen", "urllib", "httpx", "aiohttp", "webbrowser", ".goto(", "Request(",
                    "urlretrieve", "create_connection", "ws_connect", "session.", "Session(", "client.",
                    "check_output", "check_call")
_WORDS = tuple(w.encode() for w in _CANDIDATE_WORDS)
_WORD_BYTES = frozenset(b"ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789_")
_SPACE_BYTES = frozenset(b" \t\n\r\f\v")


def gate(src: bytes) -> bool:
    """Some candidate word occurs in `src`: one C substring search per word, several
    times cheaper than one regex alternation (which tries every word at every byte)."""
    for w in _WORDS:
        if w in src:
            return True
    return False
_URL_START = re.compile(r"(?:https?|wss?)://")
_MAX_DEPTH = 6

Fn = ast.FunctionDef | ast.AsyncFunctionDef


@dataclass(slots=True)
class Flow:
    launches: list[tuple[str | list[str], int]] = field(default_factory=list)  # shell string | argv, line
    fetches: list[tuple[str, int]] = field(default_factory=list)  # URL text ({name} for unknown parts), line
    unresolved_fetch: bool = False  # some fetch's URL could not be worked out
    url_constants: list[tuple[str, int]] = field(default_factory=list)  # names assigned a whole URL


def dotted(node: ast.expr) -> str | None:
    """`requests.Session().get` -> "requests.Session.get"; None for anything dynamic."""
    parts = []
    while True:
        if isinstance(node, ast.Attribute):
            parts.append(node.attr)
            node = node.value
        elif isinstance(node, ast.Call):
            node = node.func
        elif isinstance(node, ast.Name):
            parts.append(node.id)
            return ".".join(reversed(parts))
        else:
            return None


class Scope:
    """Names assigned strings or string lists anywhere in the file, in one flat table
    (function-local `url = BASE + "/go"` is the usual shape in rewards)."""

    def __init__(self) -> None:
        self.values: dict[str, list[ast.expr]] = {}

    def bind(self, bindings: dict[str, ast.expr]) -> "Scope":
        """This scope with helper parameters bound to a caller's arguments (looked up first)."""
        if not bindings:
            return self
        out = Scope()
        out.values = {**self.values, **{k: [v, *self.values.get(k, ())] for k, v in bindings.items()}}
        return out

    def add(self, target: ast.expr, value: ast.expr) -> None:
        if isinstance(target, ast.Name) and isinstance(
                value, (ast.Constant, ast.JoinedStr, ast.BinOp, ast.Call, ast.List, ast.Tuple, ast.Name)):
            self.values.setdefault(target.id, []).append(value)

    def text(self, node: ast.expr | None, depth: int = 0) -> str | None:
        """The string `node` evaluates to, with `{name}` for parts that cannot be known;
        None when none of it is known."""
        if node is None or depth > _MAX_DEPTH:
            return None
        if isinstance(node, ast.Constant):
            return node.value if isinstance(node.value, str) else None
        if isinstance(node, ast.JoinedStr):
            out = []
            for v in node.values:
                if isinstance(v, ast.Constant) and isinstance(v.value, str):
                    out.append(v.value)
                elif isinstance(v, ast.FormattedValue):
                    t = self.text(v.value, depth + 1)
                    out.append(t if t is not None else "{%s}" % (dotted(v.value) or "?"))
            return "".join(out)
        if isinstance(node, ast.BinOp) and isinstance(node.op, ast.Add):
            a, b = self.text(node.left, depth + 1), self.text(node.right, depth + 1)
            if a is None and b is None:
                return None
            return (a if a is not None else "{?}") + (b if b is not None else "{?}")
        if isinstance(node, ast.BinOp) and isinstance(node.op, ast.Mod):
            return self.text(node.left, depth + 1)
        if isinstance(node, ast.Name):
            bound = self._bound(node.id, self.text, depth)
            return bound if isinstance(bound, str) else None
        if isinstance(node, ast.Call) and isinstance(node.func, ast.Attribute) and node.func.attr in (
                "format", "strip", "rstrip"):
            return self.text(node.func.value, depth + 1)
        return None

    def command(self, node: ast.expr | None, depth: int = 0) -> list[str] | str | None:
        """A command as argv (list) or shell string; None when unknown."""
        if node is None or depth > _MAX_DEPTH:
            return None
        if isinstance(node, (ast.List, ast.Tuple)):
            words = [self.text(e, depth + 1) for e in node.elts if not isinstance(e, ast.Starred)]
            if not words or words[0] is None:
                return None
            return [w if w is not None else "{?}" for w in words]
        if isinstance(node, ast.Call):
            name = dotted(node.func)
            if name in ("shlex.split", "split") and node.args:
                return self.text(node.args[0], depth + 1)
            if isinstance(node.func, ast.Attribute) and node.func.attr == "split" and not node.args:
                return self.text(node.func.value, depth + 1)
            return self.text(node, depth)
        if isinstance(node, ast.Name):
            return self._bound(node.id, self.command, depth)
        return self.text(node, depth)

    def _bound(self, name: str, read: Callable[[ast.expr, int], list[str] | str | None],
               depth: int) -> list[str] | str | None:
        """The first value bound to `name` that `read` can work out."""
        for v in self.values.get(name, ()):
            r = read(v, depth + 1)
            if r is not None:
                return r
        return None


def _arg(call: ast.Call, index: int, keywords: tuple[str, ...]) -> ast.expr | None:
    for k in call.keywords:
        if k.arg in keywords:
            return k.value
    if index == -1:
        return ast.List(elts=list(call.args), ctx=ast.Load()) if call.args else None
    if index == -2:
        return call.args[1] if len(call.args) > 1 else None
    return call.args[index] if len(call.args) > index else None


def _names(node: ast.AST) -> set[str]:
    return {n.id for n in ast.walk(node) if isinstance(n, ast.Name)}


@dataclass(frozen=True)
class _Hit:
    """A launch or fetch: the expression holding the command/URL, and what helper
    parameters in it stand for (a caller's arguments)."""

    kind: str  # "launch" | "fetch"
    expr: ast.expr | None
    bindings: tuple[tuple[str, ast.expr], ...] = ()

    def free_names(self) -> set[str]:
        bound = {k for k, _ in self.bindings}
        names = _names(self.expr) if self.expr is not None else set()
        for _, v in self.bindings:
            names |= _names(v)
        return names - bound


@dataclass(frozen=True)
class _Helper:
    param: str
    index: int
    inner: _Hit  # the sink call in its body, in terms of `param`


_BODY, _EXPR, _SKIP = 0, 1, 2
_BODY_FIELDS = frozenset({"body", "orelse", "finalbody", "handlers", "cases"})
# Fields that never hold a node (names, flags, kinds): not walked for calls.
_SCALAR_FIELDS = frozenset({"ctx", "id", "attr", "arg", "kind", "conversion", "type_comment", "name", "level",
                            "module", "asname", "simple", "is_async"})
_STMT_FIELDS: dict[type[ast.AST], tuple[tuple[str, int], ...]] = {}
_CHILD_FIELDS: dict[type[ast.AST], tuple[str, ...]] = {ast.Constant: ()}
_NESTED: dict[type[ast.AST], tuple[str, ...]] = {}


def _stmt_fields(cls: type[ast.AST]) -> tuple[tuple[str, int], ...]:
    """(field, kind) of a statement class in `_fields` order; `returns` is not walked."""
    hit = _STMT_FIELDS.get(cls)
    if hit is None:
        hit = _STMT_FIELDS[cls] = tuple(
            (f, _BODY if f in _BODY_FIELDS else _SKIP if f == "returns" else _EXPR)
            for f in cls._fields if f not in _SCALAR_FIELDS)
    return hit


def _child_fields(cls: type[ast.AST]) -> tuple[str, ...]:
    hit = _CHILD_FIELDS.get(cls)
    if hit is None:
        hit = _CHILD_FIELDS[cls] = tuple(f for f in cls._fields if f not in _SCALAR_FIELDS)
    return hit


def _nested(cls: type[ast.AST]) -> tuple[str, ...]:
    """The fields of a statement (or except handler) holding statements, in the order the
    assignments are collected: body, orelse, finalbody, handlers, then match cases."""
    hit = _NESTED.get(cls)
    if hit is None:
        hit = _NESTED[cls] = tuple(a for a in ("body", "orelse", "finalbody", "handlers", "cases") if a in cls._fields)
    return hit


class _Scan:
    def __init__(self, tree: ast.Module, src: bytes) -> None:
        self.tree, self.src = tree, src
        self.scope = Scope()
        self.bare_launch: set[str] = set()
        self.helpers: dict[str, _Helper] = {}  # functions handing a parameter to a launch/fetch
        self.flow = Flow()
        self._defs: list[ast.stmt] = []
        self._walked: dict[int, list[ast.Call]] = {}  # id(node) -> its Call nodes (the tree outlives the scan)
        self._word_starts: list[int] | None = None
        self._collect(tree.body)

    def _collect(self, stmts: list[ast.stmt]) -> None:
        """Assignments (all levels) and subprocess names imported bare."""
        for s in stmts:
            if isinstance(s, ast.Assign):
                for t in s.targets:
                    self.scope.add(t, s.value)
                if len(s.targets) == 1 and isinstance(s.value, (ast.Constant, ast.JoinedStr)):
                    value = self.scope.text(s.value)
                    if value and _URL_START.match(value):
                        self.flow.url_constants.append((value, s.lineno))
            elif isinstance(s, ast.AnnAssign) and s.value is not None:
                self.scope.add(s.target, s.value)
            elif isinstance(s, ast.ImportFrom) and s.module == "subprocess":
                self.bare_launch.update(a.asname or a.name for a in s.names if a.name in _BARE_LAUNCH)
            elif isinstance(s, (ast.FunctionDef, ast.AsyncFunctionDef)):
                self._defs.append(s)
            for attr in _nested(s.__class__):
                sub = getattr(s, attr, None)
                if sub:
                    if attr == "cases":
                        for case in sub:
                            self._collect(case.body)
                    else:
                        self._collect(sub)

    def _calls(self, lines: list[int], functions_only: bool = False) -> list[tuple[ast.Call, Fn | None]]:
        """Call nodes in statements that touch one of `lines`, with their function (only
        inside function bodies with `functions_only`: where helpers are found)."""
        out: list[tuple[ast.Call, Fn | None]] = []
        n_lines = len(lines)
        bisect_left = bisect.bisect_left

        def visit(stmts: list[ast.stmt], fn: Fn | None) -> None:
            for s in stmts:
                i = bisect_left(lines, s.lineno)
                if i >= n_lines or lines[i] > (s.end_lineno or s.lineno):
                    continue  # touches none of the lines
                inner = s if isinstance(s, (ast.FunctionDef, ast.AsyncFunctionDef)) else fn
                if functions_only and inner is None and not isinstance(s, ast.ClassDef):
                    continue
                for name, kind in _stmt_fields(s.__class__):
                    value = getattr(s, name, None)
                    if kind == _BODY:
                        if not value:
                            continue
                        if name == "handlers":
                            for h in value:
                                visit(h.body, inner)
                        elif name == "cases":
                            for c in value:
                                visit(c.body, inner)
                        else:
                            visit(value, inner)
                    elif isinstance(value, ast.AST):
                        if kind != _SKIP:
                            out.extend((n, fn) for n in self._call_nodes(value))
                    elif isinstance(value, list):  # a list of decorators is walked too (only `returns` is not)
                        for v in value:
                            if isinstance(v, ast.AST):
                                out.extend((n, fn) for n in self._call_nodes(v))
        visit(self.tree.body, None)
        return out

    def _call_nodes(self, node: ast.AST) -> list[ast.Call]:
        """The Call nodes under `node` in `ast.walk` order (breadth first), walked once per
        node: the helper passes and the final pass ask for the same statements again."""
        key = id(node)
        hit = self._walked.get(key)
        if hit is not None:
            return hit
        out: list[ast.Call] = []
        todo = [node]
        for n in todo:  # appending while iterating: a breadth-first queue
            if isinstance(n, ast.Call):
                out.append(n)
            for f in _child_fields(n.__class__):
                v = getattr(n, f, None)
                if v.__class__ is list:
                    todo.extend([x for x in v if isinstance(x, ast.AST)])
                elif isinstance(v, ast.AST):
                    todo.append(v)
        self._walked[key] = out
        return out

    def _lines(self, extra: tuple[str, ...] = ()) -> list[int]:
        """Lines holding a candidate word, or a helper's name called (`name(`, `name (`,
        a word of its own), except `import`/`from` lines at column 0. Found with substring
        searches (a regex alternation of ~25 words cost ~0.1 ms per file)."""
        src = self.src
        if self._word_starts is None:
            self._word_starts = []
            for w in _WORDS:
                i = src.find(w)
                while i >= 0:
                    self._word_starts.append(i)
                    i = src.find(w, i + len(w))
        starts = list(self._word_starts)
        for name in extra:
            w = name.encode()
            i = src.find(w)
            while i >= 0:
                j = i + len(w)
                if (i == 0 or src[i - 1] not in _WORD_BYTES) and (j >= len(src) or src[j] not in _WORD_BYTES):
                    while j < len(src) and src[j] in _SPACE_BYTES:
                        j += 1
                    if j < len(src) and src[j] == 40:  # "("
                        starts.append(i)
                i = src.find(w, i + 1)
        out: list[int] = []
        pos, line = 0, 1
        for p in sorted(starts):  # count newlines incrementally
            line += src.count(b"\n", pos, p)
            pos = p
            if out and out[-1] == line:
                continue
            start = src.rfind(b"\n", 0, p) + 1
            if src.startswith((b"import ", b"from "), start):
                continue  # `import subprocess` calls nothing
            out.append(line)
        return out

    def sink(self, call: ast.Call) -> _Hit | None:
        name = dotted(call.func)
        if name is None:
            return None
        last = name.rsplit(".", 1)[-1]
        if name in _LAUNCH:
            return _Hit("launch", _arg(call, _LAUNCH[name], ("args", "cmd", "command")))
        if name in self.bare_launch:
            return _Hit("launch", _arg(call, 0, ("args",)))
        if last in self.helpers:
            h = self.helpers[last]
            actual = _arg(call, h.index, (h.param,))
            if actual is None:
                return None
            return _Hit(h.inner.kind, h.inner.expr, ((h.param, actual), *h.inner.bindings))
        if name.startswith("webbrowser.") and last in _WEBBROWSER:
            return _Hit("fetch", _arg(call, 0, ("url",)))
        if last in _FETCH_FUNCS:
            return _Hit("fetch", _arg(call, 0, ("url",)))
        if last in _HTTP_METHODS and "." in name:
            url = _arg(call, 1 if last == "request" else 0, ("url",))
            root = name.split(".", 1)[0].lower()
            if any(r in root for r in _HTTP_ROOTS):
                return _Hit("fetch", url)
            t = self.scope.text(url)
            if t is not None and _URL_START.match(t):  # anything.get("https://..."): a fetch
                return _Hit("fetch", url)
        return None

    def run(self) -> Flow:
        lines = self._lines()
        if not lines:
            return self.flow
        # Helpers are functions with parameters; most rewards have none (check() only).
        has_params = any(isinstance(n, (ast.FunctionDef, ast.AsyncFunctionDef)) and n.args.args
                         for n in self._defs)
        calls = self._calls(lines, functions_only=True) if has_params else []
        for _ in range(3 if has_params else 0):  # helpers, helpers of helpers
            found = False
            for call, fn in calls:
                if fn is None or fn.name in self.helpers:
                    continue
                hit = self.sink(call)
                if hit is None or hit.expr is None:
                    continue
                free = hit.free_names()
                for i, a in enumerate(fn.args.args):
                    if a.arg in free:
                        self.helpers[fn.name] = _Helper(a.arg, i, hit)
                        found = True
                        break
            if not found:
                break
            lines = self._lines(tuple(self.helpers))
            calls = self._calls(lines, functions_only=True)
        for call, fn in self._calls(lines):
            hit = self.sink(call)
            if hit is None:
                continue
            if fn is not None and fn.name in self.helpers and self.helpers[fn.name].param in hit.free_names():
                continue  # inside the helper, on its parameter: its callers say what it runs
            scope = self.scope.bind(dict(hit.bindings))
            if hit.kind == "launch":
                cmd = scope.command(hit.expr)
                if cmd is not None:
                    self.flow.launches.append((cmd, call.lineno))
            else:
                t = scope.text(hit.expr)
                if t is None:
                    self.flow.unresolved_fetch = True
                else:
                    self.flow.fetches.append((t, call.lineno))
        return self.flow


def scan(tree: ast.Module, src: bytes) -> Flow:
    """Launches and fetches of one parsed file (empty when no candidate word occurs)."""
    if not gate(src):
        return Flow()
    return _Scan(tree, src).run()
