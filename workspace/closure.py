"""The shinken modules a piece of code imports, followed to the end (a static import closure).

The workspace wheel must hold what the generated server imports and nothing else: guessing by
folder (every package with an `__init__.py`) packed `benchmarks/` and the CLI into every
training cluster. Imports are read with `ast`, at any depth (function-level imports count:
the engine imports the Docker provider lazily), so a module split or rename in shinken is
followed without a list to keep in sync.
"""

from __future__ import annotations

import ast
import functools
import sys
from dataclasses import dataclass, field
from pathlib import Path

from shinken import pyast

TOP = "shinken"


@dataclass
class Closure:
    modules: dict[str, Path] = field(default_factory=dict)  # dotted name -> source file
    third_party: set[str] = field(default_factory=set)  # non-stdlib top-level names shinken modules import

    def packages(self) -> set[str]:
        return {name for name, path in self.modules.items() if path.name == "__init__.py"}


def _module_file(root: Path, dotted: str) -> Path | None:
    parts = dotted.split(".")[1:]
    base = root.joinpath(*parts) if parts else root
    if (base / "__init__.py").is_file():
        return base / "__init__.py"
    if parts and base.with_suffix(".py").is_file():
        return base.with_suffix(".py")
    return None


@functools.lru_cache(maxsize=512)
def _imported_names(source: str, module: str, is_package: bool) -> tuple[str, ...]:
    """Dotted names this source imports (absolute; `from a import b` yields both a and a.b,
    the caller keeps whichever is a module). Keyed by the source text itself, so a process
    that makes several workspaces parses each unchanged module once (a changed one anew)."""
    out: list[str] = []
    for node in ast.walk(pyast.parse(source)):
        if isinstance(node, ast.Import):
            out += [alias.name for alias in node.names]
        elif isinstance(node, ast.ImportFrom):
            if node.level:
                # Relative: resolve against the importing module's package.
                pkg = module.split(".") if is_package else module.split(".")[:-1]
                pkg = pkg[: len(pkg) - (node.level - 1)]
                base = ".".join(pkg + ([node.module] if node.module else []))
            else:
                base = node.module or ""
            out.append(base)
            out += [f"{base}.{alias.name}" for alias in node.names if alias.name != "*"]
    return tuple(out)


def import_closure(entry_sources: list[str], root: Path) -> Closure:
    """Every shinken module reachable from `entry_sources` (Python source text that is not
    itself part of shinken, e.g. the generated app.py), with the parent packages each import
    executes. `root` is the folder of the `shinken` package."""
    closure = Closure()
    pending: list[str] = []

    def want(name: str, *, by_shinken: bool) -> None:
        top = name.split(".")[0]
        if top != TOP:
            if by_shinken and top and top not in sys.stdlib_module_names and top != "__future__":
                closure.third_party.add(top)
            return
        parts = name.split(".")
        for i in range(1, len(parts) + 1):  # importing a.b.c runs a/__init__ and a/b/__init__
            dotted = ".".join(parts[:i])
            if dotted not in closure.modules and _module_file(root, dotted) is not None:
                closure.modules[dotted] = _module_file(root, dotted)  # type: ignore[assignment]
                pending.append(dotted)

    for source in entry_sources:
        for name in _imported_names(source, "__entry__", False):
            want(name, by_shinken=False)  # the entry's own third-party imports are not shinken's
    while pending:
        dotted = pending.pop()
        path = closure.modules[dotted]
        for name in _imported_names(path.read_text(encoding="utf-8"), dotted, path.name == "__init__.py"):
            want(name, by_shinken=True)
    return closure
