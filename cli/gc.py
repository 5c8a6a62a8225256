"""`shinken gc`: find and reclaim what crashed or killed shinken processes left behind."""

from __future__ import annotations

from typing import Annotated, Any, Optional

import typer
from rich.table import Table

from shinken.cli.common import JsonFlag, Output
from shinken.errors import ShinkenError, WorkFailed

SCHEMA_ID = "shinken.gc/1"

EXAMPLES = [
    "shinken gc    # dry run: what would be reclaimed and why",
    "shinken gc --force --label shinken.run=probe-1a2b3c4d5e6f    # reclaim one run's leftovers",
    "shinken gc --older-than 2h --include-goldens --json | jq '.reclaimable | length'",
]


def _parse_labels(pairs: list[str]) -> dict[str, str]:
    labels: dict[str, str] = {}
    for pair in pairs:
        key, sep, value = pair.partition("=")
        if not sep or not key:
            raise ShinkenError(f"--label {pair!r}: expected KEY=VALUE, e.g. --label shinken.run=abc123")
        labels[key] = value
    return labels


def _human_bytes(n: int | None) -> str:
    if n is None:
        return "?"
    size = float(n)
    for unit in ("B", "KB", "MB", "GB"):
        if size < 1024 or unit == "GB":
            return f"{size:.0f} {unit}" if unit == "B" else f"{size:.1f} {unit}"
        size /= 1024
    return f"{n} B"


def _short(item_id: str, resource: str) -> str:
    if resource == "tempdir":
        return item_id
    return item_id.removeprefix("sha256:")[:12]


def _table(title: str, items: list[Any]) -> Table:
    table = Table(title=title, title_justify="left", show_lines=False)
    for col in ("kind", "id", "task", "owner", "why reclaimable", "size"):
        table.add_column(col, overflow="fold", justify="right" if col == "size" else "left")
    for it in items:
        kind = it.kind if it.resource != "image" else f"{it.kind} image"
        table.add_row(kind, _short(it.id, it.resource), it.task or "-", _owner(it.owner), it.reason,
                      _human_bytes(it.bytes))
    return table


def _owner(label: str | None) -> str:
    from shinken.sandbox.ownership import Owner

    owner = Owner.parse(label) if label else None
    if owner is None:
        return label or "-"
    return f"pid {owner.pid}" if owner.is_local() else f"pid {owner.pid}@{owner.host}"


def gc(
    force: Annotated[bool, typer.Option("--force", help="Reclaim (default is a dry run). Skips the --all prompt.")] = False,
    json_out: JsonFlag = False,
    all_: Annotated[bool, typer.Option("--all", help="Ignore owner liveness: reclaim every shinken resource "
                                                      "(asks first unless --force).")] = False,
    older_than: Annotated[Optional[str], typer.Option(
        "--older-than", metavar="DURATION",
        help="Also reclaim resources created longer ago than this (90s, 30m, 2h, 1d), even if their owner "
             "lives; golden images held by a live process are still kept.")] = None,
    include_goldens: Annotated[bool, typer.Option("--include-goldens", help="Also reclaim golden images "
                                                  "(caches: expensive to rebuild).")] = False,
    label: Annotated[Optional[list[str]], typer.Option("--label", metavar="KEY=VALUE",
                                                       help="Only resources carrying this label (repeatable).")] = None,
) -> None:
    """Reclaim containers, golden images and temp folders whose owner process is gone.

    Dry run by default: prints what would be reclaimed and why; --force reclaims. Only
    resources carrying shinken labels are ever touched; anything a live process owns is kept
    (unless --all or --older-than says otherwise). See docs/gc.md.
    """
    from shinken import reclaim
    from shinken.sandbox.gc import parse_duration
    from shinken.schemas import check_own

    output = Output(json_out)
    label_filter = _parse_labels(label or [])
    older_s: float | None = None
    if older_than is not None:
        try:
            older_s = parse_duration(older_than)
        except ValueError as exc:
            raise ShinkenError(f"--older-than: {exc}") from exc
    from shinken.sandbox.docker_client import connect

    client = connect()

    items = reclaim.find_reclaimable(client, include_goldens=include_goldens, older_than=older_s, all_=all_,
                                     label_filter=label_filter or None)
    do_it = force
    prompted = all_ and not force and bool(items)
    if prompted:
        # The list comes first so the question is about something the user has seen; with
        # --json stdout is reserved for the report, so the list goes to stderr.
        output.table(_table("--all: would reclaim, whether or not owners are alive", items), to_stderr=json_out)
        try:
            do_it = typer.confirm(f"Reclaim these {len(items)} resources, even ones live processes may own?",
                                  default=False, err=True)
        except typer.Abort:  # no answer (stdin closed): the safe one
            do_it = False

    reclaimed, failed = reclaim.reclaim(client, items) if do_it else ([], [])
    doc = {
        "schema": SCHEMA_ID,
        "dry_run": not do_it,
        "reclaimable": [i.to_json() for i in items],
        "reclaimed": [i.to_json() for i in reclaimed],
        "failed": [f.to_json() for f in failed],
    }
    check_own("gc", doc, "the gc report")

    def render() -> None:
        if not do_it:
            if items and not prompted:
                output.table(_table("would reclaim (dry run; --force to reclaim)", items))
        elif reclaimed:
            output.table(_table("reclaimed", reclaimed))

    output.result(doc, render)
    if not do_it:
        total = sum(i.bytes or 0 for i in items)
        hint = "nothing reclaimed" if prompted else "run again with --force to reclaim"
        output.note(f"{len(items)} reclaimable, {_human_bytes(total)}" + (f"; {hint}" if items else ""))
    else:
        total = sum(i.bytes or 0 for i in reclaimed)
        output.note(f"reclaimed {len(reclaimed)} of {len(items)}, {_human_bytes(total)} freed")
    for f in failed:
        output.note(f"gc: could not reclaim {f.resource or ''} {f.kind or ''} {f.id}: {f.error}")
    if failed:
        raise WorkFailed(f"{len(failed)} reclaimable resource(s) could not be removed (listed above)")
