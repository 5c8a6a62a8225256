"""`shinken triage`: which tasks can run on an image, which are blocked by it, which are broken."""

from __future__ import annotations

from pathlib import Path
from typing import Annotated, Optional

import typer

from shinken.cli.common import DEFAULT_IMAGE, ImageOpt, TaskRootArg, err, out, write_json
from shinken.errors import ShinkenError

HELP = (
    "Check every task bundle statically against an image's capabilities: executables, Python modules, "
    "desktop apps, network and mock web needs, the reward contract and loader defects. "
    "Verdicts: runnable / blocked / defective."
)


def register(app: typer.Typer) -> None:
    @app.command("triage", help=HELP)
    def _cmd(
        task_root: TaskRootArg,
        image: ImageOpt = DEFAULT_IMAGE,
        json_path: Annotated[Optional[Path], typer.Option("--json", help="Write the report here (schemas/triage.schema.json).")] = None,
        class_: Annotated[Optional[str], typer.Option("--class", help="Only tasks of this class: file_cli, desktop_app, mock_web.")] = None,
        show: Annotated[int, typer.Option("--show", min=0, help="Example ids and table rows to show.")] = 5,
        mock_urls: Annotated[Optional[Path], typer.Option("--mock-urls", help="JSON map of __CUA_GYM_*_URL__/_HOST__ placeholders to running mock apps.")] = None,
        manifest: Annotated[Optional[Path], typer.Option("--manifest", help="Capability manifest JSON (`shinken image inspect --json`); triage without Docker.")] = None,
        no_cache: Annotated[bool, typer.Option("--no-cache", help="Ignore and do not update ~/.cache/shinken/triage.")] = False,
        workers: Annotated[Optional[int], typer.Option("--workers", min=1, help="Worker processes (default 2 x cores).")] = None,
    ) -> None:
        from rich.progress import BarColumn, MofNCompleteColumn, Progress, TextColumn, TimeElapsedColumn

        from shinken.schemas import validation_error
        from shinken.triage.codes import CLASSES
        from shinken.triage.evaluate import Capabilities
        from shinken.triage.manifest import load_manifest_file, load_mock_urls, manifest_for_image
        from shinken.triage.report import build_report, render
        from shinken.triage.run import triage_root

        if class_ is not None and class_ not in CLASSES:
            raise ShinkenError(f"--class {class_}: unknown class; use one of {', '.join(CLASSES)}")
        doc = load_manifest_file(manifest) if manifest else manifest_for_image(image)
        caps = Capabilities.from_manifest(doc)
        mock = load_mock_urls(mock_urls) if mock_urls else {}
        image_ref = image if (not manifest or image != DEFAULT_IMAGE) else (caps.ref or image)

        with Progress(TextColumn("triage"), BarColumn(), MofNCompleteColumn(), TimeElapsedColumn(),
                      console=err, transient=True, disable=not err.is_terminal) as prog:
            bar = prog.add_task("triage", total=None)

            def tick(done: int, total: int) -> None:
                prog.update(bar, completed=done, total=total)

            run = triage_root(task_root, caps, mock, workers=workers, use_cache=not no_cache, progress=tick)
        if run.stats.cache_error:
            err.print(f"[yellow]warning:[/] triage cache not saved ({run.stats.cache_error})")
        report = build_report(run.tasks, caps, image_ref, str(Path(task_root).absolute()), run.stats,
                              class_filter=class_, show=show, mock_urls=len(mock))
        problem = validation_error("triage", report)
        if problem:  # our own bug; say so rather than write a file that lies
            raise ShinkenError(f"internal error: the triage report does not match its schema ({problem})", 1)
        if json_path:
            write_json(json_path, report)
        render(report, out, show)
        if json_path:
            err.print(f"report written to {json_path}")
