"""Run a shell command in a test container (docker-py), as `user` by default."""

from __future__ import annotations


def sh(container, cmd: str, user: str = "user") -> tuple[int, str]:
    """(exit code, stdout+stderr) of `bash -c cmd` inside the container, with the desktop session's
    settings in its environment as shinken gives every exec (sandbox/guest.py session_env)."""
    from shinken.sandbox import guest

    rc, out = container.exec_run(["bash", "-c", cmd], user=user, demux=False,
                                 environment={**guest.session_env(1000), "PATH": guest.PATH})
    return rc, (out or b"").decode(errors="replace")


def run_sandbox(client, image: str, task: str, *, desktop: bool = True, pids_limit: int = 1024,
                mem_limit: str = "3g"):
    """A container confined like a fork (network none, capabilities dropped), labelled for `task`,
    with the desktop up when `desktop`. The caller removes it."""
    from shinken.sandbox.docker_client import run_container
    from shinken.sandbox.ownership import labels_for

    box = run_container(
        client, image, detach=True, init=True, network_mode="none", labels=labels_for("build", task=task),
        cap_drop=["ALL"], security_opt=["no-new-privileges"], pids_limit=pids_limit, mem_limit=mem_limit,
    )
    if desktop:
        rc, out = sh(box, "shinken-desktop-up")
        if rc != 0:
            box.remove(force=True)
            raise AssertionError(f"shinken-desktop-up failed: {out}")
    return box
