"""The one contract every rollout engine keeps, local or fleet: what decides a rollout
(`EngineConfig`), what a verify answers (`VerifyResult`) and the calls a resources server makes
(`RolloutEngine`).

The server builds one EngineConfig from its YAML and hands the same object to whichever engine
serves it: `ComputerEngine` (this machine's Docker engine) or the fleet router, which sends the
rollout-deciding part with every seed so a host agent serves with the server's settings, never
its own (docs/fleet.md). A rollout is then the same rollout wherever it runs: the same image,
tier policy, observation/action profile, judge and mock web.
"""

from __future__ import annotations

import os
from dataclasses import asdict, dataclass, field, replace
from pathlib import Path
from typing import Any, Protocol

from shinken.computer.actions import ToolOutput
from shinken.computer.profiles import Profile
from shinken.computer.settings import DEFAULTS, ServerSettings
from shinken.errors import ShinkenError
from shinken.failure_kinds import kind_of, reason
from shinken.images.build import DEFAULT_IMAGE
from shinken.judge.config import JudgeConfig
from shinken.tiers import Tier, serving_tier

SEED_TIMEOUT_S = 60.0  # a fleet seed waiting for a free slot, then answered 503 (masked)
CALL_TIMEOUT_S = 600.0  # one call to a fleet host


@dataclass(frozen=True)
class EngineConfig:
    """Everything that decides what a rollout is, and the engine's bounds. Frozen: built once."""

    task_root: Path
    image: str = DEFAULT_IMAGE
    # The tier policy (shinken.tiers.serving_tier): False serves every row at its probe's tier,
    # checked; True is the operator's `filesystem` fidelity (unchecked forks).
    accept_filesystem: bool = False
    profile: Profile = field(default_factory=Profile)
    judge: JudgeConfig | None = None
    # The mock web (mockweb.runs.web_plan): a hub image the engine starts, and/or a URL map file.
    hub_image: str | None = None
    mock_urls: Path | None = None
    pool_size: int = DEFAULTS.pool_size
    demand_pools: bool = DEFAULTS.demand_pools
    idle_ttl_s: float = DEFAULTS.idle_ttl_s
    golden_ttl_s: float = DEFAULTS.golden_ttl_s
    max_goldens: int = DEFAULTS.max_goldens
    seed_timeout_s: float = SEED_TIMEOUT_S
    call_timeout_s: float = CALL_TIMEOUT_S

    def __post_init__(self) -> None:
        object.__setattr__(self, "task_root", Path(self.task_root))
        for name in ("idle_ttl_s", "golden_ttl_s", "seed_timeout_s", "call_timeout_s"):  # one type, as sent
            object.__setattr__(self, name, float(getattr(self, name)))
        for name in ("pool_size", "max_goldens"):
            object.__setattr__(self, name, int(getattr(self, name)))
        if self.mock_urls is not None:
            object.__setattr__(self, "mock_urls", Path(self.mock_urls))
        if not self.image.strip():
            raise ShinkenError("the engine's image is empty; name the task image (e.g. shinken/sandbox-cua:latest)")
        for name in ("pool_size", "idle_ttl_s", "golden_ttl_s", "seed_timeout_s", "call_timeout_s"):
            if getattr(self, name) < 0:
                raise ShinkenError(f"the engine's {name} is {getattr(self, name)}: must not be negative")
        if self.max_goldens < 1:
            raise ShinkenError(f"the engine's max_goldens is {self.max_goldens}: keep at least 1")

    # ------------------------------------------------------------------ reading it

    @classmethod
    def from_env(cls, **overrides: Any) -> "EngineConfig":
        """The config a library user gets from the environment the server's config documents:
        CUA_GYM_TASKS, SHINKEN_IMAGE, SHINKEN_STATE_FIDELITY, the pool/TTL knobs, the judge and the mock web."""
        root = os.environ.get("CUA_GYM_TASKS")
        if not root and "task_root" not in overrides:
            raise ShinkenError("CUA_GYM_TASKS is not set; point it at a folder of task bundles")
        fidelity = os.environ.get("SHINKEN_STATE_FIDELITY", "").strip()
        if fidelity == "process_memory":
            raise ShinkenError("SHINKEN_STATE_FIDELITY=process_memory: checkpointing process memory needs CRIU, which "
                               "does not work here; use checked (start states relaunched and checked per task tier)")
        if fidelity not in ("", "checked", "filesystem"):
            raise ShinkenError(f"SHINKEN_STATE_FIDELITY={fidelity!r}: use checked (the default) or filesystem")
        mock_urls = os.environ.get("SHINKEN_MOCK_URLS", "").strip()  # shinken_mock_urls
        kwargs: dict[str, Any] = dict(
            task_root=Path(root or "."),
            image=os.environ.get("SHINKEN_IMAGE", "").strip() or DEFAULT_IMAGE,
            # "filesystem" = the operator accepts unchecked forks that keep files but may lack processes.
            accept_filesystem=fidelity == "filesystem",
            **asdict(ServerSettings.from_env()),  # SHINKEN_POOL_SIZE, _IDLE_TTL, _GOLDEN_TTL, _MAX_GOLDENS, _DEMAND_POOLS
            judge=JudgeConfig.create(os.environ.get("SHINKEN_JUDGE_URL", "").strip() or None,
                                     os.environ.get("SHINKEN_JUDGE_MODEL", "").strip() or None,
                                     ("SHINKEN_JUDGE_URL (shinken_judge_url)", "SHINKEN_JUDGE_MODEL (shinken_judge_model)")),
            hub_image=os.environ.get("SHINKEN_HUB_IMAGE", "").strip() or None,  # shinken_hub_image
            mock_urls=Path(mock_urls) if mock_urls else None,
        )
        kwargs.update(overrides)
        return cls(**kwargs)

    @property
    def web(self) -> bool:
        """Whether web tasks are served (a hub image or a mock URL map is set)."""
        return self.hub_image is not None or self.mock_urls is not None

    def serving_tier(self, requested: Tier | str | None, *, needs_relaunch: bool) -> Tier:
        """The tier a rollout's computer is made at under this config's tier policy."""
        return serving_tier(requested, needs_relaunch=needs_relaunch, accept_filesystem=self.accept_filesystem)

    # ------------------------------------------------------------------ across the fleet

    def rollout(self) -> dict[str, Any]:
        """What decides a rollout, as a fleet host must reproduce it (plain data, compared by value).
        Left out: where the bundles are (a host receives them, checked by hash) and what a host
        spends of its own (warm pools, golden cache bounds: its slots bound them, `fleet join`)."""
        return {"image": self.image, "accept_filesystem": self.accept_filesystem, "profile": self.profile.to_json(),
                "judge": None if self.judge is None else {"url": self.judge.url, "model": self.judge.model,
                                                          "api_key_env": self.judge.api_key_env},
                "hub_image": self.hub_image, "mock_urls": None if self.mock_urls is None else str(self.mock_urls),
                "idle_ttl_s": self.idle_ttl_s}

    def with_rollout(self, doc: dict[str, Any]) -> "EngineConfig":
        """This config (a host's) serving the rollouts `doc` (another config's rollout()) describes."""
        judge = doc.get("judge")
        return replace(self, image=str(doc["image"]), accept_filesystem=bool(doc["accept_filesystem"]),
                       profile=Profile.from_json(doc.get("profile")),
                       judge=JudgeConfig(str(judge["url"]), str(judge["model"]), str(judge["api_key_env"]))
                       if judge else None,
                       hub_image=doc.get("hub_image"),
                       mock_urls=Path(doc["mock_urls"]) if doc.get("mock_urls") else None,
                       idle_ttl_s=float(doc["idle_ttl_s"]))

    def differences(self, other: "EngineConfig") -> list[str]:
        """What of the rollout this config and `other` decide differently, as `name: mine vs theirs`."""
        mine, theirs = self.rollout(), other.rollout()
        return [f"{k}: {mine[k]!r} vs {theirs.get(k)!r}" for k in mine if mine[k] != theirs.get(k)]


