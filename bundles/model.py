"""The bundle model: one CUA-Gym task folder, typed, with its defects."""

from __future__ import annotations

from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

KNOWN_STEP_TYPES = ("download", "execute", "launch", "open", "sleep")
TASK_HOME = "/home/user"  # the task machine's home and the working directory of every step
TASK_FILE_NAMES = ("task.json", "config.json")  # task.json wins when both exist

# Defect codes. Fatal ones make a bundle unusable (triage verdict `defective`);
# the rest are notes that are reported but do not stop the task.
FATAL_DEFECTS = frozenset(
    {
        "invalid_json",  # not UTF-8, not JSON, or not a JSON object
        "schema",  # violates schemas/task.schema.json
        "missing_task_file",  # a task-looking folder without task.json/config.json
        "missing_reward",  # no reward.py (or the evaluator's url is missing)
        "empty_reward",  # reward.py has no code
        "missing_setup_file",  # a `download` step names a ./ file the bundle lacks
        "unreadable",  # I/O error, permission, symlink loop
        "too_large",  # a file over the loader's size cap
        "unsafe_link",  # a symlink in the bundle (never followed)
    }
)
NOTE_DEFECTS = frozenset(
    {
        "unknown_step",  # a setup step type shinken does not know (kept)
        "extra_fields",  # top-level fields outside the known set (kept)
        "id_mismatch",  # the task id differs from the folder name
        "empty_instruction",
        "normalized",  # a variant real bundles use, read as its documented form (docs/bundles.md)
    }
)


@dataclass(frozen=True, slots=True)
class Defect:
    code: str
    detail: str
    path: str

    @property
    def fatal(self) -> bool:
        return self.code in FATAL_DEFECTS

    def to_json(self) -> dict[str, Any]:
        return {"code": self.code, "detail": self.detail, "path": self.path, "fatal": self.fatal}


@dataclass(frozen=True, slots=True)
class SetupStep:
    """One `{type, parameters}` entry of `config`, `evaluator.postconfig` or `shinken_post_fork`."""

    index: int
    type: str
    parameters: dict[str, Any]
    # Set on steps the loader added while normalizing a variant (e.g. the `download` that
    # places a script an `execute` names by a bundle-relative path); says why.
    added_for: str | None = None

    @property
    def known(self) -> bool:
        return self.type in KNOWN_STEP_TYPES

    @property
    def starts_process(self) -> bool:
        """Steps whose effect is a running process, lost when a container is committed."""
        return self.type in ("launch", "open")

    def command(self) -> str | list[str] | None:
        cmd = self.parameters.get("command")
        return cmd if isinstance(cmd, (str, list)) else None

    def to_json(self) -> dict[str, Any]:
        return {"type": self.type, "parameters": self.parameters}


@dataclass(slots=True)
class Bundle:
    """A loaded task folder. `raw` keeps the task file exactly as read, so nothing
    unknown is dropped; typed views are derived from it."""

    id: str
    path: Path
    layout: str  # "release" (task.json), "pipeline" (output/final/<id>/config.json), "demo"
    task_file: Path | None
    raw: dict[str, Any]
    files: dict[str, int]  # file name -> size in bytes, regular files only
    bundle_hash: str
    setup: list[SetupStep] = field(default_factory=list)
    postconfig: list[SetupStep] = field(default_factory=list)
    post_fork: list[SetupStep] = field(default_factory=list)
    defects: list[Defect] = field(default_factory=list)
    reward_name: str = "reward.py"  # the evaluator's file (`url`/`script`, `./` optional)

    @property
    def instruction(self) -> str:
        v = self.raw.get("instruction")
        return v if isinstance(v, str) else ""

    @property
    def app_type(self) -> str:
        v = self.raw.get("app_type")
        if isinstance(v, list):  # a JSON list of app names: read as the comma-joined form
            return ",".join(x for x in v if isinstance(x, str))
        return v if isinstance(v, str) else ""

    @property
    def difficulty(self) -> str | None:
        v = self.raw.get("difficulty")
        return v if isinstance(v, str) else None

    @property
    def state_fidelity(self) -> str:
        """What state the task needs preserved across a checkpoint. Imported bundles
        default to process_memory (fail closed); demo bundles may declare filesystem."""
        v = self.raw.get("shinken_state_fidelity")
        return v if v in ("filesystem", "process_memory") else "process_memory"

    @property
    def ok(self) -> bool:
        return not any(d.fatal for d in self.defects)

    def why_defective(self) -> str:
        """The fatal defects in one line ("code: detail; ..."); empty when the bundle is ok."""
        return "; ".join(f"{d.code}: {d.detail}" for d in self.defects if d.fatal)

    @property
    def reward_path(self) -> Path | None:
        return self.path / self.reward_name if self.reward_name in self.files else None

    @property
    def setup_files(self) -> list[str]:
        return sorted(n for n in self.files if n.startswith("initial_setup"))

    def file_path(self, name: str) -> Path:
        return self.path / name

    def to_json(self) -> dict[str, Any]:
        return {
            "id": self.id,
            "path": str(self.path),
            "layout": self.layout,
            "bundle_hash": self.bundle_hash,
            "app_type": self.app_type,
            "difficulty": self.difficulty,
            "files": self.files,
            "defects": [d.to_json() for d in self.defects],
        }
