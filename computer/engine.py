"""ComputerEngine: sessions -> forks of cached goldens, generation tokens, verify, bounded ownership."""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any


@dataclass
class VerifyResult:
    reward: float
    mask_sample: bool
    failure_kind: str | None
    failure_reason: str | None
    reward_output_tail: str


class ComputerEngine:
    def __init__(self, task_root, image, *, accept_filesystem=False, pool_size=0, idle_ttl_s=900,
                 golden_ttl_s=3600, max_goldens=64, provider=None) -> None:
        raise NotImplementedError

    @classmethod
    def from_env(cls) -> "ComputerEngine":
        raise NotImplementedError

    def seed(self, session: str, task_id: str, generation: str | None = None) -> str:
        raise NotImplementedError

    def tool(self, session: str, generation: str, name: str, arguments: dict[str, Any]) -> str:
        raise NotImplementedError

    def verify(self, session: str, generation: str) -> VerifyResult:
        raise NotImplementedError

    def end(self, session: str, generation: str | None = None) -> None:
        raise NotImplementedError

    def close(self) -> None:
        raise NotImplementedError
