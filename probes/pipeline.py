"""`shinken probe` end to end, without the CLI: pick the runnable tasks, skip those the
receipt log already settles, probe the rest on an executor, append each result durably,
and build the final receipt from the log."""

from __future__ import annotations

import contextlib
import hashlib
import os
import threading
import time
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING, Any, Protocol


from shinken.bundles.loader import load_root
from shinken.bundles.model import Bundle
from shinken.bundles.selection import read_task_ids
from shinken.errors import ShinkenError
from shinken.judge.config import JudgeConfig
from shinken.probes.executors import Job, LocalExecutor, RayExecutor, make_executor
from shinken.probes import media_store
from shinken.probes.final_receipt import build_receipt
from shinken.probes.oracle import Oracle, bundle_oracle, oracle_dir
from shinken.probes.receipts import ReceiptLog
from shinken.probes.rollouts import Rollout, load_rollouts
from shinken.probes.runner import ALERT_MODES, DEFAULT_PROBES, PROBES, ProbeConfig, dropped_line
from shinken.schemas import read_json, write_json

if TYPE_CHECKING:
    from shinken.mockweb.runs import WebPlan

RUNNABLE_VERDICTS = frozenset({"runnable"})


@dataclass
class ProbeRequest:
    task_root: Path
    image: str
    receipt: Path | None = None
    triage: Path | None = None
    ids: Path | None = None
    concurrency: int = 1
    repeats: int = 2
    replay: Path | None = None
    retries: int = 3
    state_fidelity: str | None = None  # None: check the start state (tiers); "filesystem": accept losing processes
    alerts: str = "flag"  # --alerts keep|flag|drop (probes.runner.ALERT_MODES)
    executor: str = "local"
    ray_address: str | None = None
    run_dir: Path | None = None
    reward_timeout: float = 120.0
    setup_timeout: float = 600.0
    settle_timeout: float = 90.0  # --settle-timeout (sandbox.docker_provider.settle_bounds)
    judge: JudgeConfig | None = None  # --judge-url/--judge-model
    backoff_s: float = 1.0
    hub: str | None = None  # hub image serving the mock web apps (mockweb)
    mock_urls: Path | None = None  # placeholder map to mocks run elsewhere (or name bindings with hub)
    oracle: Path | None = None  # --oracle DIR: per-task solution scripts (beside golden_patch.py in bundles)
    probes: tuple[str, ...] = DEFAULT_PROBES  # --probes: noop always; oracle when a task has one; vandal
    media: bool = True  # --no-media: no start screenshots, no recordings (probes/media.py)
    # How long a retry waits for a restarted engine to answer again (env: tests and slow hosts).
    engine_wait_s: float = field(default_factory=lambda: float(os.environ.get("SHINKEN_PROBE_ENGINE_WAIT", "90")))


class ProbeListener(Protocol):
    """What a probe run tells whoever watches it (probes.display.ProbeDisplay for a person).
    `started` and `finished` are called from the driver thread, `retrying` from workers."""

    def started(self, total: int, resumed: int) -> None: ...

    def finished(self, line: dict[str, Any]) -> None: ...

    def retrying(self, task_id: str, attempt: int, why: str) -> None: ...


class SilentListener:
    def started(self, total: int, resumed: int) -> None:
        pass

    def finished(self, line: dict[str, Any]) -> None:
        pass

    def retrying(self, task_id: str, attempt: int, why: str) -> None:
        pass


@dataclass
class Plan:
    bundles: list[Bundle]
    dropped: dict[str, tuple[str, str]] = field(default_factory=dict)  # id -> (reason, detail), no Docker needed
    rollouts: dict[str, tuple[Rollout, ...]] = field(default_factory=dict)
    oracles: dict[str, Oracle] = field(default_factory=dict)
    web: WebPlan | None = None  # when the run serves mock web apps
    # id -> why its golden_patch.py is not used (binary, too large, unreadable): on its receipt line
    oracle_notes: dict[str, str] = field(default_factory=dict)


def default_run_dir(task_root: Path, image: str) -> Path:
    """Same task root + image -> same run dir, so re-running the command resumes."""
    h = hashlib.sha256(f"{Path(task_root).resolve()}\0{image}".encode()).hexdigest()[:12]
    return Path("runs") / f"probe-{h}"


def resolve_image(image: str) -> str:
    """The id `image` names at the start of the run; every golden of the run is built on it."""
    from shinken.sandbox.docker_client import connect, resolve_image as resolve

    client = connect(timeout=30)
    try:
        return resolve(client, image)
    finally:
        client.close()


