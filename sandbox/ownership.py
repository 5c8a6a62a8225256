"""Who owns a container or image: labels that let `shinken gc` tell a dead owner's
leftovers from a live process's resources."""

from __future__ import annotations

import os
import socket
import time
from dataclasses import dataclass

LABEL_OWNER = "shinken.owner"  # "<host>/<pid>/<process start time in clock ticks>"
LABEL_KIND = "shinken.kind"  # fork | golden | build | pool | probe-run | server | hub | network
LABEL_TASK = "shinken.task"
LABEL_RUN = "shinken.run"
LABEL_BUNDLE_HASH = "shinken.bundle_hash"
LABEL_BASE_IMAGE = "shinken.base_image"
LABEL_CREATED = "shinken.created"  # unix seconds
LABEL_LEASE = "shinken.lease_until"  # unix seconds; owners on other hosts renew it
LABEL_MANAGED = "shinken.managed"  # "1" on everything shinken creates

KINDS = ("fork", "golden", "build", "pool", "server", "probe", "hub", "network")


def _proc_start_ticks(pid: int) -> str | None:
    """Start time of `pid` in clock ticks since boot (field 22 of /proc/<pid>/stat).
    Together with the pid it names one process: a reused pid has another start time."""
    try:
        with open(f"/proc/{pid}/stat", "rb") as fh:
            data = fh.read()
    except OSError:
        return None
    # comm (field 2) may hold spaces and parentheses; fields after the last ')' are fixed.
    rest = data[data.rindex(b")") + 2 :].split()
    return rest[19].decode()


@dataclass(frozen=True)
class Owner:
    host: str
    pid: int
    start: str

    @classmethod
    def current(cls) -> "Owner":
        pid = os.getpid()
        return cls(socket.gethostname(), pid, _proc_start_ticks(pid) or "0")

    @classmethod
    def parse(cls, label: str) -> "Owner | None":
        try:
            host, pid, start = label.rsplit("/", 2)
            return cls(host, int(pid), start)
        except ValueError:
            return None

    def label(self) -> str:
        return f"{self.host}/{self.pid}/{self.start}"

    def is_local(self) -> bool:
        return self.host == socket.gethostname()

    def is_alive(self) -> bool:
        """True only for a live process on this host with the same pid AND start time."""
        if not self.is_local():
            raise ValueError("liveness of a remote owner is decided by its lease, not by pid")
        return _proc_start_ticks(self.pid) == self.start


def labels_for(kind: str, *, task: str | None = None, run: str | None = None,
               owner: Owner | None = None, extra: dict[str, str] | None = None) -> dict[str, str]:
    """The label set every shinken-created container or image carries."""
    assert kind in KINDS, kind
    labels = {
        LABEL_MANAGED: "1",
        LABEL_KIND: kind,
        LABEL_OWNER: (owner or Owner.current()).label(),
        LABEL_CREATED: str(int(time.time())),
    }
    if task:
        labels[LABEL_TASK] = task
    if run:
        labels[LABEL_RUN] = run
    if extra:
        labels.update(extra)
    return labels
