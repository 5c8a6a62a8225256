"""Write a NeMo Gym 0.7.0 workspace for a set of kept CUA-Gym tasks.

Layout (a plain folder, no pyproject.toml at its root, so Gym does not take it for a Gym
checkout):
  <dest>/env.yaml                              policy endpoint template, no secrets
  <dest>/.shinken-workspace.json               what was written and from what
  <dest>/resources_servers/shinken_cua/        app.py, configs/, requirements.txt, README.md,
                                               tests/, data/{example,train,validation}.jsonl,
                                               vendor/shinken-*.whl
"""

from __future__ import annotations

import os
import shutil
import string
import tempfile
from dataclasses import dataclass, field
from importlib import resources
from pathlib import Path
from typing import Any

import orjson

import shinken
from shinken.bundles.loader import load_root
from shinken.bundles.model import Bundle
from shinken.bundles.selection import read_task_ids
from shinken.errors import ShinkenError
from shinken.runtime import utc_now
from shinken.images.build import DEFAULT_IMAGE
from shinken.schemas import write_json
from shinken.swap import swap_into_place
from shinken.workspace import rows as rows_mod
from shinken.workspace.split import normalize_instruction, split_bundles
from shinken.workspace.wheel import build_wheel

MANIFEST = ".shinken-workspace.json"
SERVER_DIR = Path("resources_servers") / rows_mod.SERVER_NAME
CONFIG_REL = SERVER_DIR / "configs" / f"{rows_mod.SERVER_NAME}.yaml"
MODEL_CONFIG_REL = "responses_api_models/openai_model/configs/openai_model.yaml"
EXAMPLE_ROWS = 5  # `gym env test --all` insists on exactly five


@dataclass
class WorkspaceOptions:
    dest: Path
    task_root: Path
    ids_file: Path
    val_fraction: float = 0.1
    seed: int = 0
    stratify: str = "app_type"
    image: str = DEFAULT_IMAGE
    max_steps: int = 30
    license: str = "TBD"
    force: bool = False


@dataclass
class WorkspaceResult:
    dest: Path
    train: list[str]
    validation: list[str]
    example: list[str]
    wheel: Path
    commands: list[str] = field(default_factory=list)

    def to_json(self) -> dict[str, Any]:
        return {"dest": str(self.dest), "train": self.train, "validation": self.validation,
                "example": self.example, "wheel": str(self.wheel), "commands": self.commands}


# ---------------------------------------------------------------- inputs

def _source_root() -> Path:
    return Path(shinken.__file__).resolve().parent


def _check_dest(dest: Path, force: bool) -> None:
    dest = dest.resolve()
    src = _source_root()
    if dest == src or src in dest.parents:
        raise ShinkenError(f"{dest}: is inside the shinken source tree ({src}); choose a folder outside it "
                           "(Gym would take the tree's pyproject.toml for a Gym checkout)")
    if dest.exists() and not dest.is_dir():
        raise ShinkenError(f"{dest}: exists and is not a folder; choose another --dest")
    if dest.is_dir() and any(dest.iterdir()):
        if not force:
            raise ShinkenError(f"{dest}: is not empty; pass --force to replace an earlier workspace, "
                               "or choose an empty folder")
        if not (dest / MANIFEST).is_file():
            raise ShinkenError(f"{dest}: is not empty and holds no {MANIFEST}; --force only replaces a "
                               "workspace written by shinken, so nothing was changed")


def _load(task_root: Path, ids: list[str]) -> list[Bundle]:
    if not task_root.is_dir():
        raise ShinkenError(f"{task_root}: task root is not a folder")
    by_id: dict[str, Bundle] = {}
    for b in load_root(task_root):
        by_id.setdefault(b.id, b)
    missing = [i for i in ids if i not in by_id]
    if missing:
        shown = ", ".join(missing[:5]) + (f" and {len(missing) - 5} more" if len(missing) > 5 else "")
        raise ShinkenError(f"{task_root}: {len(missing)} listed task id(s) are not in the task root: {shown}; "
                           "check --task-root or the id list")
    bad = [b for b in (by_id[i] for i in ids) if not b.ok]
    if bad:
        b = bad[0]
        raise ShinkenError(f"{b.id}: the bundle is defective ({b.why_defective()}); run `shinken triage` and drop it")
    return [by_id[i] for i in ids]


# ---------------------------------------------------------------- writing

def _template(rel: str) -> str:
    return resources.files("shinken.workspace_templates").joinpath(rel).read_text(encoding="utf-8")


def _render(rel: str, **values: Any) -> str:
    return string.Template(_template(rel)).substitute({k: str(v) for k, v in values.items()})


def _jsonl(path: Path, rows: list[dict[str, Any]]) -> None:
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_bytes(b"".join(orjson.dumps(r) + b"\n" for r in rows))


def _yaml_str(value: str) -> str:
    # JSON strings are valid YAML scalars and quote anything YAML would misread.
    return orjson.dumps(value).decode()


