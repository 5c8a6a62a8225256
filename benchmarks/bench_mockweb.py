"""Mock web (CUA-Gym-Hub) costs, measured in one run on the real engine:

- hub build per app: cold (empty npm cache, no image), rebuilt with a warm npm cache, and
  cached (the image exists: a content-hash lookup);
- hub start to ready: container start until the supervisor accepts, then an app's first
  start (its `vite preview`) until it serves;
- web-task fork-to-ready p50/p95: container + desktop + the fork's own sid holding the
  golden's hub state + the setup's browser relaunched on that sid until its window shows the
  golden's title (then DevTools is asked which page it shows), next to a plain fork of the
  same image and desktop (no hub state, no relaunch), so the ratio shows what a web task adds;
  and the state fork alone (the guest `restore`: set + set_current + read back) and a record
  (what a golden build pays: /state + /go until it settles).

- with `--checkout-survey OUT.json` on a CUA-Gym-Hub checkout: apps built of those it has, the
  build time per app, the hub image's size, and `hub check` time and results per app.

Run: .venv/bin/python benchmarks/bench_mockweb.py [--source DIR] [--apps a,b] [--n 20] [--json out.json]
     .venv/bin/python benchmarks/bench_mockweb.py --source ~/CUA-Gym-Hub --checkout-survey out/hub-survey.json
(default source: the stand-in checkout tests/data/hub; with a CUA-Gym-Hub checkout the build
numbers are those of its apps, the fork numbers need a web task for one of them: --task).
"""

from __future__ import annotations

import argparse
import json
import os
import statistics
import sys
import tempfile
import time
from pathlib import Path

from shinken.bundles.loader import load_bundle
from shinken.images.build import DEFAULT_IMAGE, _read_ca
from shinken.mockweb import hub as hubs
from shinken.mockweb.apps import discover_apps, select_apps
from shinken.mockweb.build import build_app, build_hub, build_user, ensure_node_image
from shinken.mockweb.manifest import read_manifest
from shinken.mockweb.runs import web_plan
from shinken.mockweb.session import GUEST_TIMEOUT_S
from shinken.runtime import cache_root
from shinken.sandbox.docker_client import connect, run_container
from shinken.sandbox.docker_provider import DockerProvider
from shinken.sandbox.ownership import labels_for
from shinken.tiers import Tier

REPO = Path(__file__).resolve().parent.parent
STAND_IN = REPO / "tests" / "data" / "hub"
STAR = REPO / "tests" / "data" / "web_tasks" / "8b2f7c1e-4a3d-5e6f-9a0b-1c2d3e4f5a6b"
PLAIN = REPO / "demo" / "zenity-entry"

# The fork's first page, as DevTools lists it: the browser the setup opened, relaunched on the
# fork's own sid (exit 1 when it shows anything else).
PAGE = r"""
import json, sys, urllib.request
pages = [t for t in json.load(urllib.request.urlopen("http://127.0.0.1:9222/json", timeout=5)) if t["type"] == "page"]
ok = any(sys.argv[1] in t["url"] and t["title"].startswith("Mailbox (") for t in pages)
print(json.dumps(pages)[:300]); sys.exit(0 if ok else 1)
"""


def pct(xs: list[float], q: float) -> float:
    xs = sorted(xs)
    return xs[min(len(xs) - 1, int(round(q * (len(xs) - 1))))]


def summary(xs: list[float]) -> dict[str, float]:
    return {"n": len(xs), "p50": round(statistics.median(xs), 4), "p95": round(pct(xs, 0.95), 4),
            "min": round(min(xs), 4), "max": round(max(xs), 4)}


def cache_bytes(folder: Path) -> int:
    """Bytes of tarballs and metadata in an npm cache (what was downloaded into it)."""
    return sum(p.stat().st_size for p in (folder / "_cacache").rglob("*") if p.is_file()) if folder.is_dir() else 0


