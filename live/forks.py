"""The running computers `shinken watch` can show: containers shinken made for a task (a probe's
forks and golden builds, a server's rollouts and warm pools, a provider's sandboxes), found by
their labels, and the one a user names."""

from __future__ import annotations

import time
from dataclasses import dataclass
from typing import Any

import docker.errors

from shinken.errors import ShinkenError
from shinken.sandbox.api import InfraError
from shinken.sandbox.ownership import LABEL_CREATED, LABEL_KIND, LABEL_MANAGED, LABEL_RUN, LABEL_TASK

WATCHABLE_KINDS = ("fork", "pool", "build")
DISPLAY_SOCKET = "/tmp/.X11-unix/X0"  # the guest's desktop (images/guest/shinken-desktop-up: Xvfb :0)


@dataclass(frozen=True)
class Computer:
    id: str
    name: str
    kind: str
    task: str
    run: str
    created: int

    def to_json(self) -> dict[str, Any]:
        return {"id": self.id, "name": self.name, "kind": self.kind, "task": self.task, "run": self.run,
                "created": self.created}


def running(api: Any) -> list[Computer]:
    """Every running container shinken made for a task, newest first."""
    try:
        found = api.containers(filters={"label": [f"{LABEL_MANAGED}=1"], "status": "running"})
    except docker.errors.APIError as exc:
        raise InfraError(f"listing containers: {exc}") from None
    out = []
    for c in found:
        labels = c.get("Labels") or {}
        if labels.get(LABEL_KIND) not in WATCHABLE_KINDS:
            continue
        created = labels.get(LABEL_CREATED, "")
        out.append(Computer(c["Id"], (c.get("Names") or ["?"])[0].lstrip("/"), labels[LABEL_KIND],
                            labels.get(LABEL_TASK, ""), labels.get(LABEL_RUN, ""),
                            int(created) if created.isdigit() else int(c.get("Created") or 0)))
    return sorted(out, key=lambda c: (-c.created, c.id))


def pick(computers: list[Computer], target: str) -> Computer:
    """The computer `target` names: a container id (or its start), a container name, or a task id
    (its newest computer)."""
    for match in (lambda c: c.id.startswith(target) and len(target) >= 4, lambda c: c.name == target,
                  lambda c: c.task == target):
        hits = [c for c in computers if match(c)]
        if hits:
            return hits[0]
    listed = ", ".join(f"{c.id[:12]} ({c.task})" for c in computers[:8]) or "none is running"
    raise ShinkenError(f"no running shinken computer is {target!r} (a container id, name or task id); running: {listed}")


# Exit 3: no desktop runs; 4: no x11vnc in the image (an image built before the live view).
_VIEWABLE = f'test -S {DISPLAY_SOCKET} || exit 3; command -v x11vnc >/dev/null || exit 4'
NOT_VIEWABLE = {3: "its task runs without a display", 4: "its image has no x11vnc (an image built before `shinken watch`: "
                "rebuild it with `shinken image build`)"}


def why_not_viewable(api: Any, container_id: str) -> str | None:
    """None when the computer runs a desktop x11vnc can serve; else why not."""
    try:
        ex = api.exec_create(container_id, ["sh", "-c", _VIEWABLE], stdout=True, stderr=True)
        api.exec_start(ex["Id"])  # returns once the output ended, which is when the check did
        for _ in range(100):
            state = api.exec_inspect(ex["Id"])
            if not state.get("Running"):
                code = state.get("ExitCode")
                return None if code == 0 else NOT_VIEWABLE.get(code, f"the check in it failed (exit {code})")
            time.sleep(0.05)
        return "the check in it did not finish"
    except docker.errors.APIError as exc:
        raise InfraError(f"looking for the display of {container_id[:12]}: {exc}") from None


def is_running(api: Any, container_id: str) -> bool:
    try:
        return bool(api.inspect_container(container_id)["State"].get("Running"))
    except docker.errors.NotFound:
        return False
