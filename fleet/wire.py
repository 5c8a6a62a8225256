"""What crosses Ray between the fleet router (a resources server) and a host's agent: the rollout
calls' requests and answers as data classes, on both ends the same classes.

An exception an engine call raises on a host never crosses as a string of its own making: it
crosses as `Failed`, the failure table's answer there (computer/failures.py: HTTP status, error
kind, Gym failure kind) with the exception's class, and the router raises it again as an exception
the server answers the same way (`Failed.exception`). So a fleet-served rollout fails exactly as a
local one. `Refused` is placement only: this host cannot take the seed, another may."""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any, Literal

from shinken.computer.actions import ToolOutput
from shinken.computer.contract import VerifyResult
from shinken.computer.failures import Answer, RaisedElsewhere, answer_for, qualified_name
from shinken.sandbox.api import SessionError

# Bumped when a message changes shape: an agent of another version refuses the seed, naming both.
WIRE_VERSION = 1


@dataclass(frozen=True)
class SeedRequest:
    session: str
    task_id: str
    folder: str  # the bundle's folder name (the host keeps bundles under their names)
    bundle_hash: str
    rollout: dict[str, Any]  # EngineConfig.rollout() of the server: the host serves with it
    tier: str | None = None
    generation: str | None = None
    wire: int = WIRE_VERSION


@dataclass(frozen=True)
class Seeded:
    generation: str  # the host engine's token (it names the engine that holds the rollout)
    host: str
    incarnation: str  # the agent's: a token from an earlier agent of the host is stale
    timing: dict[str, Any] = field(default_factory=dict)


@dataclass(frozen=True)
class Refused:
    """The host cannot take this seed; another host may. `full`: no free slot; `need_task`: send
    the bundle first; `config`: the host cannot serve the server's config (detail names the difference)."""

    reason: Literal["full", "need_task", "config"]
    detail: str


@dataclass(frozen=True)
class Failed:
    """An exception an engine call raised on the host, as the failure table answered it there."""

    status: int
    error: str  # the table's error kind: stale_session, infra_error, bad_task, internal_error
    failure_kind: str
    exc_class: str  # qualified name of the exception's class
    detail: str  # str(exception)
    host: str = ""

    @classmethod
    def of(cls, exc: BaseException, host: str = "") -> "Failed":
        a = answer_for(exc)
        return cls(a.status, a.error, a.failure_kind, qualified_name(type(exc)), str(exc) or type(exc).__name__, host)

    @property
    def answer(self) -> Answer:
        return Answer(self.status, self.error, self.failure_kind)

    @property
    def stale(self) -> bool:
        return self.error == "stale_session"

    @property
    def infra(self) -> bool:
        return self.error == "infra_error"

    def exception(self) -> Exception:
        """What the router raises for it: a stale session as the SessionError it was (callers
        reseed on it), anything else carrying its answer (the server answers it alike)."""
        if self.stale:
            return SessionError(self.detail)
        return RaisedElsewhere(self.answer, self.exc_class, self.detail, self.host)


@dataclass(frozen=True)
class Observed:
    """A tool call's answer (step), or the rollout's first screen (None when the profile has none)."""

    output: ToolOutput | None


@dataclass(frozen=True)
class Verified:
    result: VerifyResult


@dataclass(frozen=True)
class Ended:
    freed: bool  # the session held one of the host's slots, free again now


SeedAnswer = Seeded | Refused | Failed
ObserveAnswer = Observed | Failed
VerifyAnswer = Verified | Failed
EndAnswer = Ended | Failed