def bench_build(client, source: Path, apps: list[str] | None, cpu_shares: int | None = None) -> dict:
    """Per app, side by side: a cold build (empty npm cache, no image), a rebuild with the
    shared npm cache warm, and the cached lookup; each build's seconds per step (npm install,
    npm run build, docker commit) and the bytes the cold build downloaded into its cache."""
    chosen = select_apps(discover_apps(source), apps)
    node_tag, node_id, _ = ensure_node_image(client)
    ca = _read_ca(None)
    out = {}
    for app in chosen:
        with tempfile.TemporaryDirectory(prefix="shinken-bench-npm-") as empty:
            load = os.getloadavg()[0]
            cold = build_app(client, app, node_tag, node_id, ca, nocache=True, npm_cache=Path(empty), cpu_shares=cpu_shares)
            downloaded = cache_bytes(Path(empty))
        warm = build_app(client, app, node_tag, node_id, ca, nocache=True, cpu_shares=cpu_shares)
        # the same warm build with the build script run through `npm run build` (as before)
        via_npm = build_app(client, app, node_tag, node_id, ca, nocache=True, cpu_shares=cpu_shares, run_directly=False)
        cached = build_app(client, app, node_tag, node_id, ca).seconds
        out[app.name] = {"cold_s": round(cold.seconds, 2), "cold_phases_s": cold.phases,
                         "cold_downloaded_bytes": downloaded, "warm_npm_cache_s": round(warm.seconds, 2),
                         "warm_phases_s": warm.phases, "warm_via_npm_run_s": round(via_npm.seconds, 2),
                         "warm_via_npm_run_phases_s": via_npm.phases, "cached_s": round(cached, 4),
                         "load": round(load, 1), "load_after": round(os.getloadavg()[0], 1)}
        print(f"build {app.name}: cold {cold.seconds:.1f}s {cold.phases}, warm npm cache {warm.seconds:.1f}s "
              f"{warm.phases}, warm via npm run {via_npm.seconds:.1f}s {via_npm.phases}, cached {cached * 1000:.0f}ms",
              file=sys.stderr)
    return out


# In one container, alternately: `npm run x` (npm starts, then runs the script) and the same
# script run the way shinken now runs a build or preview script npm would only run (sh -c).
NPM_START = r"""cd /tmp && printf '{"name":"x","version":"1.0.0","scripts":{"x":"node -e 0"}}' > package.json
for i in $(seq "$1"); do
  a=$EPOCHREALTIME; npm run x >/dev/null 2>&1; b=$EPOCHREALTIME; sh -c 'node -e 0'; c=$EPOCHREALTIME
  echo "$a $b $c"
done"""


def bench_npm_start(client, n: int) -> dict:
    """What running a package.json script without npm saves per run (an app build runs its
    build script once, a hub runs each app's preview script once per start): `npm run x` vs
    `sh -c <x>` for x = `node -e 0`, alternated n times in one container of the node image."""
    node_tag, _, _ = ensure_node_image(client)
    load = os.getloadavg()[0]
    out = run_container(client, node_tag, ["bash", "-c", NPM_START, "bench", str(n)], remove=True, network_mode="none",
                                labels=labels_for("build", task="bench-npm-start"))
    rows = [[float(x) for x in ln.split()] for ln in out.decode().split("\n") if ln.strip()]
    npm = [b - a for a, b, _ in rows]
    direct = [c - b for _, b, c in rows]
    return {"npm_run_s": summary(npm), "direct_s": summary(direct), "load": round(load, 1),
            "npm_over_direct_p50": round(statistics.median(npm) / statistics.median(direct), 2)}


def bench_ab(client, source: Path, apps: list[str] | None, n: int, cpu_shares: int | None = None) -> dict:
    """Warm rebuilds of each app, alternating the build script run directly (now) and through
    `npm run build` (before), n of each: a ratio measured side by side while the load moves."""
    chosen = select_apps(discover_apps(source), apps)
    node_tag, node_id, _ = ensure_node_image(client)
    ca = _read_ca(None)
    out = {}
    for app in chosen:
        build_app(client, app, node_tag, node_id, ca, nocache=True, cpu_shares=cpu_shares)  # warm the npm cache
        direct, via_npm, loads = [], [], []
        for _ in range(n):
            loads.append(os.getloadavg()[0])
            direct.append(build_app(client, app, node_tag, node_id, ca, nocache=True, cpu_shares=cpu_shares))
            via_npm.append(build_app(client, app, node_tag, node_id, ca, nocache=True, cpu_shares=cpu_shares,
                                     run_directly=False))
        out[app.name] = {
            "direct_s": summary([b.seconds for b in direct]), "npm_run_s": summary([b.seconds for b in via_npm]),
            "direct_build_step_s": summary([b.phases["build"] for b in direct]),
            "npm_run_build_step_s": summary([b.phases["build"] for b in via_npm]),
            "npm_run_over_direct_p50": round(statistics.median(b.seconds for b in via_npm)
                                             / statistics.median(b.seconds for b in direct), 2),
            "load": [round(x, 1) for x in loads]}
        print(f"{app.name}: {out[app.name]}", file=sys.stderr)
    return out


