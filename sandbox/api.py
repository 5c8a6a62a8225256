"""The sandbox contract: result types, typed errors and the Provider / Fork / ForkPool
protocols every caller codes against (the reward grammar is needs/reward.py).

No Docker import here, so probe / gc / workspace code can depend on these types
without pulling in an engine."""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any, Protocol

from shinken.bundles.model import Bundle, SetupStep
from shinken.errors import EXIT_ENVIRONMENT, EXIT_FAILED, EnvironmentProblem, InternalError, ShinkenError
from shinken.sandbox.desktop import DesktopRecord

if TYPE_CHECKING:
    from shinken.sandbox.exec_channel import ExecChannel

OUTPUT_TAIL_BYTES = 4096  # reward output kept for the report

# Reward error codes (RewardResult.error).
REWARD_ERRORS = ("no_reward_line", "crash", "timeout", "out_of_range", "resource_limit", "judge_error")
# Accepted-but-flagged output shapes (RewardResult.deviation).
REWARD_DEVIATIONS = ("bare_number", "total_score", "lowercase")


@dataclass
class ExecResult:
    exit_code: int | None  # None when killed by timeout
    output: str  # combined stdout+stderr, utf-8 (replace), capped with the tail kept
    timed_out: bool
    duration_s: float
    truncated: bool
    # Additions to the contract: the container cgroup's OOM kills and pids-limit hits
    # counted while this exec ran (a memory hog / fork bomb shows up here).
    oom_kills: int = 0
    pids_limit_hits: int = 0

    @property
    def ok(self) -> bool:
        return self.exit_code == 0 and not self.timed_out

    @property
    def limit_hit(self) -> bool:
        return self.oom_kills > 0 or self.pids_limit_hits > 0


class SandboxError(ShinkenError):
    """Base of every sandbox failure (a ShinkenError: one root, one line in the CLI)."""

    exit_code = EXIT_FAILED


class InfraError(SandboxError, EnvironmentProblem):
    """The engine failed (API error, daemon gone, container vanished). Retryable; never
    evidence against a task."""

    exit_code = EXIT_ENVIRONMENT


class EngineUnreachable(InfraError):
    """No Docker engine answers (not started, restarting, wrong DOCKER_HOST)."""


class ImageMissing(InfraError):
    """The task image is not there (not built, or removed meanwhile)."""


class ForkLost(InfraError):
    """The computer's container is gone or stopped under a call (killed, removed, OOM-killed
    as a whole): the rollout's session is lost; the engine itself may be fine."""


class DiskFull(InfraError):
    """The computer's file system (on the engine's data root) has no room left: a write the
    policy or the reward made may have failed for the machine's reason, not the policy's."""


class QuotaExceeded(DiskFull):
    """The computer wrote past its share of the engine's disk and was stopped (sandbox/disk_quota.py):
    the machine's limit, not the policy's result; its rollout is masked."""


class HubLost(InfraError):
    """The mock web hub that holds the rollout's state is gone, stopped or restarted: what the
    reward reads from it is no longer what the policy did."""


class UnsettledDesktop(InfraError):
    """The desktop a task's setup left did not settle within the record's time in any golden
    build (a window kept changing, an app still on its way up, no window yet): its start state is
    not known, so nothing is committed or served from it. A machine too loaded for the app's
    start, or a setup that never settles; never evidence of a defective task. The probe drops the
    task as `infra_error` (tried again by the next run); the engine masks the rollout."""

    def __init__(self, task_id: str, records: list[DesktopRecord], bounds_s: tuple[float, ...]) -> None:
        self.task_id = task_id
        self.records = list(records)
        self.bounds_s = tuple(bounds_s)  # each build's record bound, in order
        last = self.records[-1] if self.records else DesktopRecord(settled=False)
        within = " and ".join(f"{b:g} s" for b in self.bounds_s)
        super().__init__(f"the desktop the setup of {task_id} left did not settle within {within} in "
                         f"{len(self.records)} golden build(s); the last {last.describe_unsettled()}")


class UnownedContainer(InternalError):
    """A container create whose labels do not name its owner, refused at the Docker door
    (sandbox/docker_client.py) before it reaches the engine: `shinken gc` could never reclaim
    such a container once its maker is gone. Always a bug in the code that asked."""


class SetupError(SandboxError):
    """A bundle setup step failed. Evidence against the task (or the image)."""

    def __init__(self, step_index: int, step_type: str, detail: str, output_tail: str = "",
                 where: str = "config") -> None:
        self.step_index = step_index
        self.step_type = step_type
        self.detail = detail
        self.output_tail = output_tail
        self.where = where  # "config" | "post_fork" | "evaluator.postconfig"
        super().__init__(f"{where}[{step_index}] ({step_type}): {detail}")


