"""The NeMo Gym 0.7.0 documents of a workspace, built as data: the server config, the
environment's config and manifest (the shape `gym env init --environment NAME --profile
custom-gym-verifier` writes; fields of nemo_gym/environment/manifest.py), and the commands a
user runs next. Every path in them is relative to the workspace root, and every engine setting
names the environment variable that overrides it, with a default inside the workspace.
"""

from __future__ import annotations

import re
from dataclasses import dataclass
from pathlib import PurePosixPath
from typing import Any

from shinken.computer.settings import DEFAULTS as SERVER_DEFAULTS, KNOBS
from shinken.computer.profiles import Profile
from shinken.errors import ShinkenError
from shinken.workspace.licensing import License

NAME_RE = re.compile(r"^[a-z][a-z0-9_]{0,63}$")
IMAGE_RE = re.compile(r"^[A-Za-z0-9][A-Za-z0-9._/:@-]*$")
MODEL_CONFIG = "responses_api_models/openai_model/configs/openai_model.yaml"
SPLITS = ("train", "validation", "example")


@dataclass(frozen=True)
class Names:
    """Where everything of environment `name` lives, relative to the workspace root."""

    name: str

    def __post_init__(self) -> None:
        if not NAME_RE.match(self.name):
            raise ShinkenError(f"--name {self.name!r}: use lower-case letters, digits and _ (a Python identifier, "
                               "as NeMo Gym names folders and instances after it), e.g. shinken_cua")

    @property
    def server_dir(self) -> PurePosixPath:
        return PurePosixPath("resources_servers") / self.name

    @property
    def env_dir(self) -> PurePosixPath:
        return PurePosixPath("environments") / self.name

    @property
    def server_config(self) -> PurePosixPath:
        return self.server_dir / "configs" / f"{self.name}.yaml"

    @property
    def tasks(self) -> PurePosixPath:
        return self.server_dir / "tasks"

    @property
    def sandbox_config(self) -> PurePosixPath:
        """The `sandbox:` block of the shinken NeMo Gym sandbox provider (docs/provider.md)."""
        return self.server_dir / "configs" / "shinken_sandbox.yaml"

    def data(self, split: str) -> PurePosixPath:
        return self.server_dir / "data" / f"{split}.jsonl"

    @property
    def resources_instance(self) -> str:
        return f"{self.name}_resources_server"

    @property
    def agent_instance(self) -> str:
        return f"{self.name}_simple_agent"

    @property
    def environment_instance(self) -> str:
        return f"{self.name}_environment_server"

    @property
    def vision_agent_instance(self) -> str:
        return f"{self.name}_vision_agent"

    def agent_for(self, profile: Profile) -> str:
        """The agent instance rows name: the vision agent delivers screenshots as input_image parts."""
        return self.vision_agent_instance if profile.screenshots else self.agent_instance


@dataclass(frozen=True)
class EngineSettings:
    image: str
    state_fidelity: str
    max_steps: int
    hub_image: str | None = None  # hub image serving the mock web apps of web tasks (mockweb)
    mock_urls: str | None = None  # or a mock URL map of mocks run elsewhere
    profile: Profile = Profile()  # what the policy sees and acts with (the default is written nowhere)
    screenshot_history: int | None = None  # keep only the last N screenshots in the model's context

    def __post_init__(self) -> None:
        if not IMAGE_RE.match(self.image):
            raise ShinkenError(f"--image {self.image!r}: not an image reference (e.g. shinken/sandbox-cua:latest)")


def _env(var: str, default: Any) -> str:
    # OmegaConf's env resolver: the caller's variable wins, else the default written here.
    if default is None:
        return f"${{oc.env:{var},null}}"
    return f"${{oc.env:{var},'{default}'}}" if isinstance(default, str) else f"${{oc.env:{var},{default}}}"