def bench_checkout(client, source: Path, out_path: Path, apps: list[str] | None, check: bool,
                   cpu_shares: int | None = None, stop_file: Path | None = None, full_hub: bool = True) -> dict:
    """Every app of a (public) CUA-Gym-Hub checkout, as `shinken hub build` builds it, one app
    at a time: built or failed, seconds (its image not cached; the npm cache shared by the
    apps, warm from the apps before it, as in one `hub build`) and per step, the bytes it added
    to the npm cache, the first error line; an app that built is then looked up again (cached:
    a content-hash lookup) and, with `check`, put in a hub image of its own and given
    `shinken hub check`. Results are written to `out_path` after every app, so the survey can
    run in the background and be stopped at any app boundary (`stop_file` exists: it stops
    before the next app); a re-run resumes: apps recorded with the same node image are not
    built again (a new node image measures every app again). At the end (not when stopped),
    the hub image of every app that built and its size. cpu_shares: the build containers' CPU
    weight (128: use idle CPU, yield to other containers)."""
    from shinken.errors import EnvironmentProblem
    from shinken.mockweb.build import AppBuildFailed
    from shinken.mockweb.check import check_hub
    from shinken.mockweb.registry import npm_config

    chosen = select_apps(discover_apps(source), apps)
    node_tag, node_id, _ = ensure_node_image(client)
    ca = _read_ca(None)
    npm = npm_config(None)
    registry = npm.registry
    doc = json.loads(out_path.read_text()) if out_path.exists() else {}
    doc.setdefault("source", str(source))
    doc.setdefault("apps_in_checkout", len(chosen))
    doc.setdefault("registry", registry)
    doc["node_image"] = node_id
    doc["cpu_shares"] = cpu_shares
    per_app = doc.setdefault("apps", {})
    npm_cache = cache_root() / f"hub-npm-u{build_user()[0]}"  # what build_app uses by default

    def save() -> None:
        doc["surveyed"] = sum(1 for r in per_app.values() if r.get("node_image") == node_id)
        doc["built"] = sum(1 for r in per_app.values() if r.get("node_image") == node_id and r.get("built"))
        tmp = out_path.with_suffix(".tmp")
        tmp.write_text(json.dumps(doc, indent=1) + "\n")
        tmp.replace(out_path)

    for i, app in enumerate(chosen, 1):
        if stop_file is not None and stop_file.exists():
            print(f"{stop_file} exists: stopped before {app.name} (re-run to resume)", file=sys.stderr, flush=True)
            save()
            return doc
        r = per_app.get(app.name, {})
        if r.get("node_image") != node_id:
            load = os.getloadavg()[0]
            before = cache_bytes(npm_cache)
            try:
                b = build_app(client, app, node_tag, node_id, ca, registry=registry, cpu_shares=cpu_shares, npm=npm)
                r = {"built": True, "cached_before": b.cached, "seconds": round(b.seconds, 2),
                     "phases": b.phases, "error": None, "load": round(load, 1)}
            except AppBuildFailed as exc:
                r = {"built": False, "cached_before": False, "seconds": round(exc.seconds, 2),
                     "error": exc.first_error, "log": str(exc.log), "load": round(load, 1)}
            except EnvironmentProblem as exc:  # the engine did not answer: tried again on the next run
                tries = per_app.setdefault(app.name, {}).get("engine_tries", 0) + 1
                per_app[app.name] = {"engine_tries": tries, "engine_error": str(exc)[:300]}
                print(f"[{i}/{len(chosen)}] {app.name}: engine problem ({exc}); try {tries}", file=sys.stderr, flush=True)
                save()
                if tries < 3:
                    raise
                r = {"built": False, "cached_before": False, "seconds": 0.0, "error": f"engine: {exc}"[:300],
                     "load": round(load, 1)}
            r.update({"node_image": node_id, "load_after": round(os.getloadavg()[0], 1),
                      "downloaded_bytes": cache_bytes(npm_cache) - before})
            per_app[app.name] = r
            print(f"[{i}/{len(chosen)}] {app.name}: {'built' if r['built'] else 'FAILED'} in {r['seconds']:.1f}s "
                  f"{r.get('phases', '')}" + (f" ({r['error']})" if r["error"] else ""), file=sys.stderr, flush=True)
            save()
        if r["built"] and "cached_s" not in r:
            r["cached_s"] = round(build_app(client, app, node_tag, node_id, ca, registry=registry).seconds, 4)
        if r["built"] and check and "check" not in r and r.get("check_tries", 0) < 2:
            one = build_hub(source, [app.name], client=client, registry=registry, latest=False)
            try:
                (res,) = check_hub(client, read_manifest(client, one.tag))
            except EnvironmentProblem as exc:  # recorded; a re-run tries the check again (twice at most)
                r["check_tries"] = r.get("check_tries", 0) + 1
                r["check_error"] = str(exc)[:300]
                save()
                if r["check_tries"] < 2:
                    raise
                continue
            finally:
                if not one.cached:  # a throwaway hub of this app alone (~80 MB each): not kept
                    try:
                        client.api.remove_image(one.tag)
                    except Exception as exc:  # noqa: BLE001 - a busy engine: the image stays, named
                        print(f"    could not remove {one.tag}: {exc}", file=sys.stderr, flush=True)
            r["check"] = res.to_json()
            r["check"]["load"] = round(os.getloadavg()[0], 1)
            bad = [k for k, v in res.results.items() if not v.ok]
            print(f"    {app.name}: hub check {'ok' if not bad else 'FAILED ' + ', '.join(bad)} ({res.seconds:.1f}s)",
                  file=sys.stderr, flush=True)
        save()
    built = [a for a in chosen if per_app.get(a.name, {}).get("built")]
    if full_hub and built:
        hub = build_hub(source, [a.name for a in built], client=client, registry=registry)
        doc["hub_image"] = hub.tag
        doc["hub_image_apps"] = len(built)
        doc["hub_image_bytes"] = client.api.inspect_image(hub.image_id)["Size"]
        save()
    return doc


