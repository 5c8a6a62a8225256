"""The desktop a task's setup left, as recorded at golden build by the guest script
`shinken-desktop-state record` (images/guest/), and the comparison of a fork's desktop with it.

Pure: no Docker. The record is stored with the golden (its meta label) and versioned with the
golden's hash; its JSON shape is schemas/desktop_record.schema.json."""

from __future__ import annotations

import hashlib
import json
from dataclasses import dataclass, field, replace
from typing import Any

from shinken.schemas import validation_error

DIALOG_ROLES = frozenset({"dialog", "alert", "file chooser", "color chooser", "font chooser"})


@dataclass(frozen=True)
class Window:
    """A showing top-level window of an application in the accessibility tree."""

    app: str
    role: str
    title: str

    @property
    def is_dialog(self) -> bool:
        return self.role in DIALOG_ROLES

    def describe(self) -> str:
        kind = "dialog" if self.is_dialog else "window"
        return f"{kind} {self.title!r} ({self.app} {self.role})"

    def to_json(self) -> dict[str, str]:
        return {"app": self.app, "role": self.role, "title": self.title}


@dataclass(frozen=True)
class Alert:
    """An alert or first-run wizard the start state shows (an app's error, question, account
    setup), read through AT-SPI at golden build: its window title and the text inside it."""

    app: str
    role: str
    title: str
    text: str = ""

    def describe(self) -> str:
        text = " ".join(self.text.split())
        return f"{self.app} {self.title!r}" + (f": {text[:200]}" if text else "")

    def to_json(self) -> dict[str, str]:
        return {"app": self.app, "role": self.role, "title": self.title, "text": self.text}


@dataclass(frozen=True)
class Root:
    """The top process of a process tree the setup started that was alive at commit."""

    argv: tuple[str, ...]
    cwd: str | None
    uid: int
    env: dict[str, str] | None  # None: unreadable at record time (the fork's session env is used)
    children: tuple[str, ...] = ()  # program names below it (soffice.bin under oosplash)
    # A launcher the setup ran that handed its window to a D-Bus-activated service and exited
    # (gnome-terminal -> gnome-terminal-server): relaunched as the setup ran it, expected to exit.
    launcher: bool = False

    @property
    def command(self) -> str:
        return " ".join(self.argv)

    def to_json(self) -> dict[str, Any]:
        doc: dict[str, Any] = {"argv": list(self.argv), "cwd": self.cwd, "uid": self.uid, "env": self.env,
                               "children": list(self.children)}
        if self.launcher:
            doc["launcher"] = True
        return doc


