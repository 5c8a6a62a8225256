"""What every command shares: option types, the output object, and how a command is registered.

A command is a module-level function in `cli/<name>.py` whose docstring is its help (first
line: the one-line summary) and whose `EXAMPLES` list is shown under it; `cli/main.py`
registers it with `add_command`. Bad input raises `ShinkenError` (one line, exit 2); work
that ran but failed raises `WorkFailed` (exit 1); `cli/main.py` prints both.
"""

from __future__ import annotations

import inspect
import sys
from collections.abc import Callable, Iterator, Sequence
from contextlib import contextmanager
from pathlib import Path
from typing import Annotated, Any, Optional

import typer
from rich.console import Console
from rich.markup import escape
from rich.table import Table

from shinken.schemas import dumps

# stdout carries results (tables, JSON); stderr carries progress and errors, so
# `--json` output can be piped safely.
out = Console(highlight=False)
err = Console(stderr=True, highlight=False)

# --- option types every command uses -------------------------------------------------

JsonFlag = Annotated[bool, typer.Option("--json", help="Print the result as JSON on stdout instead of a table.")]
ImageOpt = Annotated[
    str, typer.Option("--image", "-i", help="Task image to check or run against.", envvar="SHINKEN_IMAGE")
]
TaskRootArg = Annotated[Path, typer.Argument(help="Folder of task bundles (release, pipeline or demo layout).")]
TaskRootOpt = Annotated[Path, typer.Option("--task-root", help="Folder of task bundles (release, pipeline or demo layout).")]
_IDS_HELP = "Only these tasks: a probe receipt (its kept list), a JSON list of ids, or one id per line."
IdsOpt = Annotated[Optional[Path], typer.Option("--ids", metavar="FILE", help=_IDS_HELP)]
IdsRequiredOpt = Annotated[Path, typer.Option("--ids", "--ids-file", metavar="FILE", help=_IDS_HELP)]
ConcurrencyOpt = Annotated[int, typer.Option("--concurrency", "-c", min=1, help="Tasks worked on at once.")]


# --- registration ----------------------------------------------------------------------

def add_command(app: typer.Typer, name: str, func: Callable[..., None], examples: Sequence[str]) -> None:
    """Register a module-level command function: its docstring is the help, `examples`
    (command lines, each may end in `  # what it shows`) are printed under the options."""
    if not func.__doc__ or not examples:
        raise TypeError(f"command {name}: needs a docstring and at least one example")
    epilog = "Examples:\n\n" + "\n\n".join(_example(line) for line in examples)
    app.command(name, help=inspect.getdoc(func), epilog=epilog)(func)


def _example(line: str) -> str:
    command, _, why = line.partition("  # ")
    return (f"{why.strip()}:\n" if why else "") + f"$ {command.strip()}"


def group(help: str) -> typer.Typer:
    """A command group (`shinken image ...`); bare, it prints its help."""
    return typer.Typer(help=help, callback=help_when_bare, invoke_without_command=True)


def help_when_bare(ctx: typer.Context) -> None:
    """A group called without a command prints its help and exits 0 (instead of
    no_args_is_help, whose error class is private to typer's vendored click)."""
    if ctx.invoked_subcommand is None:
        typer.echo(ctx.get_help())
        raise typer.Exit()


# --- output -----------------------------------------------------------------------------

def print_json(data: Any) -> None:
    sys.stdout.buffer.write(dumps(data))
    sys.stdout.flush()


class Output:
    """Where one command's output goes: its result on stdout (a rendering, or JSON with
    `--json`), notes, warnings and progress on stderr."""

    def __init__(self, as_json: bool = False) -> None:
        self.as_json = as_json
        self.out = out
        self.err = err

    @property
    def live(self) -> bool:
        """A terminal is watching stderr (live progress); else one log line per event."""
        return self.err.is_terminal

    def result(self, doc: Any, render: Callable[[], None]) -> None:
        """The command's result: `doc` as JSON with --json, else `render()` (which prints
        through this object or `self.out`)."""
        if self.as_json:
            print_json(doc)
        else:
            render()

    def table(self, table: Table, *, to_stderr: bool = False) -> None:
        console = self.err if to_stderr else self.out
        if console.is_terminal:
            console.print(table)
        else:
            # Piped output gets room instead of 80 folded columns, so it stays greppable.
            Console(width=240, highlight=False, stderr=to_stderr).print(table)

    def line(self, text: str) -> None:
        """A plain result line on stdout (no markup: ids and paths print as they are)."""
        self.out.print(text, soft_wrap=True, markup=False)

    def note(self, text: str) -> None:
        self.err.print(text, soft_wrap=True, markup=False, highlight=False)

    def warn(self, text: str) -> None:
        self.err.print(f"[yellow]warning:[/] {escape(text)}", soft_wrap=True)

    @contextmanager
    def progress(self, label: str) -> Iterator[Callable[[int, int], None]]:
        """A transient progress bar on stderr (only when it is a terminal); yields
        `tick(done, total)`."""
        from rich.progress import BarColumn, MofNCompleteColumn, Progress, TextColumn, TimeElapsedColumn

        with Progress(TextColumn(label), BarColumn(), MofNCompleteColumn(), TimeElapsedColumn(),
                      console=self.err, transient=True, disable=not self.live) as prog:
            bar = prog.add_task(label, total=None)

            def tick(done: int, total: int) -> None:
                prog.update(bar, completed=done, total=total)

            yield tick
