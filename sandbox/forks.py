"""Forks of a golden: a disposable container (DockerFork) and a pool of ready ones
(ForkPool) refilled by a background thread, so a rollout starts without waiting for
create/start/desktop."""

from __future__ import annotations

import os
import threading
import time
from pathlib import Path
from typing import TYPE_CHECKING, Callable

from shinken.bundles.model import Bundle
from shinken.sandbox import guest, judge_placement, verifier
from shinken.sandbox.api import (DiskFull, Golden, HubLost, InfraError, QuotaExceeded, RewardResult, SessionError,
                                 SetupError, StartStateError, tail)
from shinken.sandbox.container import Container, UserIds, remove_container
from shinken.sandbox.web_hooks import SID_FILE
from shinken.needs.reward import classify_reward_run
from shinken.tiers import Tier

if TYPE_CHECKING:
    from shinken.sandbox.docker_provider import DockerProvider

# Less room than this on the computer's disk (for an unprivileged writer) is a full disk.
DISK_FULL_KIB = 1024
REPLAY_SLEEP_CAP_S = 2.0  # a config `sleep` replayed after `open` on every fork is capped
SETTLE_QUIET_S = 1.0  # how long the processes of an unchecked replay must hold still before the hand-out

# Post-fork replay only has launch/open/sleep steps, which read no bundle files.
NO_FILES = Bundle(id="", path=Path("/nonexistent"), layout="demo", task_file=None,
                  raw={}, files={}, bundle_hash="")