def _triage_entries(doc: Any, path: Path) -> list[dict[str, Any]]:
    tasks = doc.get("tasks") if isinstance(doc, dict) else doc
    if not isinstance(tasks, list):
        raise ShinkenError(f"{path}: no task list; pass the file `shinken triage --report PATH` wrote")
    return [t for t in tasks if isinstance(t, dict)]


def _reason_text(r: Any) -> str:
    if isinstance(r, dict):
        return ": ".join(str(x) for x in (r.get("code"), r.get("detail")) if x) or str(r)
    return str(r)


def _triage_verdict(entry: dict[str, Any], judge: bool = False) -> tuple[str | None, str, str]:
    """(id, verdict, reasons text) of one `tasks[]` entry of a shinken.triage/1 report.
    With a judge configured, a task blocked only for want of one (`needs_judge`) runs."""
    tid = entry.get("id")
    verdict = str(entry.get("verdict") or "")
    reasons = entry.get("reasons") or []
    if judge and verdict == "blocked" and isinstance(reasons, list):
        blockers = {r.get("code") for r in reasons if isinstance(r, dict) and r.get("severity") == "blocker"}
        if blockers == {"needs_judge"}:
            verdict = "runnable"
    if isinstance(reasons, list):
        # Notes do not explain a verdict; keep the blockers/defects when severities are given.
        strong = [r for r in reasons if isinstance(r, dict) and r.get("severity") in ("blocker", "defect")]
        reasons = "; ".join(_reason_text(r) for r in (strong or reasons))
    return (tid if isinstance(tid, str) else None), verdict, str(reasons)


def _overlap(entry: dict[str, Any]) -> str | None:
    """The benchmark_overlap reason's detail when it blocks the task (triage drops tasks that
    are a benchmark's test task unless --keep-benchmark-overlap made it a note)."""
    for r in entry.get("reasons") or []:
        if isinstance(r, dict) and r.get("code") == "benchmark_overlap" and r.get("severity") == "blocker":
            return str(r.get("detail") or "")
    return None


def _verdicts_from_triage(path: Path, judge: bool = False) -> dict[str, tuple[str, str]]:
    """Task id -> ("runnable" | "defective" | "blocked" | "benchmark_overlap", detail) from a triage report."""
    doc = read_json(path, "triage report", "pass the file `shinken triage --report PATH` wrote")
    out: dict[str, tuple[str, str]] = {}
    for e in _triage_entries(doc, path):
        tid, verdict, detail = _triage_verdict(e, judge)
        if tid is None:
            continue
        overlap = _overlap(e) if verdict == "blocked" else None
        if overlap is not None:  # its own reason: a data decision, not something the image lacks
            out[tid] = ("benchmark_overlap", f"triage: {overlap}")
        elif verdict in RUNNABLE_VERDICTS:
            out[tid] = ("runnable", detail)
        elif verdict == "defective":
            out[tid] = ("defective", detail or "triage: defective")
        else:
            out[tid] = ("blocked", f"triage: {verdict}" + (f": {detail}" if detail else ""))
    return out


def _triage_now(task_root: Path, bundles: list[Bundle], image: str, judge_url: str | None = None,
                web: WebPlan | None = None) -> dict[str, tuple[str, str]]:
    """Triage with the triage package (same analysis as `shinken triage`).

    Only `blocked` verdicts are taken from a triage run here: a static `defective` verdict
    on the reward script (no REWARD marker, syntax error, ...) is a prediction the probe can
    check by running it, and the probe records the evidence (reward_error with the output).
    Loader defects are fatal either way (Bundle.ok). A triage report passed with --triage
    is the user's decision and is followed as written."""
    from shinken.triage.pipeline import triage_task_root

    ids = {b.id for b in bundles}
    outcome = triage_task_root(task_root, image=image, judge_url=judge_url, web=web)
    report = [t for t in outcome.report["tasks"] if t.get("id") in ids]
    out: dict[str, tuple[str, str]] = {}
    for e in _triage_entries(report, Path("<triage>")):
        tid, verdict, detail = _triage_verdict(e)
        overlap = _overlap(e) if verdict == "blocked" else None
        if tid is not None and overlap is not None:
            out[tid] = ("benchmark_overlap", f"triage: {overlap}")
        elif tid is not None and verdict == "blocked":
            out[tid] = ("blocked", f"triage: {verdict}: {detail}")
    return out


