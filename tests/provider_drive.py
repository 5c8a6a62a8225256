"""Run INSIDE the NeMo Gym 0.7.0 runner, with the interpreter of a venv that has nemo-gym and the
workspace's shinken wheel: NeMo Gym's own registry and Sandbox / AsyncSandbox facade drive the
`shinken` provider. No shinken import here: the calling side is Gym's alone.

    python provider_drive.py api   '<json: {"image", "base", "task_root", "run_id", "network"}>'   -> one JSON report
    python provider_drive.py spawn <a .json file holding the same>   -> prints the ids it made, then sleeps (to be killed)
"""

from __future__ import annotations

import asyncio
import json
import sys
import tempfile
import time
import urllib.request
from pathlib import Path
from typing import Any

from nemo_gym.sandbox import (
    AsyncSandbox,
    ConnectableProvider,
    Sandbox,
    SandboxCreateError,
    SandboxCreateVerificationError,
    SandboxSpec,
    SupportsSandboxEndpoint,
    SupportsSandboxPauseResume,
    create_provider,
    get_provider_class,
    list_providers,
)
from nemo_gym.sandbox.providers.registry import _entry_point_loaders


def provider_cfg(args: dict[str, Any], **extra: Any) -> dict[str, Any]:
    # image: the base image task goldens are built on; plain sandboxes name args["image"] in their spec
    # network: a Docker network the test made (a shared engine's default bridge can be missing)
    return {"shinken": {"run_id": args["run_id"], "task_root": args["task_root"], "image": args["base"],
                        "network": args["network"], **extra}}


def sync_facade(args: dict[str, Any], out: dict[str, Any]) -> None:
    tmp = Path(tempfile.mkdtemp())
    (tmp / "up.txt").write_text("uploaded by gym\n")
    spec = SandboxSpec(image=args["image"], workdir="/work", env={"WHO": "gym"}, files={"/work/f.txt": "from spec"},
                       ttl_s=600, resources={"cpu": 1, "memory_mib": 512})
    t0 = time.perf_counter()
    box = Sandbox(provider_cfg(args), spec).start()
    out["sync_start_s"] = round(time.perf_counter() - t0, 3)
    try:
        r = box.exec('echo "$WHO $(pwd) $(cat f.txt)"; echo oops >&2; exit 7')
        out["exec"] = [r.stdout, r.stderr, r.return_code, r.error_type]
        box.upload(tmp / "up.txt", "/work/up.txt")
        box.download("/work/up.txt", tmp / "down.txt")
        out["roundtrip"] = (tmp / "down.txt").read_text()
        out["status_running"] = box.status().value
        box.pause()
        out["status_paused"] = box.status().value
        out["status_paused_again"] = box.status().value  # status does not wake it
        r = box.exec("echo awake")  # an exec on a paused sandbox resumes it first
        out["exec_after_pause"] = [r.stdout, r.return_code]
        out["status_after_exec"] = box.status().value
        box.pause()
        box.resume()
        out["status_resumed"] = box.status().value
        out["timeout"] = [box.exec("sleep 20", timeout_s=1).error_type]
    finally:
        box.stop()
    out["status_stopped"] = box.status().value


