"""The `shinken` command: one Typer app; every command is registered here, in help order.

Adding a command: write `cli/<name>.py` with a module-level function (docstring = help,
options from cli/common.py) and an `EXAMPLES` list, then add one `add_command` line below.
A group (`shinken image ...`) is a `common.group(...)` in its module, added with `add_typer`.
"""

from __future__ import annotations

import sys

import typer
from rich.markup import escape

from shinken import __version__
from shinken.cli import (common, download, fleet, gc, hub, image, interrupt, make_workspace, probe, profile, publish,
                         report, triage, watch)
from shinken.cli.common import add_command
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


# Command modules import their heavy libraries inside the command, so `shinken --help` stays fast.
add_command(app, "download", download.download, download.EXAMPLES)
add_command(app, "triage", triage.triage, triage.EXAMPLES)
add_command(app, "probe", probe.probe, probe.EXAMPLES)
add_command(app, "make-workspace", make_workspace.make_workspace, make_workspace.EXAMPLES)
add_command(app, "profile", profile.profile, profile.EXAMPLES)
add_command(app, "report", report.report, report.EXAMPLES)
add_command(app, "publish", publish.publish, publish.EXAMPLES)
add_command(app, "gc", gc.gc, gc.EXAMPLES)
add_command(app, "watch", watch.watch, watch.EXAMPLES)
app.add_typer(image.app, name="image")
app.add_typer(hub.app, name="hub")
app.add_typer(fleet.app, name="fleet")


def _usage_line(exc: typer.TyperException) -> str:
    """click's usage errors as one line: the problem, then where the help is."""
    ctx = getattr(exc, "ctx", None)
    hint = f" (see '{ctx.command_path} --help')" if ctx is not None else ""
    return f"{exc.format_message()}{hint}"


def _fail(message: str, exit_code: int) -> None:
    common.err.print(f"[bold red]shinken: error:[/] {escape(message)}", soft_wrap=True)
    sys.exit(exit_code)


def main() -> None:
    """Every way a command ends: its exit code, and for errors one line on stderr."""
    try:
        # standalone_mode=False returns typer.Exit codes instead of raising them.
        with interrupt.exit_within(EXIT_INTERRUPTED):  # Ctrl-C ends it within ~1 s, whichever thread takes it
            rc = app(standalone_mode=False, prog_name="shinken")  # one name however it was started (-m, entry point, tests)
        if interrupt.by_signal():  # Ctrl-C inside the command: typer made it exit code 130
            common.err.print("shinken: interrupted")
            interrupt.finish(EXIT_INTERRUPTED)
        if isinstance(rc, int) and rc:
            sys.exit(rc)
    except ShinkenError as exc:  # bad input (2), failed work (1), missing environment (3)
        _fail(str(exc), exc.exit_code)
    except KeyboardInterrupt:
        common.err.print("shinken: interrupted")
        interrupt.finish(EXIT_INTERRUPTED)
    except typer.Exit as exc:
        sys.exit(exc.exit_code)
    except typer.Abort:
        common.err.print("shinken: aborted")
        sys.exit(EXIT_INTERRUPTED)
    except typer.TyperException as exc:
        # typer >= 0.29 vendors click as typer._click; its ClickException/UsageError derive from the
        # public typer.TyperException (the separately installed click's classes never match).
        _fail(_usage_line(exc), EXIT_USAGE)


if __name__ == "__main__":
    main()
