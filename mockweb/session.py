"""One run's web plumbing: the hub container (started or reused), the run network, the
placeholder map, and the three hooks the sandbox calls for web tasks:

- `record(box, bundle)` after a golden's setup: the hub state the setup created for its sid
  (per app: initial_state and current_state, read with `/go`) is written into the golden's
  filesystem (root-only, schema hub_state); the setup's own sid is then removed from the hub;
- `restore(box)` on every fork: a fresh sid gets the recorded state (`set`, `set_current`,
  read back with `/go` and compared), `/tmp/task_web_sid` is rewritten to it;
- `release(sid)` when the fork ends: the sid's stored state is removed from the hub;
- `reset(box, sid)` for the vandal probe: the fork's sid reset in every recorded app.

Both guest commands run inside the sandbox (mockweb/state_api.py), over the run network.
"""

from __future__ import annotations

import json
import threading
from pathlib import Path
from typing import Any

from shinken.bundles.model import Bundle
from shinken.mockweb import hub as hubs
from shinken.mockweb.manifest import HubManifest
from shinken.mockweb.state_api import KEY_ENV as STATE_KEY_ENV
from shinken.mockweb.materialize import Materialized, UrlMap, default_cache_root, marker_of, materialize
from shinken.mockweb.network import connect, create_run_network, remove_run_network
from shinken.sandbox.api import InfraError, SetupError
from shinken.sandbox.ownership import Owner
from shinken.sandbox.web_hooks import SID_FILE

RECORD_PATH = "/var/lib/shinken/mockweb/hub-state.json"
_GUEST_SOURCE = (Path(__file__).resolve().parent / "state_api.py").read_text(encoding="utf-8")
GUEST_TIMEOUT_S = 120.0


