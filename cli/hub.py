"""`shinken hub build|up|down|status`: the CUA-Gym-Hub mock apps as a container next to the
sandbox (see docs/mock-web.md)."""

from __future__ import annotations

from pathlib import Path
from typing import Annotated, Any, Optional

import typer
from rich.table import Table
from rich.text import Text

from shinken.cli.common import JsonFlag, Output, add_command, group
from shinken.cli.image import CaBundleOpt, build_progress
from shinken.errors import EnvironmentProblem, ShinkenError

app = group("Build and run the CUA-Gym-Hub mock web apps that web tasks use.")

BUILD_EXAMPLES = [
    "shinken hub build --source ~/CUA-Gym-Hub --apps gmail,slack    # two apps; cached per app by content hash",
    "shinken hub build --source ~/CUA-Gym-Hub --json    # every app of the checkout that builds",
    "shinken hub build --source ~/CUA-Gym-Hub --registry https://npm.example.com/ --strict    # exit 1 if any app fails",
]
UP_EXAMPLES = [
    "shinken hub up    # a detached hub of shinken/hub:latest; probe and the workspace server reuse it",
    "shinken hub up shinken/hub:latest --publish 8000    # app i answers on http://127.0.0.1:<8000+i>, like deploy-all.sh",
]
DOWN_EXAMPLES = ["shinken hub down    # every hub `hub up` started", "shinken hub down shinken-hub-53fdc32c-1a9428"]
STATUS_EXAMPLES = ["shinken hub status", "shinken hub status --json"]
CHECK_EXAMPLES = ["shinken hub check    # every app of shinken/hub:latest; results go into its manifest",
                  "shinken hub check shinken/hub:latest --apps gmail,slack --json"]
INSPECT_EXAMPLES = ["shinken hub inspect    # the apps shinken/hub:latest serves, their host names and ports",
                    "shinken hub inspect shinken/hub:latest --json"]

DEFAULT_HUB = "shinken/hub:latest"
HubImageArg = Annotated[str, typer.Argument(help="Hub image (from `shinken hub build`).", envvar="SHINKEN_HUB_IMAGE")]
BUILD_SCHEMA = "shinken.hub_build/1"
BUILD_FAILED_SCHEMA = "shinken.hub_build_failed/1"
CHECK_SCHEMA = "shinken.hub_check/1"
STATUS_SCHEMA = "shinken.hub_status/1"


def _client() -> Any:
    from shinken.sandbox.docker_client import connect

    return connect()


def _apps_list(value: str | None) -> list[str] | None:
    if value is None:
        return None
    names = [v.strip() for v in value.split(",") if v.strip()]
    if not names:
        raise ShinkenError("--apps is empty; name apps like --apps gmail,slack (or leave it out for all)")
    return names


def _validated(name: str, doc: dict[str, Any]) -> dict[str, Any]:
    from shinken.schemas import check_own

    check_own(name, doc, f"`shinken hub` output ({name})")
    return doc


