"""Timing helpers the benchmarks share (Python's own timers only)."""

from __future__ import annotations

import time
from typing import Any


def pct(xs: list[float], q: float) -> float:
    """The q-quantile of xs (nearest rank)."""
    xs = sorted(xs)
    return xs[min(len(xs) - 1, int(round(q * (len(xs) - 1))))]


def timed_acquires(pool: Any, n: int, *, ready: int, timeout: float = 60.0, poll: float = 0.01) -> list[float]:
    """Seconds each of n acquires from a warm pool took, each taken once `ready` computers are
    waiting (or after `timeout`): what a rollout sees when the pool kept up. Each computer is
    closed at once."""
    out = []
    for _ in range(n):
        deadline = time.monotonic() + timeout
        while pool.ready < ready and time.monotonic() < deadline:
            time.sleep(poll)
        t0 = time.perf_counter()
        f = pool.acquire()
        out.append(time.perf_counter() - t0)
        f.close()
    return out