def survey_table(doc: dict) -> str:
    """docs/mock-web.md's table of a survey (markdown): per app measured with the survey's node
    image, the build result, seconds (load at its start), seconds per step, cached lookup, the
    checks it failed and check seconds, the first error line."""
    rows = ["| app | build | build s (load) | install / build / commit s | cached s | `hub check` failed | check s (load) | first error line |",
            "|---|---|---|---|---|---|---|---|"]
    for name, r in sorted(doc.get("apps", {}).items(), key=lambda kv: kv[0].lower()):
        if r.get("node_image") != doc.get("node_image"):
            continue
        ph = r.get("phases") or {}
        steps = " / ".join(f"{ph[k]:.0f}" for k in ("install", "build", "commit") if k in ph) or "-"
        chk = r.get("check")
        failed = ", ".join(k for k, v in (chk or {}).get("results", {}).items() if not v["ok"]) if chk else "-"
        err = (r.get("error") or "").replace("|", "\\|")
        build = "cached" if r.get("cached_before") else ("built" if r["built"] else "failed")
        check_s = f"{chk['seconds']:.0f} ({chk.get('load', 0):.0f})" if chk else "-"
        cached = r["cached_s"] if "cached_s" in r else "-"
        rows.append(f"| {name} | {build} | {r['seconds']:.0f} ({r['load']:.0f}) | {steps} | "
                    f"{cached} | {failed or 'none'} | {check_s} | {err} |")
    return "\n".join(rows)


# What blocks an app that did not build, read from its first error line (first match wins).
CAUSES = (
    ("npm could not resolve the lockfile's peer dependencies (ERESOLVE)", ("ERESOLVE", "peer dep")),
    ("the lockfile does not match package.json (npm ci)", ("in sync", "npm ci` can only install", "EUSAGE")),
    ("a package is not on the configured registry", ("E404", "404 Not Found", "ETARGET", "notarget")),
    ("the registry did not answer (network)", ("ENOTFOUND", "EAI_AGAIN", "ETIMEDOUT", "ECONNREFUSED", "ECONNRESET",
                                                "ERR_SOCKET_TIMEOUT")),
    ("Node too old for the app's Vite", ("requires Node", "Vite requires Node")),
    ("took over the build timeout", ("took over",)),
    ("the Docker engine did not answer", ("engine:",)),
    ("vite build failed (the app's sources)", ("vite", "rollup", "Could not resolve", "Transform failed", "error during build")),
)


