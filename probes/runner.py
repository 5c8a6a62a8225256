"""Probe one task: build (or reuse) its golden, then K no-op probes (on the golden's own build
computer when it was built now, and on forks: fork, post-fork replay, postconfig, reward) and
optional rollout replays. Pure of any executor: the
local thread pool and Ray both call `probe_task` and get a plain dict back (a receipt
line). Infrastructure failures are retried here and never counted against the task."""

from __future__ import annotations

import hashlib
import socket
import threading
import time
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass, field
from typing import Any, Callable

import orjson

from shinken.bundles.model import Bundle
from shinken.judge.config import JudgeConfig
from shinken.probes import media
from shinken.probes.oracle import Oracle, exit_code_of
from shinken.probes.receipts import LINE_SCHEMA
from shinken.probes import vandal as vandal_mod
from shinken.probes.rollouts import Rollout
from shinken.runtime import utc_now
from shinken.sandbox.api import Fork, Golden, Provider, RewardResult, SetupError, StartStateError, UnsettledDesktop
from shinken.sandbox.desktop import Alert, DesktopRecord
from shinken.tiers import Tier, probe_tiers

REASONS = (
    "zero_signal", "nondeterministic", "setup_error", "reward_error", "reward_timeout",
    "blocked", "defective", "fidelity", "infra_error", "replay_mismatch", "alert", "oracle_fails",
    "reward_passes_vandalism", "benchmark_overlap",
)
ALERT_MODES = ("keep", "flag", "drop")  # --alerts: what a start state that shows an alert gets
PROBES = ("noop", "vandal", "oracle")  # probes a run may ask for (--probes); noop always runs
# On by default only what costs under 15% more probe time (benchmarks/bench_probe.py --probe-cost):
# the oracle and vandal probes each measured at +15% of a cold first probe and ~2x a warm one.
DEFAULT_PROBES = ("noop",)
REWARD_TOLERANCE = 1e-6  # rewards are printed with a few decimals; equal means equal to this
MAX_PARALLEL_FORKS = 4  # no-op forks of one task run side by side (they are independent)
START_STATE_PROCEDURE = 2  # bump when tier selection changes: earlier receipts are not reused
START_PHASES = ("clean_s", "launch_s", "wait_s", "setup_s")  # what a tier adds to a plain fork
ORACLE_PROCEDURE = 1  # bump when how an oracle is run or judged changes
VANDAL_PROCEDURE = 1  # likewise for the vandal probe
WEB_VANDAL_PROCEDURE = 1  # the vandal probe of web tasks: their hub sid reset too (bump on change)


@dataclass(frozen=True)
class ProbeConfig:
    image: str  # the ref the user passed; forks use it, receipts record its id
    image_id: str
    repeats: int = 2
    retries: int = 3
    accept_filesystem: bool = False
    reward_timeout: float = 120.0
    setup_timeout: float = 600.0
    settle_timeout: float = 90.0  # --settle-timeout: the first golden build's record bound (the second: twice)
    run_id: str | None = None
    engine_wait_s: float = 90.0  # how long a retry waits for a restarted engine to answer
    backoff_s: float = 1.0
    judge: JudgeConfig | None = None  # --judge-url/--judge-model: rewards' reward_judge reaches it
    # --alerts: a start state showing an alert or first-run wizard is kept silently ("keep"), kept
    # and named in the receipt detail, table, report and dataset rows ("flag"), or dropped ("drop").
    alerts: str = "flag"
    probes: tuple[str, ...] = DEFAULT_PROBES  # --probes: which probes run (noop always)
    # --no-media: no start-state screenshot, no recording of a solution (probes/media.py). Not in the
    # config hash: the decision does not depend on it.
    media: bool = True

    def config_hash(self, rollouts: tuple[Rollout, ...] = (), oracle: Oracle | None = None,
                    web: bool = False) -> str:
        """Hash of the settings a result depends on (not concurrency or retries)."""
        doc = {
            "repeats": self.repeats,
            "accept_filesystem": self.accept_filesystem,
            "reward_timeout": self.reward_timeout,
            "rollouts": [[r.index, r.reward, [[c.name, c.arguments] for c in r.calls]] for r in rollouts],
            "start_state": START_STATE_PROCEDURE,
            "alerts": self.alerts,
        }
        if self.judge is not None:  # absent otherwise: receipts of judge-less runs keep their hash
            doc["judge"] = self.judge.fingerprint()
        if oracle is not None and "oracle" in self.probes:  # likewise for tasks without an oracle
            doc["oracle"] = [oracle.sha256, ORACLE_PROCEDURE]
        if "vandal" in self.probes:  # likewise for runs without the vandal probe
            # A task that reaches the network (a web task's hub state) is vandalised by a later
            # procedure (its hub sid reset too); the others' receipts keep their hash.
            doc["vandal"] = [VANDAL_PROCEDURE, WEB_VANDAL_PROCEDURE] if web else VANDAL_PROCEDURE
        return hashlib.sha256(orjson.dumps(doc, option=orjson.OPT_SORT_KEYS)).hexdigest()[:16]

    def task_hash(self, bundle: Bundle, rollouts: tuple[Rollout, ...] = (), oracle: Oracle | None = None) -> str:
        """config_hash for one task (whether it reaches the network is read only when the vandal probe runs)."""
        web = False
        if "vandal" in self.probes and bundle.ok:
            from shinken.sandbox.policy import task_needs

            web = task_needs(bundle).network
        return self.config_hash(rollouts, oracle, web)


