"""Sandbox speed, measured in one run on the real engine and the real sandbox image:

- fork p50/p95 (create + start of a container from a golden, ready to exec), linux image
- fork + first exec p50
- desktop fork-to-ready p50 (fork + shinken-desktop-up answering), and the zenity demo
  fork (desktop + replayed dialog launch + its 0.5 s sleep)
- warm-pool acquire p50
- fork vs re-provision (fresh container + desktop + the full setup) for the spreadsheet
  demo task, cold fork and pooled fork

Run: .venv/bin/python benchmarks/bench_sandbox.py [--n 30] [--json out.json]
"""

from __future__ import annotations

import argparse
import dataclasses
import json
import os
import statistics
import sys
import tempfile
import time
from pathlib import Path

from shinken.bundles.loader import load_bundle
from shinken.images.build import ensure_image
from shinken.sandbox.api import InfraError
from shinken.sandbox.container import remove_container
from shinken.sandbox.docker_provider import DockerProvider
from shinken.sandbox.ownership import labels_for
from shinken.sandbox.policy import task_needs

REPO = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(REPO))
from benchmarks.timing import pct, timed_acquires  # noqa: E402

SPREADSHEET = REPO / "demo" / "9a1f6c2e-5b3d-4e8a-9c71-2f0d4b6a8e13"


def summary(xs: list[float]) -> dict[str, float]:
    return {"n": len(xs), "p50": round(statistics.median(xs), 6), "p95": round(pct(xs, 0.95), 6),
            "min": round(min(xs), 6), "max": round(max(xs), 6)}


def timed_forks(p: DockerProvider, golden, n: int, *, first_exec: bool = False) -> list[float]:
    out = []
    for _ in range(n):
        t0 = time.perf_counter()
        f = p.fork(golden)
        if first_exec:
            f.exec(["true"])
        out.append(time.perf_counter() - t0)
        f.close()
    return out


def desktop_bundle(tmp: Path) -> Path:
    d = tmp / "bench-desktop"
    d.mkdir()
    (d / "config.json").write_text(json.dumps({
        "id": "bench-desktop", "instruction": "bench", "app_type": "os", "shinken_needs": ["desktop"],
        "shinken_state_fidelity": "filesystem", "config": [],
        "evaluator": {"type": "python", "url": "./reward.py"}}))
    (d / "reward.py").write_text('print("REWARD: 0")\n')
    return d


def reprovision(p: DockerProvider, bundle, image_id: str, *, desktop: bool | None = None) -> float:
    """What a rollout would cost without goldens: a fresh container, the desktop, the
    bundle's full setup."""
    t0 = time.perf_counter()
    labels = labels_for("build", task=bundle.id, run=p.run_id, owner=p.owner)
    needs = task_needs(bundle)
    if desktop is not None:
        needs = dataclasses.replace(needs, desktop=desktop)
    box = p.start(image_id, labels, network=needs.network, desktop=needs.desktop)  # same desktop start as a fork
    try:
        if needs.desktop:
            box.wait_desktop_boot()
        box.run_steps(bundle.setup, bundle)
        return time.perf_counter() - t0
    finally:
        remove_container(p.api, box.id)


