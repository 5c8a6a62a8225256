"""Static analysis of reward.py / initial_setup.py source: imports, reward contract,
programs called through subprocess, URLs. Parsing with `ast` on the host never runs
the code. One statement-level pass over the tree (expressions are not walked), so a
bundle costs one parse plus a few regex scans."""

from __future__ import annotations

import ast
import io
import re
import sys
import tokenize
from dataclasses import dataclass, field

from shinken import pyast
from shinken.needs.reward import CANONICAL_WORD, SOURCE_MARKER, SOURCE_MARKER_ANY_CASE, SOURCE_TOTAL_SCORE
from shinken.needs import pyflow

HOST_PY = sys.version_info[:2]
PARSE_CAP = 1024 * 1024  # rewards are KBs; a MiB-sized "script" is not worth parsing

_IMPORT_LINE = re.compile(rb"^[ \t]*(?:import[ \t]+([\w.]+(?:[ \t]*(?:as[ \t]+\w+)?[ \t]*,[ \t]*[\w.]+)*)|from[ \t]+([\w.]+)[ \t]+import)", re.M)
_DYN_IMPORT = re.compile(rb"""(?:__import__|import_module)\(\s*[rbu]?["']([\w.]+)["']""")
_SUBPROC = re.compile(
    rb"""(?:subprocess\.(?:run|call|check_call|check_output|Popen|getoutput|getstatusoutput)|os\.(?:system|popen)"""
    rb"""|\bPopen|\bcheck_output|\bcheck_call)\(\s*(\[)?\s*[rbuRBUfF]{0,2}(["'])((?:(?!\2).){1,400}?)\2"""
)
_NET_WORDS = (b"requests", b"urllib", b"httpx", b"aiohttp", b"http.client", b"urlopen", b"wget", b"curl", b"socket",
              b"webbrowser", b"selenium", b"playwright")
# An indented import, and imports guarded by try/except ImportError. A line-start pattern is
# written as "at 0, or after a newline": a pattern that begins with a literal is found by a
# fast scan for that byte, while `^` under re.M is tried at every byte (~10x slower).
_INDENTED_IMPORT = rb"[ \t]+(?:import|from)[ \t]+[\w.]"
_NESTED_IMPORT_AT0 = re.compile(_INDENTED_IMPORT)
_NESTED_IMPORT = re.compile(b"\n" + _INDENTED_IMPORT)
_EXCEPT_IMPORT = re.compile(rb"except[ \t(]*(?:ImportError|ModuleNotFoundError)")
_TRY_IMPORT = rb"[ \t]*try:[ \t]*\n[ \t]*(?:import|from)[ \t]"
_TRY_IMPORT_AT0 = re.compile(_TRY_IMPORT)
_TRY_IMPORT_LINE = re.compile(b"\n" + _TRY_IMPORT)
_IMPORT_ERRORS = frozenset({"ImportError", "ModuleNotFoundError", "Exception", "BaseException"})
_EXITS = frozenset({"exit", "quit", "_exit"})


@dataclass(slots=True)
class PyFacts:
    """What one Python file needs and how it looks; `imports` hold alternatives
    (any one satisfies) with the line that needs them."""

    syntax: str | None = None  # None | "error" | "newer" | "unchecked" | "binary" | "too_large"
    syntax_detail: str = ""
    imports: list[tuple[list[str], int]] = field(default_factory=list)
    programs: list[tuple[str | list[str], int]] = field(default_factory=list)  # (shell string | argv, line)
    # From the AST (pyflow) when the file parses: URLs it fetches or opens; `unresolved_fetch`
    # when some fetch's URL is computed, then `url_constants` (names bound to a whole URL) count.
    fetches: list[tuple[str, int]] = field(default_factory=list)
    unresolved_fetch: bool = False
    url_constants: list[tuple[str, int]] = field(default_factory=list)
    flow_checked: bool = False  # programs/fetches came from the AST (else the regex fallback below)
    network_text: bool = False  # no AST: the file does network I/O, so every URL in it counts
    marker: str | None = None  # reward only: None ok | no_marker | unreachable | bare_number | total_score | lowercase
    marker_detail: str = ""


def _top(name: str) -> str:
    return name.split(".", 1)[0]


def regex_imports(src: bytes) -> list[str]:
    """Top-level imported names by a line regex (used for `python -c` strings)."""
    names: list[str] = []
    for part in src.replace(b";", b"\n").splitlines():
        for m in _IMPORT_LINE.finditer(part):
            if m.group(2):
                if not m.group(2).startswith(b"."):
                    names.append(_top(m.group(2).decode()))
            else:
                for item in m.group(1).split(b","):
                    w = item.split()
                    if w:
                        names.append(_top(w[0].decode()))
    return [n for n in dict.fromkeys(names) if n]