async def async_facade(args: dict[str, Any], out: dict[str, Any]) -> None:
    task = SandboxSpec(provider_options={"task_id": "hello-file"}, ttl_s=600)
    t0 = time.perf_counter()
    sb = await AsyncSandbox(provider_cfg(args)).start(task)
    out["task_start_s"] = round(time.perf_counter() - t0, 3)
    try:
        r = await sb.exec("id -un; ls /home/user")
        out["task_exec"] = [r.stdout, r.return_code]
        descriptor = await sb.serialize()
        out["descriptor"] = descriptor
        other = create_provider(provider_cfg(args))  # another process of the run would hold its own
        again = await AsyncSandbox.connect(json.loads(json.dumps(descriptor)), provider=other)
        await again.exec("echo seen-by-another > /home/user/mark.txt")
        await again.disconnect()  # a borrowed sandbox stays up
        out["after_connect"] = (await sb.exec("cat /home/user/mark.txt")).stdout
        out["task_status"] = (await sb.status()).value
    finally:
        await sb.stop()
    out["task_status_stopped"] = (await sb.status()).value

    # a published port
    web = await AsyncSandbox(provider_cfg(args)).start(SandboxSpec(image=args["image"], ports=[8000]))
    try:
        await web.exec("mkdir -p /srv && echo served > /srv/index.html && "
                       "(cd /srv && nohup python3 -m http.server 8000 >/dev/null 2>&1 &)")
        ep = await web.endpoint(8000)
        body = ""
        for _ in range(50):
            try:
                body = urllib.request.urlopen(ep.endpoint + "/index.html", timeout=2).read().decode()
                break
            except OSError:
                await asyncio.sleep(0.2)
        out["endpoint"] = [ep.endpoint, body]
    finally:
        await web.stop()

    # bad config and bad calls: Gym's error types, nothing allocated
    errors: dict[str, str] = {}
    try:
        create_provider({"shinken": {"bogus_key": 1}})
    except ValueError as exc:
        errors["unknown_key"] = f"{type(exc).__name__}: {exc}"
    for name, spec in {"bad_option": SandboxSpec(provider_options={"task_id": "hello-file", "colour": "red"}),
                       "no_image": SandboxSpec(),
                       "no_task": SandboxSpec(provider_options={"task_id": "no-such-task"}),
                       "bad_image": SandboxSpec(image="shinken/no-such-image:none")}.items():
        try:
            await AsyncSandbox(provider_cfg(args, pull="never")).start(spec)
            errors[name] = "no error"
        except SandboxCreateVerificationError as exc:
            errors[name] = f"SandboxCreateVerificationError: {exc}"
        except SandboxCreateError as exc:
            errors[name] = f"SandboxCreateError: {exc}"
    try:
        await AsyncSandbox(provider_cfg(args)).start(SandboxSpec(image=args["image"], workdir="/proc/nope"))
    except SandboxCreateVerificationError as exc:
        errors["not_ready"] = f"SandboxCreateVerificationError: {exc}"
    out["errors"] = errors


def api(args: dict[str, Any]) -> dict[str, Any]:
    out: dict[str, Any] = {}
    out["listed"] = "shinken" in list_providers()
    out["entry_point"] = "shinken" in _entry_point_loaders()
    cls = get_provider_class("shinken")
    out["class"] = f"{cls.__module__}.{cls.__qualname__}"
    p = create_provider(provider_cfg(args))
    out["capabilities"] = {"pause_resume": isinstance(p, SupportsSandboxPauseResume),
                           "connect": isinstance(p, ConnectableProvider),
                           "endpoint": isinstance(p, SupportsSandboxEndpoint)}
    sync_facade(args, out)
    asyncio.run(async_facade(args, out))
    return out


async def spawn(args: dict[str, Any]) -> None:
    ids = []
    # What the test checks is gc's rule (past ttl_s while the creator lives): the creator's own reaper
    # (test_provider.py's) would take the ttl_s=2 one first whenever the pool below fills slowly.
    for spec in (SandboxSpec(image=args["image"]), SandboxSpec(image=args["image"], ttl_s=2)):
        sb = await AsyncSandbox(provider_cfg(args, reap_interval_s=3600)).start(spec)
        ids.append(sb._handle.sandbox_id)  # noqa: SLF001 - the test matches them with gc's report
    # The task fork from a provider with a warm pool, kept as a Gym server keeps its provider: after
    # this create the pool fills in the background (the test waits for that fork before the kill).
    pooled = create_provider(provider_cfg(args, pool_size=1))
    sb = await AsyncSandbox(pooled, owns_provider=False).start(SandboxSpec(provider_options={"task_id": "hello-file"}))
    ids.append(sb._handle.sandbox_id)  # noqa: SLF001
    print(json.dumps(ids), flush=True)
    await asyncio.sleep(3600)


if __name__ == "__main__":
    mode = sys.argv[1]
    raw = json.loads(Path(sys.argv[2]).read_text() if sys.argv[2].endswith(".json") else sys.argv[2])
    if mode == "api":
        print(json.dumps(api(raw)))
    else:
        asyncio.run(spawn(raw))
