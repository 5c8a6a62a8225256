"""`shinken watch`: a read-only live view of a running fork's display in the browser."""

from __future__ import annotations

import json
import signal
import sys
import threading
import time
from typing import Annotated, Optional

import typer
from rich.table import Table

from shinken.cli.common import JsonFlag, Output
from shinken.errors import ShinkenError, WorkFailed

EXAMPLES = [
    "shinken watch    # the running computers (a probe's forks, a server's rollouts)",
    "shinken watch 3f2a9c1d7e4b    # view that fork's display; the URL is printed, the view ends with the fork",
    "shinken watch zenity-entry --open    # the task's newest computer, opened in the browser",
]


def watch(
    target: Annotated[Optional[str], typer.Argument(help="A running computer: its container id (or a prefix), its name, or a task id (its newest one). Without it, the running computers are listed.")] = None,
    port: Annotated[int, typer.Option("--port", help="The view's port on 127.0.0.1 (0: any free one).", min=0, max=65535)] = 0,
    open_browser: Annotated[bool, typer.Option("--open", help="Open the view in the default browser.")] = False,
    json_out: JsonFlag = False,
) -> None:
    """Watch a running fork's desktop live in the browser, read-only.

    x11vnc (view-only) serves the display from inside the fork, reached through the Docker API;
    websockify serves noVNC on 127.0.0.1 only; the printed URL carries the view's password. The
    view ends when the fork does (its rollout or probe is over) or on Ctrl-C. Needs Debian's
    websockify and novnc here, and x11vnc in the task image (shinken's images carry it).
    """
    from shinken.live.forks import pick, running, why_not_viewable
    from shinken.live.view import LiveView, novnc_dir
    from shinken.sandbox.docker_client import connect

    output = Output(json_out)
    api = connect().api
    computers = running(api)
    if target is None:
        def render() -> None:
            table = Table(title="running computers", title_justify="left")
            for col in ("id", "kind", "task", "run", "age"):
                table.add_column(col, overflow="fold")
            now = time.time()
            for c in computers:
                table.add_row(c.id[:12], c.kind, c.task or "-", c.run or "-", f"{max(0, now - c.created):.0f} s")
            output.table(table)
            if not computers:
                output.note("no shinken computer is running; a probe or a workspace server starts them")

        output.result({"computers": [c.to_json() for c in computers]}, render)
        return
    computer = pick(computers, target)
    novnc_dir()  # the packages first: a missing one is said before anything starts
    why = why_not_viewable(api, computer.id)
    if why is not None:
        raise ShinkenError(f"{computer.id[:12]} ({computer.task}) cannot be watched: {why}")
    stop = threading.Event()

    def on_signal(signum: int, frame: object) -> None:
        stop.set()

    for sig in (signal.SIGINT, signal.SIGTERM):
        try:
            signal.signal(sig, on_signal)
        except ValueError:  # not the main thread (embedded use): Ctrl-C is not ours to take
            pass
    with LiveView(api, computer, port=port) as view:
        if json_out:  # one line: the command goes on running after it (a reader takes the line)
            sys.stdout.write(json.dumps({"url": view.url, "computer": computer.to_json()}) + "\n")
            sys.stdout.flush()
        else:
            output.line(view.url)
            output.note(f"watching {computer.id[:12]} ({computer.kind} of {computer.task or 'no task'}), read-only; "
                        "the view ends with the fork, or press Ctrl-C")
        if open_browser:
            import webbrowser

            webbrowser.open(view.url)
        how = view.wait(stop)
    if how.startswith("failed"):
        raise WorkFailed(f"the live view of {computer.id[:12]} stopped: {how}")
    output.note("the fork ended; the view is closed" if how == "ended" else "the view is closed")