def regex_import_lines(src: bytes) -> list[tuple[str, int]]:
    """(top-level name, line) of `import`/`from` statements by a line regex."""
    out: list[tuple[str, int]] = []
    for m in _IMPORT_LINE.finditer(src):
        line = _lineno(src, m.start())
        if m.group(2):
            if not m.group(2).startswith(b"."):
                out.append((_top(m.group(2).decode()), line))
        else:
            for item in m.group(1).split(b","):
                w = item.split()
                if w:
                    out.append((_top(w[0].decode()), line))
    return out


def token_imports(src: bytes) -> list[tuple[str, int]]:
    """Imports of a file that does not parse: the tokenizer still sees `import x` /
    `from x import` at the start of logical lines."""
    out: list[tuple[str, int]] = []
    try:
        toks = list(tokenize.tokenize(io.BytesIO(src).readline))
    except (tokenize.TokenError, SyntaxError, UnicodeDecodeError, ValueError):
        # The tokenizer gave up (unterminated string, bad encoding): the line regex is all we have.
        return [(n, 0) for n in regex_imports(src)]
    at_start = True
    i = 0
    while i < len(toks):
        t = toks[i]
        if t.type in (tokenize.NEWLINE, tokenize.NL, tokenize.INDENT, tokenize.DEDENT, tokenize.ENCODING):
            at_start = True
        elif at_start and t.type == tokenize.NAME and t.string in ("import", "from") and i + 1 < len(toks):
            nxt = toks[i + 1]
            if nxt.type == tokenize.NAME:
                out.append((nxt.string, t.start[0]))
                if t.string == "import":  # import a, b
                    j = i + 2
                    while j + 1 < len(toks) and toks[j].type not in (tokenize.NEWLINE, tokenize.NL):
                        if toks[j].string == "," and toks[j + 1].type == tokenize.NAME:
                            out.append((toks[j + 1].string, toks[j + 1].start[0]))
                        j += 1
            at_start = False
        else:
            at_start = False
        i += 1
    return out


def _handler_catches_import(h: ast.ExceptHandler) -> bool:
    t = h.type
    if t is None:
        return True
    names = t.elts if isinstance(t, ast.Tuple) else [t]
    return any(isinstance(n, ast.Name) and n.id in _IMPORT_ERRORS for n in names)


class _Walker:
    """Statement-level pass: imports (with try/except ImportError alternatives) and
    bare-number prints."""

    __slots__ = ("imports", "bare_print", "walked")

    def __init__(self) -> None:
        self.imports: list[tuple[list[str], int]] = []
        self.bare_print = 0
        self.walked = True

    def count_bare_prints(self, tree: ast.Module) -> int:
        if not self.walked:  # only the imports were visited; now the rest is needed
            self.imports, self.walked = [], True
            self.walk(tree.body)
        return self.bare_print

    def names(self, stmts: list[ast.stmt]) -> list[tuple[str, int]]:
        out: list[tuple[str, int]] = []
        for s in stmts:
            if isinstance(s, ast.Import):
                out.extend((_top(a.name), s.lineno) for a in s.names)
            elif isinstance(s, ast.ImportFrom):
                if not s.level and s.module:
                    out.append((_top(s.module), s.lineno))
        return out

    def walk(self, stmts: list[ast.stmt]) -> None:
        for s in stmts:
            if isinstance(s, (ast.Import, ast.ImportFrom)):
                for name, line in self.names([s]):
                    if name != "__future__":
                        self.imports.append(([name], line))
            elif isinstance(s, (ast.Try, ast.TryStar)):
                if any(_handler_catches_import(h) for h in s.handlers):
                    tried = self.names(s.body)
                    fallback = [n for h in s.handlers for n in self.names(h.body)]
                    if tried and fallback:
                        alts = list(dict.fromkeys(n for n, _ in tried + fallback))
                        self.imports.append((alts, tried[0][1]))
                    # Imports guarded without a fallback import are optional: not required.
                    self.walk([x for x in s.body if not isinstance(x, (ast.Import, ast.ImportFrom))])
                    for h in s.handlers:
                        self.walk([x for x in h.body if not isinstance(x, (ast.Import, ast.ImportFrom))])
                else:
                    self.walk(s.body)
                    for h in s.handlers:
                        self.walk(h.body)
                self.walk(s.orelse)
                self.walk(s.finalbody)
            elif isinstance(s, ast.If) and _is_env_test(s.test):
                # `if sys.version_info < ...:` / `if TYPE_CHECKING:`: the branches' imports are
                # alternatives (one branch runs), or optional when one branch imports nothing.
                a, b = self.names(s.body), self.names(s.orelse)
                if a and b:
                    self.imports.append((list(dict.fromkeys(n for n, _ in a + b)), a[0][1]))
                self.walk([x for x in s.body if not isinstance(x, (ast.Import, ast.ImportFrom))])
                self.walk([x for x in s.orelse if not isinstance(x, (ast.Import, ast.ImportFrom))])
            elif isinstance(s, ast.Expr):
                v = s.value
                if (isinstance(v, ast.Call) and isinstance(v.func, ast.Name) and v.func.id == "print"
                        and len(v.args) == 1 and _numberish(v.args[0])):
                    self.bare_print += 1
            else:
                for attr in ("body", "orelse", "finalbody"):
                    sub = getattr(s, attr, None)
                    if sub:
                        self.walk(sub)
                for c in getattr(s, "cases", ()) or ():
                    self.walk(c.body)


