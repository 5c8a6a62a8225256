"""The `shinken` sandbox provider's configuration and a create request's task options, checked
before anything is allocated. Pure Python (no Docker, no NeMo Gym), so a bad `sandbox:` block is
refused the same way wherever it is read.

A Gym config names the provider in a `sandbox:` block; its keys become ProviderConfig:

    sandbox:
      shinken:
        task_root: /data/cua-gym/final     # where provider_options.task_id is looked up
        default_ttl_s: 3600                # sandboxes without ttl_s expire after this (the default; null: never)
        limits: {cpus: 2, memory_mib: 2048, pids: 512}
        pool_size: 2                       # warm forks per task, filled after its first create
        hub_image: shinken/hub:latest      # web tasks: forks join this hub's network, each with its own sid
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, field, fields
from typing import Any

from shinken.tiers import TIER_VALUES, Tier


class ConfigProblem(ValueError):
    """A provider config or a create request that cannot be honoured (one line: what and the fix)."""


PULL = ("missing", "never")
DISK_LIMITS = ("best_effort", "strict")
TASK_OPTION_KEYS = ("task_id", "task_root", "tier")


def _number(name: str, value: Any, *, minimum: float, integer: bool = False, allow_none: bool = False) -> Any:
    if value is None and allow_none:
        return None
    if isinstance(value, bool) or not isinstance(value, (int, float)) or (integer and not float(value).is_integer()):
        kind = "an integer" if integer else "a number"
        raise ConfigProblem(f"sandbox.shinken.{name}: expected {kind}, got {value!r}")
    if value < minimum:
        raise ConfigProblem(f"sandbox.shinken.{name}: must be >= {minimum:g}, got {value!r}")
    return int(value) if integer else float(value)


def _choice(name: str, value: Any, allowed: tuple[str, ...]) -> str:
    if value not in allowed:
        raise ConfigProblem(f"sandbox.shinken.{name}: expected one of {', '.join(allowed)}, got {value!r}")
    return str(value)


def _unknown(where: str, given: Mapping[str, Any], allowed: tuple[str, ...] | list[str]) -> None:
    extra = sorted(str(k) for k in given if k not in allowed)
    if extra:
        raise ConfigProblem(f"{where}: unknown key(s) {', '.join(extra)}; allowed: {', '.join(sorted(allowed))}")


@dataclass(frozen=True)
class DefaultLimits:
    """Limits of a sandbox whose spec names none (spec.resources overrides each one)."""

    cpus: float = 2.0
    memory_mib: int = 2048
    pids: int = 512

    @classmethod
    def parse(cls, raw: Any) -> DefaultLimits:
        if raw is None:
            return cls()
        if not isinstance(raw, Mapping):
            raise ConfigProblem(f"sandbox.shinken.limits: expected a mapping (cpus, memory_mib, pids), got {raw!r}")
        names = [f.name for f in fields(cls)]
        _unknown("sandbox.shinken.limits", raw, names)
        base = cls()
        return cls(cpus=_number("limits.cpus", raw.get("cpus", base.cpus), minimum=0.01),
                   memory_mib=_number("limits.memory_mib", raw.get("memory_mib", base.memory_mib), minimum=6,
                                      integer=True),
                   pids=_number("limits.pids", raw.get("pids", base.pids), minimum=16, integer=True))


@dataclass(frozen=True)
class ProviderConfig:
    task_root: str | None = None  # default for provider_options.task_root
    image: str | None = None  # the base image task goldens are built on (default: shinken's cua image)
    accept_filesystem: bool = False  # serve unchecked filesystem-tier forks (SHINKEN_STATE_FIDELITY=filesystem)
    # ttl_s of a spec that names none; an explicit null: no expiry (sandboxes live until closed, or
    # until `shinken gc` once their creator died)
    default_ttl_s: float | None = 3600.0
    reap_interval_s: float = 30.0  # how often the provider removes its sandboxes past their ttl_s
    exec_timeout_s: float = 180.0  # an exec without timeout_s
    setup_timeout_s: float = 600.0  # building a task's golden
    network: str = "bridge"  # image sandboxes: bridge, none, or the name of a Docker network (ports need one)
    publish_host: str = "127.0.0.1"  # where spec.ports are published
    pull: str = "missing"  # pull an image sandbox's image when the engine lacks it, or never
    disk_limit: str = "best_effort"  # spec.resources.disk_gib when the engine cannot enforce it
    limits: DefaultLimits = field(default_factory=DefaultLimits)
    run_id: str | None = None  # the shinken.run label on every sandbox (gc --label shinken.run=...)
    max_workers: int = 64  # threads serving blocking engine calls for the event loop
    pool_size: int = 0  # checked forks kept warm per task (and tier, ttl_s, limits); 0: no pool
    hub_image: str | None = None  # web tasks: the hub image (`shinken hub build`) the provider runs for them
    mock_urls: str | None = None  # web tasks: or a mock URL map of mock apps run elsewhere (docs/mock-web.md)

    @classmethod
    def parse(cls, raw: Mapping[str, Any] | None) -> ProviderConfig:
        """Checked config from a `sandbox: {shinken: {...}}` block; ConfigProblem names the bad key."""
        raw = dict(raw or {})
        _unknown("sandbox.shinken", raw, [f.name for f in fields(cls)])
        base = cls()

        def text(name: str) -> str | None:
            v = raw.get(name)
            if v is not None and (not isinstance(v, str) or not v.strip()):
                raise ConfigProblem(f"sandbox.shinken.{name}: expected a non-empty string, got {v!r}")
            return v

        accept = raw.get("accept_filesystem", False)
        if not isinstance(accept, bool):
            raise ConfigProblem(f"sandbox.shinken.accept_filesystem: expected true or false, got {accept!r}")
        return cls(
            task_root=text("task_root"), image=text("image"), accept_filesystem=accept,
            default_ttl_s=_number("default_ttl_s", raw.get("default_ttl_s", base.default_ttl_s), minimum=1,
                                  allow_none=True),
            reap_interval_s=_number("reap_interval_s", raw.get("reap_interval_s", base.reap_interval_s), minimum=0.1),
            exec_timeout_s=_number("exec_timeout_s", raw.get("exec_timeout_s", base.exec_timeout_s), minimum=0.001),
            setup_timeout_s=_number("setup_timeout_s", raw.get("setup_timeout_s", base.setup_timeout_s), minimum=1),
            network=text("network") or base.network,
            publish_host=text("publish_host") or base.publish_host,
            pull=_choice("pull", raw.get("pull", base.pull), PULL),
            disk_limit=_choice("disk_limit", raw.get("disk_limit", base.disk_limit), DISK_LIMITS),
            limits=DefaultLimits.parse(raw.get("limits")),
            run_id=text("run_id"),
            max_workers=_number("max_workers", raw.get("max_workers", base.max_workers), minimum=1, integer=True),
            pool_size=_number("pool_size", raw.get("pool_size", base.pool_size), minimum=0, integer=True),
            hub_image=text("hub_image"), mock_urls=text("mock_urls"),
        )


@dataclass(frozen=True)
class TaskOptions:
    """provider_options of a sandbox that is a fork of a task's golden."""

    task_id: str
    task_root: str
    tier: Tier | None  # None: the tier the task's golden needs (shinken.tiers.serving_tier)

    @classmethod
    def parse(cls, options: Mapping[str, Any] | None, config: ProviderConfig) -> TaskOptions | None:
        """None for a plain image sandbox (no task_id); ConfigProblem for anything else wrong."""
        options = dict(options or {})
        _unknown("provider_options", options, TASK_OPTION_KEYS)
        if not options:
            return None
        task_id = options.get("task_id")
        if not isinstance(task_id, str) or not task_id.strip():
            raise ConfigProblem(f"provider_options.task_id: expected a task id string, got {task_id!r}")
        root = options.get("task_root", config.task_root)
        if not isinstance(root, str) or not root.strip():
            raise ConfigProblem("provider_options.task_root: no task folder given; set it here or task_root in "
                                "the provider's sandbox block")
        raw_tier = options.get("tier")
        tier = None
        if raw_tier is not None:
            if raw_tier not in TIER_VALUES:
                raise ConfigProblem(f"provider_options.tier: expected one of {', '.join(TIER_VALUES)}, got {raw_tier!r}")
            tier = Tier(raw_tier)
        return cls(task_id=task_id.strip(), task_root=root, tier=tier)
