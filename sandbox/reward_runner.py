"""Runs one reward.py inside the sandbox as the verifier, and credits only the score lines that
reward.py's own score statements print. A guest script: stdlib only and self-contained, placed in
the root-owned reward folder and started as `python3 -I -B run.py reward.py` by
sandbox/verifier.py, which prepends the score grammar's patterns (needs/reward.py) to it.

Two things a policy could otherwise use to forge its reward are closed here:
- Imports: reward.py may put a folder anyone can write on sys.path (the judge convention inserts
  /tmp). A module is imported only from a file whose every folder up to / is root-owned and
  writable by nobody else (a sticky root-owned folder such as /tmp may hold a root-owned file);
  a planted /tmp/openpyxl.py is passed over for the system's.
- Output: reward.py prints what the policy wrote (a cell, a file's text). A `REWARD: x` or
  `Total score: x` line counts only when a statement of reward.py that names the marker in a
  string literal printed it, once; every other occurrence (the policy's text printed by any other
  statement, a subprocess writing to the inherited descriptors, a statement that printed two
  markers) is defused so the host's grammar does not match it. A bare number (the grammar's last
  resort) counts only when reward.py's own code printed it, not a subprocess; a crash prints its
  traceback after it, so it is never the last line then.
The host parses the output with the unchanged grammar (needs/reward.py)."""

from __future__ import annotations

import _ast  # the C module: `ast` and `runpy` cost more start-up than the reward itself
import io
import os
import re
import stat
import sys
import threading
import types
from importlib.machinery import ModuleSpec, PathFinder, SourceFileLoader
TYPE_CHECKING = False  # typing's import costs the reward's start 2.5 ms
if TYPE_CHECKING:
    from collections.abc import Iterator
    from typing import Any

# Set by sandbox/verifier.py from needs/reward.py (SHINKEN_* lines it prepends to this file);
# these defaults are the same patterns, for running it by hand.
MARKER: str = globals().get("SHINKEN_MARKER", r"(?i)\b(reward|total[\s_]*score)(\s*[:=])")
NUMBER: str = globals().get("SHINKEN_NUMBER",
                            r"[-+]?(?:\d+(?:\.\d*)?|\.\d+)(?:[eE][-+]?\d+)?|[-+]?(?:nan|inf(?:inity)?)")

_MARKER_RE = re.compile(MARKER)
_BARE_RE = re.compile(rf"(?im)^(\s*(?:{NUMBER})\s*)$")
DEFUSED = r"\1 [shinken: not a score statement]\2"
DEFUSED_BARE = r"[shinken: not printed by reward.py] \1"


# --------------------------------------------------------------------------- imports

_trusted_dirs: dict[str, bool] = {}


def _component_ok(path: str, last: bool) -> bool:
    try:
        st = os.lstat(path)
    except OSError:
        return False
    if st.st_uid != 0:
        return False
    if stat.S_ISLNK(st.st_mode):  # a root-owned link in a trusted folder; its target is checked too
        return True
    if not st.st_mode & 0o022:
        return True
    # A sticky root-owned folder (/tmp): others may add entries, never replace root's.
    return not last and stat.S_ISDIR(st.st_mode) and bool(st.st_mode & stat.S_ISVTX)


def _chain_ok(path: str) -> bool:
    parts = [p for p in path.split("/") if p]
    here = "/"
    if not _component_ok(here, last=not parts):
        return False
    for i, part in enumerate(parts):
        here = os.path.join(here, part)
        last = i == len(parts) - 1
        if not last and here in _trusted_dirs:
            if not _trusted_dirs[here]:
                return False
            continue
        ok = _component_ok(here, last)
        if not last:
            _trusted_dirs[here] = ok
        if not ok:
            return False
    return True


def trusted_path(path: str) -> bool:
    """Every folder from / to `path` (and `path` itself), lexically and resolved: root-owned and
    writable by nobody else; a sticky root-owned folder may hold it."""
    path = os.path.abspath(path)
    while not os.path.lexists(path) and path != "/":  # a module inside a zip file: the zip is checked
        path = os.path.dirname(path)
    return _chain_ok(path) and _chain_ok(os.path.realpath(path))


def _spec_trusted(spec: ModuleSpec) -> bool:
    if spec.origin and spec.has_location:
        return trusted_path(spec.origin)
    locations = list(spec.submodule_search_locations or [])  # a namespace package: its folders
    return bool(locations) and all(trusted_path(p) for p in locations)


class SourceOnlyLoader(SourceFileLoader):
    """A trusted module's source, never bytecode from a __pycache__ folder others can write (a
    planted unchecked-hash .pyc is never compared with its source)."""

    def get_data(self, path: str) -> bytes:
        if path != self.path:
            raise OSError("bytecode from an untrusted folder is not read")
        return super().get_data(path)


