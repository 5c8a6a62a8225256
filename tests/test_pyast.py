"""shinken.pyast: Python parsing from several threads at once, which CPython 3.11's AST converter
does not survive (a probe run of CI lost a task to it: `SystemError: AST constructor recursion
depth mismatch`, read as infra)."""

from __future__ import annotations

import json
import re
import subprocess
import sys
from pathlib import Path

REPO = Path(__file__).resolve().parent.parent

# Three threads parse the same source while every collection runs Python code (a gc callback, so
# threads switch inside the conversion), with a tiny switch interval. Prints the SystemErrors seen.
STRESS = r"""
import ast, gc, json, sys, threading
from shinken import pyast
from shinken.needs import pyscan
parse = {"ast": ast.parse, "pyast": pyast.parse,  # the reward/setup scan probe and triage workers run
         "pyscan": lambda s: pyscan.parse(s.encode(), pyscan.HOST_PY)[0]}[sys.argv[1]]
src = "\n".join(f"def f{i}(a, b):\n    return [x * {i} for x in range(a) if x % 2] + {{'k': (a, b, {i})}}['k']"
                for i in range(40))
gc.callbacks.append(lambda phase, info: sum(range(20)))
gc.set_threshold(100)
sys.setswitchinterval(1e-5)
errors = []
def work():
    for _ in range(200):
        try:
            tree = parse(src)
            assert len(tree.body) == 40
        except SystemError as exc:
            errors.append(str(exc))
threads = [threading.Thread(target=work) for _ in range(3)]
for t in threads: t.start()
for t in threads: t.join()
print(json.dumps(errors))
"""


def _errors(which: str) -> list[str]:
    res = subprocess.run([sys.executable, "-c", STRESS, which], capture_output=True, text=True, timeout=120)
    assert res.returncode == 0, res.stderr[-2000:]
    return json.loads(res.stdout)


def test_parsing_from_threads_at_once_never_trips_cpythons_ast_converter() -> None:
    if sys.version_info < (3, 12):  # the control: the race this module exists for is real here
        seen = _errors("ast")
        assert seen and all("recursion depth mismatch" in e for e in seen), seen
    assert _errors("pyast") == []
    assert _errors("pyscan") == []


def test_no_shinken_module_parses_python_but_through_pyast() -> None:
    package = [p for top in REPO.iterdir() if not top.name.startswith(".") and top.name not in ("tests", "benchmarks")
               for p in ([top] if top.suffix == ".py" else top.rglob("*.py") if top.is_dir() else [])]
    direct = [f"{p.relative_to(REPO)}:{n}" for p in package if p.name != "pyast.py"
              for n, line in enumerate(p.read_text(encoding="utf-8").splitlines(), 1)
              if re.search(r"\bast\.parse\(", line)]
    assert len(package) > 100
    assert direct == []
