"""`shinken` for NeMo Gym's sandbox layer: the class Gym's registry loads from the entry point
group `nemo_gym.sandbox_providers` (pyproject.toml), so any Gym agent or server that takes a
`sandbox_provider` can start its sandboxes as forks of a task's golden or as containers of an
image, with pause/resume, reattach from another process (serialize_handle / connect) and
published ports. Imported only where NeMo Gym is installed (Python >= 3.13).

The blocking work is shinken's (provider/sandboxes.py) on a thread pool; a create cancelled
while it runs removes the sandbox it made once it is made, so nothing outlives a cancelled call.
"""

from __future__ import annotations

import asyncio
import concurrent.futures
from collections.abc import Callable, Mapping
from pathlib import Path
from typing import Any, TypeVar

from nemo_gym.sandbox.providers.base import (
    SandboxCreateError,
    SandboxCreateVerificationError,
    SandboxEndpoint,
    SandboxExecResult,
    SandboxHandle,
    SandboxResources,
    SandboxSpec,
    SandboxStatus,
)

from shinken.errors import ShinkenError
from shinken.provider.config import ConfigProblem, ProviderConfig, TaskOptions
from shinken.provider.sandboxes import Box, CreateFailed, NotReady, Request, SandboxHost, check_request_paths

T = TypeVar("T")
DEFAULT_READY_TIMEOUT_S = 60.0
STATUS = {"running": SandboxStatus.RUNNING, "paused": SandboxStatus.PAUSED, "created": SandboxStatus.STARTING,
          "restarting": SandboxStatus.STARTING, "exited": SandboxStatus.STOPPED, "dead": SandboxStatus.STOPPED,
          "removing": SandboxStatus.STOPPED, "gone": SandboxStatus.STOPPED}


class ShinkenCreateError(SandboxCreateError):
    """The shinken provider could not allocate a sandbox (nothing was left running)."""


class ShinkenCreateVerificationError(SandboxCreateVerificationError):
    """A shinken sandbox failed its readiness probe or start-state check (it was removed)."""


def _request(spec: SandboxSpec, config: ProviderConfig) -> Request:
    """The checked request; ShinkenCreateError before anything is allocated."""
    try:
        task = TaskOptions.parse(spec.provider_options, config)
        res = spec.resources if isinstance(spec.resources, SandboxResources) else SandboxResources.from_mapping(
            spec.resources)
        if res.gpu or res.gpu_type:
            raise ConfigProblem("spec.resources.gpu: the shinken provider has no GPUs to give")
        if spec.entrypoint:
            raise ConfigProblem("spec.entrypoint: the shinken provider keeps its own keep-alive process; run the "
                                "service with exec (in the background) instead")
        if spec.ttl_s is not None and spec.ttl_s <= 0:
            raise ConfigProblem(f"spec.ttl_s must be > 0, got {spec.ttl_s!r}")
        req = Request(image=spec.image, task=task, ttl_s=float(spec.ttl_s) if spec.ttl_s is not None else None,
                      ready_timeout_s=float(spec.ready_timeout_s or DEFAULT_READY_TIMEOUT_S), workdir=spec.workdir,
                      env={str(k): str(v) for k, v in (spec.env or {}).items()},
                      files={str(k): str(v) for k, v in (spec.files or {}).items()},
                      cpus=res.cpu, memory_mib=res.memory_mib, disk_gib=res.disk_gib, ports=tuple(spec.ports))
        check_request_paths(req)
    except (ConfigProblem, ValueError, TypeError) as exc:
        raise ShinkenCreateError(str(exc)) from None
    if task is None and not spec.image:
        raise ShinkenCreateError("spec.image or provider_options.task_id is required by the shinken provider")
    return req


def _box(handle: SandboxHandle) -> Box:
    if not isinstance(handle.raw, Box):
        raise ValueError(f"handle {handle.sandbox_id!r} was not made by the shinken provider")
    return handle.raw


