"""`shinken download` (placeholder until its issue lands)."""

from __future__ import annotations

import typer

from shinken.cli.common import not_built


def register(app: typer.Typer) -> None:
    @app.command("download", help="(not built yet)")
    def _cmd() -> None:
        not_built("download", "see the issue tracker")
