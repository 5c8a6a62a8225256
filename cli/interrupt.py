"""Ctrl-C ends every command within a bound, whatever the main thread is doing.

Python turns SIGINT into KeyboardInterrupt only when the main thread runs Python code. The
kernel may deliver a process's SIGINT to any of its threads; when it lands on another one
(a progress bar's monitor, a pool's worker) while the main thread waits in a blocking read,
the read is not interrupted and the command waits out the read's timeout (`shinken download`
on a held transfer: up to 150 s). An unwinding that blocks (a non-daemon thread joined at exit,
a read in a clean-up) has the same effect, and so, on a loaded machine, does the interpreter's
own teardown of a few hundred imported modules (over 1 s of wall time at load 12).

So, two parts:
- a watcher: the C-level signal handler runs in whichever thread takes the signal and writes
  the signal's number to the wakeup fd; a daemon thread reads it and, GRACE_S after a SIGINT,
  ends the process with exit 130;
- `finish`: when the KeyboardInterrupt came from SIGINT (our handler raised it), the command's
  own unwinding has run (forks removed, files closed); the exit handlers run and the process
  ends at once, skipping the teardown.
What the unwinding had no time for is what `kill -9` leaves: partial downloads (a prefix of the
file, resumed by the next run), registered temp folders and owned containers, which
`shinken gc` reclaims.
"""

from __future__ import annotations

import atexit
import contextlib
import os
import signal
import sys
import threading
import time
from collections.abc import Iterator

GRACE_S = 1.0  # the unwinding's time; the process is gone within ~GRACE_S + scheduling delay of SIGINT


class _State:
    by_signal = False  # the command's KeyboardInterrupt came from SIGINT (set before it is raised)


def _on_sigint(signum: int, frame: object) -> None:
    _State.by_signal = True
    raise KeyboardInterrupt


def _watch(read_fd: int, grace_s: float, exit_code: int) -> None:
    try:
        while True:
            data = os.read(read_fd, 64)
            if not data:
                os.close(read_fd)
                return  # the write end was closed: the command ended without SIGINT
            if signal.SIGINT in data:
                break
    except OSError:
        return
    time.sleep(grace_s)
    with contextlib.suppress(OSError):
        os.write(2, f"shinken: interrupted (the clean-up did not finish within {grace_s:g} s; "
                    "`shinken gc` reclaims what it left)\n".encode())
    os._exit(exit_code)


@contextlib.contextmanager
def exit_within(exit_code: int, grace_s: float = GRACE_S) -> Iterator[None]:
    """Run the body with the deadline: a SIGINT while it runs ends the process within grace_s
    (the deadline stays armed past the body, through the interpreter's exit). Main thread only
    (elsewhere a no-op); an in-process run restores the handler and wakeup fd it found."""
    _State.by_signal = False
    if threading.current_thread() is not threading.main_thread():
        yield
        return
    read_fd, write_fd = os.pipe()
    os.set_blocking(write_fd, False)  # set_wakeup_fd needs it: the C handler must never block
    try:
        previous_fd = signal.set_wakeup_fd(write_fd, warn_on_full_buffer=False)
        previous_handler = signal.signal(signal.SIGINT, _on_sigint)
    except ValueError:
        os.close(read_fd)
        os.close(write_fd)
        yield
        return
    threading.Thread(target=_watch, args=(read_fd, grace_s, exit_code), name="shinken-interrupt",
                     daemon=True).start()
    try:
        yield
    finally:
        signal.signal(signal.SIGINT, previous_handler)
        signal.set_wakeup_fd(previous_fd)
        os.close(write_fd)  # the watcher ends at EOF, unless a SIGINT already armed it


def by_signal() -> bool:
    """The command's KeyboardInterrupt came from SIGINT (typer turns it into exit code 130)."""
    return _State.by_signal


def finish(exit_code: int) -> None:
    """End an interrupted command: at once when SIGINT interrupted it (exit handlers run,
    output flushed, the interpreter's teardown skipped: a daemon thread cannot end a process
    that is finalizing), else by SystemExit as usual."""
    if not _State.by_signal:
        sys.exit(exit_code)
    atexit._run_exitfuncs()
    for stream in (sys.stdout, sys.stderr):
        with contextlib.suppress(Exception):
            stream.flush()
    os._exit(exit_code)
