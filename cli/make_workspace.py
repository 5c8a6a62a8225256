"""`shinken make-workspace` (placeholder until its issue lands)."""

from __future__ import annotations

import typer

from shinken.cli.common import not_built


def register(app: typer.Typer) -> None:
    @app.command("make-workspace", help="(not built yet)")
    def _cmd() -> None:
        not_built("make-workspace", "see the issue tracker")
