"""`shinken make-workspace`: a NeMo Gym 0.7.0 workspace (resources server + data) for kept tasks."""

from __future__ import annotations

from pathlib import Path
from typing import Annotated

import typer

from shinken.cli.common import IdsRequiredOpt, ImageOpt, JsonFlag, Output, TaskRootOpt
from shinken.images.build import DEFAULT_IMAGE

EXAMPLES = [
    "shinken make-workspace --dest ~/cua-ws --task-root data/cua-gym/tasks --ids out/receipt.json",
    "shinken make-workspace --dest ~/cua-ws --task-root demo --ids kept.txt --val-fraction 0.2 --force --json",
]


def make_workspace(
    dest: Annotated[Path, typer.Option("--dest", help="Workspace folder to create (outside the shinken tree).")],
    task_root: TaskRootOpt,
    ids: IdsRequiredOpt,
    val_fraction: Annotated[float, typer.Option("--val-fraction", help="Share of tasks for validation.")] = 0.1,
    seed: Annotated[int, typer.Option("--seed", help="Split seed (same seed, same split).")] = 0,
    stratify: Annotated[str, typer.Option("--stratify", help="Task field to stratify by, or `none`.")] = "app_type",
    image: ImageOpt = DEFAULT_IMAGE,
    max_steps: Annotated[int, typer.Option("--max-steps", help="Agent step limit per rollout.")] = 30,
    license: Annotated[str, typer.Option("--license", help="Dataset license written into the config.")] = "TBD",
    force: Annotated[bool, typer.Option("--force", help="Replace an earlier shinken workspace at --dest.")] = False,
    json_out: JsonFlag = False,
) -> None:
    """Write a NeMo Gym workspace for the tasks a probe receipt kept.

    The workspace holds the resources server shinken_cua (it forks each task's golden and
    serves the computer-use tools) and train/validation/example data; the gym commands that
    run it are printed.
    """
    from shinken.workspace.writer import WorkspaceOptions
    from shinken.workspace.writer import make_workspace as write_workspace

    output = Output(json_out)
    res = write_workspace(WorkspaceOptions(
        dest=dest, task_root=task_root, ids_file=ids, val_fraction=val_fraction, seed=seed,
        stratify=stratify, image=image, max_steps=max_steps, license=license, force=force))

    def render() -> None:
        output.line(f"workspace: {res.dest}")
        output.line(f"train: {len(res.train)}  validation: {len(res.validation)}  example: {len(res.example)}")
        output.line("run it with NeMo Gym 0.7.0 (python 3.13):")
        for line in res.commands:
            output.line(f"  {line}")

    output.result(res.to_json(), render)
