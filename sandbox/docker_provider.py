"""The filesystem-tier sandbox on Docker (sandbox.api.Provider): goldens built from a
bundle's setup, cheap forks of them, and pools of ready forks.

The parts live in their own modules: sandbox/container.py (one container: exec, files,
steps), sandbox/goldens.py (build / find / remove goldens), sandbox/forks.py (DockerFork,
ForkPool), sandbox/docker_stream.py (docker-py internals), sandbox/docker_client.py (the
engine connection). Everything goes through one low-level APIClient (keep-alive pool)."""

from __future__ import annotations

import threading
import time
from collections.abc import Mapping
from typing import Any

import docker

from shinken.bundles.model import Bundle
from shinken.judge.config import JudgeConfig
from shinken.judge.relay import JudgeRelay, shared_relay
from shinken.sandbox import connect_secret, disk_quota, goldens, judge_placement, start_state
from shinken.sandbox.api import Golden, ImageMissing, InfraError, SessionError, SetupError, UnsettledDesktop
from shinken.sandbox.container import DESKTOP_UP_TIMEOUT_S, Container, UserIds, remove_container, start_container
from shinken.sandbox.desktop import DesktopRecord
from shinken.sandbox.docker_client import connect, resolve_image
from shinken.sandbox.forks import NO_FILES, REPLAY_SLEEP_CAP_S, DockerFork, ForkPool
from shinken.sandbox.ownership import LABEL_BUNDLE_HASH, Owner, labels_for
from shinken.sandbox.policy import Limits, task_needs
from shinken.sandbox.task_network import network_for, opted_network
from shinken.sandbox.web_hooks import WebHooks
from shinken.tiers import Tier

# How long each golden build's record waits for the desktop the setup left to settle: a build whose
# record did not is thrown away and the task built once more, on a fresh container, with a longer
# bound (docs/tiers.md): at load average 30-40 Thunderbird's demo reached its folder 0.7 s after
# a second 90 s record ran out.
SETTLE_BOUNDS_S = (start_state.RECORD_TIMEOUT_S, 2 * start_state.RECORD_TIMEOUT_S)


def settle_bounds(first_s: float = start_state.RECORD_TIMEOUT_S) -> tuple[float, float]:
    """The two builds' record bounds for a first bound of `first_s` (`shinken probe --settle-timeout`):
    the second build waits twice as long."""
    return (float(first_s), 2 * float(first_s))


