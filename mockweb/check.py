"""`shinken hub check`: does each app's State API do what rewards rely on, in this hub image?

On a hub container of its own (owned by this process, removed after, on no network: the
checks use its loopback), per app:
its `vite preview` is started through the supervisor, then `check_app.mjs` runs inside the
hub with its node and checks, on fresh sids: an untouched sid's `state_diff` is empty; one
`set_current` change shows in `/go`; `reset` works; a >1 MB multi-byte UTF-8 state round-trips
byte for byte; the app answers on 127.0.0.1 and ::1. A failed check names the `/go` fields it
found wrong, which is what triage matches against the fields a task's reward reads.

The results go into the hub image's manifest (`checks` per app): the image is re-made with
the same layers and the updated label (`FROM` it, a label, nothing else) and takes over its
tags, so `--hub IMAGE` on triage and probe sees them.
"""

from __future__ import annotations

import json
import time
from dataclasses import dataclass
from datetime import datetime, timezone
from pathlib import Path
from typing import Any, Callable

from shinken.errors import EnvironmentProblem, ShinkenError
from shinken.mockweb import hub as hubs
from shinken.mockweb.manifest import LABEL_HUB_MANIFEST, HubApp, HubManifest
from shinken.sandbox.api import InfraError
from shinken.sandbox.ownership import Owner

CHECK_SCRIPT = Path(__file__).resolve().parent / "check_app.mjs"
CHECKS = ("fresh_diff_empty", "change_shows", "reset", "utf8_large", "dual_stack")
FIELDS = ("state_diff", "current_state", "initial_state")
CHECK_TIMEOUT_S = 300.0
SIDS_PER_APP = 6

Progress = Callable[[str], None]


@dataclass(frozen=True)
class CheckResult:
    ok: bool
    fields: tuple[str, ...]  # the /go fields a failed check found wrong
    detail: str

    def to_json(self) -> dict[str, Any]:
        return {"ok": self.ok, "fields": list(self.fields), "detail": self.detail}


@dataclass(frozen=True)
class AppCheck:
    app: str
    at: str
    seconds: float
    results: dict[str, CheckResult]

    @property
    def ok(self) -> bool:
        return all(r.ok for r in self.results.values())

    def to_json(self) -> dict[str, Any]:
        """The `checks` entry of the app in the hub manifest."""
        return {"at": self.at, "ok": self.ok, "seconds": round(self.seconds, 2),
                "results": {k: v.to_json() for k, v in self.results.items()}}

    @classmethod
    def from_json(cls, app: str, doc: dict[str, Any]) -> "AppCheck":
        return cls(app, doc["at"], float(doc.get("seconds", 0.0)),
                   {k: CheckResult(bool(v["ok"]), tuple(v["fields"]), str(v["detail"]))
                    for k, v in doc["results"].items()})


def failed_fields(checks: dict[str, Any] | None) -> dict[str, tuple[str, ...]]:
    """check name -> the fields it found wrong, for the failed checks of a manifest entry."""
    if not checks:
        return {}
    return {name: tuple(r.get("fields") or ()) for name, r in (checks.get("results") or {}).items() if not r.get("ok")}


def _now() -> str:
    return datetime.now(timezone.utc).strftime("%Y-%m-%dT%H:%M:%SZ")


def _all_failed(app: str, detail: str, seconds: float) -> AppCheck:
    return AppCheck(app, _now(), seconds, {
        c: CheckResult(False, () if c == "dual_stack" else FIELDS, detail) for c in CHECKS})


def _parse(app: str, out: str, seconds: float) -> AppCheck:
    try:
        doc = json.loads(out.strip().splitlines()[-1])
        res = {k: CheckResult(bool(v["ok"]), tuple(f for f in v["fields"] if f in FIELDS), str(v["detail"])[:500])
               for k, v in doc["results"].items() if k in CHECKS}
    except (ValueError, KeyError, TypeError, IndexError, AttributeError):
        return _all_failed(app, f"the check gave no result: {out.strip()[-300:]}", seconds)
    missing = [c for c in CHECKS if c not in res]
    for c in missing:
        res[c] = CheckResult(False, FIELDS, "the check did not report this")
    return AppCheck(app, _now(), seconds, res)