def build(
    source: Annotated[Path, typer.Option("--source", "-s", help="A CUA-Gym-Hub checkout (the folder holding websites/).")],
    apps: Annotated[Optional[str], typer.Option("--apps", help="Comma-separated apps to include (default: all), e.g. gmail,slack.")] = None,
    registry: Annotated[Optional[str], typer.Option(
        "--registry", help="npm registry to install every package from, whatever host a lockfile names "
                           "(default: npm's configured one: $npm_config_registry, ~/.npmrc, else registry.npmjs.org).")] = None,
    strict: Annotated[bool, typer.Option("--strict", help="Exit 1 when any app fails to build (default: only when none built).")] = False,
    cpu_shares: Annotated[Optional[int], typer.Option(
        "--cpu-shares", min=2, max=262144,
        help="CPU weight of the app build containers (Docker's --cpu-shares, default 1024); e.g. 128 "
             "builds on idle CPU and yields to other containers on a shared machine.")] = None,
    ca_bundle: CaBundleOpt = None,
    verbose: Annotated[bool, typer.Option("--verbose", "-v", help="Print every build output line.")] = False,
    json_out: JsonFlag = False,
) -> None:
    """Build (or find cached) the hub image from a CUA-Gym-Hub checkout.

    Each app gets `npm ci` (`npm install` without a lockfile) and `npm run build` in its own
    image, cached by the content hash of its sources and lockfile; every package comes from
    the configured npm registry. An app that fails is left out (its first error line and log
    are in the table) and the hub image holds every app that built, listed in its manifest."""
    from shinken.mockweb.build import NothingBuilt, build_hub
    from shinken.errors import WorkFailed

    output = Output(json_out)
    wanted = _apps_list(apps)
    try:
        with build_progress(output, "hub", verbose) as progress:
            result = build_hub(source, wanted, ca_bundle=ca_bundle, progress=progress, registry=registry,
                               cpu_shares=cpu_shares)
    except NothingBuilt as exc:
        table = _build_table([], exc.failures)
        output.result(_validated("hub_build_failed", {"schema": BUILD_FAILED_SCHEMA, "failed": [f.to_json() for f in exc.failures]}),
                      lambda: output.table(table))
        raise
    built = sum(not a.cached for a in result.apps)
    output.note(f"{result.tag}: {'cached' if result.cached else 'built'} in {result.seconds:.1f}s "
                f"({len(result.apps)} app(s) in the image: {built} built, {len(result.apps) - built} cached; "
                f"{len(result.failed)} failed; npm registry {result.registry})")
    table = _build_table(result.apps, result.failed)

    def render() -> None:
        output.table(table)
        output.line(f"hub image: {result.tag} (also {result.tag.split(':')[0]}:latest)")

    output.result(_validated("hub_build", {"schema": BUILD_SCHEMA, **result.to_json()}), render)
    if strict and result.failed:
        raise WorkFailed(f"--strict: {len(result.failed)} app(s) did not build ({', '.join(f.name for f in result.failed)}); "
                         f"the hub image {result.tag} holds the {len(result.apps)} that did")


def _build_table(builds: list[Any], failed: list[Any]) -> Table:
    """One row per app: built / cached / failed, seconds, the first error line, the log."""
    table = Table("app", "result", "seconds", "first error line", "log")
    rows = [(b.name, "cached" if b.cached else "built", b.seconds, "", b.log or "") for b in builds]
    rows += [(f.name, "FAILED", f.seconds, f.error, f.log or "") for f in failed]
    for name, res, sec, err, log in sorted(rows, key=lambda r: r[0].lower()):
        table.add_row(name, res, f"{sec:.1f}", Text(err), Text(log))  # Text: `[vite:...]` is not markup
    return table