class TrustedPathFinder:
    """sys.meta_path's path finder, entry by entry, passing over modules in untrusted places."""

    refused: list[str] = []

    @classmethod
    def find_spec(cls, name: str, path: Any = None, target: Any = None) -> ModuleSpec | None:
        for entry in list(path if path is not None else sys.path):
            spec = PathFinder.find_spec(name, [entry], target)
            if spec is None:
                continue
            if _spec_trusted(spec):
                if (isinstance(spec.loader, SourceFileLoader) and spec.cached and spec.origin
                        and not trusted_path(os.path.dirname(spec.cached))):
                    spec.loader = SourceOnlyLoader(spec.loader.name, spec.origin)
                return spec
            cls.refused.append(f"{name} from {spec.origin or entry}")
        return None

    @classmethod
    def invalidate_caches(cls) -> None:
        PathFinder.invalidate_caches()


def install_import_guard() -> None:
    sys.meta_path[:] = [TrustedPathFinder if f is PathFinder else f for f in sys.meta_path]
    if TrustedPathFinder not in sys.meta_path:
        sys.meta_path.append(TrustedPathFinder)


# --------------------------------------------------------------------------- output

def _walk(node: _ast.AST) -> Iterator[_ast.AST]:
    todo = [node]
    while todo:
        n = todo.pop()
        yield n
        for name in n._fields:
            v = getattr(n, name, None)
            if isinstance(v, _ast.AST):
                todo.append(v)
            elif isinstance(v, list):
                todo.extend(x for x in v if isinstance(x, _ast.AST))


def _literals(node: _ast.AST, names: set[str]) -> bool:
    """The statement names a score marker: in a string literal, or through a module-level name
    bound to one (`MARK = "REWARD: "`)."""
    for sub in _walk(node):
        if isinstance(sub, _ast.Constant) and isinstance(sub.value, str) and _MARKER_RE.search(sub.value):
            return True
        if isinstance(sub, _ast.Name) and sub.id in names:
            return True
    return False


def score_lines(source: str) -> set[int]:
    """The lines of reward.py's statements that print a score (see _literals)."""
    try:
        tree = compile(source, "reward.py", "exec", _ast.PyCF_ONLY_AST)
    except (SyntaxError, ValueError):
        return set()
    names = {t.id for n in getattr(tree, "body", []) if isinstance(n, _ast.Assign) and isinstance(n.value, _ast.Constant)
             and isinstance(n.value.value, str) and _MARKER_RE.search(n.value.value)
             for t in n.targets if isinstance(t, _ast.Name)}
    lines: set[int] = set()
    for node in _walk(tree):
        # Simple statements only: a compound one (if, def) would credit every line of its body.
        if isinstance(node, _ast.stmt) and not hasattr(node, "body") and _literals(node, names):
            lines.update(range(node.lineno, (node.end_lineno or node.lineno) + 1))
    return lines


class Transcript:
    """What reward.py and its subprocesses write, in order, each piece with where it came from;
    written on to `out_fd` as soon as it is settled (a run killed at its timeout keeps what it
    printed): a piece from no score statement at once, a score statement's run (print writes its
    parts separately) when the next piece comes from elsewhere."""

    def __init__(self, reward_file: str, lines: set[int], out_fd: int) -> None:
        self.file = reward_file
        self.lines = lines
        self.out_fd = out_fd
        self.lock = threading.Lock()
        self._key: Any = None  # the score statement run being gathered
        self._run: list[str] = []

    def origin(self, frame: Any) -> tuple[Any, bool]:
        """(the crediting statement's key, whether reward.py's code wrote it at all)."""
        mine = False
        while frame is not None:
            if frame.f_code.co_filename == self.file:
                mine = True
                if frame.f_lineno in self.lines:
                    return (id(frame), frame.f_lineno), True
            frame = frame.f_back
        return None, mine

    def add(self, key: Any, mine: bool, text: str) -> None:
        with self.lock:
            if key is not None and key == self._key:
                self._run.append(text)
                return
            self._settle()
            if key is not None:
                self._key, self._run = key, [text]
                return
            text = _MARKER_RE.sub(DEFUSED, text)
            self._emit(text if mine else _BARE_RE.sub(DEFUSED_BARE, text))

    def close(self) -> None:
        with self.lock:
            self._settle()

    def _settle(self) -> None:
        if self._key is None:
            return
        text = "".join(self._run)
        if len(_MARKER_RE.findall(text)) > 1:  # the policy's text beside the real marker: none counts
            text = _MARKER_RE.sub(DEFUSED, text)
        self._key, self._run = None, []
        self._emit(text)

    def _emit(self, text: str) -> None:
        view = memoryview(text.encode("utf-8", "replace"))
        while view:
            try:
                n = os.write(self.out_fd, view)
            except OSError:
                return
            view = view[n:]