def _nested_import(src: bytes) -> bool:
    """An `import`/`from` line that is indented (inside a function, block or try)."""
    return bool(_NESTED_IMPORT_AT0.match(src) or _NESTED_IMPORT.search(src))


def _guarded_import(src: bytes) -> bool:
    """`except ImportError` / `except ModuleNotFoundError`, or a `try:` line whose next
    line imports."""
    if (b"ImportError" in src or b"ModuleNotFoundError" in src) and _EXCEPT_IMPORT.search(src):
        return True
    return b"try:" in src and bool(_TRY_IMPORT_AT0.match(src) or _TRY_IMPORT_LINE.search(src))


def _is_env_test(e: ast.expr) -> bool:
    """A condition on the interpreter/platform rather than on task state."""
    for node in ast.walk(e):
        if isinstance(node, ast.Name) and node.id in ("TYPE_CHECKING", "PY2", "PY3"):
            return True
        if isinstance(node, ast.Attribute) and node.attr in ("version_info", "platform", "TYPE_CHECKING"):
            return True
    return False


def _numberish(e: ast.expr) -> bool:
    """An expression that prints as a bare number: `score`, `round(s, 2)`, `a / b`, `f"{s}"`."""
    if isinstance(e, ast.Constant):
        return isinstance(e.value, (int, float)) and not isinstance(e.value, bool)
    if isinstance(e, (ast.Name, ast.BinOp, ast.Attribute, ast.Subscript)):
        return True
    if isinstance(e, ast.Call) and isinstance(e.func, ast.Name):
        return e.func.id in ("round", "float", "int", "str", "min", "max", "sum")
    if isinstance(e, ast.JoinedStr):
        return len(e.values) == 1 and isinstance(e.values[0], ast.FormattedValue)
    return False


def parse(src: bytes, py: tuple[int, int]) -> tuple[ast.Module | None, str | None, str]:
    """(tree, problem, detail). Grammar of the image's Python where the host can tell."""
    try:
        if py < HOST_PY:
            return pyast.parse(src, feature_version=py), None, ""
        return pyast.parse(src), None, ""
    except SyntaxError as exc:
        detail = f"line {exc.lineno}: {exc.msg}"
        if py < HOST_PY:
            try:
                tree = pyast.parse(src)
            except (SyntaxError, ValueError, RecursionError, MemoryError):
                return None, "error", detail
            return tree, "newer", f"{detail} (needs Python > {py[0]}.{py[1]})"
        return None, ("unchecked" if py > HOST_PY else "error"), detail
    except ValueError as exc:  # NUL bytes
        return None, "binary", str(exc)
    except (RecursionError, MemoryError):
        return None, "error", "too deeply nested to parse"


def _lineno(src: bytes, pos: int) -> int:
    return src.count(b"\n", 0, pos) + 1


def _marker_lines(rx: re.Pattern[bytes], src: bytes, word: bytes | None = None) -> list[int]:
    """Lines of `rx`'s matches outside comments. `word`: a literal every match holds on its
    first line, so the scan starts at the first line holding it (a reward prints its marker
    near the end; matching from every quote before it cost ~0.1 ms per reward)."""
    out: list[int] = []
    at = src.find(word) if word is not None else 0
    if at < 0:
        return out
    for m in rx.finditer(src, src.rfind(b"\n", 0, at) + 1):
        start = src.rfind(b"\n", 0, m.start()) + 1
        if src[start : m.start()].lstrip().startswith(b"#"):
            continue
        out.append(_lineno(src, m.start()))
    return out