class DockerFork(Container):
    """A disposable container started from a golden image (sandbox.api.Fork)."""

    def __init__(self, provider: DockerProvider, cid: str, golden: Golden, ids: UserIds,
                 network: bool | None = None) -> None:
        super().__init__(provider.api, cid, ids, golden.network if network is None else network)
        self._provider = provider
        self.golden = golden
        self.web_sid: str | None = None  # this fork's own hub sid (mock web tasks)
        self.tier: Tier | None = None  # how this computer was made to show the start state
        self.connect_secret: str | None = None  # what the provider's connect asks for (sandbox/connect_secret.py)
        self.over_quota: str | None = None  # why the disk watchdog stopped it (sandbox/disk_quota.py)
        # Where making it took its time: container_s, desktop_s, then the relaunch's clean_s,
        # launch_s and wait_s (first_window_s of it until any window showed; settle_s of it from the
        # golden's windows showing to the relaunched apps going idle), or setup_s.
        self.start_timings: dict[str, float] = {}
        # The processes shinken started in it before the hand-out (mark_handed_out), kept through
        # verify (or, its setup scripts, let finish); empty when it started none as a non-root user
        # (every such process is the policy's).
        self.handout = verifier.HandOut()
        self.seal: verifier.Seal | None = None  # what the last verify stopped and kept

    def _check_open(self) -> None:
        if self.over_quota is not None:  # every later call on a fork stopped past its disk share
            raise QuotaExceeded(self.over_quota)
        super()._check_open()

    def reset_web_state(self) -> list[str]:
        """Reset this fork's own hub sid (the State API's `reset`) in every mock app the golden
        recorded state in; the apps reset, [] when the fork has no sid (not a web task)."""
        self._check_open()
        if self.web_sid is None or self._provider.web is None:
            return []
        return self._provider.web.reset(self, self.web_sid)

    def mark_handed_out(self, *, settle: bool = False) -> None:
        """Remember what shinken started in this computer before the policy gets it (the desktop,
        the task's apps): everything else run as another user than root is the policy's, and is
        stopped before the reward (verifier.SEAL). `settle`: first wait until no process came or
        went for a second (apps a replayed step launched, unchecked, may still be starting)."""
        self.handout = verifier.handed_out(self, SETTLE_QUIET_S if settle else 0.0)

    def run_reward(self, bundle: Bundle, *, timeout: float = 120) -> RewardResult:
        """evaluator.postconfig (as the task's user, the policy's processes still running: the
        task's own hook, e.g. Ctrl+S), then the verifier (sandbox/verifier.py): the policy's
        processes stopped, reward.py run as the verifier uid from a root-owned folder through the
        runner. A failing postconfig step raises SetupError (where="evaluator.postconfig");
        reward failures are typed in the result. With a judge configured, the judge module and its
        env file are placed for this run only and the relay accepts this run's token until the
        reward exits."""
        self._check_open()
        t0 = time.monotonic()
        self.run_steps(bundle.postconfig, bundle, where="evaluator.postconfig", deadline=t0 + max(timeout, 60))
        rp = bundle.reward_path
        if rp is None:
            return RewardResult(None, "crash", None, None, "bundle has no reward.py", 0.0)
        relay = self._provider.judge_relay()
        token = relay.grant() if relay is not None else None
        try:
            extra: dict[str, bytes] = {}
            tmp: dict[str, bytes] = {}
            if self.web_sid is not None:  # the rollout's own sid, whatever the policy wrote there
                tmp[os.path.basename(SID_FILE)] = self.web_sid.encode()
            if relay is not None and token is not None:
                files = judge_placement.guest_files(relay.config, token)
                extra[judge_placement.MODULE_NAME] = files[judge_placement.MODULE_NAME]
                tmp.update(files)
            reward_src = rp.read_bytes()
            places = verifier.placements(reward_src, extra, tmp)
            if places is None:  # too large for the seal's arguments: the engine's upload
                verifier.place(self, reward_src, extra, tmp)
            t1 = time.monotonic()
            self.seal, res = verifier.run(self, self.handout, verifier.environment(self), timeout, places)
        finally:
            if relay is not None and token is not None:
                relay.revoke(token)
        reward, error, deviation = classify_reward_run(res.output, res.exit_code, timed_out=res.timed_out,
                                                       limit_hit=res.limit_hit)
        if error is not None or reward is None or reward < 1.0:
            self.check_machine()  # an unsolved reading may be the machine's doing: then it raises
        out = res.output
        if res.limit_hit:
            out += f"\n[shinken: container limits hit: oom_kills={res.oom_kills} pids_limit={res.pids_limit_hits}]"
        return RewardResult(reward, error, deviation, res.exit_code, tail(out), time.monotonic() - t1)

    def check_machine(self) -> None:
        """Raise when the machine, not the policy, may have made the reward read the task as
        unsolved: the mock web hub holding this fork's state is gone or restarted (HubLost), or
        the fork's disk is full (DiskFull: the policy's writes may have failed with ENOSPC).
        Run only after a reward below full marks, so a solved rollout pays nothing for it."""
        web = self._provider.web
        if web is not None and self.web_sid is not None:
            why = web.lost()
            if why:
                raise HubLost(f"the mock web hub holding this rollout's state {why}")
        # The seal measured it just before the reward ran (one exec fewer); else ask now.
        free = self.seal.free_kib if self.seal is not None and self.seal.free_kib is not None else self.free_kib()
        if free is not None and free < DISK_FULL_KIB:
            raise DiskFull(f"the computer's disk is full ({free} KiB free for the user's writes): "
                           "free space on the Docker engine's data root")

    def free_kib(self) -> int | None:
        """The least room (KiB, as an unprivileged writer sees it) on the file systems a task
        writes to: /, /tmp and the user's home (overlay reports the engine's data root)."""
        res = self.exec(["df", "-Pk", "/", "/tmp", guest.HOME], timeout=30, user="root")
        free = [int(f[3]) for f in (ln.split() for ln in res.output.splitlines()[1:]) if len(f) >= 6 and f[3].isdigit()]
        return min(free) if free else None

    _removed = False  # set once the container is really gone: a failed removal is retried by calling close() again

    def close(self) -> None:
        if self._removed:
            return
        self._closed = True  # no more execs, whether or not the removal below succeeds
        remove_container(self.api, self.id)
        self._removed = True
        self._provider.forget(self)
        if self.web_sid is not None and self._provider.web is not None:
            self._provider.web.release(self.web_sid)

    def __enter__(self) -> "DockerFork":
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()


RECENT = 8  # makes a pool remembers for make_s_max


