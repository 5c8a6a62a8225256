"""Top-level X11 windows the accessibility tree does not show, for the guest scripts
(shinken-desktop-state's windows and shinken-a11y-dump's tree).

Some terminals and toolkits expose nothing to AT-SPI (xterm, Tk, plain Xlib programs): without
this their windows would be invisible to the desktop record and to the agent's observation. A
window counts when the window manager lists it (_NET_CLIENT_LIST), it is viewable, and its
process (_NET_WM_PID) is not one of the applications the accessibility tree already shows.
Python's Xlib (python3-xlib, in sandbox-core) reads it in-process: no command per poll."""

from __future__ import annotations

import contextlib
import io
import os


def x_windows(accessible_pids: set[int], accessible_names: frozenset[str] | set[str] = frozenset()) -> list[dict]:
    """[{app, title, pid, active, bbox}] of the viewable managed windows of programs the
    accessibility tree does not show: not the process of an application in it (`accessible_pids`),
    nor a process below one (GIMP's plug-ins), nor a window class named like one of them
    (`accessible_names`: an app busy starting may miss the tree's pid query under load);
    [] when there is no display or no Xlib."""
    try:
        from Xlib import X, display  # type: ignore[import-untyped]  # python3-xlib, in the image only
        from Xlib.error import DisplayError, XError  # type: ignore[import-untyped]
    except ImportError:
        return []
    try:
        with contextlib.redirect_stdout(io.StringIO()):  # Xlib prints an xauth warning on stdout
            d = display.Display(os.environ.get("DISPLAY", ":0"))
    except (DisplayError, OSError, Exception):  # noqa: BLE001 - no display: nothing to list
        return []
    out: list[dict] = []
    try:
        root = d.screen().root
        atom = d.intern_atom
        clients = root.get_full_property(atom("_NET_CLIENT_LIST"), X.AnyPropertyType)
        active_prop = root.get_full_property(atom("_NET_ACTIVE_WINDOW"), X.AnyPropertyType)
        active = active_prop.value[0] if active_prop is not None and len(active_prop.value) else None
        for wid in (clients.value if clients is not None else []):
            try:
                w = d.create_resource_object("window", wid)
                if w.get_attributes().map_state != X.IsViewable:
                    continue
                pid_prop = w.get_full_property(atom("_NET_WM_PID"), X.AnyPropertyType)
                pid = int(pid_prop.value[0]) if pid_prop is not None and len(pid_prop.value) else None
                if pid is not None and _below(pid, accessible_pids):
                    continue
                name = w.get_full_property(atom("_NET_WM_NAME"), atom("UTF8_STRING"))
                if name is not None:
                    title = name.value.decode("utf-8", "replace") if isinstance(name.value, bytes) else str(name.value)
                else:
                    raw = w.get_wm_name()
                    title = raw.decode("latin-1") if isinstance(raw, bytes) else (raw or "")
                cls = w.get_wm_class()
                if cls and {c.lower() for c in cls if c} & {n.lower() for n in accessible_names}:
                    continue
                app = cls[0] if cls else (_comm(pid) if pid is not None else "")
                geo = w.get_geometry()
                pos = w.translate_coords(root, 0, 0)
                out.append({"app": app or "", "title": title.strip(), "pid": pid, "active": wid == active,
                            "bbox": [-pos.x, -pos.y, geo.width, geo.height]})
            except XError:
                continue  # the window went away mid-read
    except Exception:  # noqa: BLE001 - a display that fails mid-walk lists nothing more
        pass
    finally:
        try:
            d.close()
        except Exception:  # noqa: BLE001
            pass
    return out


def _below(pid: int, pids: set[int]) -> bool:
    """`pid` is one of `pids` or runs below one of them."""
    seen: set[int] = set()
    while pid > 1 and pid not in seen:
        if pid in pids:
            return True
        seen.add(pid)
        try:
            with open(f"/proc/{pid}/stat", "rb") as fh:
                raw = fh.read()
            pid = int(raw[raw.rindex(b")") + 2:].split()[1])
        except (OSError, ValueError, IndexError):
            return False
    return False


def _comm(pid: int) -> str:
    try:
        with open(f"/proc/{pid}/comm", encoding="utf-8") as fh:
            return fh.read().strip()
    except OSError:
        return ""