class StartStateError(SandboxError):
    """A computer made from a golden (a relaunched fork or a re-provisioned container) does not
    show the desktop the golden recorded. Evidence about the tier, not the task: the probe falls
    back to the next tier; the engine masks the rollout as an infrastructure failure."""

    def __init__(self, tier: str, differences: list[str], timings: dict[str, float] | None = None) -> None:
        self.tier = tier
        self.differences = list(differences)
        self.timings = dict(timings or {})
        super().__init__(f"{tier}: " + "; ".join(self.differences or ["start state differs"]))


class SessionError(SandboxError):
    """Misuse: a closed fork, a stale generation, an exhausted pool."""


@dataclass
class RewardResult:
    reward: float | None
    error: str | None  # None | one of REWARD_ERRORS
    deviation: str | None  # None | one of REWARD_DEVIATIONS
    exit_code: int | None
    output_tail: str  # last ~4 KB of reward output
    duration_s: float

    @property
    def ok(self) -> bool:
        return self.error is None and self.reward is not None

    def to_json(self) -> dict[str, Any]:
        return {
            "reward": self.reward,
            "error": self.error,
            "deviation": self.deviation,
            "exit_code": self.exit_code,
            "output_tail": self.output_tail,
            "duration_s": round(self.duration_s, 3),
        }


@dataclass
class Golden:
    image_id: str
    tag: str  # shinken-golden/<task>:<hash12>
    task_id: str
    bundle_hash: str
    base_image_id: str
    needs_desktop: bool  # the task uses a display -> forks start the desktop
    post_fork: list[SetupStep] = field(default_factory=list)  # replayed on every fork
    lost_processes: list[str] = field(default_factory=list)  # alive at commit: gone on a plain fork
    network: bool = False  # mock web -> forks get a network
    build_seconds: float = 0.0
    reused: bool = False
    state_fidelity: str = "filesystem"  # what this tier preserves
    # Additions to the contract: numeric ids of `user` in the image (uploads chown to them).
    user_uid: int = 1000
    user_gid: int = 1000
    # What the setup left running and showing at commit (None: not recorded, e.g. a test double).
    desktop: DesktopRecord | None = None
    # The bundle's own shinken_post_fork steps: replayed on relaunched and re-provisioned
    # computers too (post_fork above also holds the config's launch/open steps, which only a
    # filesystem-tier fork replays; the other tiers bring those processes back from the record).
    bundle_post_fork: list[SetupStep] = field(default_factory=list)
    # Mock web: the sid the setup wrote (its hub state is recorded under it). Every fork gets a
    # sid of its own, and the record's relaunched command lines name the fork's sid instead.
    web_sid: str | None = None
    # The build container's host name, given to every fork and re-provisioned computer: a
    # terminal's title and prompt show it (`user@<host>: ~`), and so may whatever the setup wrote
    # (LibreOffice's lock, Chromium's singleton). None: Docker's per-container default.
    hostname: str | None = None
    # Paths the setup created or changed under home and the task folders (its diff against the base
    # image; directories too). None: a golden built before this was recorded.
    touched: list[str] | None = None
    # When touched is None: the epoch second the setup started (an older golden, found again), so
    # files written since can stand in for the diff.
    setup_started: float | None = None
    # Records of golden builds thrown away before this one because the desktop did not settle
    # (built now only; the receipt says so).
    unsettled: list[DesktopRecord] = field(default_factory=list)
    # How this host came to hold it, for the seed that needed it (a fleet host: fleet/golden_copy.py):
    # "cached" (found here), "built" (the setup run here), "copied" (pulled from the fleet's
    # registry); seconds it took and, for a build, why no copy was used.
    origin: str | None = None
    origin_s: float | None = None
    origin_note: str = ""

    @property
    def needs_relaunch(self) -> bool:
        """Processes the setup left were alive at commit: a plain fork is not the start state."""
        return self.desktop is not None and self.desktop.needs_relaunch

    def to_json(self) -> dict[str, Any]:
        return {
            "image_id": self.image_id,
            "tag": self.tag,
            "task_id": self.task_id,
            "bundle_hash": self.bundle_hash,
            "base_image_id": self.base_image_id,
            "needs_desktop": self.needs_desktop,
            "post_fork": [s.to_json() for s in self.post_fork],
            "lost_processes": list(self.lost_processes),
            "network": self.network,
            "build_seconds": round(self.build_seconds, 3),
            "reused": self.reused,
            "state_fidelity": self.state_fidelity,
            "desktop": self.desktop.to_json() if self.desktop is not None else None,
            "web_sid": self.web_sid,
            "hostname": self.hostname,
        }


