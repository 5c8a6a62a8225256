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
) -> None:
    """Render a triage report, a probe receipt and a profile as one page and/or Markdown.

    The page is a single self-contained HTML file (inline CSS and SVG, nothing fetched when it
    is opened, so it can be attached anywhere); every figure shows its numbers and reads
    without colour. Markdown is for terminals and dataset cards. Any of the three inputs.
    """
    from shinken.profiles.documents import read_document
    from shinken.profiles.run import PROFILE_FILE
    from shinken.report.figures import figures
    from shinken.report.html import render_html_figures
    from shinken.report.markdown import render_figures
    from shinken.schemas import write_bytes

    if not (triage or receipt or profile):
        raise ShinkenError("nothing to report: pass --triage, --receipt and/or --profile")
    if not (html or md):
        raise ShinkenError("no output: pass --html OUT.html and/or --md OUT.md (--md - for stdout)")
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
    if md:
        text = render_figures(f)
        if str(md) == "-":
            output.out.print(text, markup=False, highlight=False, soft_wrap=True, end="")
        else:
            write_bytes(md, text.encode())
            output.note(f"markdown written to {md}")
