"""The provider process removes its own sandboxes once their ttl_s has passed.

`shinken gc` reclaims a sandbox past its `shinken.expires` label too, but only when someone runs
it; a Gym run whose harness forgets a sandbox (a crashed agent, a lost handle) would otherwise
keep a desktop running for good. The reaper knows each sandbox this process handed out or keeps
in a warm pool, with its expiry, and a daemon thread removes the expired ones every interval.
"""

from __future__ import annotations

import logging
import threading
import time
from collections import deque
from collections.abc import Callable

from shinken.periodic import Periodic

log = logging.getLogger("shinken.provider")


class Reaper:
    """Expiry per sandbox id; `remove(id)` is called (from the reaper's thread) once it passed."""

    def __init__(self, interval_s: float, remove: Callable[[str], None]) -> None:
        self.interval_s = interval_s
        self._remove = remove
        self._expires: dict[str, float] = {}
        self._lock = threading.Lock()
        self._loop = Periodic("shinken-provider-reaper", lambda: self.interval_s, self.reap_once, "the sandbox reaper", log)
        self.reaped: deque[str] = deque(maxlen=256)  # the last ids removed, oldest first (tests, logs)

    def track(self, sandbox_id: str, expires: float | None) -> None:
        """Remove `sandbox_id` after `expires` (unix seconds); None: never (no ttl_s)."""
        if expires is None:
            return
        with self._lock:
            self._expires[sandbox_id] = expires
        self._loop.start()

    def forget(self, sandbox_id: str) -> None:
        with self._lock:
            self._expires.pop(sandbox_id, None)

    def expired(self, sandbox_id: str, now: float | None = None) -> bool:
        with self._lock:
            at = self._expires.get(sandbox_id)
        return at is not None and at <= (time.time() if now is None else now)

    def reap_once(self, now: float | None = None) -> list[str]:
        """Remove every tracked sandbox past its expiry; a removal that fails is tried again next time."""
        now = time.time() if now is None else now
        with self._lock:
            due = [sid for sid, at in self._expires.items() if at <= now]
        done = []
        for sid in due:
            try:
                self._remove(sid)
            except Exception as exc:  # noqa: BLE001 - the engine said no: the next pass tries again
                log.warning("removing sandbox %s past its ttl_s failed (%s); trying again", sid[:12], exc)
                continue
            log.info("removed sandbox %s: past its ttl_s", sid[:12])
            done.append(sid)
            self.forget(sid)
        with self._lock:
            self.reaped.extend(done)
        return done

    def stop(self) -> None:
        self._loop.stop()