class _Dropped(Exception):
    """Internal: the task is dropped for `reason` (a probe outcome, not a triage verdict)."""

    def __init__(self, reason: str, detail: str) -> None:
        super().__init__(detail)
        self.reason = reason
        self.detail = detail


@dataclass
class _Attempt:
    rewards: list[float | None] = field(default_factory=list)
    fork_s: list[float] = field(default_factory=list)
    reward_s: list[float] = field(default_factory=list)
    replay: list[dict[str, Any]] = field(default_factory=list)
    replay_s: float = 0.0
    golden_build_s: float = 0.0
    golden_reused: bool = False
    golden_tag: str | None = None
    lost_processes: list[str] = field(default_factory=list)
    deviation: str | None = None
    tier: Tier | None = None
    start_state: dict[str, Any] | None = None  # signature, what was checked, why a tier was passed over
    start_s: list[float] = field(default_factory=list)  # per computer: relaunch + window wait, or the full setup
    alerts_named: bool = True  # --alerts flag: the kept detail names the start state's alerts
    oracle: dict[str, Any] | None = None  # the oracle run and its outcome (None: no oracle, or not reached)
    vandal: dict[str, Any] | None = None  # the vandal probe's variants and outcome (None: not run or not reached)
    reward_tail: str | None = None  # the untouched state's reward output (the first computer's)
    media: dict[str, Any] | None = None  # screenshots and recordings, as probes/media.py hands them over


# Removing a container takes 0.1-0.5 s (more with a desktop in it): done off the critical
# path, so the next fork or task need not wait. drain_cleanup() waits for all of it before
# the process ends; a kill leaves labelled containers that `shinken gc` removes.
_cleanup_lock = threading.Lock()
_cleanup_pool: ThreadPoolExecutor | None = None
_cleanup_pending: set[Any] = set()


def _quietly(fn: Callable[[], Any]) -> None:
    try:
        fn()
    except Exception:  # noqa: BLE001 - an engine that is gone cannot clean up; gc will
        pass


def cleanup_later(fn: Callable[[], Any]) -> None:
    global _cleanup_pool
    with _cleanup_lock:
        if _cleanup_pool is None:
            _cleanup_pool = ThreadPoolExecutor(max_workers=4, thread_name_prefix="cleanup")
        fut = _cleanup_pool.submit(_quietly, fn)
        _cleanup_pending.add(fut)
    fut.add_done_callback(lambda f: _cleanup_pending.discard(f))


def drain_cleanup(timeout: float = 300.0) -> None:
    """Wait for every pending container removal (call before the process exits)."""
    from concurrent.futures import wait as _wait

    with _cleanup_lock:
        pending = list(_cleanup_pending)
    if pending:
        _wait(pending, timeout=timeout)


def _tail(text: str, n: int = 300) -> str:
    text = (text or "").strip()
    return text if len(text) <= n else "…" + text[-n:]


def is_infra(exc: BaseException) -> bool:
    """Engine trouble rather than task trouble. The sandbox maps Docker failures to
    InfraError; raw SDK/transport errors that slip through count as infra too, so an
    engine hiccup can never drop a task."""
    import docker.errors
    import requests.exceptions

    from shinken.sandbox.api import InfraError

    return isinstance(exc, (InfraError, docker.errors.DockerException, requests.exceptions.RequestException,
                            ConnectionError))


def _line(bundle_id: str, bundle_hash: str, cfg: ProbeConfig, config_hash: str, *, reason: str | None,
          detail: str, att: _Attempt | None, attempts: int, infra_errors: list[str], total_s: float) -> dict[str, Any]:
    att = att or _Attempt()
    return {
        "schema": LINE_SCHEMA,
        "task_id": bundle_id,
        "bundle_hash": bundle_hash,
        "image_id": cfg.image_id,
        "image_ref": cfg.image,
        "config_hash": config_hash,
        "outcome": "dropped" if reason else "kept",
        "reason": reason,
        "detail": detail,
        "rewards": att.rewards,
        "reward_deviation": att.deviation,
        "replay": att.replay,
        "timings": {
            "golden_build_s": round(att.golden_build_s, 4),
            "golden_reused": att.golden_reused,
            "fork_s": [round(x, 4) for x in att.fork_s],
            "reward_s": [round(x, 4) for x in att.reward_s],
            "replay_s": round(att.replay_s, 4),
            "oracle_s": round(float((att.oracle or {}).get("s") or 0.0), 4),
            "vandal_s": round(float((att.vandal or {}).get("s") or 0.0), 4),
            "start_s": [round(x, 4) for x in att.start_s],
            "total_s": round(total_s, 4),
        },
        "attempts": attempts,
        "infra_errors": infra_errors,
        "lost_processes": att.lost_processes,
        "tier": att.tier.value if att.tier is not None else None,
        "start_state": att.start_state,
        "oracle": att.oracle,
        "vandal": att.vandal,
        **({"reward_tail": att.reward_tail} if att.reward_tail is not None else {}),
        **({"media": att.media} if att.media is not None else {}),
        "golden": att.golden_tag,
        "node": socket.gethostname(),
        "finished_at": utc_now(precise=True),
    }