@dataclass
class VerifyResult:
    """A verify answer. A masked one names its failure in Gym's words (shinken/failure_kinds.py):
    `failure_kind` a Gym kind, `failure_stage` where it happened, `failure_reason` shinken's finer
    code first ("reward_timeout: ...")."""

    reward: float
    mask_sample: bool
    failure_kind: str | None
    failure_reason: str | None
    reward_output_tail: str
    failure_stage: str | None = None

    @classmethod
    def masked(cls, code: str, stage: str, detail: str, output_tail: str = "") -> "VerifyResult":
        return cls(0.0, True, kind_of(code), reason(code, detail), output_tail, stage)

    @property
    def code(self) -> str | None:
        """shinken's reason code of a masked result (the head of failure_reason)."""
        return self.failure_reason.split(":", 1)[0] if self.failure_reason else None

    def to_json(self) -> dict[str, Any]:
        return {"reward": self.reward, "mask_sample": self.mask_sample, "failure_kind": self.failure_kind,
                "failure_stage": self.failure_stage, "failure_reason": self.failure_reason,
                "reward_output_tail": self.reward_output_tail}

    @classmethod
    def from_json(cls, doc: dict[str, Any]) -> "VerifyResult":
        return cls(float(doc["reward"]), bool(doc["mask_sample"]), doc.get("failure_kind"), doc.get("failure_reason"),
                   str(doc.get("reward_output_tail") or ""), doc.get("failure_stage"))


@dataclass(frozen=True)
class EngineStatus:
    """Where an engine's rollouts and goldens are: `local` for this machine's engine, else each fleet host."""

    sessions: dict[str, int]  # where -> live rollouts
    goldens: dict[str, list[str]]  # where -> task ids of the goldens held there


class RolloutEngine(Protocol):
    """The calls a resources server makes of its engine. A session holds one rollout at a time;
    `seed` returns the rollout's token and every later call names it (a stale token raises
    SessionError). Exceptions are answered by the failure table (computer/failures.py) the same
    way whichever engine raised them."""

    @property
    def config(self) -> EngineConfig: ...

    def seed(self, session: str, task_id: str, generation: str | None = None, tier: Tier | str | None = None) -> str: ...

    def step(self, session: str, generation: str, name: str, arguments: Any) -> ToolOutput: ...

    def tool(self, session: str, generation: str, name: str, arguments: dict[str, Any]) -> str: ...

    def first_observation(self, session: str, generation: str) -> ToolOutput | None: ...

    def sandbox_id(self, session: str, generation: str) -> str | None: ...

    def verify(self, session: str, generation: str) -> VerifyResult: ...

    def end(self, session: str, generation: str | None = None) -> None: ...

    def seed_timing(self, session: str) -> dict[str, Any]: ...

    def status(self) -> EngineStatus: ...

    def close(self) -> None: ...