def _reachable(tree: ast.Module, src: bytes, lines: list[int]) -> bool:
    body = tree.body
    text = None
    for line in lines:
        for idx, s in enumerate(body):
            if not (s.lineno <= line <= (s.end_lineno or s.lineno)):
                continue
            if isinstance(s, ast.Expr) and isinstance(s.value, ast.Constant):
                break  # a docstring mentions it; that prints nothing
            if any(_is_exit(p) for p in body[:idx]):
                break
            if isinstance(s, (ast.FunctionDef, ast.AsyncFunctionDef, ast.ClassDef)) and not s.decorator_list:
                if text is None:
                    text = src.decode("utf-8", "replace")
                if len(re.findall(rf"\b{re.escape(s.name)}\b", text)) < 2:
                    break  # defined, never referenced
            return True
        else:
            return True  # a line between statements (continuation): do not guess
    return False


def _is_exit(s: ast.stmt) -> bool:
    if isinstance(s, ast.Raise):
        return True
    if isinstance(s, ast.Expr) and isinstance(s.value, ast.Call):
        f = s.value.func
        if isinstance(f, ast.Name) and f.id in _EXITS:
            return True
        if isinstance(f, ast.Attribute) and f.attr in ("exit", "_exit") and isinstance(f.value, ast.Name) \
                and f.value.id in ("sys", "os"):
            return True
    return False


def analyze(src: bytes, py: tuple[int, int], *, reward: bool) -> PyFacts:
    facts = PyFacts()
    if len(src) > PARSE_CAP:
        facts.syntax, facts.syntax_detail = "too_large", f"{len(src)} bytes > {PARSE_CAP}"
        return facts
    if b"\0" in src:
        facts.syntax, facts.syntax_detail = "binary", "contains NUL bytes"
        return facts
    if reward or pyflow.gate(src) or _guarded_import(src):
        # Setup scripts are parsed when imports are guarded or something is launched or
        # fetched (pyflow tells launches and fetches from data only on the tree).
        tree, problem, detail = parse(src, py)
    else:
        # Setup scripts: imports by a line scan, no parse (the probe catches a setup that
        # crashes); the AST is only worth it when imports sit in try/except fallbacks.
        tree, problem, detail = None, None, ""
        facts.imports = [([n], line) for n, line in regex_import_lines(src) if n != "__future__"]
    facts.syntax, facts.syntax_detail = problem, detail
    if tree is not None:
        w = _Walker()
        if _nested_import(src) or _guarded_import(src):
            w.walk(tree.body)  # imports inside functions/blocks/try: walk the statements
        else:  # every import is at column 0: the module body lists them all
            w.walk([x for x in tree.body if isinstance(x, (ast.Import, ast.ImportFrom))])
            w.walked = False
        facts.imports = w.imports
    elif problem is not None:
        facts.imports = [([n], line) for n, line in token_imports(src) if n != "__future__"]
        w = None
    else:
        w = None
    seen = {n for alts, _ in facts.imports for n in alts}
    for m in (_DYN_IMPORT.finditer(src) if b"import_" in src or b"__import__" in src else ()):
        n = _top(m.group(1).decode())
        if n not in seen:
            facts.imports.append(([n], _lineno(src, m.start())))
            seen.add(n)
    if tree is not None:
        flow = pyflow.scan(tree, src)
        facts.programs, facts.fetches = flow.launches, flow.fetches
        facts.unresolved_fetch, facts.url_constants = flow.unresolved_fetch, flow.url_constants
        facts.flow_checked = True
    # Substring gates first: `in` is a C memchr-speed scan, the regexes are not.
    elif b"subprocess" in src or b"os.system" in src or b"popen" in src or b"Popen" in src:
        for m in _SUBPROC.finditer(src):
            cmd = m.group(3).decode("utf-8", "replace")
            facts.programs.append(([cmd] if m.group(1) else cmd, _lineno(src, m.start())))
    # Without a tree (a file that does not parse) a network-looking file's URLs all count.
    facts.network_text = tree is None and b"://" in src and any(k in src for k in _NET_WORDS)
    if reward:
        upper = _marker_lines(SOURCE_MARKER, src, CANONICAL_WORD.encode())
        if upper:
            if tree is not None and not _reachable(tree, src, upper):
                facts.marker, facts.marker_detail = "unreachable", f"REWARD: printed only at line(s) {upper[:5]}, never reached"
        elif _marker_lines(SOURCE_MARKER_ANY_CASE, src):
            facts.marker, facts.marker_detail = "lowercase", "prints `reward:` in lower/mixed case"
        elif _marker_lines(SOURCE_TOTAL_SCORE, src):
            facts.marker, facts.marker_detail = "total_score", "prints `Total score: X`, no `REWARD:` line"
        elif w is not None and tree is not None and w.count_bare_prints(tree):
            facts.marker, facts.marker_detail = "bare_number", "prints a bare value, no `REWARD:` line"
        elif tree is not None:
            facts.marker, facts.marker_detail = "no_marker", "no `REWARD:` print anywhere"
    return facts