# --- what callers code against (sandbox.docker_provider implements it) ----------------

class Fork(Protocol):
    """A disposable sandbox started from a golden: exec, files, the reward run."""

    @property
    def id(self) -> str: ...

    @property
    def golden(self) -> Golden: ...

    def exec(self, cmd: str | list[str], *, timeout: float = 60, user: str = "user",
             env: dict[str, str] | None = None, workdir: str | None = None,
             max_output: int = 64_000) -> ExecResult: ...

    def open_channel(self, argv: list[str], *, user: str = "user") -> ExecChannel: ...

    def upload(self, data: bytes, dest: str, mode: int = 0o644, user: str = "user") -> None: ...

    def download(self, path: str) -> bytes: ...

    def run_reward(self, bundle: Bundle, *, timeout: float = 120) -> RewardResult: ...

    def reset_web_state(self) -> list[str]: ...

    def close(self) -> None: ...

    # How it was made to show the start state (shinken.tiers.Tier) and what that took per phase.
    tier: Any
    start_timings: dict[str, float]
    # What opens it to the `shinken` provider's connect (sandbox/connect_secret.py); None: not connectable.
    connect_secret: str | None
    # Why the disk watchdog stopped it (sandbox/disk_quota.py); every later call raises QuotaExceeded.
    over_quota: str | None


class ForkPool(Protocol):
    """Ready forks of one golden, refilled in the background."""

    @property
    def golden(self) -> Golden: ...

    @property
    def ready(self) -> int: ...

    size: int  # computers it keeps ready

    @property
    def making(self) -> int: ...

    @property
    def make_s(self) -> float | None:
        """Decayed mean seconds to make one pooled computer (None before the first)."""
        ...

    @property
    def make_s_max(self) -> float | None:
        """The slowest of the pool's recent makes (None before the first)."""
        ...

    def acquire(self, timeout: float | None = 120) -> Fork: ...

    def take(self, wait_s: float = 0.0) -> Fork | None:
        """A ready computer, or None; waits up to wait_s only while one is being made."""
        ...

    def resize(self, size: int) -> None: ...

    def close(self) -> None: ...


class Provider(Protocol):
    """Goldens (a task's set-up state, built once) and forks of them."""

    tier: str

    def resolve_image(self, image: str) -> str:
        """The id `image` (a tag or an id) names now; resolve once per run and pass the id on."""
        ...

    def ensure_golden(self, bundle: Bundle, image_id: str, *, setup_timeout: float = 600,
                      keep_computer: bool = False, settle_timeout: float = 90.0) -> Golden: ...

    def take_golden_computer(self, golden: Golden) -> Fork | None:
        """The running build container of a golden just built with keep_computer (the start
        state itself, unforked), once; None when the golden was reused or not kept."""
        ...

    def fork(self, golden: Golden, *, replay: bool = True, network: bool | None = None,
             kind: str = "fork", tier: Any = None) -> Fork:
        """A fork made to show the start state at `tier` (shinken.tiers.Tier; default: relaunch
        when the setup left processes, else snapshot). StartStateError when a relaunch differs."""
        ...

    def provision(self, bundle: Bundle, golden: Golden, *, kind: str = "fork", replay: bool = True,
                  setup_timeout: float = 600) -> Fork:
        """The re-provision tier: a fresh container with the full setup, checked against the golden."""
        ...

    def pool(self, golden: Golden, size: int, *, tier: Any = None, bundle: Bundle | None = None,
             parallel: int = 1, allow_empty: bool = False) -> ForkPool: ...

    def hold_golden(self, golden: Golden) -> None:
        """A lease on the golden while this provider serves from it: no other process deletes it."""
        ...

    def has_golden(self, golden: Golden) -> bool:
        """Whether the golden image is still there (a process holding no lease may force it out)."""
        ...

    def release_golden(self, golden: Golden) -> None:
        """Let go of the lease; the golden stays."""
        ...

    def delete_golden(self, golden_or_image_id: Golden | str) -> bool:
        """Let go of the golden; remove it unless another holds it (True: it is gone)."""
        ...

    def close(self) -> None: ...


def tail(text: str, limit: int = OUTPUT_TAIL_BYTES) -> str:
    """The last `limit` characters of `text` (the end of an output is what explains it)."""
    return text if len(text) <= limit else text[-limit:]
