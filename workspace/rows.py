"""Dataset rows for the shinken_cua resources server, validated before they are written:
NeMo Gym's collate silently skips invalid rows, so a bad row must fail here instead."""

from __future__ import annotations

from typing import Any

from shinken.bundles.model import Bundle
from shinken.computer.actions import tool_schemas
from shinken.computer.profiles import Profile
from shinken.errors import ShinkenError
from shinken.schemas import validation_error

SERVER_NAME = "shinken_cua"
RESOURCES_INSTANCE = f"{SERVER_NAME}_resources_server"
AGENT_INSTANCE = f"{SERVER_NAME}_simple_agent"
ENVIRONMENT_INSTANCE = f"{SERVER_NAME}_environment_server"

SYSTEM_PROMPT = (
    "You operate a Linux desktop computer (user `user`, home /home/user, screen 1920x1080) "
    "through tools. Observe the screen with computer_observe: it lists the accessibility tree "
    "as numbered elements like [e7]; use mode \"diff\" after an action to see only what changed. "
    "Act with computer_click (an element id, or x/y), computer_type_text, computer_key and "
    "computer_exec (a shell command). Work step by step and check the result of each action. "
    "When the task is complete, call computer_done exactly once."
)


_SEE = {
    "a11y": "Observe the screen with computer_observe: it lists the accessibility tree as numbered elements "
            "like [e7]; use mode \"diff\" after an action to see only what changed. ",
    "screenshot": "You see the screen as a screenshot at the start and after every action. ",
    "both": "You see the screen as a screenshot at the start and after every action, together with its "
            "accessibility tree as numbered elements like [e7] (computer_observe reads it again). ",
}
_ACT = {
    "shinken": "Act with computer_click (an element id, or x/y), computer_type_text and computer_key",
    "pixel": "Act with computer_click, computer_double_click, computer_right_click, computer_drag, computer_scroll "
             "and computer_move at pixel coordinates of the screenshot, computer_type_text, computer_key and "
             "computer_wait",
    "pyautogui": "Act with computer_pyautogui: a short pyautogui program, with coordinates in the screenshot's "
                 "pixels (or WAIT to look again)",
}


def system_prompt(profile: Profile) -> str:
    if profile.is_default:
        return SYSTEM_PROMPT
    done = "send DONE (or FAIL when it cannot be done) exactly once" if profile.actions == "pyautogui" \
        else "call computer_done exactly once"
    shell = " and computer_exec (a shell command)" if profile.exec else " (there is no shell: use the screen)"
    w, h = profile.size or (1920, 1080)
    return (f"You operate a Linux desktop computer (user `user`, home /home/user, screen {w}x{h}) through tools. "
            + _SEE[profile.observation] + _ACT[profile.actions] + shell
            + f". Work step by step and check the result of each action. When the task is complete, {done}.")


def make_row(bundle: Bundle, *, agent_name: str = AGENT_INSTANCE, tier: str | None = None,
             alerts: list[str] | None = None,
             checks: tuple[str | None, str | None] = (None, None),
             profile: Profile | None = None) -> dict[str, Any]:
    """`tier`: the probe's start-state tier for the task (shinken.tiers), None when unknown;
    `alerts`: the alerts its start state shows (`app: title`, probes.final_receipt.kept_alerts);
    `checks`: the probe's oracle and vandal outcomes (None: that probe did not run on the task);
    `profile`: what the policy sees and acts with; a non-default one is recorded in the row
    (`shinken_profile`), the default leaves the row as it always was."""
    profile = profile or Profile()
    instruction = bundle.instruction.strip()
    if not instruction:
        raise ShinkenError(f"{bundle.id}: the task has no instruction; drop it from the id list")
    row = {
        "responses_create_params": {
            "input": [
                {"role": "system", "content": system_prompt(profile)},
                {"role": "user", "content": instruction},
            ],
            "tools": tool_schemas(profile),
            # Actions on one computer are ordered; parallel calls would race.
            "parallel_tool_calls": False,
        },
        "agent_ref": {"type": "responses_api_agents", "name": agent_name},
        "task_id": bundle.id,
        "instruction": instruction,
        "app_type": bundle.app_type,
        "difficulty": bundle.difficulty,
        "bundle_hash": bundle.bundle_hash,
        "state_fidelity": bundle.state_fidelity,
        # How the server gives this task its start state (the engine checks it again at seed).
        "shinken_tier": tier,
        # Can the work pass the reward (oracle), can damage (vandal): a partial or one-variant pass is a flag.
        "shinken_oracle": checks[0],
        "shinken_vandal": checks[1],
    }
    if alerts:  # absent when the start state shows none: rows of tasks without alerts stay as they were
        row["shinken_alerts"] = list(alerts)
    if not profile.is_default:
        row["shinken_profile"] = profile.to_json()
    check_row(row, where=bundle.id)
    return row


def check_row(row: Any, *, where: str) -> None:
    err = validation_error("gym_row", row)
    if err:
        raise ShinkenError(f"{where}: dataset row does not match schemas/gym_row.schema.json: {err}")
