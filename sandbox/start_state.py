"""Record, restore and check a task's start state inside a sandbox container, through the guest
script `shinken-desktop-state` (images/guest/). Works on anything with the sandbox box's
`exec(argv, timeout=, user=)`; the provider calls it at golden build (baseline + record), on
relaunch-tier forks (restore) and on re-provisioned containers (record + compare)."""

from __future__ import annotations

import json
from typing import Any, Protocol

from shinken.sandbox.api import ExecResult, InfraError, SetupError, StartStateError, tail
from shinken.sandbox.desktop import DesktopRecord, Observed, differences

GUEST = "shinken-desktop-state"
RECORD_TIMEOUT_S = 90.0  # an app still starting when the setup ends (GIMP under load) is waited for
RESTORE_TIMEOUT_S = 90.0  # relaunched apps must show the recorded windows within this
EXEC_SLACK_S = 30.0
FOCUS_TIMEOUT_S = 15.0  # a re-provisioned desktop whose focus differs gets this long to take the golden's


class _Execs(Protocol):
    def exec(self, cmd: list[str], *, timeout: float = ..., user: str = ...) -> ExecResult: ...


def _json(res: ExecResult, what: str) -> dict[str, Any]:
    if res.exit_code == 127 and GUEST in res.output:
        raise SetupError(-1, "image", f"the image lacks {GUEST} (a guest script of shinken's images); "
                         "rebuild it with `shinken image build`", tail(res.output), where="image")
    if res.exit_code == 2 and "unrecognized arguments" in res.output:
        raise SetupError(-1, "image", f"the image's {GUEST} is older than this shinken; rebuild the image with "
                         "`shinken image build`", tail(res.output), where="image")
    if res.exit_code == 126 and "unable to find user" in res.output:
        raise SetupError(-1, "image", "the image has no user `user`", tail(res.output), where="image")
    lines = [ln for ln in res.output.strip().splitlines() if ln.startswith("{")]
    try:
        doc = json.loads(lines[-1]) if lines else None
    except ValueError:
        doc = None
    if not isinstance(doc, dict):
        detail = "timed out" if res.timed_out else f"exit {res.exit_code}"
        raise InfraError(f"{GUEST} {what} printed no result ({detail}): {res.output.strip()[-300:]}")
    if doc.get("error"):
        raise InfraError(f"{GUEST} {what} failed: {doc['error']}")
    if doc.get("desktop_error") and doc.get("late"):  # a wait ran out: the load, retried
        raise InfraError(f"the desktop did not come up in time (load?): {doc['desktop_error']}")
    if doc.get("desktop_error"):  # --wait-desktop: what Container.wait_desktop_boot would raise
        raise SetupError(-1, "desktop", str(doc["desktop_error"]), tail(str(doc.get("log") or "")), where="desktop")
    return doc


def _wait_arg(wait_desktop: float | None) -> list[str]:
    return [] if wait_desktop is None else ["--wait-desktop", str(wait_desktop)]


def baseline(box: _Execs, *, wait_desktop: float | None = None) -> dict[str, Any]:
    """Remember the processes alive before the setup runs (the desktop's own); with wait_desktop,
    first wait that long for the desktop the container boots (one exec for both). Returns the
    guest's answer: uid and gid of `user`, desktop_s."""
    timeout = 60 + (wait_desktop or 0)
    return _json(box.exec([GUEST, "baseline", *_wait_arg(wait_desktop)], timeout=timeout), "baseline")


def record(box: _Execs, *, timeout: float = RECORD_TIMEOUT_S) -> DesktopRecord:
    """What the setup left: the roots still alive and the settled windows."""
    doc = _json(box.exec([GUEST, "record", "--timeout", str(timeout)], timeout=timeout + EXEC_SLACK_S), "record")
    try:
        return DesktopRecord.from_json(doc)
    except ValueError as exc:
        raise InfraError(f"{GUEST} record: {exc}") from None


def clean(box: _Execs) -> None:
    """Remove what killed processes left in the committed filesystem (lock and recovery files)."""
    _json(box.exec([GUEST, "clean"], timeout=60), "clean")


def restore(box: _Execs, rec: DesktopRecord, *, timeout: float = RESTORE_TIMEOUT_S,
            clean_first: bool = True, wait_desktop: float | None = None) -> Observed:
    """Clean, relaunch the record's roots and wait (bounded) for its windows. Raises
    StartStateError naming what differs when they do not appear. With wait_desktop, first wait
    that long for the desktop the container boots (one exec for both; timings get desktop_s)."""
    argv = [GUEST, "restore", "--record", rec.restore_arg(), "--timeout", str(timeout), *_wait_arg(wait_desktop)]
    if not clean_first:
        argv.append("--no-clean")
    res = box.exec(argv, timeout=timeout + EXEC_SLACK_S + (wait_desktop or 0))
    seen = Observed.from_guest(_json(res, "restore"))
    diff = differences(rec, seen)
    if diff:
        raise StartStateError("relaunch", diff, seen.timings)
    return seen


def compare(box: _Execs, tier: str, expected: DesktopRecord, rec: DesktopRecord,
            *, timeout: float = FOCUS_TIMEOUT_S) -> Observed:
    """A freshly provisioned container's settled desktop must be the golden's (StartStateError;
    also when its record did not settle).
    When only the focus differs it is given to the golden's focused window, as a relaunch does."""
    if not rec.settled:  # what it showed may be on its way elsewhere: not a checked start state
        raise StartStateError(tier, [f"the desktop did not settle: {rec.describe_unsettled()}"])
    seen = Observed(windows=rec.windows, active=rec.active)
    diff = differences(expected, seen)
    if diff and seen.windows == expected.windows:
        expect = json.dumps(expected.signature(), separators=(",", ":"))
        res = box.exec([GUEST, "windows", "--expect", expect, "--timeout", str(timeout)], timeout=timeout + EXEC_SLACK_S)
        seen = Observed.from_guest(_json(res, "windows"))
        diff = differences(expected, seen)
    if diff:
        raise StartStateError(tier, diff)
    return seen