@dataclass(frozen=True)
class DesktopRecord:
    roots: tuple[Root, ...] = ()
    windows: tuple[Window, ...] = ()
    active: str | None = None  # title of the focused window
    settled: bool = True  # False: the desktop was still changing when the record's time ran out
    processes: tuple[str, ...] = ()  # every process the setup left (command lines), for the receipt
    # Alerts and first-run wizards among the windows (not part of the signature: the windows are).
    alerts: tuple[Alert, ...] = ()
    # Settled by its windows alone: unchanged for the guest's STEADY_S while the apps kept working
    # (a media player playing); False when the apps went idle too.
    busy: bool = False
    changing: tuple[str, ...] = ()  # not settled: what kept changing, in words (the guest's)

    @property
    def lost(self) -> list[str]:
        """What a plain filesystem fork would lose: the roots' command lines."""
        return [r.command for r in self.roots]

    @property
    def needs_relaunch(self) -> bool:
        return bool(self.roots)

    def signature(self) -> dict[str, Any]:
        """What every computer made from this golden must show: windows (sorted) and focus."""
        return {"windows": [w.to_json() for w in self.windows], "active": self.active}

    def signature_hash(self) -> str:
        doc = json.dumps(self.signature(), sort_keys=True, separators=(",", ":"))
        return hashlib.sha256(doc.encode()).hexdigest()[:12]

    def to_json(self) -> dict[str, Any]:
        return {"roots": [r.to_json() for r in self.roots], "windows": [w.to_json() for w in self.windows],
                "active": self.active, "settled": self.settled, "processes": list(self.processes),
                "alerts": [a.to_json() for a in self.alerts], "busy": self.busy, "changing": list(self.changing)}

    def describe_unsettled(self) -> str:
        """A record that did not settle, in words: what showed and what kept changing."""
        shown = ", ".join(w.describe() for w in self.windows) or "no window"
        why = "; ".join(self.changing) or "nothing named"
        return f"showed {shown}; kept changing: {why}"

    def renamed(self, old: str, new: str) -> "DesktopRecord":
        """The record with `old` replaced by `new` in the roots' command lines and environments
        (a mock web fork relaunches the setup's browser on its own sid, not the golden's)."""
        if not old or old == new:
            return self
        roots = tuple(replace(r, argv=tuple(a.replace(old, new) for a in r.argv),
                              env=None if r.env is None else {k: v.replace(old, new) for k, v in r.env.items()})
                      for r in self.roots)
        return replace(self, roots=roots)

    def restore_arg(self) -> str:
        """The record as the guest's `restore --record` wants it (roots + the signature to wait for)."""
        return json.dumps({"roots": [r.to_json() for r in self.roots], **self.signature(), "busy": self.busy},
                          separators=(",", ":"))

    @classmethod
    def from_json(cls, doc: Any) -> "DesktopRecord":
        """Parse a record (the guest's output or a stored one); ValueError when it is malformed."""
        err = validation_error("desktop_record", doc)
        if err is not None:
            raise ValueError(f"desktop record does not match schemas/desktop_record.schema.json: {err}")
        return cls(
            roots=tuple(Root(argv=tuple(r["argv"]), cwd=r.get("cwd"), uid=int(r["uid"]), env=r.get("env"),
                             children=tuple(r.get("children") or ()), launcher=bool(r.get("launcher", False)))
                   for r in doc.get("roots", [])),
            windows=tuple(sorted((Window(w["app"], w["role"], w["title"]) for w in doc.get("windows", [])),
                                 key=lambda w: (w.app, w.role, w.title))),
            active=doc.get("active"),
            settled=bool(doc.get("settled", True)),
            processes=tuple(doc.get("processes") or ()),
            alerts=tuple(Alert(a["app"], a["role"], a["title"], a.get("text", "")) for a in doc.get("alerts") or ()),
            busy=bool(doc.get("busy", False)),
            changing=tuple(doc.get("changing") or ()),
        )


@dataclass(frozen=True)
class Observed:
    """A computer's desktop as the guest saw it after a relaunch or a re-provision."""

    windows: tuple[Window, ...]
    active: str | None
    dead: tuple[str, ...] = ()  # relaunched roots that exited
    errors: tuple[str, ...] = ()  # roots that could not be started
    timings: dict[str, float] = field(default_factory=dict)

    @classmethod
    def from_guest(cls, doc: dict[str, Any]) -> "Observed":
        wins = tuple(sorted((Window(str(w.get("app", "")), str(w.get("role", "")), str(w.get("title", "")))
                             for w in doc.get("windows") or [] if isinstance(w, dict)),
                            key=lambda w: (w.app, w.role, w.title)))
        timings = {k: float(doc[k]) for k in ("desktop_s", "clean_s", "launch_s", "wait_s", "first_window_s", "settle_s")
                   if isinstance(doc.get(k), (int, float))}
        return cls(windows=wins, active=doc.get("active"), dead=tuple(doc.get("dead") or ()),
                   errors=tuple(doc.get("errors") or ()), timings=timings)


def differences(expected: DesktopRecord, seen: Observed) -> list[str]:
    """What the computer shows that the golden did not, and the reverse, in words (empty: the
    start states match)."""
    out = [f"could not start {e}" for e in seen.errors]
    out += [f"`{d}` exited after relaunch" for d in seen.dead]
    want, got = list(expected.windows), list(seen.windows)
    for w in want:
        if w in got:
            got.remove(w)
        else:
            out.append(f"missing {w.describe()}")
    out += [f"unexpected {w.describe()}" for w in got]
    if not out and expected.active is not None and seen.active != expected.active:
        out.append(f"focus on {seen.active!r}, the golden had {expected.active!r}")
    return out
