"""The `shinken` command: one Typer app, one module per command."""

from __future__ import annotations

import sys

import typer
from rich.markup import escape

from shinken import __version__
from shinken.cli import common
from shinken.errors import EXIT_INTERRUPTED, EXIT_USAGE, ShinkenError

app = typer.Typer(
    name="shinken",
    help="CUA-Gym task bundles to clean RL data and a NeMo Gym workspace.",
    add_completion=False,
    pretty_exceptions_enable=False,
)


def _version(value: bool) -> None:
    if value:
        common.out.print(f"shinken {__version__}")
        raise typer.Exit()


@app.callback(invoke_without_command=True)
def _root(
    ctx: typer.Context,
    version: bool = typer.Option(False, "--version", callback=_version, is_eager=True, help="Print the version."),
) -> None:
    common.help_when_bare(ctx)


def _register() -> None:
    # Imported here so `shinken --help` stays fast and each command stays in its module.
    from shinken.cli import download, gc, image, make_workspace, probe, triage

    for mod in (download, triage, probe, make_workspace, gc):
        mod.register(app)
    app.add_typer(image.app, name="image")


_register()


def _usage_line(exc: typer.TyperException) -> str:
    """click's usage errors as one line: the problem, then where the help is."""
    ctx = getattr(exc, "ctx", None)
    hint = f" (see '{ctx.command_path} --help')" if ctx is not None else ""
    return f"{exc.format_message()}{hint}"


def fail(message: str, exit_code: int) -> None:
    common.err.print(f"[bold red]shinken: error:[/] {escape(message)}", soft_wrap=True)
    sys.exit(exit_code)


def main() -> None:
    try:
        # standalone_mode=False returns typer.Exit codes instead of raising them.
        rc = app(standalone_mode=False)
        if isinstance(rc, int) and rc:
            sys.exit(rc)
    except ShinkenError as exc:
        fail(str(exc), exc.exit_code)
    except KeyboardInterrupt:
        common.err.print("shinken: interrupted")
        sys.exit(EXIT_INTERRUPTED)
    except typer.Exit as exc:
        sys.exit(exc.exit_code)
    except typer.Abort:
        common.err.print("shinken: aborted")
        sys.exit(1)
    except typer.TyperException as exc:
        # typer >= 0.29 vendors click as typer._click; its ClickException/UsageError derive from the
        # public typer.TyperException (the separately installed click's classes never match).
        fail(_usage_line(exc), EXIT_USAGE if exc.exit_code in (0, 1, EXIT_USAGE) else exc.exit_code)


if __name__ == "__main__":
    main()
