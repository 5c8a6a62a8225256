"""Python source to an AST, one thread at a time.

CPython 3.11 keeps the AST converter's recursion counter in interpreter-wide state: when two
threads turn source into AST objects at once (a thread switch inside the conversion, e.g. while a
collection runs Python code), the counter is corrupted and `ast.parse` raises `SystemError: AST
constructor recursion depth mismatch` (python/cpython#106905). shinken parses task files and
action programs from worker threads (probe, triage, the servers), so every parse goes through
here. The lock costs no parallelism: a parse holds the GIL from start to end anyway."""

from __future__ import annotations

import ast
import threading

_LOCK = threading.Lock()


def parse(source: str | bytes, *, feature_version: tuple[int, int] | None = None) -> ast.Module:
    """`ast.parse(source)` of a module, never beside another thread's parse."""
    with _LOCK:
        return ast.parse(source, mode="exec", feature_version=feature_version)