def dropped_line(bundle: Bundle, cfg: ProbeConfig, reason: str, detail: str,
                 rollouts: tuple[Rollout, ...] = (), oracle: Oracle | None = None) -> dict[str, Any]:
    """A receipt for a task decided without touching Docker (defective, blocked)."""
    return _line(bundle.id, bundle.bundle_hash, cfg, cfg.task_hash(bundle, rollouts, oracle), reason=reason, detail=detail,
                 att=None, attempts=0, infra_errors=[], total_s=0.0)


def _check_reward(rr: RewardResult, what: str) -> float:
    if rr.error == "judge_error":
        from shinken.sandbox.api import InfraError

        # The judge endpoint failed, not the task: retried like an engine failure.
        raise InfraError(f"{what}: the LLM judge did not answer; {_tail(rr.output_tail, 300)}")
    if rr.error == "timeout":
        raise _Dropped("reward_timeout", f"{what}: reward.py did not finish in time; {_tail(rr.output_tail)}")
    if rr.error is not None or rr.reward is None:
        raise _Dropped("reward_error", f"{what}: {rr.error or 'no reward'} (exit {rr.exit_code}); {_tail(rr.output_tail)}")
    return float(rr.reward)


def _computer(provider: Provider, golden: Golden, bundle: Bundle, cfg: ProbeConfig, tier: Tier) -> Fork:
    """A computer showing the start state at `tier` (StartStateError when it does not)."""
    if tier is Tier.REPROVISION:
        return provider.provision(bundle, golden, setup_timeout=cfg.setup_timeout)
    return provider.fork(golden, tier=tier)


def _noop_probe(provider: Provider, golden: Golden, bundle: Bundle, cfg: ProbeConfig, k: int,
                tier: Tier, shots: dict[Tier, dict[str, Any]] | None = None) -> tuple[float, float, RewardResult, float]:
    """One no-op probe on its own computer: made at `tier` (post-fork replay, relaunch and check,
    or a full re-provision), then postconfig + reward. The first one of a desktop task puts a
    screenshot of the start state into `shots` (when media are on)."""
    t0 = time.monotonic()
    try:
        fork = _computer(provider, golden, bundle, cfg, tier)
    except SetupError as exc:
        where = "setup on a fresh container" if tier is Tier.REPROVISION else "post-fork replay"
        raise _Dropped("setup_error", f"{where} (fork {k}): {_setup_detail(exc)}") from None
    try:
        fork_s = time.monotonic() - t0
        start_s = float(sum(fork.start_timings.get(p, 0.0) for p in START_PHASES))
        if shots is not None and k == 0 and golden.needs_desktop:
            shots[tier] = media.start_screenshot(fork, media.expects_window(golden))
        t1 = time.monotonic()
        rr = fork.run_reward(bundle, timeout=cfg.reward_timeout)
        return fork_s, time.monotonic() - t1, rr, start_s
    except SetupError as exc:  # postconfig failed
        raise _Dropped("setup_error", f"postconfig (fork {k}): {_setup_detail(exc)}") from None
    finally:
        cleanup_later(fork.close)


def _computer_name(kind: str, index: int) -> str:
    return "the golden's own computer" if kind == "golden" else f"computer {index} ({kind})"


def _setup_detail(exc: SetupError) -> str:
    parts = [str(exc)]
    if exc.output_tail:
        parts.append(_tail(exc.output_tail, 200))
    return "; ".join(p for p in parts if p)


def _replay(provider: Provider, golden: Golden, bundle: Bundle, cfg: ProbeConfig, ro: Rollout,
            tier: Tier) -> dict[str, Any]:
    """Replay a recorded rollout on a fresh fork through the workspace server's own tool
    implementation, then score it."""
    from shinken.computer.tools import new_context, run_tool

    try:
        fork = _computer(provider, golden, bundle, cfg, tier)
    except SetupError as exc:
        raise _Dropped("setup_error", f"post-fork replay (replay {ro.index}): {_setup_detail(exc)}") from None
    try:
        ctx = new_context(fork)
        rec = media.recording(fork, golden, cfg.media, f"replay {ro.index}")
        for call in ro.calls:
            t = time.monotonic()
            answer = run_tool(ctx, call.name, call.arguments)
            if rec is not None:
                rec.step(media.described_call(call.name, call.arguments), answer, time.monotonic() - t)
        if rec is not None:
            rec.stop()
        try:
            rr = fork.run_reward(bundle, timeout=cfg.reward_timeout)
        except SetupError as exc:
            raise _Dropped("setup_error", f"postconfig (replay {ro.index}): {_setup_detail(exc)}") from None
        err = rr.error if rr.error is not None else (None if rr.reward is not None else "no reward")
        match = (err is None and rr.reward is not None and ro.reward is not None
                 and abs(rr.reward - ro.reward) <= REWARD_TOLERANCE)
        out: dict[str, Any] = {"rollout": ro.index, "recorded": ro.reward, "reward": rr.reward, "match": bool(match),
               "calls": len(ro.calls), "error": err, "reward_tail": _tail(rr.output_tail)}
        if rec is not None:
            out["recording"] = rec.finish(rr.reward, rr.output_tail)  # moved into the line's media by _attempt
        return out
    finally:
        cleanup_later(fork.close)


