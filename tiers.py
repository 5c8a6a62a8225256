"""The tier of a task's start state: how a rollout's computer is made to look as the task's
setup left it, and what was checked. One vocabulary for the probe receipt (`tier`), the
dataset rows (`shinken_tier`), the computer engine and the reports (docs/tiers.md)."""

from __future__ import annotations

from enum import Enum


class Tier(str, Enum):
    # Nothing the setup started was alive at commit: a fork of the golden image is exact.
    SNAPSHOT = "snapshot"
    # The setup's processes that were alive at commit are relaunched on every fork, after the
    # leftovers of their killed predecessors are cleaned, and the fork's desktop signature
    # (windows, focus) is checked against the golden's record before the fork is handed over.
    RELAUNCH = "relaunch"
    # Relaunching cannot reproduce the setup's desktop (it did UI work after launching): every
    # rollout gets a fresh container from the base image with the full setup run, checked the
    # same way. Slower, exact.
    REPROVISION = "reprovision"
    # Chosen by the user (`--state-fidelity filesystem`): files are kept, processes the setup
    # left may be lost, and the start state is NOT checked.
    FILESYSTEM = "filesystem"

    @property
    def checked(self) -> bool:
        """Whether every computer made at this tier has its desktop signature compared with the golden's."""
        return self in (Tier.RELAUNCH, Tier.REPROVISION)

    @property
    def forks_golden(self) -> bool:
        """Whether rollouts start from a fork of the golden image (else a fresh provision)."""
        return self is not Tier.REPROVISION


TIER_VALUES: tuple[str, ...] = tuple(t.value for t in Tier)

GUARANTEES: dict[Tier, str] = {
    Tier.SNAPSHOT: "exact: nothing the setup started was running at commit, a fork has the same files",
    Tier.RELAUNCH: "checked: the setup's apps relaunched on the golden's files, windows match the golden's",
    Tier.REPROVISION: "checked: the full setup run again per rollout, windows match the golden's",
    Tier.FILESYSTEM: "unchecked: the golden's files only; processes the setup left may be missing",
}


def parse_tier(value: object) -> Tier | None:
    """A Tier from its value (receipt lines, dataset rows); None for null/absent/unknown."""
    if isinstance(value, Tier):
        return value
    try:
        return Tier(str(value)) if value is not None else None
    except ValueError:
        return None


def probe_tiers(*, needs_relaunch: bool, accept_filesystem: bool) -> list[Tier]:
    """The tiers the probe tries for a task, best first. Nothing alive at commit: the snapshot
    is exact. Otherwise relaunch, then re-provision, unless the user (or the bundle) accepted
    the filesystem alone."""
    if not needs_relaunch:
        return [Tier.SNAPSHOT]
    if accept_filesystem:
        return [Tier.FILESYSTEM]
    return [Tier.RELAUNCH, Tier.REPROVISION]


def serving_tier(requested: Tier | str | None, *, needs_relaunch: bool, accept_filesystem: bool) -> Tier:
    """The tier a rollout's computer is made at: the probe's (from the dataset row), made safe.
    A golden whose setup left processes is never served as a plain snapshot; without a recorded
    tier the checked relaunch is used; `filesystem` only by the operator's or the probe's choice."""
    tier = parse_tier(requested)
    if accept_filesystem and tier is not Tier.REPROVISION:
        return Tier.FILESYSTEM if needs_relaunch else Tier.SNAPSHOT
    if not needs_relaunch:
        return tier if tier in (Tier.REPROVISION, Tier.FILESYSTEM) else Tier.SNAPSHOT
    if tier in (None, Tier.SNAPSHOT):
        return Tier.RELAUNCH
    return tier