class ForkPool:
    """Ready forks of one golden, refilled in the background by `parallel` threads, so a rollout
    starts without waiting for create/start/desktop. A fixed pool keeps `size`; a demand-sized
    one (computer/demand.py) is resized as requests come and go (`resize`, down to 0)."""

    def __init__(self, provider: DockerProvider, golden: Golden, size: int,
                 make: Callable[[], DockerFork] | None = None, *, parallel: int = 1, allow_empty: bool = False) -> None:
        if size < (0 if allow_empty else 1):
            raise SessionError("pool size must be >= 1")
        self._p, self.golden, self.size = provider, golden, size
        # How a pooled computer is made (a relaunched and checked fork, a re-provision, ...).
        self._make = make or (lambda: provider.fork(golden, kind="pool"))
        self._ready: list[DockerFork] = []
        self._making = 0  # computers being made now
        self._cv = threading.Condition()
        self._closed = False
        self._error: BaseException | None = None
        self.make_s: float | None = None  # decayed mean time to make one (what a refill costs)
        self._recent: list[float] = []  # the last RECENT makes' seconds (make_s_max)
        self.made = 0
        self._threads = [threading.Thread(target=self._refill, name=f"shinken-pool-{golden.tag}-{i}", daemon=True)
                         for i in range(max(1, int(parallel)))]
        for t in self._threads:
            t.start()

    def _refill(self) -> None:
        failures = 0
        while True:
            with self._cv:
                while not self._closed and len(self._ready) + self._making >= self.size:
                    self._cv.wait()
                if self._closed:
                    return
                self._making += 1
            t0 = time.monotonic()
            try:
                fork = self._make()
                failures = 0
            except BaseException as exc:  # kept and re-raised to acquire(): never silent
                failures += 1
                with self._cv:
                    self._making -= 1
                    self._error = exc
                    self._cv.notify_all()
                # A relaunch that keeps missing the golden's windows costs a whole app start per try.
                cap = 60.0 if isinstance(exc, StartStateError) else 5.0
                time.sleep(min(cap, 0.2 * 2 ** failures))
                continue
            took = time.monotonic() - t0
            surplus = None
            with self._cv:
                self._making -= 1
                self.made += 1
                self.make_s = took if self.make_s is None else 0.7 * self.make_s + 0.3 * took
                self._recent = [*self._recent[-(RECENT - 1):], took]
                if self._closed or len(self._ready) >= self.size:
                    surplus = fork  # closed, or shrunk while it was being made
                else:
                    self._ready.append(fork)
                    self._error = None
                self._cv.notify_all()
            if surplus is not None:
                surplus.close()
                if self._closed:
                    return

    def acquire(self, timeout: float | None = 120) -> DockerFork:
        deadline = None if timeout is None else time.monotonic() + timeout
        with self._cv:
            while not self._ready:
                if self._closed:
                    raise SessionError("pool is closed")
                if self._error is not None and isinstance(self._error, (SetupError, SessionError, StartStateError)):
                    raise self._error  # the golden cannot be forked (as checked); waiting will not help
                left = None if deadline is None else deadline - time.monotonic()
                if left is not None and left <= 0:
                    err = self._error
                    raise InfraError(f"no fork ready within {timeout}s" + (f" (last error: {err})" if err else ""))
                self._cv.wait(left)
            fork = self._ready.pop(0)
            self._cv.notify_all()
            return fork

    def take(self, wait_s: float = 0.0) -> DockerFork | None:
        """A ready fork, or None (the caller makes one itself). Waits up to `wait_s` only while
        a computer is being made, never for one nobody is making."""
        deadline = time.monotonic() + max(0.0, wait_s)
        with self._cv:
            while not self._ready:
                left = deadline - time.monotonic()
                if self._closed or self._making == 0 or left <= 0:
                    return None
                self._cv.wait(left)
            fork = self._ready.pop(0)
            self._cv.notify_all()
            return fork

    def resize(self, size: int) -> None:
        """Keep `size` ready from now on: more are made in the background, a surplus is closed now."""
        with self._cv:
            if self._closed:
                return
            self.size = max(0, int(size))
            surplus = self._ready[self.size:]
            del self._ready[self.size:]
            self._cv.notify_all()
        for f in surplus:
            f.close()

    @property
    def ready(self) -> int:
        with self._cv:
            return len(self._ready)

    @property
    def make_s_max(self) -> float | None:
        """The slowest of the last RECENT makes (None before the first): a make time the load moves
        (seen here: 17 to 31 s within minutes) is sized for at its recent worst, not its mean."""
        with self._cv:
            return max(self._recent) if self._recent else None

    @property
    def making(self) -> int:
        with self._cv:
            return self._making

    def close(self) -> None:
        with self._cv:
            if self._closed:
                return
            self._closed = True
            forks, self._ready = self._ready, []
            self._cv.notify_all()
        for t in self._threads:
            t.join(timeout=120)
        for f in forks:
            f.close()
        self._p.forget_pool(self)

    def __enter__(self) -> "ForkPool":
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()
