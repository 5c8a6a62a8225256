"""Fork-to-desktop-ready on the sandbox-linux image: container create+start, then
`shinken-desktop-up` (Xvfb + openbox + session bus + AT-SPI bus) until it returns, and the
idempotent second call. Also the first a11y dump of a zenity dialog.

    .venv/bin/python benchmarks/bench_desktop.py [--n 15]
"""

from __future__ import annotations

import argparse
import statistics
import time

import docker

from shinken.images.build import build_image
from shinken.sandbox.docker_client import run_container
from shinken.sandbox.ownership import labels_for


def pct(xs: list[float], p: float) -> float:
    xs = sorted(xs)
    return xs[min(len(xs) - 1, int(round(p * (len(xs) - 1))))]


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--n", type=int, default=15)
    args = ap.parse_args()
    client = docker.from_env()
    image = build_image("linux", client=client).tag
    start_s, up_s, total_s, again_s, dump_s = [], [], [], [], []
    for i in range(args.n):
        t0 = time.perf_counter()
        c = run_container(client, image, detach=True, init=True, network_mode="none",
                                  labels=labels_for("build", task="bench-desktop"), cap_drop=["ALL"],
                                  security_opt=["no-new-privileges"])
        try:
            t1 = time.perf_counter()
            rc, out = c.exec_run(["shinken-desktop-up"], user="user")
            t2 = time.perf_counter()
            assert rc == 0, out
            rc, _ = c.exec_run(["shinken-desktop-up"], user="user")
            t3 = time.perf_counter()
            start_s.append(t1 - t0); up_s.append(t2 - t1); total_s.append(t2 - t0); again_s.append(t3 - t2)
            if i < 3:
                c.exec_run(["bash", "-c", ". /tmp/shinken-session.env; (setsid zenity --entry >/dev/null 2>&1 &)"],
                           user="user")
                t4 = time.perf_counter()
                while time.perf_counter() - t4 < 20:
                    rc, out = c.exec_run(["shinken-a11y-dump", "--app", "zenity"], user="user")
                    if b'"editable"' in out:
                        break
                dump_s.append(time.perf_counter() - t4)
        finally:
            c.remove(force=True)
    print(f"image {image}, n={args.n}")
    for name, xs in (("create+start", start_s), ("desktop-up", up_s), ("fork-to-desktop-ready", total_s),
                     ("desktop-up again (idempotent)", again_s), ("zenity launch -> editable entry in dump", dump_s)):
        if xs:
            print(f"{name:42s} p50 {statistics.median(xs):.3f}s  p90 {pct(xs, 0.9):.3f}s  max {max(xs):.3f}s")


if __name__ == "__main__":
    main()
