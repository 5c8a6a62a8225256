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
GATE = re.compile("|".join(re.escape(w) for w in _CANDIDATE_WORDS).encode())
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


class _Scan:
    def __init__(self, tree: ast.Module, src: bytes) -> None:
        self.tree, self.src = tree, src
        self.scope = Scope()
        self.bare_launch: set[str] = set()
        self.helpers: dict[str, _Helper] = {}  # functions handing a parameter to a launch/fetch
        self.flow = Flow()
        self._defs: list[ast.stmt] = []
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
            for attr in ("body", "orelse", "finalbody", "handlers"):
                sub = getattr(s, attr, None)
                if sub:
                    self._collect(sub)
            for case in getattr(s, "cases", ()) or ():
                self._collect(case.body)

    def _calls(self, lines: list[int], functions_only: bool = False) -> list[tuple[ast.Call, Fn | None]]:
        """Call nodes in statements that touch one of `lines`, with their function (only
        inside function bodies with `functions_only`: where helpers are found)."""
        out: list[tuple[ast.Call, Fn | None]] = []

        def touches(s: ast.stmt) -> bool:
            i = bisect.bisect_left(lines, s.lineno)
            return i < len(lines) and lines[i] <= (s.end_lineno or s.lineno)

        def visit(stmts: list[ast.stmt], fn: Fn | None) -> None:
            for s in stmts:
                if not touches(s):
                    continue
                inner = fn if not isinstance(s, (ast.FunctionDef, ast.AsyncFunctionDef)) else s
                if functions_only and inner is None and not isinstance(s, ast.ClassDef):
                    continue
                for name, value in ast.iter_fields(s):
                    if isinstance(value, list) and value and isinstance(value[0], ast.stmt):
                        visit(value, inner)
                    elif isinstance(value, list) and value and isinstance(value[0], ast.excepthandler):
                        for h in value:
                            visit(h.body, inner)
                    elif isinstance(value, list) and value and isinstance(value[0], ast.match_case):
                        for c in value:
                            visit(c.body, inner)
                    elif isinstance(value, ast.AST) and name not in ("decorator_list", "returns"):
                        out.extend((n, fn) for n in ast.walk(value) if isinstance(n, ast.Call))
                    elif isinstance(value, list):
                        for v in value:
                            if isinstance(v, ast.AST):
                                out.extend((n, fn) for n in ast.walk(v) if isinstance(n, ast.Call))
        visit(self.tree.body, None)
        return out

    def _lines(self, extra: tuple[str, ...] = ()) -> list[int]:
        rx = GATE if not extra else re.compile(GATE.pattern + b"|" + b"|".join(
            rb"\b" + re.escape(n.encode()) + rb"\s*\(" for n in extra))
        out: list[int] = []
        src, pos, line = self.src, 0, 1
        for m in rx.finditer(src):  # matches come in order: count newlines incrementally
            line += src.count(b"\n", pos, m.start())
            pos = m.start()
            if out and out[-1] == line:
                continue
            start = src.rfind(b"\n", 0, pos) + 1
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
    if not GATE.search(src):
        return Flow()
    return _Scan(tree, src).run()