def failure_cause(error: str) -> str:
    for cause, needles in CAUSES:
        if any(n.lower() in error.lower() for n in needles):
            return cause
    return "other"


def survey_summary(doc: dict) -> str:
    """The survey's count (N of the checkout's apps measured with its node image, how many
    built and were checked) and its failures grouped by cause (markdown)."""
    rows = {k: r for k, r in doc.get("apps", {}).items() if r.get("node_image") == doc.get("node_image")}
    built = [k for k, r in rows.items() if r.get("built")]
    checked = [k for k in built if rows[k].get("check")]
    passed = [k for k in checked if rows[k]["check"].get("ok")]
    lines = [f"{len(rows)} of {doc.get('apps_in_checkout', '?')} apps measured: {len(built)} built, "
             f"{len(rows) - len(built)} failed; {len(checked)} checked, {len(passed)} passed every check"]
    groups: dict[str, list[str]] = {}
    for k, r in sorted(rows.items(), key=lambda kv: kv[0].lower()):
        if not r.get("built"):
            groups.setdefault(failure_cause(r.get("error") or ""), []).append(k)
    for cause, names in sorted(groups.items(), key=lambda kv: -len(kv[1])):
        lines.append(f"- {cause}: {len(names)} ({', '.join(names)})")
    by_check: dict[str, list[str]] = {}
    for k in checked:
        for name, v in rows[k]["check"]["results"].items():
            if not v["ok"]:
                by_check.setdefault(name, []).append(k)
    for name, names in sorted(by_check.items()):
        lines.append(f"- `hub check` {name} failed: {len(names)} of {len(checked)} ({', '.join(names)})")
    return "\n".join(lines)


def bench_start(client, manifest, n: int) -> dict:
    ready, first_app = [], []
    for _ in range(n):
        t0 = time.perf_counter()
        h = hubs.start_hub(client, manifest)  # returns once the supervisor accepts
        ready.append(time.perf_counter() - t0)
        t1 = time.perf_counter()
        hubs.start_app(client, h.id, manifest.apps[0].name)
        first_app.append(time.perf_counter() - t1)
        hubs.stop_hub(client, h.id)
    return {"hub_ready_s": summary(ready), "first_app_ready_s": summary(first_app), "app": manifest.apps[0].name}


def bench_forks(client, hub_image: str, image: str, n: int, task: Path) -> dict:
    plan = web_plan(hub_image, None, client=client)
    assert plan is not None
    web = plan.session(client, run_id=f"bench-web-{os.getpid()}")
    try:
        bundle, blocked = plan.prepare(load_bundle(task))
        assert blocked is None, blocked
        with DockerProvider(run_id=web.run_id, web=web) as p:
            g = p.ensure_golden(bundle, image)
            plain_g = p.ensure_golden(load_bundle(PLAIN), image)
            t0 = time.perf_counter()
            with p.fork(g) as warmup:  # first fork also starts the app if the build did not
                apps = [f"--app={t.name}={t.url}" for t in plan.urls.targets.values()]
                record = _timed(lambda: web._guest(warmup, ["record", "--sid-file", "/tmp/task_web_sid",
                                                            "--out", "/tmp/bench-record.json", *apps], "record"))
            first = time.perf_counter() - t0
            web_forks, plain_forks, restores, misses = [], [], [], 0
            parts: dict[str, list[float]] = {}
            for _ in range(n):
                # A web fork: container + desktop + its own sid with the golden's state + the
                # setup's browser relaunched on that sid and checked against the golden's windows.
                t = time.perf_counter()
                f = p.fork(g)
                web_forks.append(time.perf_counter() - t)
                for k, v in f.start_timings.items():
                    parts.setdefault(k, []).append(v)
                misses += not f.exec(["python3", "-c", PAGE, str(f.web_sid)], timeout=60).ok
                sid = web.new_sid()  # the state fork alone, on a second sid
                restores.append(_timed(lambda: web.restore(f, sid)))
                web.release(sid)
                f.close()
                # The same image and desktop without hub state or relaunch.
                t = time.perf_counter()
                q = p.fork(plain_g, replay=False, tier=Tier.FILESYSTEM)
                plain_forks.append(time.perf_counter() - t)
                q.close()
    finally:
        web.close()
    return {
        "first_web_fork_s": round(first, 3),
        "web_fork_to_ready_s": summary(web_forks),
        "web_fork_parts_p50_s": {k: round(statistics.median(v), 3) for k, v in parts.items()},
        "plain_desktop_fork_s": summary(plain_forks),
        "web_over_plain_p50": round(statistics.median(web_forks) / statistics.median(plain_forks), 3),
        "state_fork_s": summary(restores),
        "record_s": round(record, 4),
        "first_page_not_the_forks_sid": misses,
    }


