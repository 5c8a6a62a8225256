"""`shinken report`: the run in pictures, as one static HTML file and/or Markdown."""

from __future__ import annotations

from pathlib import Path
from typing import Annotated, Optional

import typer

from shinken.cli.common import Output
from shinken.errors import ShinkenError

EXAMPLES = [
    "shinken report --triage out/triage.json --receipt out/receipt.json --profile out/profile --html out/report.html",
    "shinken report --profile out/profile --md -  # the profile as Markdown on stdout",
    "shinken report --triage out/triage.json --receipt out/receipt.json --tasks out/tasks  # the task browser: open out/tasks/index.html",
]


def _shown(path: Path) -> str:
    """The input's path as the page shows it: relative to the working folder when inside it."""
    full = path.resolve()
    try:
        return str(full.relative_to(Path.cwd()))
    except ValueError:
        return str(full)


def report(
    triage: Annotated[Optional[Path], typer.Option("--triage", help="Triage report (`shinken triage --report`).")] = None,
    receipt: Annotated[Optional[Path], typer.Option("--receipt", help="Probe receipt (`shinken probe --receipt`).")] = None,
    profile: Annotated[Optional[Path], typer.Option("--profile", help="profile.json, or the folder `shinken profile --out` wrote.")] = None,
    html: Annotated[Optional[Path], typer.Option("--html", help="Write the HTML page here.")] = None,
    md: Annotated[Optional[Path], typer.Option("--md", help="Write the Markdown report here (`-`: stdout).")] = None,
    tasks: Annotated[Optional[Path], typer.Option("--tasks", metavar="DIR", help="Write the task browser into this folder (open DIR/index.html from disk): one row per task, filters, each task's reasons, outcomes, start screenshot and recordings.")] = None,
    task_root: Annotated[Optional[Path], typer.Option("--task-root", help="Where the task folders are, for their instructions (default: the receipt's task root, else the triage report's paths).")] = None,
    media: Annotated[Optional[Path], typer.Option("--media", metavar="DIR", help="The probe's run dir holding its media/ (default: the receipt's run_dir).")] = None,
) -> None:
    """Render a triage report, a probe receipt and a profile as one page, Markdown and/or a task browser.

    The page is a single self-contained HTML file (inline CSS and SVG, nothing fetched when it
    is opened, so it can be attached anywhere); every figure shows its numbers and reads
    without colour. Markdown is for terminals and dataset cards. The task browser (--tasks) is a
    folder that opens from disk: a row per task, filtered by app, verdict, outcome, reason, tier,
    family and benchmark overlap, each with its details, start screenshot and recordings. Any of
    the three inputs.
    """
    from shinken.profiles.documents import read_document
    from shinken.profiles.run import PROFILE_FILE
    from shinken.report.figures import figures
    from shinken.report.html import render_html_figures
    from shinken.report.markdown import render_figures
    from shinken.schemas import write_bytes

    if not (triage or receipt or profile):
        raise ShinkenError("nothing to report: pass --triage, --receipt and/or --profile")
    if not (html or md or tasks):
        raise ShinkenError("no output: pass --html OUT.html, --md OUT.md (--md - for stdout) and/or --tasks DIR")
    if tasks is not None and not (triage or receipt):
        raise ShinkenError("--tasks needs the tasks: pass --triage and/or --receipt")
    for name, folder in (("--task-root", task_root), ("--media", media)):
        if folder is not None and not folder.is_dir():
            raise ShinkenError(f"{name} {folder}: not a folder")
    if profile is not None and profile.is_dir():
        profile = profile / PROFILE_FILE
    inputs = {"triage": (triage, "triage"), "receipt": (receipt, "probe_receipt"), "profile": (profile, "profile")}
    docs = {name: read_document(path, schema) if path else None for name, (path, schema) in inputs.items()}
    sources = {name: _shown(path) for name, (path, _) in inputs.items() if path}
    f = figures(docs["triage"], docs["receipt"], docs["profile"], sources)
    output = Output()
    if html:
        write_bytes(html, render_html_figures(f).encode())
        output.note(f"report written to {html}")
    if tasks:
        from shinken.report.task_site import write_task_site

        done = write_task_site(tasks, docs["triage"], docs["receipt"], docs["profile"], sources=sources,
                               task_root=task_root, media_root=media)
        missing = f"; {done['media_missing']} media file(s) not found (pass --media DIR)" if done["media_missing"] else ""
        output.note(f"task browser written to {done['index']}: {done['tasks']} tasks, {done['media']} media file(s)"
                    f"{missing}")
    if md:
        text = render_figures(f)
        if str(md) == "-":
            output.out.print(text, markup=False, highlight=False, soft_wrap=True, end="")
        else:
            write_bytes(md, text.encode())
            output.note(f"markdown written to {md}")
