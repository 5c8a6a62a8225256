"""Run a shell command in a test container (docker-py), as `user` by default."""

from __future__ import annotations


def sh(container, cmd: str, user: str = "user") -> tuple[int, str]:
    """(exit code, stdout+stderr) of `bash -c cmd` inside the container."""
    rc, out = container.exec_run(["bash", "-c", cmd], user=user, demux=False)
    return rc, (out or b"").decode(errors="replace")


def in_session(cmd: str) -> str:
    """`cmd` with the desktop session's environment (DISPLAY, the D-Bus session bus) loaded."""
    return f". /tmp/shinken-session.env && {cmd}"
