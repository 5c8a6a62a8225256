"""Shared option types, consoles and output helpers for every command."""

from __future__ import annotations

import sys
from pathlib import Path
from typing import Annotated, Any

import orjson
import typer
from rich.console import Console


# stdout carries results (tables, JSON); stderr carries progress and errors, so
# `--json` output can be piped safely.
out = Console(highlight=False)
err = Console(stderr=True, highlight=False)

JsonFlag = Annotated[bool, typer.Option("--json", help="Print machine-readable JSON instead of a table.")]
ImageOpt = Annotated[
    str, typer.Option("--image", "-i", help="Task image to check or run against.", envvar="SHINKEN_IMAGE")
]
TaskRootArg = Annotated[Path, typer.Argument(help="Folder of task bundles (release, pipeline or demo layout).")]
ConcurrencyOpt = Annotated[int, typer.Option("--concurrency", "-c", min=1, help="Tasks worked on at once.")]

def help_when_bare(ctx: typer.Context) -> None:
    """A group called without a command prints its help and exits 0 (used instead of
    no_args_is_help, whose error class is private to typer's vendored click)."""
    if ctx.invoked_subcommand is None:
        typer.echo(ctx.get_help())
        raise typer.Exit()


DEFAULT_IMAGE = "shinken/sandbox-linux:latest"


def print_json(data: Any) -> None:
    sys.stdout.buffer.write(orjson.dumps(data, option=orjson.OPT_INDENT_2 | orjson.OPT_NON_STR_KEYS) + b"\n")
    sys.stdout.flush()


def write_json(path: Path, data: Any) -> None:
    """Write atomically: a reader never sees half a report."""
    path.parent.mkdir(parents=True, exist_ok=True)
    tmp = path.with_name(f".{path.name}.tmp")
    tmp.write_bytes(orjson.dumps(data, option=orjson.OPT_INDENT_2 | orjson.OPT_NON_STR_KEYS) + b"\n")
    tmp.replace(path)