def sandbox_config(names: Names, engine: EngineSettings) -> dict[str, Any]:
    """A named sandbox block for Gym agents and servers that take `sandbox_provider: shinken_sandbox`:
    forks of this workspace's tasks (provider_options {task_id, tier}) or containers of any image.
    Gym starts servers in their own folders, so the task folder is an absolute path from
    CUA_GYM_TASKS (set it to <workspace>/<tasks>)."""
    return {"shinken_sandbox": {"shinken": {
        "task_root": "${oc.env:CUA_GYM_TASKS}",
        "image": _env("SHINKEN_IMAGE", engine.image),
        "accept_filesystem": engine.state_fidelity == "filesystem",
        "default_ttl_s": 3600,
    }}}


def _plain(value: float | bool) -> float | str:
    """900.0 written as 900, as the config always had it; a flag as true/false."""
    if isinstance(value, bool):
        return "true" if value else "false"
    return int(value) if float(value).is_integer() else value


VISION_AGENT_DIR = "shinken_vision_agent"  # responses_api_agents/<this>/ (workspace_templates/agent)
TEXT_AGENT_DIR = "shinken_agent"  # Gym's simple_agent answering a seed's infrastructure failure masked


def agent_dir(profile: Profile) -> str:
    """The agent the workspace ships (responses_api_agents/<this>/)."""
    return VISION_AGENT_DIR if profile.screenshots else TEXT_AGENT_DIR


def _profile_settings(profile: Profile) -> dict[str, Any]:
    if profile.is_default:
        return {}  # a default workspace's config is what it was before profiles
    return {
        "shinken_observation": profile.observation,
        "shinken_actions": profile.actions,
        "shinken_exec": profile.exec,
        "shinken_screenshot_format": profile.image_format,
        "shinken_screenshot_quality": profile.quality,
        "shinken_screenshot_size": f"{profile.size[0]}x{profile.size[1]}" if profile.size else None,
    }


def _agent(names: Names, engine: EngineSettings, datasets: list[dict[str, Any]]) -> dict[str, Any]:
    block: dict[str, Any] = {
        "entrypoint": "app.py",
        "resources_server": {"type": "resources_servers", "name": names.resources_instance},
        "model_server": {"type": "responses_api_models", "name": "policy_model"},
        "max_steps": engine.max_steps,
        "datasets": datasets,
    }
    if not engine.profile.screenshots:
        return {names.agent_instance: {"responses_api_agents": {TEXT_AGENT_DIR: block}}}
    if engine.screenshot_history is not None:
        # Gym's recency policy: earlier screenshots leave the context (not an exact prefix: NeMo RL
        # refuses such rollouts for training; for evaluation of long rollouts).
        block["context_history"] = {"enabled": True, "policy": {"type": "recency", "config": {"images": {
            "enabled": True, "keep_last_groups": engine.screenshot_history, "protect_initial_context": False}}}}
    return {names.vision_agent_instance: {"responses_api_agents": {VISION_AGENT_DIR: block}}}