class DockerProvider:
    tier = "filesystem"

    def __init__(self, client: docker.DockerClient | None = None, *, run_id: str | None = None,
                 owner: Owner | None = None, limits: Limits | None = None, judge: JudgeConfig | None = None,
                 web: WebHooks | None = None, labels: Mapping[str, str] | None = None,
                 task_network: str | None = None, disk_share_mib: float = 0.0) -> None:
        self.client = client or connect()  # EngineUnreachable (an InfraError) when no engine answers
        self.api = self.client.api
        self.run_id = run_id
        self.owner = owner or Owner.current()
        self.labels = dict(labels or {})  # extra labels on every fork and pool fork (e.g. LABEL_MADE_BY)
        self.limits = limits or Limits()
        # mockweb.session.WebSession of this run: the network web tasks join, their hub state
        # recorded at golden build and forked per fork.
        self.web = web
        # The Docker network the operator named for tasks that need the network (else only a web
        # run's internal network; sandbox/task_network.py).
        self.task_network = task_network if task_network is not None else opted_network()
        self._forks: set[DockerFork] = set()
        self._pools: set[ForkPool] = set()
        self._golden_computers: dict[str, DockerFork] = {}  # golden image id -> its kept build container
        self._leases: dict[str, str] = {}  # golden image id -> this provider's lease on it (goldens.hold)
        self._lock = threading.Lock()
        self._host_configs: dict[tuple[bool, str | None], dict[str, Any]] = {}
        self.judge = judge  # rewards that call reward_judge reach it through the relay
        # A fork's disk share, enforced by the storage driver where it can (sandbox/disk_quota.py); 0: none.
        self.disk_share_mib = disk_share_mib

    def judge_relay(self) -> JudgeRelay | None:
        """The running relay for this provider's judge (shared by the process), or None."""
        return shared_relay(self.judge) if self.judge is not None else None

    # --- containers -----------------------------------------------------------------
    def _host_config(self, network: bool, judge: bool = False) -> dict[str, Any]:
        relay = self.judge_relay() if judge else None
        key = (network, str(relay.directory) if relay is not None else None)
        hc = self._host_configs.get(key)
        if hc is None:
            lim = self.limits
            hc = self.api.create_host_config(
                init=True,
                cap_drop=["ALL"],
                cap_add=list(lim.cap_add),
                security_opt=["no-new-privileges"],
                pids_limit=lim.pids,
                mem_limit=lim.mem,
                memswap_limit=lim.mem,  # no swap: a hog is OOM-killed, not slowed to a crawl
                nano_cpus=int(lim.cpus * 1e9),
                shm_size=lim.shm_size,
                network_mode=network_for(self.web.network_mode if self.web is not None else None, self.task_network,
                                         self.api) if network else "none",
                # The relay's folder, read-only: its socket is the one thing a fork can reach.
                binds={key[1]: {"bind": judge_placement.MOUNT, "mode": "ro"}} if key[1] else None,
            )
            self._host_configs[key] = hc
        return hc

    def _with_quota(self, host_config: dict[str, Any], image_id: str) -> dict[str, Any]:
        """A fork's host config with its disk share as a storage quota where the engine enforces one."""
        opt = disk_quota.storage_opt(self.api, image_id, self.disk_share_mib)
        return {**host_config, "StorageOpt": opt} if opt else host_config

    def start(self, image_id: str, labels: dict[str, str], *, network: bool, desktop: bool = False,
              ids: UserIds | None = None, judge: bool = False) -> Container:
        """A running container with this provider's isolation (the golden build uses it;
        so would a re-provisioned rollout); `judge`: rewards run in it may reach the judge relay,
        as on a fork. The caller removes it."""
        cid = start_container(self.api, image_id, labels, self._host_config(network, judge and self.judge is not None),
                              desktop=desktop)
        return Container(self.api, cid, ids or UserIds(), network)

    def forget(self, fork: DockerFork) -> None:
        with self._lock:
            self._forks.discard(fork)

    def forget_pool(self, pool: ForkPool) -> None:
        with self._lock:
            self._pools.discard(pool)

    # --- goldens ----------------------------------------------------------------------
    def resolve_image(self, image: str) -> str:
        return resolve_image(self.client, image)

    def ensure_golden(self, bundle: Bundle, image_id: str, *, setup_timeout: float = 600,
                      keep_computer: bool = False,
                      settle_timeout: float = start_state.RECORD_TIMEOUT_S) -> Golden:
        """The committed post-setup image of `bundle` on the base image `image_id`, built
        once and then found again by its labels (bundle hash + base image id), with the record
        of what the setup left running (golden.desktop); which tier reproduces it is the
        caller's call (shinken.tiers). Pass the id the run resolved once (resolve_image): a
        tag may be moved meanwhile. With `keep_computer`, a golden built now keeps its build
        container running for take_golden_computer(). `settle_timeout`: how long the first build's
        record waits for the desktop to settle (the second one waits twice as long)."""
        if not bundle.ok:
            raise SetupError(-1, "bundle", f"{bundle.id}: defective bundle ({bundle.why_defective()})", where="bundle")
        base_id = self.resolve_image(image_id)  # an id names itself; this checks it is still there
        for attempt in (1, 2):
            found = goldens.find_golden(self.api, bundle, base_id)
            if found is None:
                break
            try:
                self.hold_golden(found)
                return found
            except ImageMissing:  # deleted by its last holder between the lookup and the lease: build it
                if attempt == 2:
                    raise
        # A web task's build container holds the golden's own hub sid, whose state forks copy:
        # it is not handed out as a computer.
        keep = keep_computer and not (self.web is not None and task_needs(bundle).network)
        golden, box = self._build_settled(bundle, base_id, setup_timeout, keep=keep,
                                          bounds=settle_bounds(settle_timeout))
        if box is not None:
            own = DockerFork(self, box.id, golden, box.ids, network=box.network)
            with self._lock:
                self._forks.add(own)  # removed by close() if nobody takes it
                self._golden_computers[golden.image_id] = own
        self.hold_golden(golden)
        return golden

    def hold_golden(self, golden: Golden) -> None:
        """Hold a lease on `golden` while this provider serves from it (goldens.hold; once per golden):
        no other process deletes it meanwhile. Released by delete_golden or close. ImageMissing when
        the golden is gone already."""
        with self._lock:
            if golden.image_id in self._leases:
                return
        lease = goldens.hold(self.api, golden, labels_for("lease", task=golden.task_id, run=self.run_id,
                                                          owner=self.owner, extra=dict(self.labels)))
        with self._lock:
            extra = lease if golden.image_id in self._leases else None
            self._leases.setdefault(golden.image_id, lease)
        if extra is not None:  # another thread took one meanwhile
            remove_container(self.api, extra)

    def has_golden(self, golden: Golden) -> bool:
        """Whether the golden image is still on the engine (forced out by a process that holds no lease)."""
        return goldens.exists(self.api, golden.image_id)

    def release_golden(self, golden: Golden) -> None:
        """Let go of this provider's lease on the golden; the golden stays (for others, or for gc)."""
        self._let_go(golden.image_id)

    def let_go_of_goldens(self) -> None:
        """Release every lease this provider holds (its goldens stay); the forks it made are untouched."""
        with self._lock:
            held = list(self._leases)
        errors = []
        for image_id in held:
            try:
                self._let_go(image_id)
            except InfraError as exc:
                errors.append(str(exc))
        if errors:
            raise InfraError("; ".join(errors))

    def _let_go(self, image_id: str) -> None:
        with self._lock:
            lease = self._leases.pop(image_id, None)
        if lease is not None:
            remove_container(self.api, lease)

    def _build_settled(self, bundle: Bundle, base_id: str, setup_timeout: float, *, keep: bool,
                       bounds: tuple[float, ...] = SETTLE_BOUNDS_S) -> tuple[Golden, Container | None]:
        """build_golden, once more on a fresh container (with a longer bound) when the desktop the
        setup left did not settle (the same container waited on did not help: Thunderbird sat on
        `Home` past 90 s at load average 45-80). Raises UnsettledDesktop naming both records when
        neither did."""
        records: list[DesktopRecord] = []
        for bound in bounds:
            try:
                golden, box = goldens.build_golden(self, bundle, base_id, setup_timeout, keep=keep, record_timeout=bound)
                golden.unsettled = records
                return golden, box
            except UnsettledDesktop as exc:
                records += exc.records
        raise UnsettledDesktop(bundle.id, records, bounds)

    def take_golden_computer(self, golden: Golden) -> DockerFork | None:
        """The build container of `golden` when this provider built it with keep_computer: still
        running as the setup left it (processes, windows, focus), so it shows the start state
        by definition and needs no relaunch or check. Handed out once; the taker closes it."""
        with self._lock:
            own = self._golden_computers.pop(golden.image_id, None)
        if own is not None:
            own.mark_handed_out()
        return own

    def delete_golden(self, golden_or_image_id: Golden | str) -> bool:
        """Let go of a golden and remove its image unless another holds it (explicit; goldens are
        never removed implicitly): this provider's forks of it are closed and its lease released
        first. True when the image is gone; False when another process's fork or lease holds it
        (it stays: a shared cache). Failures are retried, then raised."""
        image_id = golden_or_image_id.image_id if isinstance(golden_or_image_id, Golden) else golden_or_image_id
        with self._lock:
            mine = [f for f in self._forks if f.golden.image_id == image_id]
        for f in mine:
            f.close()
        self._let_go(image_id)
        return goldens.remove_golden_image(self.api, image_id)

    # --- forks --------------------------------------------------------------------
    def fork(self, golden: Golden, *, replay: bool = True, network: bool | None = None,
             kind: str = "fork", tier: Tier | None = None, extra_labels: Mapping[str, str] | None = None) -> DockerFork:
        """A running container from the golden, desktop up when the task needs it, made to show
        the start state the way `tier` says (default: relaunch when the setup left processes,
        else snapshot; see shinken.tiers). A relaunch whose desktop differs from the golden's
        record raises StartStateError. replay=False skips the post-fork steps; `extra_labels` are
        added to this fork's (e.g. the expiry of a NeMo Gym sandbox)."""
        tier = tier or (Tier.RELAUNCH if golden.needs_relaunch else Tier.SNAPSHOT)
        if tier is Tier.REPROVISION:
            raise SessionError("a re-provision tier computer is made with provision(), not fork()")
        net = golden.network if network is None else network
        secret, secret_labels = connect_secret.new()
        labels = labels_for(kind, task=golden.task_id, run=self.run_id, owner=self.owner,
                            extra={**self.labels, **(extra_labels or {}), **secret_labels,
                                   LABEL_BUNDLE_HASH: golden.bundle_hash, goldens.LABEL_GOLDEN: golden.image_id})
        t0 = time.monotonic()
        cid = start_container(self.api, golden.image_id, labels,
                              self._with_quota(self._host_config(net, self.judge is not None), golden.image_id),
                              desktop=golden.needs_desktop, hostname=golden.hostname)
        fork = DockerFork(self, cid, golden, UserIds(golden.user_uid, golden.user_gid), network=net)
        fork.tier, fork.connect_secret = tier, secret
        with self._lock:
            self._forks.add(fork)
        try:
            t1 = time.monotonic()
            relaunch = tier is Tier.RELAUNCH and golden.desktop is not None and golden.desktop.needs_relaunch
            web = self.web if golden.network else None
            # A relaunch waits for the desktop itself, in the same exec (one round trip fewer),
            # unless the hub state must be set in between.
            joint = relaunch and golden.needs_desktop and web is None
            if golden.needs_desktop and not joint:
                fork.wait_desktop_boot()
            fork.start_timings = {"container_s": round(t1 - t0, 4), "desktop_s": round(time.monotonic() - t1, 4)}
            if web is not None:
                fork.web_sid = web.new_sid()  # set first: a half-made sid is released on close
                if not web.restore(fork, fork.web_sid):
                    fork.web_sid = None
            # The config's launch/open steps are replayed only at the filesystem tier; the other
            # tiers bring those processes back from the record (or had none).
            steps = golden.post_fork if tier is Tier.FILESYSTEM or golden.desktop is None else golden.bundle_post_fork
            if relaunch:
                seen = start_state.restore(fork, self._relaunch_record(golden, fork),
                                           wait_desktop=DESKTOP_UP_TIMEOUT_S if joint else None)
                fork.start_timings.update(seen.timings)
            elif tier is Tier.FILESYSTEM and golden.desktop is not None and any(s.starts_process for s in steps):
                start_state.clean(fork)  # the replayed apps would meet their build-time locks
            if replay and steps:
                fork.run_steps(steps, NO_FILES, where="post_fork", sleep_cap=REPLAY_SLEEP_CAP_S)
            if golden.needs_desktop or relaunch or (replay and steps):
                # shinken started processes as the task's user: they are kept (those of an unchecked
                # replay once they hold still; a relaunch waited for its apps to go idle)
                fork.mark_handed_out(settle=replay and not relaunch and any(s.starts_process for s in steps))
        except BaseException:
            fork.close()
            raise
        return fork

    @staticmethod
    def _relaunch_record(golden: Golden, fork: DockerFork) -> DesktopRecord:
        """What a relaunch-tier fork starts again: the golden's record, with the golden's web sid
        (a browser the setup opened on the mock) replaced by the fork's own."""
        assert golden.desktop is not None
        if golden.web_sid and fork.web_sid:
            return golden.desktop.renamed(golden.web_sid, fork.web_sid)
        return golden.desktop

    def provision(self, bundle: Bundle, golden: Golden, *, kind: str = "fork", replay: bool = True,
                  setup_timeout: float = 600, extra_labels: Mapping[str, str] | None = None) -> DockerFork:
        """The re-provision tier: a fresh container from the golden's base image with the bundle's
        whole setup run on it, its desktop checked against the golden's record (StartStateError
        when it differs), then the bundle's post-fork steps."""
        t0 = time.monotonic()
        secret, secret_labels = connect_secret.new()
        labels = labels_for(kind, task=golden.task_id, run=self.run_id, owner=self.owner,
                            extra={**self.labels, **(extra_labels or {}), **secret_labels,
                                   LABEL_BUNDLE_HASH: golden.bundle_hash, goldens.LABEL_GOLDEN: golden.image_id})
        cid = start_container(self.api, golden.base_image_id, labels,
                              self._with_quota(self._host_config(golden.network, self.judge is not None),
                                               golden.base_image_id),
                              desktop=golden.needs_desktop, hostname=golden.hostname)
        fork = DockerFork(self, cid, golden, UserIds(golden.user_uid, golden.user_gid))
        fork.tier, fork.connect_secret = Tier.REPROVISION, secret
        with self._lock:
            self._forks.add(fork)
        try:
            _, _, _, rec = goldens.set_up(fork, bundle, deadline=t0 + setup_timeout)
            if self.web is not None and golden.network:
                fork.web_sid = self.web.setup_sid(fork)  # the setup made its own: released on close
                if fork.web_sid is not None:
                    self.web.seal(fork.web_sid)
            if golden.desktop is not None:
                start_state.compare(fork, "reprovision", golden.desktop, rec)
            fork.start_timings = {"setup_s": round(time.monotonic() - t0, 3)}
            if replay and golden.bundle_post_fork:
                fork.run_steps(golden.bundle_post_fork, NO_FILES, where="post_fork", sleep_cap=REPLAY_SLEEP_CAP_S)
            fork.mark_handed_out()
        except BaseException:
            fork.close()
            raise
        return fork

    def pool(self, golden: Golden, size: int, *, tier: Tier | None = None, bundle: Bundle | None = None,
             parallel: int = 1, allow_empty: bool = False) -> ForkPool:
        """`size` computers kept ready, each made (and checked) at `tier` before it is handed out,
        by `parallel` refill threads; `allow_empty`: a demand-sized pool that starts (and may shrink) to 0."""
        if tier is Tier.REPROVISION:
            if bundle is None:
                raise SessionError("a re-provision pool needs the bundle")
            setup = bundle
            p = ForkPool(self, golden, size, make=lambda: self.provision(setup, golden, kind="pool"),
                         parallel=parallel, allow_empty=allow_empty)
        else:
            p = ForkPool(self, golden, size, make=lambda: self.fork(golden, kind="pool", tier=tier),
                         parallel=parallel, allow_empty=allow_empty)
        with self._lock:
            self._pools.add(p)
        return p

    def close(self) -> None:
        """Remove every fork and pool this provider made and let go of its goldens (they stay: a cache)."""
        with self._lock:
            pools, self._pools = list(self._pools), set()
            self._golden_computers.clear()  # their containers are in _forks, closed below
        for p in pools:
            p.close()
        with self._lock:
            forks = list(self._forks)
        errors = []
        for f in forks:
            try:
                f.close()
            except InfraError as exc:
                errors.append(str(exc))
        try:
            self.let_go_of_goldens()
        except InfraError as exc:
            errors.append(str(exc))
        if errors:
            raise InfraError("; ".join(errors))

    def __enter__(self) -> DockerProvider:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()