def check(
    image: HubImageArg = DEFAULT_HUB,
    apps: Annotated[Optional[str], typer.Option("--apps", help="Comma-separated apps to check (default: every app of the image).")] = None,
    strict: Annotated[bool, typer.Option("--strict", help="Exit 1 when any app fails a check.")] = False,
    json_out: JsonFlag = False,
) -> None:
    """Check each app's State API on fresh sids of a hub of the image, and record the results
    in the image's manifest (`checks` per app).

    Per app: a new sid's state_diff is empty; one set_current change shows in /go; reset
    works; a >1 MB multi-byte UTF-8 state round-trips byte for byte; the app answers on
    127.0.0.1 and ::1 inside the hub. Triage (--hub) drops tasks whose reward reads a field a
    failed check found wrong."""
    from shinken.errors import WorkFailed
    from shinken.mockweb.check import CHECKS, check_hub, record_checks
    from shinken.mockweb.manifest import read_manifest

    output = Output(json_out)
    client = _client()
    manifest = read_manifest(client, image)
    wanted = _apps_list(apps)
    with build_progress(output, "hub check", True) as progress:
        results = check_hub(client, manifest, wanted, progress=progress)
        new_id = record_checks(client, manifest, results, progress=None)
    doc = _validated("hub_check", {"schema": CHECK_SCHEMA, "image": new_id, "checked_image": manifest.image_id,
                                   "apps": [{"app": r.app, "checks": r.to_json()} for r in results]})
    table = Table("app", *CHECKS, "fields found wrong", "seconds")
    for r in results:
        fields = sorted({f for v in r.results.values() if not v.ok for f in v.fields})
        table.add_row(r.app, *("ok" if r.results[c].ok else "FAIL" for c in CHECKS), ", ".join(fields) or "-",
                      f"{r.seconds:.1f}")
    failing = [r for r in results if not r.ok]

    def render() -> None:
        output.table(table)
        for r in failing:
            for name, v in r.results.items():
                if not v.ok:
                    output.line(f"{r.app} {name}: {v.detail}")
        output.line(f"{len(results) - len(failing)} of {len(results)} app(s) passed every check; "
                    f"results recorded in the manifest of {image} ({new_id[:19]})")

    output.result(doc, render)
    if strict and failing:
        raise WorkFailed(f"--strict: {len(failing)} app(s) failed a State API check: {', '.join(r.app for r in failing)}")


def up(
    image: HubImageArg = DEFAULT_HUB,
    publish: Annotated[Optional[int], typer.Option("--publish", "-p", min=1, max=65535,
                                                   help="Publish app i (in name order) on 127.0.0.1:PORT+i, "
                                                        "as deploy-all.sh numbers them from 8000.")] = None,
    eager: Annotated[bool, typer.Option("--eager", help="Start every app now (default: on its first request).")] = False,
    json_out: JsonFlag = False,
) -> None:
    """Start a detached hub by hand.

    It outlives this command; probe and the workspace server reuse a running hub of the same
    image. Stop it with `shinken hub down`."""
    from shinken.mockweb import hub as hubs
    from shinken.mockweb.manifest import read_manifest

    client = _client()
    manifest = read_manifest(client, image)
    running = [h for h in hubs.find_hubs(client, manifest.image_id) if h.detached]
    if running and (publish is None or running[0].published == publish):
        h = running[0]
        Output(json_out).note(f"hub {h.name} of {image} is already running")
    else:
        h = hubs.start_hub(client, manifest, detached=True, publish=publish, eager=eager)
        Output(json_out).note(f"started {h.name}")
    _print_status([_status_of(client, h)], json_out)


def down(
    names: Annotated[Optional[list[str]], typer.Argument(help="Hub container names or ids (default: every hub `up` started).")] = None,
    json_out: JsonFlag = False,
) -> None:
    """Stop the hubs `shinken hub up` started.

    A run's own hub goes away with its run (or with `shinken gc` after the run died)."""
    from shinken.mockweb import hub as hubs

    client = _client()
    found = hubs.find_hubs(client, running_only=False)
    if names:
        chosen = []
        for n in names:
            match = [h for h in found if h.name == n or h.id.startswith(n)]
            if not match:
                raise ShinkenError(f"no hub container {n!r}; `shinken hub status` lists them")
            if not match[0].detached:
                raise ShinkenError(f"{match[0].name} belongs to a running shinken process (a probe or server run); "
                                   "it is removed when that run ends, or by `shinken gc` after it died")
            chosen.append(match[0])
    else:
        chosen = [h for h in found if h.detached]
    for h in chosen:
        hubs.stop_hub(client, h.id)
    output = Output(json_out)
    output.note(f"stopped {len(chosen)} hub(s)")
    doc = _validated("hub_status", {"schema": STATUS_SCHEMA, "hubs": [], "stopped": [h.name for h in chosen]})
    output.result(doc, lambda: [output.line(h.name) for h in chosen])