def check_app(client: Any, cid: str, app: HubApp, internal: int, owner: Owner, run_id: str) -> AppCheck:
    """Start `app` in the hub container `cid` and run every check on fresh sids of it."""
    t0 = time.monotonic()
    try:
        hubs.start_app(client, cid, app.name)
    except InfraError as exc:
        return _all_failed(app.name, f"the app did not start: {exc}", time.monotonic() - t0)
    sids = [hubs.new_sid(owner, run_id) for _ in range(SIDS_PER_APP)]
    arg = json.dumps({"app": app.name, "port": app.port, "internal": internal, "sids": sids})
    try:
        code, out = hubs.hub_exec(client, cid, ["node", "--input-type=module", "-e", CHECK_SCRIPT.read_text(), arg],
                                  timeout=CHECK_TIMEOUT_S)
    except InfraError as exc:
        return _all_failed(app.name, f"the check could not run: {exc}", time.monotonic() - t0)
    result = _parse(app.name, out, time.monotonic() - t0)
    try:
        hubs.remove_sids(client, cid, sids)
    except InfraError:
        pass  # the hub is removed after the check anyway
    return result


def check_hub(client: Any, manifest: HubManifest, names: list[str] | None = None,
              progress: Progress | None = None) -> list[AppCheck]:
    """Check every app of `manifest` (or those named) on a hub of its own, one app at a time."""
    apps = list(manifest.apps)
    if names:
        wanted = {n.strip().lower().removesuffix("_mock") for n in names}
        unknown = wanted - {a.name.lower() for a in apps}
        if unknown:
            raise ShinkenError(f"--apps: {', '.join(sorted(unknown))} not in hub image {manifest.image_id[:19]} "
                               f"(it serves {len(apps)} apps; `shinken hub inspect` lists them)")
        apps = [a for a in apps if a.name.lower() in wanted]
    owner = Owner.current()
    run_id = f"hub-check-{int(time.time())}"
    hub = hubs.start_hub(client, manifest, run_id=run_id, owner=owner, network="none")  # checks use its loopback
    try:
        hubs.write_owner_lease(client, hub.id, owner, run_id)
        internal = {a["name"]: int(a.get("internal") or 0) for a in hubs.health(client, hub.id)["apps"]}
        out = []
        for i, a in enumerate(apps, 1):
            if progress is not None:
                progress(f"[{i}/{len(apps)}] checking {a.name}")
            r = check_app(client, hub.id, a, internal.get(a.name, 0), owner, run_id)
            if progress is not None:
                bad = [k for k, v in r.results.items() if not v.ok]
                progress(f"{a.name}: {'ok' if not bad else 'FAILED ' + ', '.join(bad)} ({r.seconds:.1f}s)")
            out.append(r)
        return out
    finally:
        hubs.stop_hub(client, hub.id)


def with_checks(manifest: HubManifest, results: list[AppCheck]) -> dict[str, Any]:
    """The manifest document with these results as the apps' `checks` (other apps keep theirs)."""
    doc = manifest.to_doc()
    by_app = {r.app: r for r in results}
    for a in doc["apps"]:
        if a["name"] in by_app:
            a["checks"] = by_app[a["name"]].to_json()
    return doc


def record_checks(client: Any, manifest: HubManifest, results: list[AppCheck],
                  progress: Progress | None = None) -> str:
    """Re-make the hub image with `checks` in its manifest label (same layers) and move its
    shinken/hub tags onto it; the new image id."""
    from shinken.images.build import run_build
    from shinken.mockweb.build import HUB_REPO, _tar
    from shinken.schemas import check_own

    doc = with_checks(manifest, results)
    check_own("hub_manifest", doc, "the hub manifest with check results")
    info = client.api.inspect_image(manifest.image_id)
    tags = [t for t in info.get("RepoTags") or [] if t.startswith(f"{HUB_REPO}:")]
    if not tags:
        raise EnvironmentProblem(f"hub image {manifest.image_id[:19]} has no {HUB_REPO} tag to carry the checks; "
                                 "rebuild it with `shinken hub build`")
    context = _tar({"Dockerfile": b"ARG BASE_IMAGE\nFROM ${BASE_IMAGE}\n"})
    labels = {LABEL_HUB_MANIFEST: json.dumps(doc, sort_keys=True, separators=(",", ":"))}
    new_id = run_build(client, context, tags[0], f"hub-checks-{manifest.image_id.removeprefix('sha256:')[:12]}",
                       buildargs={"BASE_IMAGE": manifest.image_id}, labels=labels, progress=progress, nocache=False)
    for t in tags[1:]:
        repo, tag = t.rsplit(":", 1)
        client.api.tag(new_id, repo, tag)
    return new_id