def main() -> int:
    ap = argparse.ArgumentParser()
    ap.add_argument("--n", type=int, default=30)
    ap.add_argument("--json", type=Path)
    args = ap.parse_args()
    n = args.n
    image = ensure_image("linux")
    res: dict = {"image": image, "loadavg_start": os.getloadavg(), "cpus": os.cpu_count()}
    p = DockerProvider(run_id="bench-sandbox")
    built = []
    try:
        with tempfile.TemporaryDirectory() as tmp:
            hello = load_bundle(REPO / "demo" / "hello-file")
            g_hello = p.ensure_golden(hello, image)
            desk = load_bundle(desktop_bundle(Path(tmp)))
            g_desk = p.ensure_golden(desk, image)
            zen = load_bundle(REPO / "demo" / "zenity-entry")
            g_zen = p.ensure_golden(zen, image)
            sheet = load_bundle(SPREADSHEET)
            g_sheet = p.ensure_golden(sheet, image)
            built = [g for g in (g_hello, g_desk, g_zen, g_sheet) if not g.reused]

            timed_forks(p, g_hello, 3)  # warm the connection pool and page cache
            res["fork"] = summary(timed_forks(p, g_hello, n))
            res["fork_first_exec"] = summary(timed_forks(p, g_hello, max(10, n // 2), first_exec=True))
            res["desktop_fork_to_ready"] = summary(timed_forks(p, g_desk, max(10, n // 2)))
            res["zenity_fork_to_ready"] = summary(timed_forks(p, g_zen, 8))

            k = 3
            with p.pool(g_hello, k) as pool:
                acq = timed_acquires(pool, max(15, n // 2), ready=k)
            res["pool_acquire"] = summary(acq)

            # interleaved, so both sides see the same machine load
            re_times, fork_sheet = [], []
            for _ in range(6):
                re_times.append(reprovision(p, sheet, image))
                fork_sheet += timed_forks(p, g_sheet, 2)
            # the same without the desktop: what the filesystem tier itself saves
            g_files = dataclasses.replace(g_sheet, needs_desktop=False)
            re_files, fork_files = [], []
            for _ in range(6):
                re_files.append(reprovision(p, sheet, image, desktop=False))
                fork_files += timed_forks(p, g_files, 2)
            with p.pool(g_sheet, 2) as pool:
                sheet_acq = timed_acquires(pool, 8, ready=2)
            res["spreadsheet"] = {
                "golden_build_s": round(g_sheet.build_seconds, 3),
                "reprovision": summary(re_times),
                "fork": summary(fork_sheet),
                "pool_acquire": summary(sheet_acq),
                "ratio_reprovision_over_fork": round(statistics.median(re_times) / statistics.median(fork_sheet), 2),
                "reprovision_no_desktop": summary(re_files),
                "fork_no_desktop": summary(fork_files),
                "ratio_no_desktop": round(statistics.median(re_files) / statistics.median(fork_files), 2),
                "ratio_reprovision_over_pool_acquire": round(
                    statistics.median(re_times) / statistics.median(sheet_acq), 1),
            }
    finally:
        p.close()
        for g in built:
            try:
                p.delete_golden(g)
            except InfraError as exc:  # e.g. another process forked it meanwhile: it stays (gc finds it)
                print(f"note: {exc}", file=sys.stderr)
    res["loadavg_end"] = os.getloadavg()

    f = res["fork"]
    s = res["spreadsheet"]
    print(f"fork (linux image)           p50 {f['p50']*1000:7.1f} ms   p95 {f['p95']*1000:7.1f} ms   (target p50 <= 250 ms)")
    print(f"fork + first exec            p50 {res['fork_first_exec']['p50']*1000:7.1f} ms")
    print(f"desktop fork-to-ready        p50 {res['desktop_fork_to_ready']['p50']*1000:7.1f} ms   (target <= 600 ms)")
    print(f"zenity demo fork (+0.5 s sleep) p50 {res['zenity_fork_to_ready']['p50']*1000:7.1f} ms")
    print(f"warm-pool acquire            p50 {res['pool_acquire']['p50']*1e6:7.1f} us   (target <= 50 ms)")
    print(f"spreadsheet re-provision     p50 {s['reprovision']['p50']*1000:7.1f} ms")
    print(f"spreadsheet fork (desktop)   p50 {s['fork']['p50']*1000:7.1f} ms   ratio {s['ratio_reprovision_over_fork']}x")
    print(f"spreadsheet, files only: re-provision p50 {s['reprovision_no_desktop']['p50']*1000:7.1f} ms, "
          f"fork p50 {s['fork_no_desktop']['p50']*1000:7.1f} ms   ratio {s['ratio_no_desktop']}x")
    print(f"spreadsheet pooled acquire   p50 {s['pool_acquire']['p50']*1e6:7.1f} us   ratio {s['ratio_reprovision_over_pool_acquire']:.0f}x")
    print(f"load average start {res['loadavg_start']} end {res['loadavg_end']}")
    if args.json:
        args.json.write_text(json.dumps(res, indent=2))
    return 0


if __name__ == "__main__":
    sys.exit(main())