class ShinkenProvider:
    """NeMo Gym SandboxProvider (plus pause/resume, endpoint, connect) backed by shinken."""

    name = "shinken"

    def __init__(self, **config: Any) -> None:
        try:
            self.config = ProviderConfig.parse(config)  # unknown keys refused before anything is allocated
        except ConfigProblem as exc:
            raise ValueError(str(exc)) from None
        self.host = SandboxHost(self.config)
        self._pool: concurrent.futures.ThreadPoolExecutor | None = None

    def _executor(self) -> concurrent.futures.ThreadPoolExecutor:
        if self._pool is None:
            self._pool = concurrent.futures.ThreadPoolExecutor(self.config.max_workers,
                                                               thread_name_prefix="shinken-provider")
        return self._pool

    async def _run(self, fn: Callable[..., T], *args: Any, **kwargs: Any) -> T:
        loop = asyncio.get_running_loop()
        return await loop.run_in_executor(self._executor(), lambda: fn(*args, **kwargs))

    # ------------------------------------------------------------------ the protocol

    async def create(self, spec: SandboxSpec) -> SandboxHandle:
        req = _request(spec, self.config)
        loop = asyncio.get_running_loop()
        fut = loop.run_in_executor(self._executor(), self.host.create, req)
        try:
            box = await asyncio.shield(fut)
        except asyncio.CancelledError:
            fut.add_done_callback(self._close_orphan)  # made after all: removed, not leaked
            raise
        except NotReady as exc:
            raise ShinkenCreateVerificationError(str(exc)) from None
        except CreateFailed as exc:
            raise ShinkenCreateError(str(exc)) from None
        except ShinkenError as exc:  # engine unreachable, image missing, ...
            raise ShinkenCreateError(str(exc)) from None
        return SandboxHandle(sandbox_id=box.id, provider_name=self.name, raw=box)

    def _close_orphan(self, fut: asyncio.Future[Box]) -> None:
        if fut.cancelled() or fut.exception() is not None:
            return
        box = fut.result()
        try:
            self._executor().submit(self.host.close, box)
        except RuntimeError:  # the pool is shut down: close here
            self.host.close(box)

    async def exec(self, handle: SandboxHandle, command: str, *, cwd: str | None = None,
                   env: dict[str, str] | None = None, timeout_s: int | float | None = None,
                   user: str | int | None = None) -> SandboxExecResult:
        out = await self._run(self.host.exec, _box(handle), command, cwd=cwd, env=env, timeout_s=timeout_s, user=user)
        return SandboxExecResult(stdout=out.stdout, stderr=out.stderr, return_code=out.return_code,
                                 error_type=out.error_type)

    async def upload_file(self, handle: SandboxHandle, source_path: Path, target_path: str) -> None:
        data = await self._run(Path(source_path).read_bytes)
        try:
            await self._run(self.host.upload, _box(handle), data, target_path)
        except ShinkenError as exc:
            raise RuntimeError(f"shinken upload to {target_path!r} failed: {exc}") from None

    async def download_file(self, handle: SandboxHandle, source_path: str, target_path: Path) -> None:
        try:
            data = await self._run(self.host.download, _box(handle), source_path)
        except ShinkenError as exc:
            raise RuntimeError(f"shinken download of {source_path!r} failed: {exc}") from None
        target = Path(target_path)
        target.parent.mkdir(parents=True, exist_ok=True)
        await self._run(target.write_bytes, data)

    async def status(self, handle: SandboxHandle) -> SandboxStatus:
        state = await self._run(self.host.status, _box(handle))
        return STATUS.get(state, SandboxStatus.UNKNOWN)

    async def close(self, handle: SandboxHandle) -> None:
        await self._run(self.host.close, _box(handle))

    async def aclose(self) -> None:
        pool, self._pool = self._pool, None
        if pool is not None:
            pool.shutdown(wait=False)
        # drains the warm pools (waits for a fork being made): off the event loop
        await asyncio.get_running_loop().run_in_executor(None, self.host.shutdown)

    # ------------------------------------------------------------------ capabilities

    async def pause(self, handle: SandboxHandle) -> None:
        await self._run(self.host.pause, _box(handle))

    async def resume(self, handle: SandboxHandle) -> None:
        await self._run(self.host.resume, _box(handle))

    async def endpoint(self, handle: SandboxHandle, port: int) -> SandboxEndpoint:
        host, host_port = await self._run(self.host.endpoint, _box(handle), port)
        shown = f"[{host}]" if ":" in host else host
        return SandboxEndpoint(endpoint=f"http://{shown}:{host_port}")

    async def serialize_handle(self, handle: SandboxHandle, *, scope: str | None = None) -> dict[str, Any]:
        return _box(handle).descriptor()

    async def connect(self, descriptor: Mapping[str, Any]) -> SandboxHandle:
        try:
            box = await self._run(self.host.attach, dict(descriptor))
        except ShinkenError as exc:
            raise ShinkenCreateError(str(exc)) from None
        return SandboxHandle(sandbox_id=box.id, provider_name=self.name, raw=box)
