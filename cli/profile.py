"""`shinken profile`: how often a policy solves each task, from NeMo Gym rollouts; the tasks
in the band where RL learns, and a control sample of the same size."""

from __future__ import annotations

from pathlib import Path
from typing import Annotated, Optional

import typer

from shinken.cli.common import JsonFlag, Output, TaskRootOpt

EXAMPLES = [
    "shinken profile results/rollouts.jsonl --task-root data/cua-gym/tasks --out out/profile",
    "shinken profile results/run2/ --task-root demo --receipt out/demo/receipt.json --out out/profile"
    "  # add a second run's rollouts to the same profile",
    "shinken profile results/ --task-root demo --out out/profile --min-pass 0.2 --max-pass 0.8 --json",
]


def profile(
    rollouts: Annotated[list[Path], typer.Argument(help="Rollout JSONL files (or folders of them) from `gym eval run`.")],
    task_root: TaskRootOpt,
    out_dir: Annotated[Path, typer.Option("--out", help="Folder for profile.json, band.json, control.json; re-runs add to it.")],
    receipt: Annotated[Optional[Path], typer.Option("--receipt", help="Probe receipt: every kept task is listed (unmeasured ones as insufficient), with its tier.")] = None,
    min_pass: Annotated[float, typer.Option("--min-pass", help="Pass rate at or below which a task is too hard.")] = 0.1,
    max_pass: Annotated[float, typer.Option("--max-pass", help="Pass rate at or above which a task is too easy.")] = 0.9,
    pass_threshold: Annotated[float, typer.Option("--pass-threshold", help="Reward that counts as a pass (partial rewards below it fail).")] = 1.0,
    min_rollouts: Annotated[int, typer.Option("--min-rollouts", help="Scored rollouts a task needs to be measured.")] = 4,
    control: Annotated[bool, typer.Option("--control/--no-control", help="Write control.json.")] = True,
    seed: Annotated[int, typer.Option("--seed", help="Seed of the control sample.")] = 0,
    reset: Annotated[bool, typer.Option("--reset", help="Forget the rollouts earlier runs recorded in --out.")] = False,
    show: Annotated[int, typer.Option("--show", min=0, help="Task rows to show in the table.")] = 20,
    json_out: JsonFlag = False,
) -> None:
    """Profile tasks from NeMo Gym rollouts: pass rate per task, the band, a control sample.

    Reads `gym eval run --num-repeats K` output (several files and runs accumulate in --out)
    and writes solved.jsonl (one rollout per task that scored 1.0, for `probe --replay` and
    `make-workspace --rollouts`), profile.json, band.json (tasks with min-pass < pass rate < max-pass) and
    control.json (a seeded sample of the measured tasks, as many as the band); both id files
    work with `make-workspace --ids`. Masked rollouts are excluded, never scored as failures.
    """
    from shinken.profiles.bands import Settings
    from shinken.profiles.display import render
    from shinken.profiles.run import BAND_FILE, CONTROL_FILE, OUTCOMES_FILE, PROFILE_FILE, ProfileRequest, \
        outcomes_jsonl, run_profile
    from shinken.profiles.solved import SOLVED_FILE, solved_lines
    from shinken.schemas import write_bytes, write_json

    output = Output(json_out)
    res = run_profile(ProfileRequest(
        rollouts=rollouts, task_root=task_root, out=out_dir, receipt=receipt, reset=reset,
        settings=Settings(min_pass=min_pass, max_pass=max_pass, pass_threshold=pass_threshold,
                          min_rollouts=min_rollouts, seed=seed, control=control)))
    write_bytes(out_dir / OUTCOMES_FILE, outcomes_jsonl(res.outcomes))
    solved = solved_lines(res.outcomes)
    write_bytes(out_dir / SOLVED_FILE, b"".join(line + b"\n" for line in solved))
    write_json(out_dir / BAND_FILE, res.band, "task_ids")
    if res.control is not None:
        write_json(out_dir / CONTROL_FILE, res.control, "task_ids")
    else:
        (out_dir / CONTROL_FILE).unlink(missing_ok=True)  # a control of an earlier band would mislead
    write_json(out_dir / PROFILE_FILE, res.doc, "profile")  # last: its presence means the folder is complete
    def show_profile() -> None:
        for part in render(res.doc, show):
            output.line(part) if isinstance(part, str) else output.table(part)

    output.result(res.doc, show_profile)
    for read in res.doc["reads"][-len(res.files):]:
        if not read["rollouts"] and not read["path"].endswith("_failures.jsonl"):
            output.warn(f"{read['path']} holds no rollouts (is its gym eval run still going?)")
    if not res.band:
        output.warn("the band is empty: no task's pass rate lies strictly between --min-pass and --max-pass")
    output.note(f"profile written to {out_dir / PROFILE_FILE}; band: {len(res.band)} task(s) in {out_dir / BAND_FILE}"
                + (f", control: {len(res.control)} in {out_dir / CONTROL_FILE}" if res.control is not None else "")
                + f"; {len(solved)} solved rollout(s) to replay in {out_dir / SOLVED_FILE} (`shinken probe --replay`, "
                  "then `make-workspace --rollouts`: full_reward verifier cases)")