def _timed(fn) -> float:
    return _timed_value(fn)[1]


def _timed_value(fn):
    t = time.perf_counter()
    v = fn()
    return v, time.perf_counter() - t


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--source", type=Path, default=STAND_IN)
    ap.add_argument("--apps", default=None)
    ap.add_argument("--image", default=DEFAULT_IMAGE)
    ap.add_argument("--task", type=Path, default=STAR, help="web task for the fork numbers (its app must be built)")
    ap.add_argument("--n", type=int, default=20)
    ap.add_argument("--starts", type=int, default=3)
    ap.add_argument("--skip-build", action="store_true", help="only hub start and forks (the image must exist)")
    ap.add_argument("--json", type=Path)
    ap.add_argument("--ab", type=int, default=0, metavar="N",
                    help="only: N warm rebuilds per app alternating the direct build script and `npm run build`")
    ap.add_argument("--survey-table", type=Path, metavar="OUT.json", help="print the markdown table of a survey file")
    ap.add_argument("--npm-start", type=int, default=0, metavar="N",
                    help="only: `npm run` vs running the script directly, N times each, alternated")
    ap.add_argument("--build-only", action="store_true", help="only the per-app build numbers (cold, warm npm cache, cached)")
    ap.add_argument("--checkout-survey", type=Path, metavar="OUT.json",
                    help="build every app of --source one by one (resumable; results in OUT.json), "
                         "then the hub of those that built, its size, and `hub check` per app")
    ap.add_argument("--no-check", action="store_true", help="with --checkout-survey: skip `hub check`")
    ap.add_argument("--cpu-shares", type=int, default=None,
                    help="CPU weight of the app build containers (e.g. 128 on a shared machine)")
    ap.add_argument("--stop-file", type=Path, default=None,
                    help="with --checkout-survey: stop before the next app once this file exists (resumable)")
    ap.add_argument("--no-full-hub", action="store_true",
                    help="with --checkout-survey: skip the hub image of every app that built")
    a = ap.parse_args()
    client = connect()
    apps = [x for x in a.apps.split(",") if x] if a.apps else None
    if a.checkout_survey is not None:
        doc = bench_checkout(client, a.source, a.checkout_survey, apps, not a.no_check, a.cpu_shares,
                             a.stop_file, not a.no_full_hub)
        print(json.dumps({k: v for k, v in doc.items() if k != "apps"}, indent=1))
        return
    if a.survey_table is not None:
        doc = json.loads(a.survey_table.read_text())
        print(survey_table(doc) + "\n\n" + survey_summary(doc))
        return
    if a.ab:
        print(json.dumps(bench_ab(client, a.source, apps, a.ab, a.cpu_shares), indent=1))
        return
    if a.npm_start:
        print(json.dumps(bench_npm_start(client, a.npm_start), indent=1))
        return
    load = os.getloadavg()
    out: dict = {"load_before": [round(x, 2) for x in load]}
    if not a.skip_build:
        out["build"] = bench_build(client, a.source, apps, a.cpu_shares)
    if a.build_only:
        out["load_after"] = [round(x, 2) for x in os.getloadavg()]
        print(json.dumps(out, indent=1))
        if a.json:
            a.json.write_text(json.dumps(out, indent=1) + "\n")
        return
    hub = build_hub(a.source, apps, client=client)
    out["hub_image"] = hub.tag
    manifest = read_manifest(client, hub.tag)
    out["start"] = bench_start(client, manifest, a.starts)
    if any(app.name == "mailbox" for app in manifest.apps) or a.task != STAR:
        out["forks"] = bench_forks(client, hub.tag, a.image, a.n, a.task)
    out["load_after"] = [round(x, 2) for x in os.getloadavg()]
    out["guest_timeout_s"] = GUEST_TIMEOUT_S
    text = json.dumps(out, indent=1)
    print(text)
    if a.json:
        a.json.write_text(text + "\n")


if __name__ == "__main__":
    main()
