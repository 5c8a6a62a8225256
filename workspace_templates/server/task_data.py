"""Task-data schema of this server's dataset rows (NeMo Gym's `task_data.py` protocol).

`gym env schema --resources-server <name>` prints it; Gym's data tooling validates rows with it.
Everything in a row besides `responses_create_params` and `agent_ref` is task data that Gym
passes whole to /seed_session and /verify. Only the standard library and pydantic may be
imported here (Gym loads this file without installing the server's requirements). Mirrors
schemas/gym_row.schema.json in the shinken repository, which a shinken test compares it with.
"""

from typing import Literal, Optional, Union

from pydantic import BaseModel, ConfigDict, Field


class TaskData(BaseModel):
    # Gym's convention: keep unknown fields (its validator reports them) rather than drop them.
    model_config = ConfigDict(extra="allow")

    task_id: str = Field(
        min_length=1,
        description="CUA-Gym task id: the bundle folder under the server's task root that /seed_session forks.",
        json_schema_extra={"consumed_by": ["verify", "provenance"]},
    )
    instruction: str = Field(
        min_length=1,
        description="The task's instruction (also the row's last user message).",
        json_schema_extra={"consumed_by": ["prompt", "provenance"]},
    )
    app_type: str = Field(description="CUA-Gym app_type of the task.", json_schema_extra={"consumed_by": ["metrics"]})
    difficulty: Optional[str] = Field(
        default=None, description="CUA-Gym difficulty label, when the task has one.",
        json_schema_extra={"consumed_by": ["metrics"]},
    )
    bundle_hash: str = Field(
        min_length=1,
        description="Content hash of the task bundle the row was made from.",
        json_schema_extra={"consumed_by": ["provenance"]},
    )
    state_fidelity: Literal["filesystem", "process_memory"] = Field(
        description="State fidelity the bundle declares.", json_schema_extra={"consumed_by": ["provenance"]},
    )
    shinken_tier: Optional[Literal["snapshot", "relaunch", "reprovision", "filesystem"]] = Field(
        default=None,
        description="How the probe made and checked this task's start state.",
        json_schema_extra={"consumed_by": ["metrics", "provenance"]},
    )
    shinken_alerts: Optional[list[str]] = Field(
        default=None,
        description="Alerts and first-run wizards the task's start state shows (`app: title`), as the probe found them.",
        json_schema_extra={"consumed_by": ["metrics", "provenance"]},
    )
    shinken_oracle: Optional[Literal["oracle_passes", "oracle_partial", "oracle_fails"]] = Field(
        default=None,
        description="The oracle probe's outcome: the task's reference solution reached 1.0 (passes) or less (partial).",
        json_schema_extra={"consumed_by": ["metrics", "provenance"]},
    )
    shinken_vandal: Optional[Literal["vandal_resists", "vandal_passes_remove", "vandal_passes_garbage",
                                     "reward_passes_vandalism", "vandal_no_files", "vandal_not_recorded"]] = Field(
        default=None,
        description="The vandal probe's outcome: does the reward pass with the setup's files removed or garbled.",
        json_schema_extra={"consumed_by": ["metrics", "provenance"]},
    )
    shinken_profile: Optional["ProfileData"] = Field(
        default=None,
        description="The observation/action profile the row was made for (absent: a11y + shinken tools + shell); the "
                    "server refuses a row made for another profile.",
        json_schema_extra={"consumed_by": ["verify", "provenance"]},
    )


class ProfileData(BaseModel):
    model_config = ConfigDict(extra="forbid")

    observation: Literal["a11y", "screenshot", "both"]
    actions: Literal["shinken", "pixel", "pyautogui"]
    exec: bool
    image_format: Literal["png", "jpeg", "webp"]
    quality: int = Field(ge=1, le=100)
    size: Union[str, None] = Field(pattern=r"^[1-9][0-9]{1,4}x[1-9][0-9]{1,4}$")


TaskData.model_rebuild()