def commands_for(dest: Path) -> list[str]:
    cfg = f"{CONFIG_REL}"
    return [
        f"cd {dest}",
        "# edit env.yaml (policy_base_url, policy_model_name; export POLICY_API_KEY)",
        f"gym env start --config {cfg} --config {MODEL_CONFIG_REL}",
        f"#   legacy: ng_run \"+config_paths=[{cfg},{MODEL_CONFIG_REL}]\"",
        f"gym eval run --no-serve --agent {rows_mod.AGENT_INSTANCE} --input {SERVER_DIR}/data/example.jsonl "
        f"--output results/shinken_cua_example.jsonl --limit 5 --concurrency 2",
        f"#   legacy: ng_collect_rollouts +agent_name={rows_mod.AGENT_INSTANCE} "
        f"+input_jsonl_fpath={SERVER_DIR}/data/example.jsonl "
        f"+output_jsonl_fpath=results/shinken_cua_example.jsonl +limit=5 +num_samples_in_parallel=2",
        f"gym dataset collate --config {cfg} --mode example_validation --output-dir results/example_validation",
        f"#   legacy: ng_prepare_data \"+config_paths=[{cfg}]\" +mode=example_validation "
        f"+output_dirpath=results/example_validation",
    ]


def make_workspace(opts: WorkspaceOptions) -> WorkspaceResult:
    dest = Path(opts.dest).expanduser().absolute()
    task_root = Path(opts.task_root).expanduser().resolve()
    if not 0.0 <= opts.val_fraction < 1.0:
        raise ShinkenError(f"--val-fraction {opts.val_fraction}: must be at least 0 and below 1")
    if opts.max_steps < 1:
        raise ShinkenError(f"--max-steps {opts.max_steps}: must be at least 1")
    _check_dest(dest, opts.force)
    ids = read_task_ids(Path(opts.ids_file))
    bundles = _load(task_root, ids)

    rows = {b.id: rows_mod.make_row(b) for b in bundles}
    split = split_bundles(bundles, val_fraction=opts.val_fraction, seed=opts.seed, stratify=opts.stratify)
    _check_disjoint(split.train, split.validation, rows)
    pool = split.train + split.validation  # tiny sets: examples may reuse validation tasks
    example = [pool[i % len(pool)] for i in range(EXAMPLE_ROWS)]

    # Write into a fresh sibling folder, then swap it in: a failed run leaves dest untouched.
    dest.parent.mkdir(parents=True, exist_ok=True)
    stage = Path(tempfile.mkdtemp(prefix=f".{dest.name}.", dir=dest.parent))
    try:
        server = stage / SERVER_DIR
        wheel = build_wheel(server / "vendor")
        version = shinken.__version__
        common = dict(shinken_version=version, task_root=task_root, image=opts.image,
                      state_fidelity="filesystem", license=opts.license, max_steps=opts.max_steps,
                      seed=opts.seed, stratify=opts.stratify, val_fraction=opts.val_fraction,
                      n_train=len(split.train), n_validation=len(split.validation))
        (server / "configs").mkdir(parents=True)
        (server / "tests").mkdir()
        (server / "__init__.py").write_text(_template("shinken_cua/__init__.py.tmpl"))
        (server / "tests" / "__init__.py").write_text("")
        (server / "app.py").write_text(_template("shinken_cua/app.py.tmpl"))
        (server / "tests" / "test_app.py").write_text(_template("shinken_cua/tests/test_app.py.tmpl"))
        (server / "README.md").write_text(_render("shinken_cua/README.md.tmpl", **common))
        (server / "requirements.txt").write_text(_render(
            "shinken_cua/requirements.txt.tmpl", shinken_requirement=f"./vendor/{wheel.name}"))
        (stage / CONFIG_REL).write_text(_render(
            "shinken_cua/configs/shinken_cua.yaml.tmpl",
            **{**common, "task_root": _yaml_str(str(task_root)), "image": _yaml_str(opts.image),
               "license": _yaml_str(opts.license)}))
        (stage / "env.yaml").write_text(_template("env.yaml.tmpl"))
        _jsonl(server / "data" / "train.jsonl", [rows[i] for i in split.train])
        _jsonl(server / "data" / "validation.jsonl", [rows[i] for i in split.validation])
        _jsonl(server / "data" / "example.jsonl", [rows[i] for i in example])
        manifest = {
            "schema": "shinken.workspace/1",
            "created_at": utc_now(),
            "shinken_version": version,
            "task_root": str(task_root),
            "ids_file": str(Path(opts.ids_file).resolve()),
            "image": opts.image,
            "seed": opts.seed,
            "val_fraction": opts.val_fraction,
            "stratify": opts.stratify,
            "max_steps": opts.max_steps,
            "license": opts.license,
            "wheel": str(Path(SERVER_DIR) / "vendor" / wheel.name),
            "train": split.train,
            "validation": split.validation,
            "example": example,
        }
        write_json(stage / MANIFEST, manifest, "workspace_manifest")
        os.chmod(stage, 0o755)
        swap_into_place(stage, dest)
    except BaseException:
        shutil.rmtree(stage, ignore_errors=True)
        raise
    return WorkspaceResult(dest, split.train, split.validation, example,
                           dest / SERVER_DIR / "vendor" / wheel.name, commands_for(dest))


def _check_disjoint(train: list[str], val: list[str], rows: dict[str, dict[str, Any]]) -> None:
    # Defence in depth: the split guarantees this; a violation is a bug, not bad input.
    assert not set(train) & set(val), "train and validation share task ids"
    ti = {normalize_instruction(rows[i]["instruction"]) for i in train}
    assert not any(normalize_instruction(rows[i]["instruction"]) in ti for i in val), \
        "train and validation share an instruction"
