"""One table from every exception class shinken defines to what the resources server answers.

An engine call that raises is answered with (HTTP status, error kind, Gym failure kind). The
table is looked up by the exception's class and its bases, most specific first, so its order
never decides (an ordered `except` chain once answered every InfraError with 422 `bad_task`,
because InfraError is a ShinkenError and that branch came first). Every class shinken defines
is either in ANSWERS or in NOT_RAISED_TO_SERVER (with why); tests/test_failure_table.py walks
all of shinken's modules and fails on a class in neither, so a new class cannot fall through.

Only a task error answers 422 `bad_task`: a plain ShinkenError (unknown task id, defective
bundle, bad tier in the row) and SetupError (a setup step of the bundle failed). The engine,
the machine and lost sessions answer 503 or 409, never a task error; so do the Docker SDK's
own errors (an engine that went away under a connected client raises requests' ConnectionError).
"""

from __future__ import annotations

from dataclasses import dataclass

import docker.errors
import requests.exceptions

from shinken.errors import EnvironmentProblem, InternalError, ShinkenError, WorkFailed
from shinken.failure_kinds import (
    BAD_TASK,
    INTERNAL_ERROR,
    PROVIDER_QUOTA_EXHAUSTED,
    PROVIDER_UNAVAILABLE,
    SESSION_LOST,
)
from shinken.sandbox.api import (
    DiskFull,
    EngineUnreachable,
    ForkLost,
    HubLost,
    ImageMissing,
    InfraError,
    QuotaExceeded,
    SandboxError,
    SessionError,
    SetupError,
    StartStateError,
    UnownedContainer,
    UnsettledDesktop,
)
from shinken.sandbox.task_network import NetworkRefused


@dataclass(frozen=True)
class Answer:
    status: int  # HTTP status of the reply
    error: str  # the reply's "error" field
    failure_kind: str  # Gym's name for it (nemo_gym/failure_kinds.py, or shinken's namespaced one)

    @property
    def task_error(self) -> bool:
        """Evidence against the task (the row or its bundle), never against the machine."""
        return self.error == "bad_task"


class RaisedElsewhere(ShinkenError):
    """An exception raised on another host (a fleet host's agent, fleet/wire.py) and carried here
    with the answer this table gave it there: the server answers it as if it had been raised here.
    `exc_class` names the original class (qualified), `host` where it was raised."""

    def __init__(self, answer: "Answer", exc_class: str, detail: str, host: str = "") -> None:
        super().__init__(detail)
        self.answer, self.exc_class, self.host = answer, exc_class, host


STALE = Answer(409, "stale_session", SESSION_LOST)
INFRA = Answer(503, "infra_error", PROVIDER_UNAVAILABLE)
LOST = Answer(503, "infra_error", SESSION_LOST)
BAD = Answer(422, "bad_task", BAD_TASK)
BUG = Answer(500, "internal_error", INTERNAL_ERROR)

ANSWERS: dict[type[BaseException], Answer] = {
    # a stale or unknown generation, a closed fork or engine: the caller's session is gone
    SessionError: STALE,
    # the engine, the machine, the hub: retry later, never the task's fault
    InfraError: INFRA,
    EngineUnreachable: INFRA,
    ImageMissing: INFRA,
    EnvironmentProblem: INFRA,
    ForkLost: LOST,
    DiskFull: Answer(503, "infra_error", PROVIDER_QUOTA_EXHAUSTED),
    QuotaExceeded: Answer(503, "infra_error", PROVIDER_QUOTA_EXHAUSTED),  # past its disk share: stopped
    HubLost: INFRA,
    # the computer made for the rollout does not show the golden's desktop (docs/tiers.md)
    StartStateError: INFRA,
    # the desktop the setup left did not settle in two golden builds: nothing to serve it from
    UnsettledDesktop: INFRA,
    # a task that needs the network, on a run that gives it none (no hub, no network named): this
    # run cannot serve it, another can
    NetworkRefused: INFRA,
    # the task: unknown id, defective bundle, a setup step that fails, a bad row
    ShinkenError: BAD,
    SetupError: BAD,
    # a sandbox failure with no finer class: not evidence against the task
    SandboxError: BUG,
    # a command's work failed / shinken's own bug: never the task's
    WorkFailed: BUG,
    InternalError: BUG,
    # a container create whose labels name no owner, refused at the Docker door: shinken's bug
    UnownedContainer: BUG,
    # answered by the answer it carries (answer_for); a bug only if it carries none
    RaisedElsewhere: BUG,
    # the Docker SDK's own errors where no shinken code wrapped them: an engine that stopped
    # answering (its socket gone: a ConnectionError) or answered an error is an outage
    requests.exceptions.RequestException: INFRA,
    docker.errors.DockerException: INFRA,
}

# Classes of packages this one cannot import (computer/ and provider/ share a layer), by their
# qualified name. NeMo Gym's sandbox-provider path raises these to Gym's sandbox layer, not to
# this server; they are ShinkenErrors, so without an entry they would answer 422 bad_task, yet
# their causes mix engine errors, a failed pull, a lost container and bad requests: never
# evidence against the task on their own.
ANSWERS_BY_NAME: dict[str, Answer] = {
    "shinken.provider.sandboxes.CreateFailed": INFRA,
    "shinken.provider.sandboxes.NotReady": INFRA,
}

# Exception classes shinken defines that never leave their module (or are turned into one of
# the classes above before they reach an engine call), with where they are caught.
NOT_RAISED_TO_SERVER: dict[str, str] = {
    "shinken.bundles.loader._TooLarge": "caught in the loader: a file too large is a bundle defect",
    "shinken.probes.runner._Dropped": "probe only: a task dropped with its reason",
    "shinken.download.archive._Refused": "download only: an archive member refused",
    "shinken.mockweb.state_api.StateApiError": "runs in the guest; the host sees InfraError or SetupError",
    "shinken.computer.a11y.DumpError": "turned into ToolArgError by the tools",
    "shinken.computer.tools.ToolArgError": "the tool answers the model an error text (its own mistake)",
    "shinken.computer.screen.ScreenshotError": "caught in computer/actions.py: the model reads it as text",
    "shinken.sandbox.exec_channel.ChannelBroken": "caught in computer/screen.py: the capture channel is opened "
                                                 "once more, else the capture takes a fresh exec",
    # `shinken hub build` only: the server runs a hub image that was built already
    "shinken.mockweb.build.AppBuildFailed": "hub build only: one app left out of the hub image",
    "shinken.mockweb.build.NothingBuilt": "hub build only: no hub image was made",
    "shinken.provider.config.ConfigProblem": "the sandbox provider's config check",
}


def answer_for(exc: BaseException) -> Answer:
    """The answer for an exception: its class's entry, else its nearest base's; an exception
    shinken did not classify (a bug) is a 500, never a task error. An exception carried from a
    fleet host gets the answer it got there."""
    carried = getattr(exc, "answer", None) if isinstance(exc, RaisedElsewhere) else None
    if isinstance(carried, Answer):
        return carried
    for cls in type(exc).__mro__:
        found = ANSWERS.get(cls) or ANSWERS_BY_NAME.get(qualified_name(cls))
        if found is not None:
            return found
    return BUG


def qualified_name(cls: type) -> str:
    return f"{cls.__module__}.{cls.__qualname__}"
