"""`shinken probe`: check each runnable task on real forks (untouched state must score
< 1.0, forks must agree, recorded rollouts must reproduce) and write a receipt of the
tasks to keep. Resumable: receipts of finished tasks are appended durably as they finish."""

from __future__ import annotations

import signal
from enum import Enum
from pathlib import Path
from typing import Annotated, Optional

import typer

from shinken.cli.common import DEFAULT_IMAGE, ConcurrencyOpt, ImageOpt, JsonFlag, TaskRootArg, err, out, print_json
from shinken.errors import EXIT_FAILED


class ExecutorKind(str, Enum):
    local = "local"
    ray = "ray"


class Fidelity(str, Enum):
    filesystem = "filesystem"


def _sigterm_to_interrupt() -> None:
    # A TERM (e.g. from a job runner) unwinds like Ctrl-C, so forks are removed on the way out.
    def handler(signum: int, frame: object) -> None:
        raise KeyboardInterrupt

    try:
        signal.signal(signal.SIGTERM, handler)
    except ValueError:  # not the main thread (embedded use)
        pass


def register(app: typer.Typer) -> None:
    @app.command("probe", help="Probe runnable tasks on forks of their golden state; write a receipt of tasks to keep.")
    def probe(
        task_root: TaskRootArg,
        image: ImageOpt = DEFAULT_IMAGE,
        receipt: Annotated[Optional[Path], typer.Option("--receipt", help="Write the final probe receipt (JSON) here.")] = None,
        triage: Annotated[Optional[Path], typer.Option("--triage", help="Triage report; only its runnable tasks are probed.")] = None,
        ids: Annotated[Optional[Path], typer.Option("--ids", help="File of task ids (one a line) to probe.")] = None,
        concurrency: ConcurrencyOpt = 1,
        repeats: Annotated[int, typer.Option("--repeats", "-k", min=1, help="No-op forks per task (>= 2 checks determinism).")] = 2,
        replay: Annotated[Optional[Path], typer.Option("--replay", help="NeMo Gym rollouts JSONL to replay and re-score.")] = None,
        retries: Annotated[int, typer.Option("--retries", min=0, help="Retries of infrastructure failures per task.")] = 3,
        state_fidelity: Annotated[Optional[Fidelity], typer.Option("--state-fidelity", help="Accept keeping only the filesystem for tasks that would need process memory.")] = None,
        executor: Annotated[ExecutorKind, typer.Option("--executor", help="local threads, or Ray tasks on Docker nodes.")] = ExecutorKind.local,
        ray_address: Annotated[Optional[str], typer.Option("--ray-address", help="Ray cluster to join (default: start a local one).")] = None,
        run_dir: Annotated[Optional[Path], typer.Option("--run-dir", help="Receipt log folder (default runs/probe-<hash of task root+image>).")] = None,
        reward_timeout: Annotated[float, typer.Option("--reward-timeout", min=1, help="Seconds a reward.py may run.")] = 120.0,
        setup_timeout: Annotated[float, typer.Option("--setup-timeout", min=1, help="Seconds the golden's setup may take.")] = 600.0,
        json_out: JsonFlag = False,
    ) -> None:
        from shinken.probes.display import ProbeDisplay, dropped_lines, final_table, summary_text
        from shinken.probes.pipeline import ProbeRequest, run_probe

        _sigterm_to_interrupt()
        req = ProbeRequest(
            task_root=task_root, image=image, receipt=receipt, triage=triage, ids=ids, concurrency=concurrency,
            repeats=repeats, replay=replay, retries=retries,
            state_fidelity=state_fidelity.value if state_fidelity else None, executor=executor.value,
            ray_address=ray_address, run_dir=run_dir, reward_timeout=reward_timeout, setup_timeout=setup_timeout,
        )
        display: ProbeDisplay | None = None

        def on_start(total: int, resumed: int) -> None:
            nonlocal display
            display = ProbeDisplay(err, total - resumed, resumed, enabled=err.is_terminal)
            display.__enter__()
            if resumed:
                err.print(f"resuming: {resumed} of {total} task(s) already have receipts")

        def on_result(line: dict) -> None:
            if display is not None:
                display.task_done(line)
            if not err.is_terminal:  # a log line per task when there is no live display
                err.print(f"{line['task_id']}: {line['outcome']}" + (f" ({line['reason']})" if line["reason"] else ""),
                          soft_wrap=True)

        def on_retry(task_id: str, attempt: int, why: str) -> None:
            if display is not None:
                display.retry(task_id, attempt, why)
            if not err.is_terminal:
                err.print(f"{task_id}: infrastructure failure on attempt {attempt}, retrying ({why})", soft_wrap=True)

        try:
            doc = run_probe(req, on_start=on_start, on_result=on_result, on_retry=on_retry)
        finally:
            if display is not None:
                display.__exit__(None, None, None)
        if json_out:
            print_json(doc)
        else:
            out.print(final_table(doc))
            for text in dropped_lines(doc):
                out.print(text, soft_wrap=True, markup=False)
            out.print(summary_text(doc))
        if doc["summary"]["by_reason"].get("infra_error"):
            err.print("some tasks hit infrastructure failures after every retry; re-run the same command to retry them")
            raise typer.Exit(EXIT_FAILED)