def _run_oracle(provider: Provider, golden: Golden, bundle: Bundle, cfg: ProbeConfig, oracle: Oracle,
                tier: Tier) -> dict[str, Any]:
    """Run the task's reference solution on a fresh computer at `tier` through the workspace's own
    `computer_exec` tool (the calls a `full_reward` verifier case replays), then score it."""
    from shinken.computer.tools import EXEC, new_context, run_tool
    from shinken.sandbox.api import InfraError

    t0 = time.monotonic()
    try:
        fork = _computer(provider, golden, bundle, cfg, tier)
    except SetupError as exc:
        raise _Dropped("setup_error", f"post-fork replay (oracle): {_setup_detail(exc)}") from None
    recording = None
    try:
        ctx = new_context(fork)
        rec = media.recording(fork, golden, cfg.media, "oracle")
        answers = []
        for name, args in oracle.calls():
            t = time.monotonic()
            answers.append(run_tool(ctx, name, args))
            if rec is not None and name == EXEC:
                rec.step(media.oracle_shown(oracle.name), answers[-1], time.monotonic() - t)
        if rec is not None:
            rec.stop()
        try:
            rr = fork.run_reward(bundle, timeout=cfg.reward_timeout)
        except SetupError as exc:
            raise _Dropped("setup_error", f"postconfig (oracle): {_setup_detail(exc)}") from None
        if rec is not None:
            recording = rec.finish(rr.reward, rr.output_tail)
    finally:
        cleanup_later(fork.close)
    if rr.error == "judge_error":
        raise InfraError(f"oracle: the LLM judge did not answer; {_tail(rr.output_tail, 300)}")
    err = rr.error if rr.error is not None else (None if rr.reward is not None else "no reward")
    head, _, out = answers[0].partition("\n")
    rec_doc = {**oracle.to_json(), "outcome": None, "reward": rr.reward, "reward_error": err,
               "exit_code": exit_code_of(head), "script_tail": _tail(out if out else head),
               "reward_tail": _tail(rr.output_tail), "s": round(time.monotonic() - t0, 4)}
    if recording is not None:
        rec_doc["recording"] = recording  # moved into the line's media by _oracle_step
    return rec_doc


def _vandal_variant(provider: Provider, golden: Golden, bundle: Bundle, cfg: ProbeConfig, tier: Tier,
                    variant: str, files: list[str]) -> tuple[list[str], list[str], RewardResult]:
    """One vandal variant on its own computer: the files damaged (as root) and, for a web task, the
    fork's hub sid reset in every app the golden holds state in; then postconfig + reward."""
    import json

    from shinken.sandbox.api import InfraError

    try:
        fork = _computer(provider, golden, bundle, cfg, tier)
    except SetupError as exc:
        raise _Dropped("setup_error", f"post-fork replay (vandal {variant}): {_setup_detail(exc)}") from None
    try:
        if golden.touched is None:  # an older golden: the files written since its setup started
            found = fork.exec(["python3", "-c", vandal_mod.SCAN, json.dumps(vandal_mod.scan_roots(bundle)),
                               str(golden.setup_started), "400"], user="root", timeout=120)
            if not found.ok:
                raise InfraError(f"vandal {variant}: listing the setup's files failed: {_tail(found.output)}")
            files = vandal_mod.without_web_plumbing(
                vandal_mod.targets(bundle, json.loads(found.output.strip().splitlines()[-1])), golden.web_sid)
        res = fork.exec(["python3", "-c", vandal_mod.SCRIPT, variant, json.dumps(files)], user="root", timeout=120)
        if not res.ok:
            raise InfraError(f"vandal {variant}: damaging the files failed (exit {res.exit_code}): {_tail(res.output)}")
        damaged = json.loads(res.output.strip().splitlines()[-1])
        web = fork.reset_web_state()
        try:
            rr = fork.run_reward(bundle, timeout=cfg.reward_timeout)
        except SetupError as exc:
            raise _Dropped("setup_error", f"postconfig (vandal {variant}): {_setup_detail(exc)}") from None
        return damaged, web, rr
    finally:
        cleanup_later(fork.close)


