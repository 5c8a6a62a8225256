"""The one way tests run the `shinken` command (the `shinken_cli` fixture in conftest.py).

In process by default: `cli.main.main()` with `sys.argv` set, stdout and stderr captured and
the exit code taken from its `SystemExit`, so a call costs no interpreter start and no
re-import. That is the same function the installed entry point calls, with the same
error handling (one line on stderr, exit 2 for bad input).

A subprocess (the installed `.venv/bin/shinken`) where in-process cannot mean the same:
`env=` (libraries such as huggingface_hub read their environment once, at import; `setenv=`
changes variables that shinken itself reads per call, in process) and
`subprocess=True` for tests about the entry point itself (no traceback from a real process).
Tests that signal a running command start it with `popen()`.
"""

from __future__ import annotations

import contextlib
import io
import os
import subprocess
import sys
from dataclasses import dataclass
from pathlib import Path

SHINKEN = Path(sys.executable).with_name("shinken")


@dataclass(frozen=True)
class CliResult:
    """What a run left: the fields of `subprocess.CompletedProcess` the tests read."""

    args: list[str]
    returncode: int
    stdout: str
    stderr: str


def _exit_code(exc: SystemExit) -> int:
    if exc.code is None:
        return 0
    if isinstance(exc.code, int):
        return exc.code
    print(exc.code, file=sys.stderr)  # sys.exit("message") prints it and exits 1
    return 1


def _in_process(args: list[str], stdin: str, setenv: dict[str, str]) -> CliResult:
    from shinken.cli.main import main

    # Text streams over bytes: commands write JSON to sys.stdout.buffer.
    out = io.TextIOWrapper(io.BytesIO(), encoding="utf-8", write_through=True)
    err = io.TextIOWrapper(io.BytesIO(), encoding="utf-8", write_through=True)
    saved_argv, saved_stdin = sys.argv, sys.stdin
    saved_env = {k: os.environ.get(k) for k in setenv}
    sys.argv, sys.stdin = ["shinken", *args], io.StringIO(stdin)
    os.environ.update(setenv)
    rc = 0
    try:
        with contextlib.redirect_stdout(out), contextlib.redirect_stderr(err):
            try:
                main()
            except SystemExit as exc:
                rc = _exit_code(exc)
    finally:
        sys.argv, sys.stdin = saved_argv, saved_stdin
        for k, v in saved_env.items():
            if v is None:
                os.environ.pop(k, None)
            else:
                os.environ[k] = v
    return CliResult(args, rc, _text(out), _text(err))


def _text(stream: io.TextIOWrapper) -> str:
    stream.flush()
    raw = stream.buffer
    assert isinstance(raw, io.BytesIO)
    return raw.getvalue().decode("utf-8", errors="replace")


def run_cli(*args: str | os.PathLike[str], env: dict[str, str] | None = None, subprocess_: bool = False,
            timeout: float = 600, cwd: str | os.PathLike[str] | None = None, stdin: str = "",
            setenv: dict[str, str] | None = None) -> CliResult:
    """`shinken ARGS`: in process unless `env` is given or `subprocess_` asks for the real entry point."""
    argv = [str(a) for a in args]
    if env is None and not subprocess_ and cwd is None:
        return _in_process(argv, stdin, setenv or {})
    if setenv:
        env = {**(os.environ if env is None else env), **setenv}
    p = subprocess.run([str(SHINKEN), *argv], capture_output=True, text=True, timeout=timeout, env=env, cwd=cwd,
                       input=stdin)
    return CliResult(argv, p.returncode, p.stdout, p.stderr)


def popen(*args: str | os.PathLike[str], env: dict[str, str] | None = None,
          cwd: str | os.PathLike[str] | None = None) -> subprocess.Popen[str]:
    """A running `shinken ARGS` (for tests that interrupt it); stdout and stderr piped."""
    return subprocess.Popen([str(SHINKEN), *[str(a) for a in args]], env=env, cwd=cwd, text=True,
                            stdin=subprocess.DEVNULL, stdout=subprocess.PIPE, stderr=subprocess.PIPE)
