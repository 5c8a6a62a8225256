"""`shinken triage` end to end, without the CLI: capabilities from an image or a manifest
file, the analysis of a task root, and the report (checked against its schema). The CLI
and the probe's own triage both call `triage_task_root`."""

from __future__ import annotations

from collections.abc import Callable, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING, Any

from shinken.errors import ShinkenError
from shinken.images.build import DEFAULT_IMAGE
from shinken.judge.config import check_judge_url
from shinken.triage.codes import CLASSES
from shinken.triage.evaluate import _PLACEHOLDER_KEY, Capabilities, StateDefects, app_key
from shinken.triage.hygiene import Hygiene, HygieneOptions
from shinken.triage.manifest import load_manifest_file, manifest_for_image
from shinken.triage.report import build_report
from shinken.triage.run import triage_root

if TYPE_CHECKING:
    from shinken.mockweb.manifest import HubManifest
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
    benchmarks: Sequence[Path] = (),
    keep_overlap: bool = False,
) -> TriageOutcome:
    """Triage every bundle under `task_root` against `image`: its live manifest (Docker),
    or the `manifest` file when given. The report names `image`, else the manifest's image,
    else the default image. `judge_url`: a judge will be configured (never called here).
    `web`: the run's hub and mock URL plan when the caller resolved it already (the probe),
    else it is made here from `hub` and `mock_urls`. `benchmarks`: folders of benchmark task
    JSONs compared with besides the shipped ones; `keep_overlap`: tasks that match one stay
    runnable (a note) instead of blocked."""
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
    defects: StateDefects = {}
    hub_checks: dict[str, Any] | None = None
    if web is not None and web.manifest is not None:  # the hub's failed State API checks (mockweb)
        defects = state_defects(web.manifest, mock)
        hub_checks = hub_checks_summary(web.manifest)
    hygiene = Hygiene.load(HygieneOptions(benchmark_dirs=tuple(Path(b) for b in benchmarks), keep_overlap=keep_overlap))
    run = triage_root(task_root, caps, mock, workers=workers, use_cache=use_cache, progress=progress,
                      judge=judge_url is not None, state_defects=defects, hygiene=hygiene)
    report = build_report(run.tasks, caps, image, str(Path(task_root).absolute()), run.stats,
                          class_filter=class_filter, show=show, mock_urls=len(mock), hub_checks=hub_checks,
                          hygiene=run.hygiene)
    return TriageOutcome(report, run.stats.cache_error)


def state_defects(manifest: "HubManifest", mock: dict[str, str]) -> StateDefects:
    """The failed State API checks of the hub's apps (their `checks` in the manifest), by the
    app key of every placeholder that reaches the app and by the app's own key."""
    from urllib.parse import urlsplit

    from shinken.mockweb.check import failed_fields

    by_alias: dict[str, tuple[str, dict[str, tuple[str, ...]]]] = {}
    for a in manifest.apps:
        failed = {c: f for c, f in failed_fields(a.checks).items() if f}
        if failed:
            by_alias[a.alias] = (a.name, failed)
    out: StateDefects = {}
    for a in manifest.apps:
        if a.alias in by_alias:
            out[app_key(a.name)] = by_alias[a.alias]
    for placeholder, url in mock.items():
        host = urlsplit(url).hostname or ""
        m = _PLACEHOLDER_KEY.match(placeholder)
        if host in by_alias and m:
            out.setdefault(m.group(1), by_alias[host])
    return out


def hub_checks_summary(manifest: "HubManifest") -> dict[str, Any]:
    """For the report: which apps failed which check (and which were never checked)."""
    from shinken.mockweb.check import CHECKS, failed_fields

    by_check: dict[str, list[str]] = {c: [] for c in CHECKS}
    unchecked = []
    for a in manifest.apps:
        if a.checks is None:
            unchecked.append(a.name)
            continue
        for c in failed_fields(a.checks):
            by_check.setdefault(c, []).append(a.name)
    return {"image": manifest.image_id, "apps": len(manifest.apps), "failed_by_check": by_check, "unchecked": unchecked}
