"""`shinken gc` (placeholder until its issue lands)."""

from __future__ import annotations

import typer

from shinken.cli.common import not_built


def register(app: typer.Typer) -> None:
    @app.command("gc", help="(not built yet)")
    def _cmd() -> None:
        not_built("gc", "see the issue tracker")