def plan(req: ProbeRequest, image_id: Callable[[], str] | None = None) -> Plan:
    """The bundles to probe and those dropped without probing. `image_id` gives the id the
    run resolved once; the probe's own triage (no --triage) inspects that image, not the ref."""
    bundles = load_root(req.task_root)
    if req.ids is not None:
        wanted = read_task_ids(req.ids)
        by_id = {b.id: b for b in bundles}
        missing = [i for i in wanted if i not in by_id]
        if missing:
            raise ShinkenError(f"{req.ids}: {len(missing)} id(s) not under {req.task_root}: {', '.join(missing[:5])}")
        bundles = [by_id[i] for i in dict.fromkeys(wanted)]
    dropped: dict[str, tuple[str, str]] = {}
    judge = req.judge is not None
    triage = _verdicts_from_triage(req.triage, judge) if req.triage else None
    web = _web_plan(req)  # the hub image is looked up once per run: the triage below reuses it
    if triage is None:
        triage = _triage_now(req.task_root, bundles, image_id() if image_id else req.image,
                             req.judge.url if req.judge else None, web)
    for b in bundles:
        if not b.ok:
            dropped[b.id] = ("defective", b.why_defective())
        elif (v := triage.get(b.id)) is None:
            if req.triage:  # the report decides the scope: unknown tasks are not run
                dropped[b.id] = ("blocked", f"not in triage report {req.triage}")
        elif v[0] != "runnable":
            dropped[b.id] = v  # blocked, defective or benchmark_overlap
    if web is not None:  # web tasks run on copies with the mock addresses of this run
        for i, b in enumerate(bundles):
            if b.id not in dropped:
                bundles[i], blocked = web.prepare(b)
                if blocked:
                    dropped[b.id] = ("blocked", blocked)
    rollouts = load_rollouts(req.replay) if req.replay else {}
    unknown = sorted(set(rollouts) - {b.id for b in bundles})
    if unknown and req.ids is None:
        raise ShinkenError(f"{req.replay}: rollouts for {len(unknown)} task(s) not under {req.task_root}: "
                           f"{', '.join(unknown[:5])}")
    oracles, notes = _oracles(req, bundles)
    return Plan(bundles, dropped, rollouts, oracles, web, notes)


def _oracles(req: ProbeRequest, bundles: list[Bundle]) -> tuple[dict[str, Oracle], dict[str, str]]:
    """Task id -> its oracle: the --oracle DIR script, else the bundle's golden_patch.py; and task
    id -> why a bundle's golden_patch.py cannot be used (unreadable, binary, too large): such a task
    is probed without an oracle and its receipt line says why (`oracle_note`)."""
    if "oracle" not in req.probes:
        return {}, {}
    out = oracle_dir(req.oracle, [b.id for b in bundles]) if req.oracle is not None else {}
    notes: dict[str, str] = {}
    for b in bundles:
        if b.id not in out:
            try:
                found = bundle_oracle(b.id, b.path, b.files)
            except ShinkenError as exc:
                found = None
                notes[b.id] = f"no oracle run: {exc}"
            if found is not None:
                out[b.id] = found
    return out, notes


def _web_plan(req: ProbeRequest) -> WebPlan | None:
    from shinken.mockweb.runs import web_plan

    return web_plan(req.hub, req.mock_urls)