def server_config(names: Names, engine: EngineSettings, lic: License, description: str) -> dict[str, Any]:
    datasets = []
    for split in SPLITS:
        ds: dict[str, Any] = {"name": split, "type": split, "jsonl_fpath": str(names.data(split)), "num_repeats": 1}
        if split != "example" or lic.stated:
            ds["license"] = lic.gym_label  # Gym requires it for train and validation
        datasets.append(ds)
    return {
        names.resources_instance: {"resources_servers": {names.name: {
            "entrypoint": "app.py",
            "domain": "agent",
            "verified": False,
            "description": description,
            "num_workers": 1,
            "cua_gym_tasks": _env("CUA_GYM_TASKS", str(names.tasks)),
            "shinken_image": _env("SHINKEN_IMAGE", engine.image),
            "shinken_state_fidelity": _env("SHINKEN_STATE_FIDELITY", engine.state_fidelity),
            # The engine's pool, TTL and golden bounds (computer/settings.py holds the defaults).
            **{key: _env(var, _plain(getattr(SERVER_DEFAULTS, name))) for name, (key, var) in KNOBS.items()},
            # Rewards that call reward_judge need an endpoint (docs/judge.md); none by default.
            "shinken_judge_url": _env("SHINKEN_JUDGE_URL", None),
            "shinken_judge_model": _env("SHINKEN_JUDGE_MODEL", None),
            # Web tasks: the hub the server starts (docs/mock-web.md); none when the set has none.
            "shinken_hub_image": _env("SHINKEN_HUB_IMAGE", engine.hub_image),
            "shinken_mock_urls": _env("SHINKEN_MOCK_URLS", engine.mock_urls),
            # A fleet of Docker hosts on Ray (docs/fleet.md); empty = this machine's engine.
            "shinken_fleet_address": _env("SHINKEN_FLEET_ADDRESS", None),
            **_profile_settings(engine.profile),
        }}},
        **_agent(names, engine, datasets),
        names.environment_instance: {"environment_servers": {"legacy_agent": {
            "entrypoint": "app.py",
            "agent_server": {"type": "responses_api_agents", "name": names.agent_for(engine.profile)},
        }}},
    }


def environment_config(names: Names) -> dict[str, Any]:
    return {"config_paths": [str(names.server_config)]}


def manifest(names: Names, *, version: str, description: str, lic: License, authors: list[str],
             determinism: str, profile: Profile = Profile()) -> dict[str, Any]:
    return {
        "name": names.name,
        "version": version,
        "experimental": True,
        "kind": "environment",
        "integration_profile": "custom-gym-verifier",
        "domain": "agent",
        "description": description,
        # observations are accessibility trees and command output, as text (or screenshots too)
        "modality": "multimodal" if profile.screenshots else "text",
        "licensing": lic.spdx,
        "authors": authors,
        "reward": {"range": [0.0, 1.0], "higher_is_better": True},
        "determinism": determinism,
        "resources_server": names.name,
        "agent_server": agent_dir(profile),
        "datasets": [{"name": s, "type": s, "jsonl_fpath": str(names.data(s)), "num_repeats": 1} for s in SPLITS],
        "model_server": "policy_model",
        "session_model": "episode",
        "state": "per_session",
        "sandbox": "docker",
        "lifecycle": "active",
    }


def gate_commands(names: Names) -> list[str]:
    """Gym's own checks, in the order a user runs them (no service is started by these)."""
    n = names.name
    return [
        f"gym env validate {n}",
        f"gym env validate --environment {n} --config {MODEL_CONFIG} --strict",
        f"gym env schema --resources-server {n}",
        f"gym env test {n}",
        f"gym env test --resources-server {n}",
    ]


def run_commands(names: Names, profile: Profile = Profile()) -> list[str]:
    """Serve, collect the example rollouts and metrics Gym servers ship, then publish."""
    n, cfg, data = names.name, names.server_config, names.server_dir / "data"
    agent = names.agent_for(profile)
    return [
        f"gym env start --environment {n} --config {MODEL_CONFIG}",
        f"#   legacy: ng_run \"+config_paths=[{cfg},{MODEL_CONFIG}]\"",
        f"gym eval run --no-serve --agent {agent} --input {data}/example.jsonl "
        f"--output results/example_rollouts.jsonl --limit 5 --concurrency 2",
        f"#   legacy: ng_collect_rollouts +agent_name={agent} +input_jsonl_fpath={data}/example.jsonl "
        f"+output_jsonl_fpath=results/example_rollouts.jsonl +limit=5 +num_samples_in_parallel=2",
        f"cp results/example_rollouts.jsonl {data}/example_rollouts.jsonl",
        f"gym dataset collate --config {cfg} --mode example_validation --output-dir results/example_validation",
        f"#   legacy: ng_prepare_data \"+config_paths=[{cfg}]\" +mode=example_validation "
        f"+output_dirpath=results/example_validation",
        f"gym env test --resources-server {n} +should_validate_data=true",
        f"gym env publish {n}",
    ]