def _run_vandal(provider: Provider, golden: Golden, bundle: Bundle, cfg: ProbeConfig, tier: Tier) -> dict[str, Any]:
    """Both vandal variants side by side; the record the receipt line carries (outcome set here)."""
    from shinken.sandbox.api import InfraError

    t0 = time.monotonic()
    if golden.touched is None and golden.setup_started is None:
        return {"outcome": "vandal_not_recorded", "files": [], "rewards": {}, "errors": {}, "s": 0.0}
    files = (vandal_mod.without_web_plumbing(vandal_mod.targets(bundle, golden.touched), golden.web_sid)
             if golden.touched is not None else ["(scanned in the fork)"])
    if not files and golden.web_sid is None:  # a web task still has its hub state to reset
        return {"outcome": "vandal_no_files", "files": [], "rewards": {}, "errors": {}, "s": 0.0}
    with ThreadPoolExecutor(max_workers=len(vandal_mod.VARIANTS), thread_name_prefix="vandal") as pool:
        futs = {v: pool.submit(_vandal_variant, provider, golden, bundle, cfg, tier, v, files)
                for v in vandal_mod.VARIANTS}
        done = {v: f.result() for v, f in futs.items()}
    damaged = sorted({p for d, _, _ in done.values() for p in d})
    web = sorted({a for _, w, _ in done.values() for a in w})
    rewards: dict[str, float | None] = {}
    errors: dict[str, str | None] = {}
    tails: dict[str, str] = {}
    for v, (_, _, rr) in done.items():
        if rr.error == "judge_error":
            raise InfraError(f"vandal {v}: the LLM judge did not answer; {_tail(rr.output_tail, 300)}")
        rewards[v], errors[v], tails[v] = rr.reward, rr.error, _tail(rr.output_tail)
    rec: dict[str, Any] = {"outcome": "vandal_no_files", "files": damaged, "rewards": rewards, "errors": errors,
                           "reward_tails": tails, "s": round(time.monotonic() - t0, 4)}
    if web:
        rec["web"] = web  # absent for tasks without hub state: their records read as before
    if damaged or web:
        rec["outcome"] = vandal_mod.judge(rewards)
    return rec


def _judge_oracle(rec: dict[str, Any], untouched: float) -> str:
    """oracle_passes (1.0), oracle_partial (above the untouched start, below 1.0) or oracle_fails."""
    r = rec["reward"]
    if rec["reward_error"] is not None or r is None:
        return "oracle_fails"
    if r >= 1.0 - REWARD_TOLERANCE:
        return "oracle_passes"
    return "oracle_partial" if r > untouched + REWARD_TOLERANCE else "oracle_fails"


def _oracle_detail(rec: dict[str, Any]) -> str:
    ran = "timed out" if rec["exit_code"] is None else f"exit {rec['exit_code']}"
    scored = f"reward {rec['reward']}" if rec["reward_error"] is None else f"reward {rec['reward_error']}"
    return f"{rec['path'].rsplit('/', 1)[-1]} ({ran}) -> {scored}"


def _score_own(own: Fork, bundle: Bundle, cfg: ProbeConfig) -> tuple[float, float, RewardResult, float]:
    """The no-op probe on the golden's own computer (its build container, still running as the
    setup left it): nothing to make or check, only postconfig + reward."""
    try:
        t1 = time.monotonic()
        rr = own.run_reward(bundle, timeout=cfg.reward_timeout)
        return 0.0, time.monotonic() - t1, rr, 0.0
    except SetupError as exc:
        raise _Dropped("setup_error", f"postconfig (the golden's own computer): {_setup_detail(exc)}") from None
    finally:
        cleanup_later(own.close)


def _forks_at(provider: Provider, golden: Golden, bundle: Bundle, cfg: ProbeConfig,
              tier: Tier, k: int, shots: dict[Tier, dict[str, Any]] | None = None) -> list[tuple[float, float, RewardResult, float]]:
    """k no-op probes side by side at `tier`. An infra failure anywhere voids the attempt; a
    start-state mismatch is raised (StartStateError) so the caller can try the next tier."""
    with ThreadPoolExecutor(max_workers=min(k, MAX_PARALLEL_FORKS), thread_name_prefix="fork") as pool:
        futures = [pool.submit(_noop_probe, provider, golden, bundle, cfg, i, tier, shots) for i in range(k)]
        results = []
        first_exc: BaseException | None = None
        for f in futures:  # wait for all: every fork is handed to cleanup before the attempt ends
            try:
                results.append(f.result())
            except BaseException as exc:  # noqa: BLE001 - re-raised below
                first_exc = first_exc or exc
    # An infra failure anywhere voids the attempt, even if another fork saw a task error.
    errors = [e for e in (f.exception() for f in futures) if e is not None]
    infra = next((e for e in errors if is_infra(e)), None)
    if infra is not None:
        raise infra
    mismatch = next((e for e in errors if isinstance(e, StartStateError)), None)
    if mismatch is not None:
        raise mismatch
    if first_exc is not None:
        raise first_exc
    return results


def _reprovision_ahead(golden: Golden, tiers: list[Tier]) -> bool:
    """Start the re-provision alongside the relaunch check, not after it fails, when the golden's
    record shows a dialog: usually the setup opened it after launching the app (typed, clicked),
    which a relaunch does not do. Only the order of work changes: the relaunch is still tried
    first and kept when it matches; the re-provision then was spent for nothing."""
    rec = golden.desktop
    return (tiers[:2] == [Tier.RELAUNCH, Tier.REPROVISION] and rec is not None
            and any(w.is_dialog for w in rec.windows))


def _alerts(golden: Golden) -> tuple[Alert, ...]:
    return golden.desktop.alerts if golden.desktop is not None else ()


