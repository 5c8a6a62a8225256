"""A fork's share of the engine's disk, so one rollout cannot fill the data root and fail every
rollout on the host.

Where the storage driver enforces a size (`storage_opt size=`: overlay2 over xfs mounted with
pquota, and a few other drivers) the fork is created with that limit: its writes past the
share fail with ENOSPC inside the fork, and the reward's check of the machine (DiskFull) masks
the rollout. Whether the engine can is found once per engine by creating (not starting) a
container with the option: the daemon refuses it at create where it cannot ("--storage-opt is
supported only for overlay over xfs with 'pquota' mount option" on overlay2 over ext4).

Elsewhere a watchdog thread reads the size of every served fork's writable layer (SizeRw, one
list call for all of them) every POLL_S; a fork past its share is marked and frozen (`docker
pause`: every process of it stops at once, mid-write), and every later call on it raises
QuotaExceeded, which masks its rollout as `provider_quota_exhausted`. A fork can write at most
what it writes in one poll past its share before it is stopped. Its disk is freed when the
rollout's fork is removed (its end, or the idle reaper).
"""

from __future__ import annotations

import logging
import os
import threading
import time
from typing import Any, Protocol

import docker.errors

from shinken.errors import ShinkenError
from shinken.periodic import Periodic
from shinken.sandbox.api import QuotaExceeded
from shinken.sandbox.docker_client import create_container
from shinken.sandbox.ownership import labels_for

log = logging.getLogger("shinken.sandbox")

SHARE_ENV = "SHINKEN_FORK_DISK_MIB"  # a fork's share in MiB; 0 turns the quota and the watchdog off
DEFAULT_SHARE_MIB = 4096.0  # a desktop rollout writes a few MB; a browser's cache can reach ~2 GB
POLL_S = 2.0
FREEZE_TRIES = 5  # pause attempts (0.1 s doubling waits) before the fork is killed instead
MIB = 1 << 20

_enforced: dict[int, bool] = {}  # id(api) -> whether the engine behind it enforces storage_opt size
_enforced_lock = threading.Lock()


def share_mib(value: float | None = None) -> float:
    """The share: `value`, else SHINKEN_FORK_DISK_MIB, else DEFAULT_SHARE_MIB (0: no limit)."""
    if value is not None:
        return float(value)
    raw = os.environ.get(SHARE_ENV, "").strip()
    if not raw:
        return DEFAULT_SHARE_MIB
    try:
        mib = float(raw)
    except ValueError:
        raise ShinkenError(f"{SHARE_ENV}={raw!r}: not a number; set a fork's disk share in MiB (0: no limit)") from None
    if mib < 0:
        raise ShinkenError(f"{SHARE_ENV}={raw!r}: must not be negative (0: no limit)")
    return mib


def enforced(api: Any) -> bool | None:
    """Whether this engine enforces storage_opt size (None: not found out yet)."""
    with _enforced_lock:
        return _enforced.get(id(api))


def storage_opt(api: Any, image_id: str, mib: float) -> dict[str, str] | None:
    """{"size": ...} for a fork's host config where the engine enforces it, else None (found out
    once per engine, with `image_id` as the probe container's image)."""
    if mib <= 0:
        return None
    opt = {"size": f"{int(mib)}M"}
    known = enforced(api)
    if known is None:
        try:
            cid = create_container(api, image_id, command="true", labels=labels_for("build", task="disk-quota-probe"),
                                   host_config=api.create_host_config(storage_opt=opt))
        except docker.errors.APIError as exc:
            known = False
            log.info("fork disk quota: the engine's storage driver cannot enforce one (%s); the watchdog limits "
                     "forks to %g MiB instead", exc.explanation or exc, mib)
        else:
            known = True
            try:
                api.remove_container(cid, force=True)
            except docker.errors.APIError:
                pass  # an owned, never-started container: `shinken gc` reclaims it
        with _enforced_lock:
            _enforced[id(api)] = known
    return opt if known else None


class Watched(Protocol):
    """What the watchdog needs of a fork (sandbox.api.Fork)."""

    @property
    def id(self) -> str: ...

    over_quota: str | None


class DiskWatch:
    """The watchdog over the forks an engine serves (a no-op without an engine or a share)."""

    def __init__(self, api: Any, share: float, interval_s: float = POLL_S) -> None:
        self.api = api
        self.share_mib = share
        self.interval_s = interval_s
        self._forks: dict[str, Watched] = {}
        self._lock = threading.Lock()
        self._loop = Periodic("shinken-disk-watch", lambda: self.interval_s, self.check_once, "the fork disk watchdog", log)
        self.stopped: list[str] = []  # ids of forks it stopped (tests, health)

    def watch(self, fork: Watched) -> None:
        if self.api is None or self.share_mib <= 0 or enforced(self.api):
            return  # no engine, no share, or the storage driver holds the fork to it
        with self._lock:
            self._forks[fork.id] = fork
        self._loop.start()

    def forget(self, fork_id: str) -> None:
        with self._lock:
            self._forks.pop(fork_id, None)

    def check_once(self) -> list[str]:
        """Read every watched fork's writable layer once; stop those past the share."""
        with self._lock:
            forks = dict(self._forks)
        if not forks:
            return []
        try:
            listed = self.api.containers(all=True, size=True, filters={"id": list(forks)})
        except docker.errors.APIError as exc:
            log.warning("fork disk watchdog: the engine did not list sizes (%s); next poll", exc)
            return []
        limit = self.share_mib * MIB
        out = []
        for c in listed:
            fork = forks.get(c.get("Id", ""))
            used = c.get("SizeRw") or 0  # omitted while the fork has written nothing
            if fork is None or fork.over_quota is not None or used <= limit:
                continue
            # Marked first: a call that comes in while the pause lands already sees why.
            fork.over_quota = (f"the computer wrote {used / MIB:.0f} MiB, past its share of {self.share_mib:g} MiB "
                               f"of the engine's disk ({SHARE_ENV}); it was stopped")
            self._stop_writing(fork.id)
            log.warning("fork %s: %s", fork.id[:12], fork.over_quota)
            self.forget(fork.id)
            out.append(fork.id)
        with self._lock:
            self.stopped += out
        return out

    def _stop_writing(self, cid: str) -> None:
        """Freeze the fork (its writes stop at once; an exec in flight waits out its timeout, then
        the next call sees why). The freezer can refuse under load (a process not frozen in time):
        retried for ~3 s, then the fork is killed instead."""
        for attempt in range(FREEZE_TRIES):
            try:
                self.api.pause(cid)
                return
            except docker.errors.NotFound:
                return  # gone: nothing left to stop
            except docker.errors.APIError as exc:
                if "already paused" in str(exc).lower():
                    return
                log.info("fork disk watchdog: pausing %s: %s", cid[:12], exc)
            time.sleep(0.1 * 2 ** attempt)
        try:
            self.api.kill(cid)
        except docker.errors.APIError as exc:
            log.warning("fork disk watchdog: %s could be neither paused nor killed (%s)", cid[:12], exc)

    def close(self) -> None:
        self._loop.stop()


__all__ = ["DEFAULT_SHARE_MIB", "DiskWatch", "POLL_S", "QuotaExceeded", "SHARE_ENV", "enforced", "share_mib",
           "storage_opt"]