def run_probe(req: ProbeRequest, listener: ProbeListener | None = None, *,
              executor: LocalExecutor | RayExecutor | None = None) -> dict[str, Any]:
    """Probe and return the final receipt (also written to req.receipt when given)."""
    listener = listener or SilentListener()
    if req.repeats < 1:
        raise ShinkenError("--repeats must be at least 1")
    if req.state_fidelity == "process_memory":
        raise ShinkenError("--state-fidelity process_memory: checkpointing process memory needs CRIU, which does not "
                           "work on this kernel; drop the option (the default relaunches and checks the setup's "
                           "apps, or re-provisions) or pass --state-fidelity filesystem to skip the check")
    if req.alerts not in ALERT_MODES:
        raise ShinkenError(f"--alerts {req.alerts}: use keep, flag or drop")
    unknown = [x for x in req.probes if x not in PROBES]
    if unknown or "noop" not in req.probes:
        raise ShinkenError(f"--probes {','.join(req.probes)}: choose from {','.join(PROBES)}; noop is always part "
                           "of a probe (it decides the start state)")
    if req.state_fidelity not in (None, "filesystem"):
        raise ShinkenError(f"--state-fidelity {req.state_fidelity}: use filesystem, or leave it out")
    t0 = time.monotonic()
    resolved: list[str] = []

    def resolved_image_id() -> str:  # once per run, after the input checks (usage errors first)
        if not resolved:
            resolved.append(resolve_image(req.image))
        return resolved[0]

    p = plan(req, resolved_image_id)
    image_id = resolved_image_id()
    run_dir = Path(req.run_dir) if req.run_dir else default_run_dir(req.task_root, req.image)
    cfg = ProbeConfig(image=req.image, image_id=image_id, repeats=req.repeats, retries=req.retries,
                      accept_filesystem=req.state_fidelity == "filesystem", reward_timeout=req.reward_timeout,
                      setup_timeout=req.setup_timeout, settle_timeout=req.settle_timeout, run_id=run_dir.name, backoff_s=req.backoff_s,
                      engine_wait_s=req.engine_wait_s, judge=req.judge, alerts=req.alerts, probes=tuple(req.probes),
                      media=req.media)
    probed = 0
    with ReceiptLog(run_dir) as log, contextlib.ExitStack() as stack:
        todo: list[Job] = []
        decided: list[dict[str, Any]] = []
        resumed = 0
        for b in p.bundles:
            ro = p.rollouts.get(b.id, ())
            orc = p.oracles.get(b.id)
            if log.finished(b.id, (b.bundle_hash, image_id, cfg.task_hash(b, ro, orc))) is not None:
                resumed += 1
            elif b.id in p.dropped:
                decided.append(dropped_line(b, cfg, *p.dropped[b.id], ro, orc))
            else:
                todo.append(Job(b, ro, orc))
        web_session = _open_web(p, todo, req, run_dir.name, stack)
        ex = executor or make_executor(req.executor, req.concurrency, ray_address=req.ray_address,
                                       provider_factory=_web_factory(web_session, cfg))
        if isinstance(ex, LocalExecutor) and web_session is not None and ex.provider_factory is None:
            ex.provider_factory = _web_factory(web_session, cfg)
        if isinstance(ex, RayExecutor) and ex.web is None:
            ex.web = p.web  # web tasks use the hub of the host each runs on (its agent's)
        listener.started(len(p.bundles), resumed)

        def record(line: dict[str, Any]) -> None:
            nonlocal probed
            note = p.oracle_notes.get(line["task_id"])
            if note is not None and line.get("oracle") is None:
                line = {**line, "oracle_note": note}
            line = media_store.store(run_dir, line)  # its images into the run dir, their paths in the line
            log.append(line)
            probed += 1
            listener.finished(line)

        for line in decided:
            record(line)
        stop = threading.Event()
        try:
            ex.run(todo, cfg, record, on_retry=listener.retrying, stop=stop)
        finally:
            if isinstance(ex, RayExecutor) and executor is None:
                ex.shutdown()
        wall = time.monotonic() - t0
        run_info = {
            "task_root": str(req.task_root),
            "run_dir": str(run_dir),
            "probed": probed,
            "resumed": resumed,
            "wall_s": round(wall, 3),
            "tasks_per_hour": round(probed / wall * 3600, 1) if probed and wall > 0 else None,
            "repeats": req.repeats,
            "concurrency": req.concurrency,
            "executor": ex.name,
            "state_fidelity": req.state_fidelity,
            "alerts": req.alerts,
            "judge": req.judge.describe() if req.judge is not None else None,
            "probes": list(req.probes),
        }
        doc = build_receipt(image_ref=req.image, image_id=image_id, task_ids=[b.id for b in p.bundles],
                            lines=log.latest, run_info=run_info)
    if req.receipt is not None:
        write_json(Path(req.receipt), doc, "probe_receipt")
    return doc


def _open_web(p: Plan, todo: list[Job], req: ProbeRequest, run_id: str, stack: contextlib.ExitStack) -> Any:
    """The run's WebSession (hub container + network) when a web task is to be probed."""
    from shinken.mockweb.materialize import marker_of
    from shinken.mockweb.runs import is_web

    if p.web is None or not any(is_web(j.bundle) for j in todo):
        return None
    if req.executor != "local":
        return None  # on Ray, each Docker host's agent owns that host's hub (probes/executors.py)
    from shinken.sandbox.docker_client import connect

    session = p.web.session(connect(), run_id=run_id)
    stack.callback(session.close)  # after the executor drained its cleanups (LocalExecutor.run)
    # The apps start while the first goldens' containers and desktops come up.
    session.warm(sorted({name for j in todo for name in (marker_of(j.bundle) or {}).get("apps", {})}))
    return session


def _web_factory(session: Any, cfg: ProbeConfig) -> Any:
    if session is None:
        return None

    def make() -> Any:
        from shinken.sandbox.docker_provider import DockerProvider

        return DockerProvider(run_id=cfg.run_id, judge=cfg.judge, web=session)
    return make