def _start_state(golden: Golden, *, checked: int, passed_over: list[str], computers: list[str]) -> dict[str, Any]:
    """The receipt line's start_state: the golden's signature and windows, what was checked, the
    alerts its start state shows, whether its record settled (and what kept changing in golden
    builds thrown away before it)."""
    record = golden.desktop
    return {
        "signature": record.signature_hash() if record is not None else None,
        "windows": [w.describe() for w in record.windows] if record is not None else [],
        "checked": checked,
        "passed_over": passed_over,
        "computers": computers,
        "alerts": [{"app": a.app, "title": a.title, "text": a.text} for a in _alerts(golden)],
        **_settle_fields(record, golden.unsettled),
    }


def _settle_fields(record: DesktopRecord | None, thrown_away: list[DesktopRecord]) -> dict[str, Any]:
    """`settled` (null: no desktop), `busy`, `unsettled_builds` and what kept changing in them."""
    return {
        "settled": None if record is None else record.settled,
        "busy": bool(record is not None and record.busy),
        "unsettled_builds": len(thrown_away),
        "changing": [c for r in thrown_away for c in r.changing],
    }


def _unsettled_state(exc: UnsettledDesktop) -> dict[str, Any]:
    """The start_state of a task whose desktop did not settle in any golden build: the last
    record's windows, not a signature (nothing was committed)."""
    last = exc.records[-1] if exc.records else DesktopRecord(settled=False)
    return {"signature": None, "windows": [w.describe() for w in last.windows], "checked": 0, "passed_over": [],
            "computers": [], "alerts": [], **_settle_fields(last, exc.records)}


def _attempt(provider: Provider, bundle: Bundle, cfg: ProbeConfig, rollouts: tuple[Rollout, ...], att: _Attempt,
             oracle: Oracle | None = None) -> None:
    t0 = time.monotonic()
    k = max(1, cfg.repeats)
    try:
        # The id resolved once at the start of the run: the receipt's image_id is what the
        # golden is built on, even if the tag is moved (an image rebuild) meanwhile.
        # With K >= 2, a golden built now keeps its build container: one of the K no-op probes
        # is scored there, on the start state itself, which saves one computer (for a desktop
        # task, one app start) per task. At least one fork per tier is still made and checked.
        golden = provider.ensure_golden(bundle, cfg.image_id, setup_timeout=cfg.setup_timeout,
                                        keep_computer=k >= 2, settle_timeout=cfg.settle_timeout)
    except SetupError as exc:
        raise _Dropped("setup_error", _setup_detail(exc)) from None
    except UnsettledDesktop as exc:
        att.golden_build_s = time.monotonic() - t0
        att.start_state = _unsettled_state(exc)
        raise
    att.golden_build_s = time.monotonic() - t0
    att.golden_reused = golden.reused
    att.golden_tag = golden.tag
    att.lost_processes = list(golden.lost_processes)
    own = provider.take_golden_computer(golden)
    alerts = _alerts(golden)
    att.alerts_named = cfg.alerts == "flag"
    if alerts and cfg.alerts == "drop":
        # Decided by the golden's record alone: no computer needs to be made for it.
        if own is not None:
            cleanup_later(own.close)
        att.start_state = _start_state(golden, checked=0, passed_over=[], computers=[])
        raise _Dropped("alert", "the start state shows " + "; ".join(f"alert {a.describe()}" for a in alerts)
                       + " (--alerts drop)")

    # The best tier whose computers show what the setup left (shinken.tiers).
    tiers = probe_tiers(needs_relaunch=golden.needs_relaunch,
                        accept_filesystem=cfg.accept_filesystem or bundle.state_fidelity == "filesystem")
    passed_over: list[str] = []
    results: list[tuple[float, float, RewardResult, float]] = []
    computers: list[str] = []  # per result: "golden" (its own build computer) or the tier of a fork
    checked = 0
    shots: dict[Tier, dict[str, Any]] | None = {} if cfg.media else None  # the start state per tier tried
    with ThreadPoolExecutor(max_workers=2, thread_name_prefix="golden-computer") as side:
        # Scored while the first tier's forks are made (it needs nothing from them).
        own_run = side.submit(_score_own, own, bundle, cfg) if own is not None else None

        def with_own(tier: Tier) -> bool:
            # The golden's own computer keeps the setup's processes: it stands for every tier
            # that reproduces them, never for the filesystem tier (whose forks lose them).
            return own_run is not None and tier is not Tier.FILESYSTEM

        def n_forks(tier: Tier) -> int:
            return k - 1 if with_own(tier) else k

        ahead = side.submit(_forks_at, provider, golden, bundle, cfg, Tier.REPROVISION, n_forks(Tier.REPROVISION),
                            shots) if _reprovision_ahead(golden, tiers) else None
        for tier in tiers:
            try:
                if tier is Tier.REPROVISION and ahead is not None:
                    results = ahead.result()
                else:
                    results = _forks_at(provider, golden, bundle, cfg, tier, n_forks(tier), shots)
            except StartStateError as exc:
                passed_over.append(str(exc))
                continue
            att.tier = tier
            checked = len(results) if tier.checked else 0
            computers = [tier.value] * len(results)
            if with_own(tier) and own_run is not None:  # (the second test is for the type checker)
                results = [own_run.result(), *results]  # its infra failure voids the attempt too
                computers = ["golden", *computers]
            break
        for run in (own_run, ahead):
            if run is not None:
                run.exception()  # wait for it (and its cleanup) even when no tier took it
    if att.tier is None:
        raise _Dropped("fidelity", "no tier reproduces the start state the setup left: " + " | ".join(passed_over))
    att.start_state = _start_state(golden, checked=checked, passed_over=passed_over, computers=computers)
    if shots is not None:
        att.media = media.collect(att.media, start=shots.get(att.tier), desktop=golden.needs_desktop)
    att.reward_tail = _tail(results[0][2].output_tail)
    for fork_s, reward_s, rr, start_s in results:
        att.fork_s.append(fork_s)
        att.reward_s.append(reward_s)
        att.start_s.append(start_s)
        att.rewards.append(rr.reward)
        att.deviation = att.deviation or rr.deviation
    values = [_check_reward(rr, f"untouched state, {_computer_name(c, i)}")
              for i, ((_, _, rr, _), c) in enumerate(zip(results, computers))]
    if max(values) - min(values) > REWARD_TOLERANCE:
        raise _Dropped("nondeterministic", f"{len(results)} computers of the same start state "
                       f"({', '.join(computers)}) scored {values}")
    if values[0] >= 1.0 - REWARD_TOLERANCE:
        raise _Dropped("zero_signal", f"the untouched state already scores {values[0]}; no learning signal")

    t1 = time.monotonic()
    for ro in rollouts:
        rec = _replay(provider, golden, bundle, cfg, ro, att.tier)
        att.media = media.collect(att.media, recording=rec.pop("recording", None))
        att.replay.append(rec)
    att.replay_s = time.monotonic() - t1
    bad = [r for r in att.replay if not r["match"]]
    if bad:
        r = bad[0]
        why = f"error {r['error']}" if r["error"] else f"scored {r['reward']}"
        raise _Dropped("replay_mismatch",
                       f"{len(bad)}/{len(att.replay)} replays differ; rollout {r['rollout']} recorded {r['recorded']}, {why}")

    tier = att.tier
    with ThreadPoolExecutor(max_workers=1, thread_name_prefix="vandal-probe") as side:
        vandal_run = side.submit(_run_vandal, provider, golden, bundle, cfg, tier) if "vandal" in cfg.probes else None
        try:
            _oracle_step(provider, golden, bundle, cfg, oracle, att, values[0])
        finally:
            failed = vandal_run.exception() if vandal_run is not None else None  # waits for its forks
            if vandal_run is not None and failed is None:
                att.vandal = vandal_run.result()  # recorded even when the oracle drops the task
            elif failed is not None and is_infra(failed):
                raise failed  # an infra failure anywhere voids the attempt
        if failed is not None:
            raise failed
    if att.vandal is not None and att.vandal["outcome"] == "reward_passes_vandalism":
        raise _Dropped("reward_passes_vandalism", "the reward reaches 1.0 when the files the setup made are "
                       f"removed and when they hold garbage: {vandal_mod.describe(att.vandal)}")


