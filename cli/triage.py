"""`shinken triage`: which tasks can run on an image, which are blocked by it, which are broken."""

from __future__ import annotations

from pathlib import Path
from typing import Annotated, Optional

import typer

from shinken.cli.common import JsonFlag, Output, TaskRootArg
from shinken.images.build import DEFAULT_IMAGE

EXAMPLES = [
    "shinken triage data/cua-gym/tasks --report out/triage.json    # table on stdout, report file for probe",
    "shinken triage demo --manifest manifest.json --json | jq .summary.by_verdict    # no Docker needed",
    "shinken triage demo --class desktop_app --show 20",
    "shinken triage data/cua-gym/tasks --hub shinken/hub:latest --class mock_web    # web tasks the hub serves",
    "shinken triage data/cua-gym/tasks --benchmark ~/OSWorld-v2/examples --report out/triage.json    # another benchmark's test tasks too",
]


def triage(
    task_root: TaskRootArg,
    image: Annotated[Optional[str], typer.Option(
        "--image", "-i", envvar="SHINKEN_IMAGE",
        help=f"Task image to check against [default: {DEFAULT_IMAGE}, or the --manifest's image].")] = None,
    report: Annotated[Optional[Path], typer.Option("--report", metavar="PATH",
                                                   help="Also write the report here (schemas/triage.schema.json).")] = None,
    json_out: JsonFlag = False,
    class_: Annotated[Optional[str], typer.Option("--class", help="Only tasks of this class: file_cli, desktop_app, mock_web.")] = None,
    show: Annotated[int, typer.Option("--show", min=0, help="Example ids and table rows to show.")] = 5,
    mock_urls: Annotated[Optional[Path], typer.Option("--mock-urls", help="JSON map of __CUA_GYM_*_URL__/_HOST__ placeholders to running mock apps.")] = None,
    hub: Annotated[Optional[str], typer.Option("--hub", metavar="IMAGE", envvar="SHINKEN_HUB_IMAGE",
                                               help="Hub image (`shinken hub build`): the mock apps it serves count as available.")] = None,
    manifest: Annotated[Optional[Path], typer.Option("--manifest", help="Capability manifest JSON (`shinken image inspect --json`); triage without Docker.")] = None,
    no_cache: Annotated[bool, typer.Option("--no-cache", help="Ignore and do not update ~/.cache/shinken/triage.")] = False,
    workers: Annotated[Optional[int], typer.Option("--workers", min=1, help="Worker processes (default 2 x cores).")] = None,
    judge_url: Annotated[Optional[str], typer.Option("--judge-url", help="The LLM judge probe/the server will use (docs/judge.md); rewards that call reward_judge are then not blocked for it. Triage never calls it.")] = None,
    benchmark: Annotated[Optional[list[Path]], typer.Option("--benchmark", metavar="DIR", help="A folder of an evaluation benchmark's task JSONs (each with an `instruction`) to compare every task with, besides the shipped OSWorld test set; repeatable.")] = None,
    keep_benchmark_overlap: Annotated[bool, typer.Option("--keep-benchmark-overlap", help="Keep tasks that are a benchmark's test task (a note) instead of blocking them (benchmark_overlap); the dataset card says so.")] = False,
) -> None:
    """Check every task bundle statically against an image's capabilities.

    Executables, Python modules, desktop apps, network and mock web needs, the reward
    contract and loader defects decide each task's verdict: runnable / blocked / defective.
    """
    from shinken.schemas import dumps, write_bytes
    from shinken.triage.pipeline import triage_task_root
    from shinken.triage.report import check_report, render

    output = Output(json_out)
    with output.progress("triage") as tick:
        outcome = triage_task_root(task_root, image=image, manifest=manifest, mock_urls=mock_urls, hub=hub,
                                   class_filter=class_, show=show, workers=workers, use_cache=not no_cache,
                                   progress=tick, judge_url=judge_url, benchmarks=benchmark or (),
                                   keep_overlap=keep_benchmark_overlap)
    if outcome.cache_error:
        output.warn(f"triage cache not saved ({outcome.cache_error})")
    # Checked against its schema once, before it leaves the process.
    check_report(outcome.report)
    if report is not None:
        write_bytes(report, dumps(outcome.report))
    output.result(outcome.report, lambda: render(outcome.report, output.out, show))
    if report is not None:
        output.note(f"report written to {report}")
