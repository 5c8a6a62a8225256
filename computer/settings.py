"""The resources server's engine settings and their defaults, written once.

Read by the engine (`ComputerEngine`'s keyword defaults and `from_env`), by the config
writer (`workspace/gym_config.py`: each knob as `${oc.env:VAR,default}`) and by the generated
server's typed config (`workspace_templates/server/app.py`'s field defaults).
"""

from __future__ import annotations

import os
from dataclasses import dataclass

from shinken.errors import ShinkenError


@dataclass(frozen=True)
class ServerSettings:
    """How many warm forks, how long idle rollouts and unused goldens live, how many goldens."""

    pool_size: int = 0  # warm forks kept ready per golden
    idle_ttl_s: float = 900  # seconds before an idle rollout is reaped
    golden_ttl_s: float = 3600  # seconds an unused golden image is kept
    max_goldens: int = 64  # golden images kept at once (LRU)
    # Warm computers per task sized from its seeds (computer/demand.py) instead of pool_size per
    # golden; off by default (docs/fleet.md, "Demand-sized warm pools"; docs/measurements/fleet.md:
    # what they cost, and what failed with them on by default: a warm computer still being made
    # when a server is stopped outlives it until a gc).
    demand_pools: bool = False

    @classmethod
    def from_env(cls) -> "ServerSettings":
        """The defaults, each overridden by its environment variable when that is set (see KNOBS)."""
        def knob(name: str, integer: bool = False) -> float:
            return _env_number(KNOBS[name][1], getattr(DEFAULTS, name), integer=integer)

        return cls(pool_size=int(knob("pool_size", integer=True)), idle_ttl_s=knob("idle_ttl_s"),
                   golden_ttl_s=knob("golden_ttl_s"), max_goldens=int(knob("max_goldens", integer=True)),
                   demand_pools=_env_flag(KNOBS["demand_pools"][1], DEFAULTS.demand_pools))

DEFAULTS = ServerSettings()

# A fleet host keeps demand pools by default (`fleet join --no-demand-pools` turns them off): its
# warm computers are bounded by the slots it declared (a warm computer never takes a slot a
# rollout needs) and its agent outlives the servers that use it, so a pool is not cut short by a
# server's stop; what a pool costs is in docs/fleet.md's capacity model. The local engine above
# keeps them off (DEFAULTS.demand_pools).
FLEET_DEMAND_POOLS = True

# field -> (server config key, environment variable), in the config's order.
KNOBS: dict[str, tuple[str, str]] = {
    "pool_size": ("shinken_pool_size", "SHINKEN_POOL_SIZE"),
    "idle_ttl_s": ("shinken_idle_ttl", "SHINKEN_IDLE_TTL"),
    "golden_ttl_s": ("shinken_golden_ttl", "SHINKEN_GOLDEN_TTL"),
    "max_goldens": ("shinken_max_goldens", "SHINKEN_MAX_GOLDENS"),
    "demand_pools": ("shinken_demand_pools", "SHINKEN_DEMAND_POOLS"),
}


def _env_flag(name: str, default: bool) -> bool:
    raw = (os.environ.get(name) or "").strip().lower()
    if not raw:
        return default
    if raw in ("1", "true", "yes", "on"):
        return True
    if raw in ("0", "false", "no", "off"):
        return False
    raise ShinkenError(f"{name}={raw!r}: use true or false")


def _env_number(name: str, default: float, *, integer: bool = False) -> float:
    raw = os.environ.get(name)
    if raw is None or raw.strip() == "":
        return default
    try:
        value = int(raw) if integer else float(raw)
    except ValueError:
        raise ShinkenError(f"{name}={raw!r}: not a number; set it to e.g. {int(default)}") from None
    if value < 0:
        raise ShinkenError(f"{name}={raw!r}: must not be negative")
    return value