def _oracle_step(provider: Provider, golden: Golden, bundle: Bundle, cfg: ProbeConfig, oracle: Oracle | None,
                 att: _Attempt, untouched: float) -> None:
    values = [untouched]
    assert att.tier is not None
    if oracle is not None and "oracle" in cfg.probes:
        rec = _run_oracle(provider, golden, bundle, cfg, oracle, att.tier)
        att.media = media.collect(att.media, recording=rec.pop("recording", None))
        rec["outcome"] = _judge_oracle(rec, values[0])
        att.oracle = rec
        solved = any(r["match"] and r["reward"] is not None and r["reward"] >= 1.0 - REWARD_TOLERANCE
                     for r in att.replay)
        if rec["outcome"] == "oracle_fails" and not solved:
            # Kept when a recorded rollout reached 1.0: then the reward can pass and the oracle is wrong.
            raise _Dropped("oracle_fails", f"the reference solution does not pass the reward: {_oracle_detail(rec)} "
                           f"(untouched start {values[0]}); reward output: {rec['reward_tail']}")


ProviderFactory = Callable[[], Provider]


def default_provider_factory(run_id: str | None, judge: JudgeConfig | None = None) -> ProviderFactory:
    def make() -> Provider:
        from shinken.sandbox.docker_provider import DockerProvider

        return DockerProvider(run_id=run_id, judge=judge)
    return make


