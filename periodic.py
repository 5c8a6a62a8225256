"""A daemon thread that calls one function every interval until stopped: the computer engine's
maintenance and pool sizing, the provider's sandbox reaper, the fork disk watchdog. A failing
call is logged and the loop goes on (these threads must outlive anything that goes wrong once)."""

from __future__ import annotations

import logging
import threading
from collections.abc import Callable


class Periodic:
    """`tick` every `interval_s` seconds (first after one interval) on a daemon thread named
    `name`, from `start()` until `stop()`; `what` names it in the log when a tick fails.
    `interval_s` may be a function, read before each wait (an owner's setting that may change)."""

    def __init__(self, name: str, interval_s: float | Callable[[], float], tick: Callable[[], object], what: str,
                 log: logging.Logger) -> None:
        self.name = name
        self.interval_s = interval_s
        self._tick = tick
        self._what = what
        self._log = log
        self._stop = threading.Event()
        self._lock = threading.Lock()
        self._thread: threading.Thread | None = None

    def start(self) -> None:
        """Start the thread unless it runs or was stopped (callers may start it on every use)."""
        with self._lock:
            if self._thread is None and not self._stop.is_set():
                self._thread = threading.Thread(target=self._run, name=self.name, daemon=True)
                self._thread.start()

    def _run(self) -> None:
        while not self._stop.wait(self.interval_s() if callable(self.interval_s) else self.interval_s):
            try:
                self._tick()
            except Exception:  # noqa: BLE001 - the loop must survive anything, and say so
                self._log.exception("%s failed", self._what)

    def stop(self, timeout: float = 30.0) -> None:
        """Stop for good and wait (at most `timeout`) for a tick in progress."""
        self._stop.set()
        with self._lock:
            thread, self._thread = self._thread, None
        if thread is not None and thread is not threading.current_thread():
            thread.join(timeout=timeout)
