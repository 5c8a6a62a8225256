"""`shinken make-workspace`: a NeMo Gym 0.7.0 workspace (resources server + data) for kept tasks."""

from __future__ import annotations

from pathlib import Path
from typing import Annotated

import typer

from shinken.cli.common import JsonFlag, out, print_json


def register(app: typer.Typer) -> None:
    @app.command(
        "make-workspace",
        help="Write a NeMo Gym workspace (resources server shinken_cua, train/validation/example data) "
        "for the tasks a probe receipt kept, and print the gym commands that run it.",
    )
    def _cmd(
        dest: Annotated[Path, typer.Option("--dest", help="Workspace folder to create (outside the shinken tree).")],
        task_root: Annotated[Path, typer.Option("--task-root", help="Folder of task bundles.")],
        ids_file: Annotated[Path, typer.Option("--ids-file", help="Probe receipt (its `kept` list) or a file of task ids.")],
        val_fraction: Annotated[float, typer.Option("--val-fraction", help="Share of tasks for validation.")] = 0.1,
        seed: Annotated[int, typer.Option("--seed", help="Split seed (same seed, same split).")] = 0,
        stratify: Annotated[str, typer.Option("--stratify", help="Task field to stratify by, or `none`.")] = "app_type",
        image: Annotated[str, typer.Option("--image", help="Sandbox image the server forks tasks from.")] = "shinken/sandbox-cua:latest",
        max_steps: Annotated[int, typer.Option("--max-steps", help="Agent step limit per rollout.")] = 30,
        license: Annotated[str, typer.Option("--license", help="Dataset license written into the config.")] = "TBD",
        force: Annotated[bool, typer.Option("--force", help="Replace an earlier shinken workspace at --dest.")] = False,
        json_out: JsonFlag = False,
    ) -> None:
        from shinken.workspace.writer import WorkspaceOptions, make_workspace

        res = make_workspace(WorkspaceOptions(
            dest=dest, task_root=task_root, ids_file=ids_file, val_fraction=val_fraction, seed=seed,
            stratify=stratify, image=image, max_steps=max_steps, license=license, force=force))
        if json_out:
            print_json(res.to_json())
            return
        out.print(f"workspace: {res.dest}")
        out.print(f"train: {len(res.train)}  validation: {len(res.validation)}  example: {len(res.example)}")
        out.print("run it with NeMo Gym 0.7.0 (python 3.13):")
        for line in res.commands:
            out.print(f"  {line}", soft_wrap=True, markup=False)
