"""How a run (triage, probe, the workspace server) takes web tasks in: from `--hub IMAGE`
and/or `--mock-urls FILE` to the placeholder map, the materialized bundles and, when a web
task is really run, the WebSession (hub container + run network)."""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING, Any

from shinken.bundles.model import Bundle
from shinken.errors import ShinkenError
from shinken.mockweb.manifest import HubManifest, read_manifest
from shinken.mockweb.materialize import (
    MARKER,
    UrlMap,
    add_mock_urls,
    default_cache_root,
    hub_url_map,
    materialize,
    needs_materializing,
)
from shinken.schemas import read_json

if TYPE_CHECKING:
    from shinken.mockweb.session import WebSession


def _docker() -> Any:
    from shinken.sandbox.docker_client import connect

    return connect()


@dataclass
class WebPlan:
    urls: UrlMap
    manifest: HubManifest | None
    hub_image: str | None
    cache_root: Path

    def mock_urls(self) -> dict[str, str]:
        """The flat placeholder map triage matches against."""
        return self.urls.mock_urls()

    def prepare(self, bundle: Bundle) -> tuple[Bundle, str | None]:
        """(the bundle to run, why it cannot run or None). A task naming no mock is returned
        as it is."""
        if not bundle.ok or not needs_materializing(bundle):
            return bundle, None
        m = materialize(bundle, self.urls, self.cache_root)
        if m.missing:
            where = f"hub {self.hub_image}" if self.manifest is not None else (self.urls.source or "--mock-urls")
            return bundle, f"needs_mock_web: {', '.join(m.missing)} not served by {where}"
        return m.bundle, None

    def session(self, client: Any, *, run_id: str | None, labels: dict[str, str] | None = None,
                attach: dict[str, str] | None = None) -> WebSession:
        """The run's WebSession: its own hub and network, or (`attach`, a WebSession.endpoint())
        the hub and network a fleet host's agent owns on this engine."""
        from shinken.mockweb.session import WebSession

        return WebSession(client, self.urls, self.manifest, run_id=run_id, cache_root=self.cache_root, labels=labels,
                          attach=attach)


def web_plan(hub: str | None, mock_urls: Path | None, *, client: Any = None) -> WebPlan | None:
    """None when the run was given neither a hub nor a mock URL map (web tasks stay blocked)."""
    if hub is None and mock_urls is None:
        return None
    doc = None  # the file first: bad input is said before the engine is asked
    if mock_urls is not None:
        doc = read_json(mock_urls, "mock URL map", 'expected {"__CUA_GYM_X_URL__": "http://..."} or url_variables.json',
                        schema="mock_urls")
    manifest = read_manifest(client or _docker(), hub) if hub else None
    urls = hub_url_map(manifest) if manifest is not None else UrlMap()
    if mock_urls is not None and doc is not None:
        add_mock_urls(urls, doc, str(mock_urls), bind_only=manifest is not None)
    return WebPlan(urls, manifest, hub, default_cache_root())


def is_web(bundle: Bundle) -> bool:
    """A bundle materialized for a run (it reaches mock apps)."""
    return MARKER in bundle.files
