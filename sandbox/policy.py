"""What a task needs from its sandbox (desktop, network) and the isolation every
sandbox container gets. Pure functions over a Bundle; no Docker import."""

from __future__ import annotations

import json
from dataclasses import dataclass, field

from shinken.bundles.model import Bundle, SetupStep

MOCK_WEB_MARK = "__CUA_GYM_"  # url placeholders of the mock web apps
MOCK_WEB_MARKER_FILE = ".shinken-mockweb.json"  # in a bundle materialized for a run (mockweb.materialize)


@dataclass(frozen=True)
class Limits:
    """Resource limits for every sandbox container (setup, fork, reward)."""

    mem: str = "2g"  # LibreOffice + Xvfb fit; a memory hog is OOM-killed inside the cgroup
    pids: int = 512  # a fork bomb hits this, not the host
    cpus: float = 2.0
    # Root in the container is only used by shinken itself (file placement, desktop
    # start); untrusted code runs as `user`, which holds no capabilities and cannot gain
    # any (no-new-privileges, no setuid). These are what root-side steps need.
    cap_add: tuple[str, ...] = ("CHOWN", "DAC_OVERRIDE", "FOWNER", "SETUID", "SETGID", "KILL")
    shm_size: str = "256m"  # Chrome / LibreOffice use /dev/shm


@dataclass(frozen=True)
class TaskNeeds:
    desktop: bool
    network: bool
    reasons: list[str] = field(default_factory=list)


def _steps(bundle: Bundle) -> list[SetupStep]:
    return [*bundle.setup, *bundle.post_fork, *bundle.postconfig]


def task_needs(bundle: Bundle) -> TaskNeeds:
    # The display decision is triage's evidence (app_type, launched GUI programs, from
    # Python too, GUI automation), so a task whose setup starts Chrome gets a desktop even
    # when its app_type says `os` or `mock_websites`.
    from shinken.needs.analyze import desktop_evidence

    declared = {x for x in bundle.raw.get("shinken_needs") or [] if isinstance(x, str)}
    desktop_why = [
        *(["shinken_needs: desktop"] if "desktop" in declared else []),
        *(["a launch/open step"] if any(s.starts_process for s in _steps(bundle)) else []),
        *desktop_evidence(bundle),
    ]
    web = (bundle.app_type.endswith("_mock") or MOCK_WEB_MARK in json.dumps(bundle.raw)
           or MOCK_WEB_MARKER_FILE in bundle.files)
    network_why = [
        *(["shinken_needs: network"] if declared & {"network", "mock_web"} else []),
        *(["mock web app"] if web else []),
    ]
    if web and not desktop_why:
        desktop_why.append("mock web app (its setup opens the browser)")
    return TaskNeeds(desktop=bool(desktop_why), network=bool(network_why), reasons=desktop_why + network_why)


def split_setup(steps: list[SetupStep]) -> tuple[list[SetupStep], list[SetupStep]]:
    """(run at golden build, replayed on each fork from config).

    Processes do not survive the commit, so every launch/open step is replayed on each
    fork. A trailing block of launch/open/sleep steps (the usual `open` + `sleep` at the
    end of a document task) is not run at build at all: running it there would only
    leave lock files of a killed app in the golden. Process steps followed by a
    download/execute run at build too (the later step may depend on them)."""
    last_fs = max((i for i, s in enumerate(steps) if s.type in ("download", "execute")), default=-1)
    build = [s for i, s in enumerate(steps) if i <= last_fs or s.type not in ("launch", "open", "sleep")]
    replay: list[SetupStep] = []
    for i, s in enumerate(steps):
        if s.starts_process:
            replay.append(s)
        elif s.type == "sleep" and i > last_fs and replay and replay[-1].starts_process:
            replay.append(s)  # the wait that lets the app come up
    return build, replay
