"""`shinken probe` (placeholder until its issue lands)."""

from __future__ import annotations

import typer

from shinken.cli.common import not_built


def register(app: typer.Typer) -> None:
    @app.command("probe", help="(not built yet)")
    def _cmd() -> None:
        not_built("probe", "see the issue tracker")