def probe_task(bundle: Bundle, cfg: ProbeConfig, rollouts: tuple[Rollout, ...] = (),
               provider_factory: ProviderFactory | None = None,
               stop: threading.Event | None = None,
               on_retry: Callable[[str, int, str], None] | None = None,
               oracle: Oracle | None = None) -> dict[str, Any]:
    """Probe one task and return its receipt line. Never raises for task or engine
    trouble: the outcome says what happened."""
    config_hash = cfg.task_hash(bundle, rollouts, oracle)
    if not bundle.ok:
        return dropped_line(bundle, cfg, "defective", bundle.why_defective(), rollouts, oracle)
    factory = provider_factory or default_provider_factory(cfg.run_id, cfg.judge)
    t_start = time.monotonic()
    infra_errors: list[str] = []
    attempts = 0
    att = _Attempt()
    while True:
        attempts += 1
        att = _Attempt()
        provider = None
        try:
            provider = factory()
            _attempt(provider, bundle, cfg, rollouts, att, oracle)
            reason, detail = None, _kept_detail(att)
        except _Dropped as v:
            reason, detail = v.reason, v.detail
        except UnsettledDesktop as exc:
            # Not retried in this run: the provider built the golden twice already. Not kept and
            # not evidence against the task: the next run tries again (infra_error lines are).
            infra_errors.append(f"{type(exc).__name__}: {_tail(str(exc), 200)}")
            reason, detail = "infra_error", f"start state not recorded: {exc}; not kept, tried again by the next run"
        except Exception as exc:  # noqa: BLE001 - classified right here
            if not is_infra(exc):
                # A bug in shinken (or the sandbox), not evidence against the task: report it
                # like an infrastructure failure, which the next run tries again.
                import traceback

                where = traceback.extract_tb(exc.__traceback__)[-1]
                infra_errors.append(f"internal {type(exc).__name__}: {_tail(str(exc), 200)} "
                                    f"({where.filename.rsplit('/', 1)[-1]}:{where.lineno})")
                reason, detail = "infra_error", f"internal error, not a task defect: {infra_errors[-1]}"
                return _line(bundle.id, bundle.bundle_hash, cfg, config_hash, reason=reason, detail=detail,
                             att=att, attempts=attempts, infra_errors=infra_errors,
                             total_s=time.monotonic() - t_start)
            infra_errors.append(f"{type(exc).__name__}: {_tail(str(exc), 200)}")
            if attempts > cfg.retries or (stop is not None and stop.is_set()):
                reason, detail = "infra_error", f"engine failed {attempts} time(s); last: {infra_errors[-1]}"
            else:
                if on_retry is not None:
                    on_retry(bundle.id, attempts, infra_errors[-1])
                time.sleep(min(cfg.backoff_s * 2 ** (attempts - 1), 15.0))
                from shinken.sandbox.docker_client import wait_for_engine

                wait_for_engine(cfg.engine_wait_s, stop)
                continue
        finally:
            if provider is not None:
                cleanup_later(provider.close)
        return _line(bundle.id, bundle.bundle_hash, cfg, config_hash, reason=reason, detail=detail, att=att,
                     attempts=attempts, infra_errors=infra_errors, total_s=time.monotonic() - t_start)


def _kept_detail(att: _Attempt) -> str:
    own = " (the golden's own computer among them)" if "golden" in ((att.start_state or {}).get("computers") or []) else ""
    s = f"untouched state scores {att.rewards[0]} on {len(att.rewards)} computer(s){own}"
    if att.replay:
        s += f"; {len(att.replay)} replay(s) reproduce"
    if att.vandal is not None and att.vandal["outcome"].startswith("vandal_passes_"):
        s += f"; flagged: the reward passes one vandal variant ({vandal_mod.describe(att.vandal)})"
    if att.oracle is not None:
        flag = {"oracle_partial": " (flagged: partial)",
                "oracle_fails": " (the oracle fails, but a recorded rollout reached 1.0)"}.get(att.oracle["outcome"], "")
        s += f"; oracle {_oracle_detail(att.oracle)}{flag}"
    s += f"; tier {att.tier.value if att.tier else None}: {tier_reason(att)}"
    st = att.start_state or {}
    if st.get("busy"):
        s += "; its apps were still working when the record took their unchanged windows as settled"
    if st.get("unsettled_builds"):
        s += (f"; settled in a fresh golden build after {st['unsettled_builds']} whose desktop did not settle "
              f"({'; '.join(st.get('changing') or [])[:300]})")
    alerts = (att.start_state or {}).get("alerts") or []
    if alerts and att.alerts_named:
        s += "; the start state shows " + "; ".join(
            f"alert {a['app']} {a['title']!r}" + (f": {' '.join(a['text'].split())[:200]}" if a["text"] else "")
            for a in alerts)
    return s


def tier_reason(att: _Attempt) -> str:
    """Why the task got its tier, in words (the receipt's detail)."""
    windows = ", ".join((att.start_state or {}).get("windows") or []) or "no windows"
    if att.tier is Tier.SNAPSHOT:
        return "nothing the setup started was running at commit"
    if att.tier is Tier.FILESYSTEM:
        return f"start state not checked; not recreated after fork: {', '.join(att.lost_processes)}"
    how = "relaunched " + ", ".join(att.lost_processes) if att.tier is Tier.RELAUNCH else "full setup per rollout"
    checked = (att.start_state or {}).get("checked", 0)
    s = f"{how}; {checked} computer(s) checked: showed the golden's {windows}"
    passed = (att.start_state or {}).get("passed_over") or []
    if passed:
        s += f" (passed over: {' | '.join(passed)})"
    return s


def infra_line(bundle: Bundle, cfg: ProbeConfig, rollouts: tuple[Rollout, ...], attempts: int,
               detail: str, oracle: Oracle | None = None) -> dict[str, Any]:
    """A receipt for a task the infrastructure never let us decide (retried next run)."""
    return _line(bundle.id, bundle.bundle_hash, cfg, cfg.task_hash(bundle, rollouts, oracle), reason="infra_error",
                 detail=detail, att=None, attempts=attempts, infra_errors=[detail[:200]], total_s=0.0)
