"""`shinken probe`: check each runnable task on real forks (untouched state must score
< 1.0, forks must agree, recorded rollouts must reproduce) and write a receipt of the
tasks to keep. Resumable: receipts of finished tasks are appended durably as they finish."""

from __future__ import annotations

import signal
from enum import Enum
from pathlib import Path
from typing import Annotated, Optional

import typer

from shinken.cli.common import ConcurrencyOpt, IdsOpt, ImageOpt, JsonFlag, Output, TaskRootArg
from shinken.errors import WorkFailed
from shinken.images.build import DEFAULT_IMAGE

EXAMPLES = [
    "shinken probe data/cua-gym/tasks --triage out/triage.json --receipt out/receipt.json -c 2",
    "shinken probe demo --state-fidelity filesystem --json | jq .kept    # the demo set, receipt on stdout",
    "shinken probe demo --ids ids.txt --replay rollouts.jsonl    # re-score recorded NeMo Gym rollouts",
    "shinken probe tasks --judge-url http://127.0.0.1:8000/v1 --judge-model qwen2.5-7b    # rewards that call reward_judge",
    "shinken probe data/cua-gym/tasks --hub shinken/hub:latest --triage out/triage.json    # web tasks too",
    "shinken probe output/final --probes noop,oracle --receipt out/receipt.json    # golden_patch.py must pass its reward",
    "shinken probe tasks --probes noop,oracle,vandal --oracle solutions/ --receipt out/receipt.json",
]


class ExecutorKind(str, Enum):
    local = "local"
    ray = "ray"


class Alerts(str, Enum):
    keep = "keep"
    flag = "flag"
    drop = "drop"


class Fidelity(str, Enum):
    filesystem = "filesystem"
    process_memory = "process_memory"  # accepted so it can be refused with the reason (no CRIU here)


def _sigterm_to_interrupt() -> None:
    # A TERM (e.g. from a job runner) unwinds like Ctrl-C, so forks are removed on the way out.
    def handler(signum: int, frame: object) -> None:
        raise KeyboardInterrupt

    try:
        signal.signal(signal.SIGTERM, handler)
    except ValueError:  # not the main thread (embedded use)
        pass