class _Stream(io.TextIOBase):
    """sys.stdout / sys.stderr while reward.py runs: every write goes to the transcript."""

    def __init__(self, transcript: Transcript, fd: int) -> None:
        self._t = transcript
        self._fd = fd
        self.buffer = _Bytes(self)

    @property
    def encoding(self) -> str:  # type: ignore[override]
        return "utf-8"

    @property
    def errors(self) -> str:  # type: ignore[override]
        return "replace"

    def write(self, s: str) -> int:
        key, mine = self._t.origin(sys._getframe(1))
        self._t.add(key, mine, str(s))
        return len(s)

    def writable(self) -> bool:
        return True

    def flush(self) -> None:
        pass

    def isatty(self) -> bool:
        return False

    def fileno(self) -> int:  # a subprocess told to write here writes to the captured descriptors
        return self._fd


class _Bytes(io.RawIOBase):
    def __init__(self, text: _Stream) -> None:
        self._text = text

    def write(self, b: Any) -> int:
        data = bytes(b)
        key, mine = self._text._t.origin(sys._getframe(1))
        self._text._t.add(key, mine, data.decode("utf-8", "replace"))
        return len(data)

    def writable(self) -> bool:
        return True

    def fileno(self) -> int:
        return self._text.fileno()


def _drain(fd: int, transcript: Transcript) -> None:
    """What subprocesses write to the inherited descriptors: never reward.py's own statements."""
    while True:
        try:
            chunk = os.read(fd, 65536)
        except OSError:
            return
        if not chunk:
            return
        transcript.add(None, False, chunk.decode("utf-8", "replace"))


# --------------------------------------------------------------------------- main

# The desktop session's settings shinken passes (sandbox/guest.py session_env): dropped when no
# display is up, so a reward on a computer without a desktop runs as it always did.
SESSION_KEYS = ("DISPLAY", "DBUS_SESSION_BUS_ADDRESS", "XDG_RUNTIME_DIR", "NO_AT_BRIDGE", "GTK_MODULES",
                "ACCESSIBILITY_ENABLED", "GNOME_ACCESSIBILITY", "QT_ACCESSIBILITY", "QT_LINUX_ACCESSIBILITY_ALWAYS_ON",
                "GSETTINGS_BACKEND", "LIBGL_ALWAYS_SOFTWARE")


def run(reward_file: str) -> int:
    if not os.path.exists("/tmp/.X11-unix/X0"):
        for k in SESSION_KEYS:
            os.environ.pop(k, None)
    out_fd = os.dup(1)  # the exec's own stdout: only this process writes the result there
    with open(reward_file, encoding="utf-8", errors="replace") as fh:
        source = fh.read()
    transcript = Transcript(reward_file, score_lines(source), out_fd)
    r, w = os.pipe()
    os.dup2(w, 1)
    os.dup2(w, 2)
    os.close(w)
    reader = threading.Thread(target=_drain, args=(r, transcript), daemon=True)
    reader.start()
    sys.stdout = sys.__stdout__ = _Stream(transcript, 1)  # type: ignore[misc,assignment]
    sys.stderr = sys.__stderr__ = _Stream(transcript, 2)  # type: ignore[misc,assignment]
    install_import_guard()
    sys.path.insert(0, os.path.dirname(reward_file))  # the judge module beside reward.py, as before
    sys.argv = [reward_file]
    code = 0
    main = types.ModuleType("__main__")  # what `python3 reward.py` runs it as
    main.__file__ = reward_file
    main.__builtins__ = __builtins__  # type: ignore[attr-defined]
    sys.modules["__main__"] = main
    try:
        exec(compile(source, reward_file, "exec"), main.__dict__)
        for t in threading.enumerate():
            if t is not threading.current_thread() and not t.daemon and t is not reader:
                t.join()
    except SystemExit as exc:
        if exc.code is None:
            code = 0
        elif isinstance(exc.code, int):
            code = exc.code
        else:
            print(exc.code, file=sys.stderr)
            code = 1
    except BaseException:  # noqa: BLE001 - reported as the reward's crash, never the runner's
        import traceback

        traceback.print_exc()
        code = 1
    try:
        import atexit

        atexit._run_exitfuncs()
    except BaseException:  # noqa: BLE001
        import traceback

        traceback.print_exc()
    if TrustedPathFinder.refused:
        print("[shinken: modules in places the task's user can write were not imported: "
              + ", ".join(sorted(set(TrustedPathFinder.refused))[:10]) + "]", file=sys.stderr)
    devnull = os.open(os.devnull, os.O_WRONLY)
    os.dup2(devnull, 1)
    os.dup2(devnull, 2)
    reader.join(0.5)  # a background child may hold the pipe: not waited for past this
    transcript.close()
    return code & 0xFF


if __name__ == "__main__":
    os._exit(run(sys.argv[1]))
