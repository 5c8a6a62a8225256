"""NeMo Gym 0.7.0's failure vocabulary, and every way a shinken rollout fails mapped onto it.

Gym (`nemo_gym/failure_kinds.py`) names a failure by what went wrong (`failure_kind`, low
cardinality, safe to group by) and keeps the occurrence's detail in `failure_reason`; a stage
(`FailureStage`) says where in the episode it happened. Trainers and Gym's tools read those
names, so shinken speaks them: every rollout failure has one of shinken's finer reason codes
(`reward_timeout`, `start_state`, ...), which maps here onto one Gym kind and one stage; the code
goes first in `failure_reason` ("reward_timeout: reward.py: timeout (exit None)").

Standard library only (profile and report code read it without Docker or Gym installed). The
names are copied from the 0.7.0 wheel; tests/test_failure_table.py checks them against the
wheel in the Gym runner image.
"""

from __future__ import annotations

from typing import Literal

FailureStage = Literal["admission", "seed", "agent", "verification", "cleanup"]

# The names of nemo_gym/failure_kinds.py (0.7.0) that shinken produces.
PROVIDER_UNAVAILABLE = "provider_unavailable"
PROVIDER_OOM_KILLED = "provider_oom_killed"
PROVIDER_QUOTA_EXHAUSTED = "provider_quota_exhausted"
SESSION_LOST = "session_lost"
SESSION_EXPIRED = "session_expired"
SESSION_RELEASE_FAILED = "session_release_failed"
VERIFIER_ERROR = "verifier_error"
JUDGE_FAILED = "judge_failed"
# Gym lets an environment namespace what the shared set has no name for: `<server>:<kind>`.
# A bad task (unknown id, defective bundle, a setup step that fails) is evidence against the
# task itself, not a failure of the policy or of the infrastructure; Gym has no name for it.
BAD_TASK = "shinken:bad_task"
# A bug in shinken (an exception nobody classified): not evidence against the task either.
INTERNAL_ERROR = "shinken:internal_error"

# Every name in nemo_gym.failure_kinds.FAILURE_KINDS (0.7.0), checked against the wheel by a test.
GYM_FAILURE_KINDS: frozenset[str] = frozenset({
    "transport_unreachable", "transport_peer_drop", "transport_timeout", "transport_local_resource",
    "agent_run_error", "agent_request_failed", "agent_timeout", "agent_command_not_allowed",
    "judge_failed", "judge_unparseable", "verifier_error",
    "provider_unavailable", "provider_quota_exhausted", "provider_oom_killed",
    "session_lost", "session_expired", "session_release_failed",
    "cancelled", "kill_shaped", "shutdown", "persistence_failed", "cohort_incomplete",
})


# shinken's reason code -> Gym kind. A masked verify response carries the kind as
# `failure_kind`, where it happened as `failure_stage` and "<code>: <detail>" as `failure_reason`.
REASONS: dict[str, str] = {
    # the engine failed under the rollout (daemon gone, API error, hub unreachable)
    "infra": PROVIDER_UNAVAILABLE,
    # the computer's disk (the engine's data root) was full when the reward read an unsolved task
    "disk_full": PROVIDER_QUOTA_EXHAUSTED,
    # the computer wrote past its share of the engine's disk and was stopped (sandbox/disk_quota.py)
    "disk_quota": PROVIDER_QUOTA_EXHAUSTED,
    # the mock web hub holding the rollout's state died, stopped or restarted under it
    "hub_lost": PROVIDER_UNAVAILABLE,
    # the rollout's container is gone (killed, removed, stopped) or its session was closed
    "fork_lost": SESSION_LOST,
    # the rollout's computer did not show the golden's desktop (docs/tiers.md)
    "start_state": PROVIDER_UNAVAILABLE,
    # the task's evaluator.postconfig steps failed before reward.py ran
    "postconfig": VERIFIER_ERROR,
    # the verify path itself raised (a bug, or an error nobody classified)
    "verify_error": VERIFIER_ERROR,
    # reward.py (sandbox/reward.py's REWARD_ERRORS)
    "reward_no_reward_line": VERIFIER_ERROR,
    "reward_crash": VERIFIER_ERROR,
    "reward_timeout": VERIFIER_ERROR,
    "reward_out_of_range": VERIFIER_ERROR,
    "reward_resource_limit": PROVIDER_OOM_KILLED,  # the reward hit the memory or pids limit
    "reward_judge_error": JUDGE_FAILED,
    "reward_missing": VERIFIER_ERROR,
}


def kind_of(code: str) -> str:
    """The Gym kind of a shinken reason code (a code nobody mapped: a verifier error)."""
    return REASONS.get(code, VERIFIER_ERROR)


def reason(code: str, detail: str) -> str:
    """`failure_reason` text: shinken's code first, then the occurrence's detail."""
    return f"{code}: {detail}" if detail else code


def is_gym_kind(name: str) -> bool:
    """A name Gym groups by: registered, or namespaced `<server>:<kind>` as Gym allows."""
    if name in GYM_FAILURE_KINDS:
        return True
    head, sep, tail = name.partition(":")
    return bool(sep) and head.isidentifier() and tail.isidentifier() and name == name.lower()


def gym_kind(name: str) -> str:
    """The Gym kind for a failure_kind read from a rollout file: Gym's names (and namespaced
    ones) as they are, shinken's older reason codes ("infra", "reward_timeout", ...) translated,
    anything else as it is (a label another server wrote)."""
    if is_gym_kind(name):
        return name
    return REASONS.get(name, name)
