"""Running a bundle's setup steps (download / execute / launch / open / sleep) in a
container. A failing step is a SetupError naming the step: evidence against the task."""

from __future__ import annotations

import time
from collections.abc import Iterable
from typing import TYPE_CHECKING

from shinken.bundles.model import Bundle, SetupStep
from shinken.sandbox import guest
from shinken.sandbox.api import SessionError, SetupError, tail

if TYPE_CHECKING:
    from shinken.sandbox.container import Container

DEFAULT_BUDGET_S = 600.0  # a step with no deadline may take this long


def run_steps(box: Container, steps: Iterable[SetupStep], bundle: Bundle, *, where: str = "config",
              deadline: float | None = None, sleep_cap: float | None = None) -> None:
    """Run `steps` in order; `deadline` (time.monotonic()) bounds them all."""
    for step in steps:
        remaining = DEFAULT_BUDGET_S if deadline is None else deadline - time.monotonic()
        if remaining <= 0:
            raise SetupError(step.index, step.type, "setup time budget exhausted", where=where)
        _run_step(box, step, bundle, where, remaining, sleep_cap)


def _run_step(box: Container, step: SetupStep, bundle: Bundle, where: str, budget: float,
              sleep_cap: float | None) -> None:
    p = step.parameters

    def fail(detail: str, out: str = "") -> SetupError:
        return SetupError(step.index, step.type, detail, tail(out), where=where)

    if step.type == "download":
        files = p.get("files")
        if not isinstance(files, list):
            raise fail("parameters.files is not a list")
        for f in files:
            url = f.get("url") if isinstance(f, dict) else None
            dest = f.get("path") if isinstance(f, dict) else None
            if not isinstance(url, str) or not isinstance(dest, str) or not dest.startswith("/"):
                raise fail(f"bad file entry {f!r}: needs url and an absolute path")
            if url.startswith("./"):
                name = url[2:]
                if name not in bundle.files:  # only regular files of the bundle folder, no ../
                    raise fail(f"{url} is not a file of the bundle")
                try:
                    box.upload(bundle.file_path(name).read_bytes(), dest)
                except (SessionError, OSError) as exc:
                    raise fail(f"cannot place {url} at {dest}: {exc}") from None
            elif url.startswith(("http://", "https://")):
                if not box.network:
                    raise fail(f"{url} is remote and this sandbox has no network "
                               "(only mock-web tasks get one); bundle the file instead")
                res = box.exec(["python3", "-c", guest.FETCH_URL, url, dest], timeout=min(budget, 300))
                if not res.ok:
                    raise fail(f"fetching {url} failed (exit {res.exit_code})", res.output)
            else:
                raise fail(f"unsupported url {url!r}")
    elif step.type == "execute":
        cmd = step.command()
        if cmd is None or (isinstance(cmd, list) and not cmd):
            raise fail("parameters.command is missing")
        res = box.exec(cmd if isinstance(cmd, str) else [str(c) for c in cmd], timeout=budget,
                       workdir=guest.HOME)
        limits = (f" (container limits hit: oom_kills={res.oom_kills}, pids_limit={res.pids_limit_hits})"
                  if res.limit_hit else "")
        if res.timed_out:
            raise fail(f"timed out after {budget:.0f}s{limits}", res.output)
        if res.exit_code != 0:
            raise fail(f"exited with status {res.exit_code}{limits}", res.output)
    elif step.type == "launch":
        cmd = step.command()
        if cmd is None or (isinstance(cmd, list) and not cmd):
            raise fail("parameters.command is missing")
        box.launch(["bash", "-lc", cmd] if isinstance(cmd, str) else [str(c) for c in cmd])
    elif step.type == "open":
        path = p.get("path")
        if not isinstance(path, str) or not path:
            raise fail("parameters.path is missing")
        box.launch(["bash", "-c", guest.OPEN, "shinken-open", path])
    elif step.type == "sleep":
        try:
            secs = float(p.get("seconds", 0))
        except (TypeError, ValueError):
            raise fail(f"bad seconds {p.get('seconds')!r}") from None
        secs = max(0.0, min(secs, budget, sleep_cap if sleep_cap is not None else secs))
        time.sleep(secs)
    else:
        raise fail(f"unknown step type {step.type!r}")
