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
from shinken.mockweb.build import build_app, build_hub, ensure_node_image
from shinken.mockweb.manifest import read_manifest
from shinken.mockweb.runs import web_plan
from shinken.mockweb.session import GUEST_TIMEOUT_S
from shinken.sandbox.docker_client import connect
from shinken.sandbox.docker_provider import DockerProvider
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


def bench_build(client, source: Path, apps: list[str] | None) -> dict:
    chosen = select_apps(discover_apps(source), apps)
    node_tag, node_id, _ = ensure_node_image(client)
    ca = _read_ca(None)
    out = {}
    for app in chosen:
        with tempfile.TemporaryDirectory(prefix="shinken-bench-npm-") as empty:
            cold = build_app(client, app, node_tag, node_id, ca, nocache=True, npm_cache=Path(empty)).seconds
        warm = build_app(client, app, node_tag, node_id, ca, nocache=True).seconds
        cached = build_app(client, app, node_tag, node_id, ca).seconds
        out[app.name] = {"cold_s": round(cold, 2), "warm_npm_cache_s": round(warm, 2), "cached_s": round(cached, 4)}
        print(f"build {app.name}: cold {cold:.1f}s, warm npm cache {warm:.1f}s, cached {cached * 1000:.0f}ms", file=sys.stderr)
    return out


def bench_checkout(client, source: Path, out_path: Path, apps: list[str] | None, check: bool) -> dict:
    """Every app of a (public) CUA-Gym-Hub checkout, as `shinken hub build` builds it: per app
    built or failed, seconds (its image not cached; the npm cache shared by the apps, warm from
    the apps before it, as in one `hub build`), the first error line; then every app again
    (cached: a content-hash lookup), the hub image of the apps that built and its size, and
    `shinken hub check` per app. Results are written to `out_path` after every app, and a
    re-run resumes: apps already recorded are not built again."""
    from shinken.mockweb.build import AppBuildFailed
    from shinken.mockweb.check import check_hub
    from shinken.mockweb.registry import configured_registry

    chosen = select_apps(discover_apps(source), apps)
    node_tag, node_id, _ = ensure_node_image(client)
    ca = _read_ca(None)
    registry, _ = configured_registry(None)
    doc = json.loads(out_path.read_text()) if out_path.exists() else {}
    doc.setdefault("source", str(source))
    doc.setdefault("apps_in_checkout", len(chosen))
    doc.setdefault("registry", registry)
    per_app = doc.setdefault("apps", {})
    for i, app in enumerate(chosen, 1):
        if app.name in per_app:
            continue
        load = os.getloadavg()[0]
        try:
            b = build_app(client, app, node_tag, node_id, ca, registry=registry)
            per_app[app.name] = {"built": True, "cached_before": b.cached, "seconds": round(b.seconds, 2),
                                 "error": None, "load": round(load, 1)}
        except AppBuildFailed as exc:
            per_app[app.name] = {"built": False, "cached_before": False, "seconds": round(exc.seconds, 2),
                                 "error": exc.first_error, "log": str(exc.log), "load": round(load, 1)}
        r = per_app[app.name]
        print(f"[{i}/{len(chosen)}] {app.name}: {'built' if r['built'] else 'FAILED'} in {r['seconds']:.1f}s"
              + (f" ({r['error']})" if r["error"] else ""), file=sys.stderr, flush=True)
        out_path.write_text(json.dumps(doc, indent=1) + "\n")
    built = [a for a in chosen if per_app.get(a.name, {}).get("built")]
    for a in built:
        per_app[a.name]["cached_s"] = round(build_app(client, a, node_tag, node_id, ca, registry=registry).seconds, 4)
    doc["built"] = len(built)
    hub = build_hub(source, [a.name for a in built], client=client, registry=registry)
    doc["hub_image"] = hub.tag
    doc["hub_image_bytes"] = client.api.inspect_image(hub.image_id)["Size"]
    out_path.write_text(json.dumps(doc, indent=1) + "\n")
    if check:
        manifest = read_manifest(client, hub.tag)
        for r in check_hub(client, manifest, progress=lambda line: print(line, file=sys.stderr, flush=True)):
            per_app[r.app]["check"] = r.to_json()
            out_path.write_text(json.dumps(doc, indent=1) + "\n")
    return doc


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
    ap.add_argument("--checkout-survey", type=Path, metavar="OUT.json",
                    help="build every app of --source one by one (resumable; results in OUT.json), "
                         "then the hub of those that built, its size, and `hub check` per app")
    ap.add_argument("--no-check", action="store_true", help="with --checkout-survey: skip `hub check`")
    a = ap.parse_args()
    client = connect()
    apps = [x for x in a.apps.split(",") if x] if a.apps else None
    if a.checkout_survey is not None:
        doc = bench_checkout(client, a.source, a.checkout_survey, apps, not a.no_check)
        print(json.dumps({k: v for k, v in doc.items() if k != "apps"}, indent=1))
        return
    load = os.getloadavg()
    out: dict = {"load_before": [round(x, 2) for x in load]}
    if not a.skip_build:
        out["build"] = bench_build(client, a.source, apps)
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