def inspect(image: HubImageArg = DEFAULT_HUB, json_out: JsonFlag = False) -> None:
    """Print a hub image's manifest: the apps it serves, their host names, ports and versions."""
    from shinken.mockweb.manifest import read_manifest

    output = Output(json_out)
    m = read_manifest(_client(), image)
    doc = m.to_doc()
    _validated("hub_manifest", doc)
    table = Table("app", "host name (port 80)", "direct port", "placeholder", "source hash")
    for a in m.apps:
        table.add_row(a.name, a.alias, str(a.port), f"__CUA_GYM_{a.key}_URL__", a.source_hash)
    output.result(doc, lambda: output.table(table))


def status(json_out: JsonFlag = False) -> None:
    """List hub containers: image, owner, published ports, started apps, stored sids."""
    from shinken.mockweb import hub as hubs

    client = _client()
    found = hubs.find_hubs(client, running_only=False)
    _print_status([_status_of(client, h) for h in found], json_out)


def _status_of(client: Any, h: Any) -> dict[str, Any]:
    from shinken.mockweb import hub as hubs
    from shinken.mockweb.manifest import read_manifest
    from shinken.sandbox.api import InfraError

    try:
        manifest = read_manifest(client, h.image_id)
    except ShinkenError:
        manifest = None  # the image was removed under a running hub

    info = client.api.inspect_container(h.id)
    running = bool(info["State"].get("Running"))
    networks = sorted((info.get("NetworkSettings") or {}).get("Networks") or {})
    doc: dict[str, Any] = {
        "id": h.id, "name": h.name, "image_id": h.image_id, "running": running, "detached": h.detached,
        "owner": h.owner, "published": h.published, "networks": networks, "apps": [], "sids": 0, "error": None,
    }
    pub = {a.name: h.published + i for i, a in enumerate(manifest.apps)} if h.published and manifest else {}
    if running:
        try:
            health = hubs.health(client, h.id)
            sids = hubs.list_sids(client, h.id)
            doc["sids"] = len({s.sid for s in sids})
            per_app: dict[str, int] = {}
            for s in sids:
                per_app[s.app] = per_app.get(s.app, 0) + 1
            doc["apps"] = [{"name": a["name"], "alias": a["alias"], "port": a["port"], "running": a["running"],
                            "sids": per_app.get(a["name"], 0), "last_error": a.get("last_error"),
                            "url": f"http://127.0.0.1:{pub[a['name']]}" if a["name"] in pub else None}
                           for a in health["apps"]]
        except (InfraError, EnvironmentProblem) as exc:
            doc["error"] = str(exc)
    return doc


def _print_status(hubs_docs: list[dict[str, Any]], json_out: bool) -> None:
    output = Output(json_out)
    doc = _validated("hub_status", {"schema": STATUS_SCHEMA, "hubs": hubs_docs})
    if not hubs_docs:
        output.result(doc, lambda: output.note("no hub containers; start one with `shinken hub up` "
                                               "(probe and the workspace server start their own)"))
        return
    table = Table("hub", "state", "owner", "published at", "apps (started)", "sids")
    for d in hubs_docs:
        apps = ", ".join(f"{a['name']}{'*' if a['running'] else ''}" for a in d["apps"]) or (d["error"] or "-")
        owner = "detached (hub up)" if d["detached"] else (d["owner"] or "-")
        pub = " ".join(a["url"] for a in d["apps"] if a["url"]) or "-"
        table.add_row(d["name"], "running" if d["running"] else "stopped", owner, pub, apps, str(d["sids"]))

    def render() -> None:
        output.table(table)
        output.note("* = app started (apps start on their first request)")

    output.result(doc, render)


add_command(app, "build", build, BUILD_EXAMPLES)
add_command(app, "check", check, CHECK_EXAMPLES)
add_command(app, "up", up, UP_EXAMPLES)
add_command(app, "down", down, DOWN_EXAMPLES)
add_command(app, "status", status, STATUS_EXAMPLES)
add_command(app, "inspect", inspect, INSPECT_EXAMPLES)
