"""The `shinken` command: one Typer app, one module per command."""

from __future__ import annotations

import sys

import typer

from shinken import __version__
from shinken.cli import common
from shinken.errors import EXIT_INTERRUPTED, ShinkenError

app = typer.Typer(
    name="shinken",
    help="CUA-Gym task bundles to clean RL data and a NeMo Gym workspace.",
    no_args_is_help=True,
    add_completion=False,
    pretty_exceptions_enable=False,
)


def _version(value: bool) -> None:
    if value:
        common.out.print(f"shinken {__version__}")
        raise typer.Exit()


@app.callback()
def _root(
    version: bool = typer.Option(False, "--version", callback=_version, is_eager=True, help="Print the version."),
) -> None:
    pass


def _register() -> None:
    # Imported here so `shinken --help` stays fast and each command stays in its module.
    from shinken.cli import download, gc, image, make_workspace, probe, triage

    for mod in (download, triage, probe, make_workspace, gc):
        mod.register(app)
    app.add_typer(image.app, name="image")


_register()


def main() -> None:
    try:
        # standalone_mode=False returns typer.Exit codes instead of raising them.
        rc = app(standalone_mode=False)
        if isinstance(rc, int) and rc:
            sys.exit(rc)
    except ShinkenError as exc:
        common.err.print(f"[bold red]shinken: error:[/] {exc}", soft_wrap=True)
        sys.exit(exc.exit_code)
    except KeyboardInterrupt:
        common.err.print("shinken: interrupted")
        sys.exit(EXIT_INTERRUPTED)
    except typer.Exit as exc:
        sys.exit(exc.exit_code)
    except typer.Abort:
        common.err.print("shinken: aborted")
        sys.exit(1)
    except Exception as exc:  # click usage errors come through here in standalone_mode=False
        import click

        if isinstance(exc, click.exceptions.ClickException):
            exc.show()
            sys.exit(exc.exit_code)
        raise


if __name__ == "__main__":
    main()
