"""`shinken triage` end to end, without the CLI: capabilities from an image or a manifest
file, the analysis of a task root, and the report (checked against its schema). The CLI
and the probe's own triage both call `triage_task_root`."""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING, Any

from shinken.errors import ShinkenError
from shinken.images.build import DEFAULT_IMAGE
from shinken.judge.config import check_judge_url
from shinken.triage.codes import CLASSES
from shinken.triage.evaluate import Capabilities
from shinken.triage.manifest import load_manifest_file, manifest_for_image
from shinken.triage.report import build_report
from shinken.triage.run import triage_root

if TYPE_CHECKING:
    from shinken.mockweb.runs import WebPlan


@dataclass
class TriageOutcome:
    report: dict[str, Any]  # schemas/triage.schema.json
    cache_error: str | None  # the cache could not be saved (the results stand)


def triage_task_root(
    task_root: Path,
    *,
    image: str | None = None,
    manifest: Path | None = None,
    mock_urls: Path | None = None,
    hub: str | None = None,
    class_filter: str | None = None,
    show: int = 5,
    workers: int | None = None,
    use_cache: bool = True,
    progress: Callable[[int, int], None] | None = None,
    judge_url: str | None = None,
    web: "WebPlan | None" = None,
) -> TriageOutcome:
    """Triage every bundle under `task_root` against `image`: its live manifest (Docker),
    or the `manifest` file when given. The report names `image`, else the manifest's image,
    else the default image. `judge_url`: a judge will be configured (never called here).
    `web`: the run's hub and mock URL plan when the caller resolved it already (the probe),
    else it is made here from `hub` and `mock_urls`."""
    if judge_url is not None:
        check_judge_url(judge_url)
    if class_filter is not None and class_filter not in CLASSES:
        raise ShinkenError(f"--class {class_filter}: unknown class; use one of {', '.join(CLASSES)}")
    if manifest is not None:
        caps = Capabilities.from_manifest(load_manifest_file(manifest))
        image = image or caps.ref or DEFAULT_IMAGE
    else:
        image = image or DEFAULT_IMAGE
        caps = Capabilities.from_manifest(manifest_for_image(image))
    if web is None and (hub is not None or mock_urls is not None):
        # The hub's apps and the --mock-urls map, read as the probe reads them (mockweb, one reader).
        from shinken.mockweb.runs import web_plan

        web = web_plan(hub, mock_urls)
    mock = web.mock_urls() if web is not None else {}
    run = triage_root(task_root, caps, mock, workers=workers, use_cache=use_cache, progress=progress,
                      judge=judge_url is not None)
    report = build_report(run.tasks, caps, image, str(Path(task_root).absolute()), run.stats,
                          class_filter=class_filter, show=show, mock_urls=len(mock))
    return TriageOutcome(report, run.stats.cache_error)