class WebSession:
    """Made by mockweb.runs.WebPlan.session(): with a hub manifest, a hub container (a running
    one of the same image is reused) and a fresh run network; without one (mocks the user runs
    elsewhere, `--mock-urls`), only the per-fork sids."""

    def __init__(self, client: Any, urls: UrlMap, manifest: HubManifest | None, *, run_id: str | None = None,
                 owner: Owner | None = None, reuse_hub: bool = True, cache_root: Path | None = None,
                 labels: dict[str, str] | None = None, attach: dict[str, str] | None = None) -> None:
        self.client = client
        self.labels = dict(labels or {})  # extra labels on the hub and network it creates
        self.owner = owner or Owner.current()
        self.run_id = run_id
        self.cache_root = cache_root or default_cache_root()
        self.manifest = manifest
        self.urls = urls
        self.hub: hubs.HubContainer | None = None
        self.network: str | None = None
        self.started_hub = False
        self.owns_network = attach is None
        self._hub_started: str | None = None  # the hub's StartedAt when this session took it
        self._hub_secret: str | None = None  # read from the hub's config on first use ("" : it has none)
        self._lock = threading.Lock()
        self._closed = False
        if attach is not None:
            self._attach(attach)
        elif self.manifest is not None:
            self._open_hub(reuse_hub)

    def endpoint(self) -> dict[str, str] | None:
        """What another process on this Docker host needs to use this session's hub and network
        (`attach=`): a fleet host agent owns them, the probe's tasks on that host attach."""
        if self.hub is None or self.network is None or self.manifest is None:
            return None
        return {"hub_id": self.hub.id, "network": self.network, "hub_image_id": self.manifest.image_id,
                "hub_started": self._hub_started or ""}

    def _attach(self, ep: dict[str, str]) -> None:
        """Use a hub and run network another process owns (endpoint()); close() leaves them."""
        if self.manifest is None or ep.get("hub_image_id") != self.manifest.image_id:
            raise InfraError(f"the host's hub runs {str(ep.get('hub_image_id'))[:19]}, not this run's hub image "
                             f"{self.manifest.image_id[:19] if self.manifest else None}")
        self.hub = hubs.HubContainer(ep["hub_id"], ep["hub_id"][:12], ep["hub_image_id"], False, None, None, 0.0)
        self.network = ep["network"]
        self._hub_started = ep.get("hub_started") or hubs.started_at(self.client, self.hub.id)
        hubs.write_owner_lease(self.client, self.hub.id, self.owner, self.run_id)  # this process's sids

    def _open_hub(self, reuse: bool) -> None:
        assert self.manifest is not None
        try:
            self.network = create_run_network(self.client, run_id=self.run_id, owner=self.owner,
                                              labels_extra=self.labels)
            # Only a hub `shinken hub up` started is shared: another run's hub ends with that run.
            found = [h for h in hubs.find_hubs(self.client, self.manifest.image_id) if h.detached] if reuse else []
            if found:
                self.hub = found[0]
                connect(self.client, self.network, self.hub.id, [a.alias for a in self.manifest.apps])
            else:
                self.hub = hubs.start_hub(self.client, self.manifest, run_id=self.run_id, owner=self.owner,
                                          network=self.network, labels_extra=self.labels)
                self.started_hub = True
            hubs.require_guards(self.client, self.hub.id, self.manifest.image_id)
            hubs.write_owner_lease(self.client, self.hub.id, self.owner, self.run_id)
            self._hub_started = hubs.started_at(self.client, self.hub.id)
        except BaseException:
            self.close()
            raise

    # ------------------------------------------------------------ tasks

    def materialize(self, bundle: Bundle) -> Materialized:
        return materialize(bundle, self.urls, self.cache_root)

    def warm(self, app_names: list[str]) -> None:
        """Start these apps' vite preview now, in the background (else on first request)."""
        if self.hub is None:
            return
        hub_id = self.hub.id

        def run() -> None:
            for name in app_names:
                try:
                    hubs.start_app(self.client, hub_id, name)
                except Exception:  # noqa: BLE001 - a setup's first request starts it anyway
                    pass
        threading.Thread(target=run, name="shinken-hub-warm", daemon=True).start()

    # ------------------------------------------------------------ sandbox hooks

    @property
    def network_mode(self) -> str | None:
        """Docker network_mode of web-task containers: the run network with a hub; None without
        one (the user's own mocks are somewhere outside: reaching them takes a network the
        operator names, sandbox/task_network.py)."""
        return self.network

    def _apps_for(self, bundle: Bundle) -> dict[str, str]:
        marker = marker_of(bundle)
        if marker and isinstance(marker.get("apps"), dict):
            return {n: str(a["url"]) for n, a in marker["apps"].items()}
        return {t.name: t.url for t in self.urls.targets.values()}

    def _key_env(self, sid: str) -> dict[str, str] | None:
        """The rollout key of `sid` for shinken's own guest command (root's environment only), when
        the hub is shinken's: its front door refuses `set` and `reset` on a rollout's sid without it."""
        if self.hub is None:
            return None
        if self._hub_secret is None:
            self._hub_secret = hubs.hub_key(self.client, self.hub.id) or ""
        return {STATE_KEY_ENV: hubs.state_key(self._hub_secret, sid)} if self._hub_secret else None

    def _guest(self, box: Any, args: list[str], what: str, env: dict[str, str] | None = None) -> dict[str, Any]:
        res = box.exec(["python3", "-I", "-c", _GUEST_SOURCE, *args], timeout=GUEST_TIMEOUT_S, user="root", env=env)
        line = res.output.strip().splitlines()[-1] if res.output.strip() else ""
        try:
            doc = json.loads(line)
        except ValueError:
            doc = None
        if res.ok and isinstance(doc, dict) and "error" not in doc:
            return doc
        detail = doc.get("error") if isinstance(doc, dict) else res.output.strip()[-300:]
        if isinstance(doc, dict) and doc.get("kind") == "unreachable":
            raise InfraError(f"{what}: the hub did not answer: {detail}")  # engine trouble: retried
        raise SetupError(-1, "hub_state", f"{what}: {detail or f'exit {res.exit_code}'}", res.output[-2000:],
                         where="hub_state")

    def record(self, box: Any, bundle: Bundle) -> dict[str, Any]:
        """Write the golden's hub state into the build container; returns the summary
        (`{"sid", "apps": {name: bytes}}`) kept in the golden's metadata."""
        args = ["record", "--sid-file", SID_FILE, "--out", RECORD_PATH]
        for name, url in sorted(self._apps_for(bundle).items()):
            args += ["--app", f"{name}={url}"]
        summary = self._guest(box, args, "recording the golden's hub state")
        if summary.get("sid"):
            # Recorded; the setup's sid is not used again. Its uploads stay: the recorded state
            # names them by this sid (they live as long as the hub, see docs/mock-web.md).
            self.release(str(summary["sid"]), keep_uploads=True)
        return summary

    def setup_sid(self, box: Any) -> str | None:
        """The sid a setup run in `box` wrote (a re-provisioned computer's own), or None."""
        res = box.exec(["cat", SID_FILE], timeout=30, user="root")
        sid = res.output.strip() if res.ok else ""
        return sid if sid and len(sid) < 200 and "\n" not in sid else None

    def new_sid(self) -> str:
        return hubs.new_sid(self.owner, self.run_id)

    def restore(self, box: Any, sid: str) -> bool:
        """Give a fork the sid `sid` holding the golden's hub state; False when the golden
        recorded none (its setup wrote no sid), so the fork has no sid of its own."""
        summary = self._guest(box, ["restore", "--record", RECORD_PATH, "--sid", sid, "--sid-file", SID_FILE],
                              "giving the fork its hub state", self._key_env(sid))
        return bool(summary.get("sid"))

    def reset(self, box: Any, sid: str) -> list[str]:
        """Reset the fork's sid `sid` (State API `reset`) in every app the golden recorded state in,
        from inside the fork; the apps reset (the vandal probe's damage to a web task's state)."""
        summary = self._guest(box, ["reset", "--record", RECORD_PATH, "--sid", sid], "resetting the fork's hub state",
                              self._key_env(sid))
        return [str(a) for a in summary.get("apps") or []]

    def seal(self, sid: str) -> None:
        """Make `sid` a rollout's (a re-provisioned computer's setup sid): the hub then asks its key
        of `set` and `reset`, as it does of every fork's shk- sid."""
        if self.hub is not None and not sid.startswith(hubs.SID_PREFIX):
            hubs.seal_sid(self.client, self.hub.id, sid)

    def lost(self) -> str | None:
        """Why the hub forks got their state from is no longer that hub: removed, stopped, or
        started again (its state of the forks' sids is gone then); None while it runs, or
        when the mocks run elsewhere (--mock-urls: not ours to watch)."""
        if self.hub is None:
            return None
        now = hubs.started_at(self.client, self.hub.id)
        if now is None:
            return f"(container {self.hub.id[:12]}) is gone"
        if not now:
            return f"(container {self.hub.id[:12]}) is not running"
        if self._hub_started and now != self._hub_started:
            return f"(container {self.hub.id[:12]}) was restarted at {now}"
        return None

    def release(self, sid: str, *, keep_uploads: bool = False) -> None:
        """Remove a sid's state (never raises: a sid left behind is gc's to reclaim)."""
        try:
            if self.hub is not None:
                hubs.remove_sids(self.client, self.hub.id, [sid], keep_uploads=keep_uploads)
            else:
                from shinken.mockweb.state_api import StateClient

                for t in self.urls.targets.values():
                    try:
                        StateClient(t.url, timeout=10).reset(sid)
                    except Exception:  # noqa: BLE001 - best effort on mocks run elsewhere
                        pass
        except Exception:  # noqa: BLE001 - see docstring
            pass

    # ------------------------------------------------------------ lifetime

    def close(self) -> None:
        with self._lock:
            if self._closed:
                return
            self._closed = True
        errors = []
        if self.network is not None and self.owns_network:
            try:
                remove_run_network(self.client, self.network)
            except InfraError as exc:
                errors.append(str(exc))
        if self.started_hub and self.hub is not None:
            try:
                hubs.stop_hub(self.client, self.hub.id)
            except InfraError as exc:
                errors.append(str(exc))
        if errors:
            raise InfraError("; ".join(errors))

    def __enter__(self) -> "WebSession":
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()
