"""`shinken image` (placeholder until its issue lands)."""

from __future__ import annotations

import typer

from shinken.cli.common import not_built

app = typer.Typer(help="Build and inspect task images.", no_args_is_help=True)


@app.command("build", help="(not built yet)")
def build() -> None:
    not_built("image build", "see the issue tracker")