def probe(
    task_root: TaskRootArg,
    image: ImageOpt = DEFAULT_IMAGE,
    receipt: Annotated[Optional[Path], typer.Option("--receipt", metavar="PATH", help="Write the final probe receipt (JSON) here.")] = None,
    triage: Annotated[Optional[Path], typer.Option("--triage", metavar="PATH", help="Triage report (`shinken triage --report`); only its runnable tasks are probed.")] = None,
    ids: IdsOpt = None,
    concurrency: ConcurrencyOpt = 1,
    repeats: Annotated[int, typer.Option("--repeats", "-k", min=1, help="No-op forks per task (>= 2 checks determinism).")] = 2,
    replay: Annotated[Optional[Path], typer.Option("--replay", help="NeMo Gym rollouts JSONL to replay and re-score.")] = None,
    retries: Annotated[int, typer.Option("--retries", min=0, help="Retries of infrastructure failures per task.")] = 3,
    state_fidelity: Annotated[Optional[Fidelity], typer.Option("--state-fidelity", help="filesystem: keep tasks whose start state is not checked (processes the setup left may be lost); process_memory: refused (no CRIU). Default: check it (tiers snapshot/relaunch/reprovision).")] = None,
    alerts: Annotated[Alerts, typer.Option("--alerts", help="A start state that shows an alert or first-run wizard (an app's error dialog, an account setup): keep it silently, flag it (kept, named in the receipt, table, report and dataset rows) or drop it.")] = Alerts.flag,
    executor: Annotated[ExecutorKind, typer.Option("--executor", help="local threads, or Ray tasks on Docker nodes.")] = ExecutorKind.local,
    ray_address: Annotated[Optional[str], typer.Option("--ray-address", help="Ray cluster to join (default: start a local one).")] = None,
    run_dir: Annotated[Optional[Path], typer.Option("--run-dir", help="Receipt log folder (default runs/probe-<hash of task root+image>).")] = None,
    reward_timeout: Annotated[float, typer.Option("--reward-timeout", min=1, help="Seconds a reward.py may run.")] = 120.0,
    setup_timeout: Annotated[float, typer.Option("--setup-timeout", min=1, help="Seconds the golden's setup may take.")] = 600.0,
    settle_timeout: Annotated[float, typer.Option("--settle-timeout", min=1, help="Seconds a golden build waits for the desktop the setup left to settle; a build whose desktop did not is redone once, waiting twice as long (docs/tiers.md).")] = 90.0,
    judge_url: Annotated[Optional[str], typer.Option("--judge-url", metavar="URL", help="OpenAI-compatible API base (e.g. http://127.0.0.1:8000/v1) for rewards that call reward_judge; key from $SHINKEN_JUDGE_API_KEY or $OPENAI_API_KEY (docs/judge.md).")] = None,
    judge_model: Annotated[Optional[str], typer.Option("--judge-model", metavar="NAME", help="Model name the judge endpoint serves (needed with --judge-url).")] = None,
    hub: Annotated[Optional[str], typer.Option("--hub", metavar="IMAGE", envvar="SHINKEN_HUB_IMAGE",
                                               help="Hub image (`shinken hub build`) serving the mock web apps web tasks use.")] = None,
    mock_urls: Annotated[Optional[Path], typer.Option("--mock-urls", metavar="FILE",
                                                      help="Placeholders -> mock apps you run elsewhere (flat JSON or url_variables.json).")] = None,
    oracle: Annotated[Optional[Path], typer.Option("--oracle", metavar="DIR", help="Per-task solution scripts (<task id>.py|.sh or <task id>/golden_patch.py), run like a bundle's own golden_patch.py.")] = None,
    probes: Annotated[str, typer.Option("--probes", metavar="LIST", help="Probes to run, comma-separated: noop (always), oracle (a task's golden_patch.py or --oracle script must pass its reward), vandal (the reward must not pass with the setup's files removed or garbled). Default noop: each of the others adds ~15% to a first probe (docs/probe.md).")] = "noop",
    media: Annotated[bool, typer.Option("--media/--no-media", help="Keep a small screenshot of each desktop task's start state and a short recording of each solution that ran (oracle, replay), in the run dir, for `shinken report --tasks`.")] = True,
    json_out: JsonFlag = False,
) -> None:
    """Probe runnable tasks on forks of their golden state; write a receipt of tasks to keep.

    Each task's golden checkpoint is built once and forked per probe: untouched state must
    score below 1.0, forks must agree, recorded rollouts must reproduce. Resumable: the same
    command again skips every task that already has a receipt line.
    """
    from shinken.judge.config import JudgeConfig
    from shinken.probes.display import ProbeDisplay, dropped_lines, final_table, summary_text
    from shinken.probes.pipeline import ProbeRequest, run_probe

    _sigterm_to_interrupt()
    output = Output(json_out)
    req = ProbeRequest(
        task_root=task_root, image=image, receipt=receipt, triage=triage, ids=ids, concurrency=concurrency,
        repeats=repeats, replay=replay, retries=retries,
        state_fidelity=state_fidelity.value if state_fidelity else None, alerts=alerts.value, executor=executor.value,
        ray_address=ray_address, run_dir=run_dir, reward_timeout=reward_timeout, setup_timeout=setup_timeout,
        settle_timeout=settle_timeout,
        judge=JudgeConfig.create(judge_url, judge_model),
        hub=hub, mock_urls=mock_urls, oracle=oracle,
        probes=tuple(dict.fromkeys(p.strip() for p in probes.split(",") if p.strip())), media=media,
    )
    with ProbeDisplay(output.err, live=output.live) as display:
        doc = run_probe(req, display)

    def render() -> None:
        output.table(final_table(doc))
        for text in dropped_lines(doc):
            output.line(text)
        output.line(summary_text(doc))

    output.result(doc, render)
    if doc["summary"]["by_reason"].get("infra_error"):
        raise WorkFailed("some tasks hit infrastructure failures after every retry; "
                         "re-run the same command to retry them")
