"""`shinken make-workspace`: a NeMo Gym 0.7.0 environment (manifest, resources server, data,
verifier cases, the task bundles) for kept tasks."""

from __future__ import annotations

from pathlib import Path
from typing import Annotated, Optional

import typer

from shinken.cli.common import IdsRequiredOpt, ImageOpt, JsonFlag, Output, TaskRootOpt
from shinken.images.build import DEFAULT_IMAGE

EXAMPLES = [
    "shinken make-workspace --dest ~/cua-ws --task-root data/cua-gym/tasks --ids out/receipt.json"
    "  # license from the download's dataset card",
    "shinken make-workspace --dest ~/cua-ws --task-root demo --ids out/demo/receipt.json "
    "--rollouts demo/solutions.jsonl --license Apache-2.0 --force  # the demo, with a full-reward verifier case",
    "shinken make-workspace --dest ~/cua-ws --task-root demo --ids kept.txt --val-fraction 0.2 --json",
    "shinken make-workspace --dest ~/cua-vl --task-root demo --ids out/demo/receipt.json --license Apache-2.0 "
    "--observation screenshot --actions pixel --no-exec  # vision-language policies, GUI only",
    "shinken make-workspace --dest ~/cua-ws --task-root data/cua-gym/tasks --ids out/receipt.json --hub shinken/hub:latest"
    "  # web tasks: the server starts the hub",
]


def make_workspace(
    dest: Annotated[Path, typer.Option("--dest", help="Workspace folder to create (outside the shinken tree).")],
    task_root: TaskRootOpt,
    ids: IdsRequiredOpt,
    rollouts: Annotated[Optional[list[Path]], typer.Option(
        "--rollouts", help="Recorded rollouts (the JSONL given to `shinken probe --replay`); those the probe "
                           "replayed with reward 1.0 become full-reward verifier cases. Repeatable.")] = None,
    name: Annotated[str, typer.Option("--name", help="Environment and resources-server name.")] = "shinken_cua",
    author: Annotated[Optional[list[str]], typer.Option(
        "--author", help="Author for the manifest (repeatable); default: git user.name, else the login name.")] = None,
    license: Annotated[Optional[str], typer.Option(
        "--license", help="SPDX license of the tasks (e.g. CC-BY-4.0); default: the dataset card's, from the "
                          "task root's .shinken-source.json. `unknown` only if you mean it.")] = None,
    dataset_license: Annotated[Optional[str], typer.Option(
        "--dataset-license", help="NeMo Gym dataset license label, when the SPDX license has none.")] = None,
    val_fraction: Annotated[float, typer.Option("--val-fraction", help="Share of tasks for validation.")] = 0.1,
    seed: Annotated[int, typer.Option("--seed", help="Split seed (same seed, same split).")] = 0,
    stratify: Annotated[str, typer.Option("--stratify", help="Task field to stratify by, or `none`.")] = "app_type",
    image: ImageOpt = DEFAULT_IMAGE,
    max_steps: Annotated[int, typer.Option("--max-steps", help="Agent step limit per rollout.")] = 30,
    force: Annotated[bool, typer.Option("--force", help="Replace an earlier shinken workspace at --dest.")] = False,
    hub: Annotated[Optional[str], typer.Option("--hub", metavar="IMAGE", envvar="SHINKEN_HUB_IMAGE",
                                               help="Hub image the server runs for web tasks (as given to probe).")] = None,
    mock_urls: Annotated[Optional[Path], typer.Option("--mock-urls", metavar="FILE",
                                                      help="Mock URL map the server uses for web tasks (as given to probe).")] = None,
    observation: Annotated[str, typer.Option(
        "--observation", help="What the policy sees: a11y (the accessibility tree as text), screenshot (a screenshot "
                              "at seed time and after every action), both.")] = "a11y",
    actions: Annotated[str, typer.Option(
        "--actions", help="Tools: shinken (element ids or points), pixel (click/double_click/right_click/drag/scroll/"
                          "move at pixels, type, key, wait, done), pyautogui (one tool running a short pyautogui "
                          "program; WAIT/DONE/FAIL).")] = "shinken",
    no_exec: Annotated[bool, typer.Option(
        "--no-exec", help="No shell tool (nor unchecked Python): desktop tasks must be done through the GUI.")] = False,
    screenshot_size: Annotated[Optional[str], typer.Option(
        "--screenshot-size", metavar="WxH", help="Scale screenshots (and the policy's coordinates) to WxH; "
                                                 "default the display's size.")] = None,
    screenshot_format: Annotated[str, typer.Option("--screenshot-format", help="png, jpeg or webp.")] = "png",
    screenshot_quality: Annotated[int, typer.Option("--screenshot-quality", help="JPEG/WebP quality 1-100.")] = 80,
    screenshot_history: Annotated[Optional[int], typer.Option(
        "--screenshot-history", metavar="N", help="Keep only the last N screenshots in the model's context (default: "
                                                  "all; N is not safe for NeMo RL's exact-prefix check).")] = None,
    json_out: JsonFlag = False,
) -> None:
    """Write a NeMo Gym environment for the tasks a probe receipt kept.

    The workspace holds the environment's manifest, the resources server shinken_cua (it forks
    each task's golden and serves the computer-use tools), train/validation/example data,
    verifier cases built from the probe's evidence and the task bundles themselves, with every
    path relative to it. The gym commands that check it (Gym's gates) and run it are printed.
    """
    from shinken.computer.profiles import Profile, parse_size
    from shinken.workspace.writer import WorkspaceOptions
    from shinken.workspace.writer import make_workspace as write_workspace

    output = Output(json_out)
    profile = Profile(observation=observation, actions=actions, exec=not no_exec, image_format=screenshot_format,
                      quality=screenshot_quality, size=parse_size(screenshot_size))
    res = write_workspace(WorkspaceOptions(
        dest=dest, task_root=task_root, ids_file=ids, val_fraction=val_fraction, seed=seed,
        stratify=stratify, image=image, max_steps=max_steps, license=license, dataset_license=dataset_license,
        name=name, authors=list(author or []), rollouts=list(rollouts or []), force=force, hub=hub,
        mock_urls=mock_urls, profile=profile, screenshot_history=screenshot_history))
    for note in res.notes:
        output.note(f"shinken: note: {note}")

    def render() -> None:
        s = res.store
        output.line(f"workspace: {res.dest}  (environment {res.name}, license {res.license}, "
                    f"determinism {res.determinism})")
        output.line(f"train: {len(res.train)}  validation: {len(res.validation)}  example: {len(res.example)}")
        output.line(f"bundles: {s['bundles']} ({s['files']} files, {s['bytes_total']} bytes; {s['bytes_stored']} bytes "
                    f"stored, {s['linked_files']} identical files linked)")
        output.line("verifier cases: " + ", ".join(f"{n} {k}" for k, n in res.verifier_cases.items()))
        output.line("check and run it with NeMo Gym 0.7.0 (python 3.13):")
        for line in res.commands:
            output.line(f"  {line}")

    output.result(res.to_json(), render)
