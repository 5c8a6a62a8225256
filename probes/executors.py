"""Where task probes run: a local thread pool, or Ray tasks on the cluster's Docker
nodes. Either way results stream back to the driver, which alone writes receipts."""

from __future__ import annotations

import shutil
import threading
from concurrent.futures import FIRST_COMPLETED, Future, ThreadPoolExecutor, wait
from dataclasses import dataclass
from pathlib import Path
from contextlib import contextmanager
from typing import TYPE_CHECKING, Any, Callable, Iterable, Iterator

from shinken.bundles import wire
from shinken.bundles.model import Bundle
from shinken.errors import EnvironmentProblem
from shinken.fleet.nodes import DOCKER_RESOURCE, bundle_payload, docker_nodes, home_index, host_name
from shinken.runtime import make_temp_dir, unregister_temp_dir
from shinken.sandbox.ownership import LABEL_RUN, LABEL_TASK
from shinken.probes.oracle import Oracle
from shinken.probes.rollouts import Rollout
from shinken.probes.runner import ProbeConfig, ProviderFactory, drain_cleanup, probe_task

if TYPE_CHECKING:
    from shinken.mockweb.runs import WebPlan

OnResult = Callable[[dict[str, Any]], None]
OnRetry = Callable[[str, int, str], None]
# Nodes that may run probes advertise DOCKER_RESOURCE (`ray start --resources
# '{"shinken_docker": 4}'`); without any such node, every alive node is used.


@dataclass(frozen=True)
class Job:
    bundle: Bundle
    rollouts: tuple[Rollout, ...] = ()
    oracle: Oracle | None = None  # the task's reference solution (golden_patch.py or --oracle DIR)


def _take(jobs: Iterator[Job], free: int, stop: threading.Event) -> list[Job]:
    """Up to `free` more jobs to start; none once the run is stopping."""
    out: list[Job] = []
    while len(out) < free and not stop.is_set():
        job = next(jobs, None)
        if job is None:
            break
        out.append(job)
    return out


class LocalExecutor:
    """`concurrency` tasks at once in threads of this process (the work is Docker I/O)."""

    name = "local"

    def __init__(self, concurrency: int = 1, provider_factory: ProviderFactory | None = None) -> None:
        self.concurrency = max(1, concurrency)
        self.provider_factory = provider_factory

    def run(self, jobs: Iterable[Job], cfg: ProbeConfig, on_result: OnResult, *,
            on_retry: OnRetry | None = None, stop: threading.Event | None = None) -> None:
        stop = stop or threading.Event()
        it: Iterator[Job] = iter(jobs)
        pool = ThreadPoolExecutor(max_workers=self.concurrency, thread_name_prefix="probe")
        running: set[Future] = set()
        try:
            while True:
                for job in _take(it, self.concurrency - len(running), stop):
                    running.add(pool.submit(probe_task, job.bundle, cfg, job.rollouts,
                                            self.provider_factory, stop, on_retry, job.oracle))
                if not running:
                    return
                done, running = wait(running, return_when=FIRST_COMPLETED)
                for f in done:
                    on_result(f.result())  # callbacks run in the driver thread only
        except BaseException:
            stop.set()  # in-flight probes stop at their next retry point
            raise
        finally:
            pool.shutdown(wait=True, cancel_futures=True)
            drain_cleanup()


# --- Ray --------------------------------------------------------------------------------

_bundle_payload = bundle_payload


@contextmanager
def materialized(payload: dict[str, Any], run_id: str | None = None) -> Iterator[Bundle]:
    """The payload's bundle on this node: the task root's own folder when the node has it
    unchanged, else a copy in a temp folder that is removed afterwards and registered for
    `shinken gc` meanwhile (a worker killed mid-probe leaves nothing unaccounted for)."""
    from shinken.bundles.loader import load_bundle

    path = Path(payload["path"])
    if path.is_dir():
        b = load_bundle(path)
        if b.bundle_hash == payload["bundle_hash"]:
            yield b
            return
    # Not on this node (or changed since the driver read it): rebuild it from the payload
    # under a folder named like the original, because the folder name can be the task id.
    name, files = wire.checked(payload)  # names from the driver: one path component each
    base = make_temp_dir(prefix="probe-payload-", labels={LABEL_TASK: name, **({LABEL_RUN: run_id} if run_id else {})})
    try:
        dest = base / name
        dest.mkdir()
        wire.write_files(dest, files)
        yield load_bundle(dest)
    finally:
        shutil.rmtree(base, ignore_errors=True)
        unregister_temp_dir(base)


def _ray_probe(payload: dict[str, Any], cfg: ProbeConfig, rollouts: tuple[Rollout, ...],
               oracle: Oracle | None = None, web: WebPlan | None = None,
               endpoint: dict[str, str] | None = None) -> dict[str, Any]:
    """One task's probe on this node. A web task (`web`) runs with the mock web of this run: on a
    hub run its forks join the hub and run network this host's agent owns (`endpoint`)."""
    client: Any = None
    try:
        factory: ProviderFactory | None = None
        if web is not None:
            from shinken.sandbox.docker_client import connect
            from shinken.sandbox.docker_provider import DockerProvider

            client = connect()
            session = web.session(client, run_id=cfg.run_id, attach=endpoint)

            def factory() -> Any:
                return DockerProvider(run_id=cfg.run_id, judge=cfg.judge, web=session)
        with materialized(payload, cfg.run_id) as bundle:
            return probe_task(bundle, cfg, rollouts, factory, oracle=oracle)
    finally:
        drain_cleanup()  # a Ray worker may be stopped right after its last task
        if client is not None:
            client.close()


_docker_nodes = docker_nodes  # the fleet's hosts, in the fleet's order (shinken.fleet.nodes)


class RayExecutor:
    """Each task's probe is a Ray task pinned (hard node affinity) to one Docker node, its home
    (shinken.fleet.nodes.home_index over the host names, as the fleet's router places rollouts),
    so goldens stay where they were built and where the server will look for them."""

    name = "ray"

    def __init__(self, concurrency: int = 1, address: str | None = None, num_cpus: int | None = None,
                 web: WebPlan | None = None) -> None:
        self.concurrency = max(1, concurrency)
        self.address = address
        self.num_cpus = num_cpus
        # The run's mock web (--hub / --mock-urls): web tasks on a node use the hub its host
        # agent owns there (one per host, fleet/agent.py web_endpoint).
        self.web = web
        self._started_agents: list[Any] = []

    def _web_endpoint(self, ray: Any, node: dict[str, Any], cfg: ProbeConfig) -> dict[str, str] | None:
        """The hub and run network of `node`'s host agent for this run's hub image (the agent
        started if the node has none yet); None when the run has no hub (--mock-urls only)."""
        from shinken.fleet import cluster
        from shinken.fleet.nodes import DOCKER_RESOURCE as SLOTS

        if self.web is None or self.web.manifest is None or self.web.hub_image is None:
            return None
        name = host_name(node)
        agent = cluster.find_agent(ray, name)
        if agent is None:
            host = cluster.Host(name, node["NodeID"], node.get("NodeManagerAddress", ""),
                                int(node.get("Resources", {}).get(SLOTS, 1) or 1))
            agent = cluster.start_agent(ray, host, cfg.image)
            self._started_agents.append(agent)
        try:
            answer = ray.get(agent.web_endpoint.remote(self.web.hub_image), timeout=600)
        except Exception as exc:  # noqa: BLE001 - the agent or its node died
            raise EnvironmentProblem(f"host {name}: its agent did not give web tasks a hub ({type(exc).__name__})") from None
        if answer.get("error"):
            raise EnvironmentProblem(f"host {name} cannot serve web tasks: {answer.get('detail')}; put the hub image "
                                     "on every host (`shinken image push` / `pull`, docs/fleet.md)")
        want = self.web.manifest.image_id
        if answer.get("hub_image_id") != want:
            raise EnvironmentProblem(f"host {name}'s {self.web.hub_image} is {str(answer.get('hub_image_id'))[7:19]}, "
                                     f"this run's is {want[7:19]}; every host must run the same hub image")
        return dict(answer)

    def _init(self) -> Any:
        try:
            import ray
        except ImportError:
            raise EnvironmentProblem("--executor ray needs Ray: pip install 'shinken-cua[ray]'") from None
        if not ray.is_initialized():
            kwargs: dict[str, Any] = {"ignore_reinit_error": True, "log_to_driver": False,
                                      "include_dashboard": False, "configure_logging": False}
            if self.address:
                from shinken.fleet.cluster import check_head

                check_head(self.address)
                kwargs["address"] = self.address
            else:
                from shinken.fleet import ray_auth

                # Token mode for the local cluster too: its ports listen on every interface.
                ray_auth.apply(ray_auth.local_env())
                # "local": always a fresh instance, never a cluster `ray start` left on this host.
                kwargs["address"] = "local"
                kwargs["num_cpus"] = self.num_cpus or max(self.concurrency, 1)
            # A local cluster started here inherits this process's environment
            # (DOCKER_HOST included); cluster nodes use their own.
            try:
                ray.init(**kwargs)
            except Exception as exc:  # noqa: BLE001 - connection problems are environment problems
                raise EnvironmentProblem(f"cannot start or reach Ray ({self.address or 'local'}): {exc}") from None
        return ray

    def run(self, jobs: Iterable[Job], cfg: ProbeConfig, on_result: OnResult, *,
            on_retry: OnRetry | None = None, stop: threading.Event | None = None) -> None:
        ray = self._init()
        from ray.util.scheduling_strategies import NodeAffinitySchedulingStrategy

        nodes, tagged = _docker_nodes(ray)
        names = [host_name(n) for n in nodes]
        if not nodes:
            raise EnvironmentProblem("the Ray cluster has no alive node")
        # On tagged nodes one unit of the resource per probe also caps each node's load at
        # what it advertises.
        remote = ray.remote(num_cpus=1, max_retries=0, resources={DOCKER_RESOURCE: 1} if tagged else None)(_ray_probe)
        stop = stop or threading.Event()
        it = iter(jobs)
        running: dict[Any, tuple[Job, int]] = {}  # ref -> (job, ray-level attempts)
        endpoints: dict[str, dict[str, str] | None] = {}  # node id -> its host's hub (web tasks)

        def submit(job: Job, attempt: int) -> None:
            from shinken.mockweb.runs import is_web

            node = nodes[home_index(job.bundle.id, names)]
            web = self.web if self.web is not None and is_web(job.bundle) else None
            if web is not None and node["NodeID"] not in endpoints:
                endpoints[node["NodeID"]] = self._web_endpoint(ray, node, cfg)
            ref = remote.options(
                scheduling_strategy=NodeAffinitySchedulingStrategy(node_id=node["NodeID"], soft=False)
            ).remote(_bundle_payload(job.bundle), cfg, job.rollouts, job.oracle, web,
                     endpoints.get(node["NodeID"]) if web is not None else None)
            running[ref] = (job, attempt)

        try:
            while True:
                for job in _take(it, self.concurrency - len(running), stop):
                    submit(job, 1)
                if not running:
                    return
                done, _ = ray.wait(list(running), num_returns=1)
                for ref in done:
                    job, attempt = running.pop(ref)
                    try:
                        on_result(ray.get(ref))
                    except ray.exceptions.RayError as exc:
                        # A worker or node died: infrastructure, like a Docker failure.
                        if attempt <= cfg.retries:
                            if on_retry is not None:
                                on_retry(job.bundle.id, attempt, f"ray: {type(exc).__name__}")
                            submit(job, attempt + 1)
                        else:
                            from shinken.probes.runner import infra_line

                            on_result(infra_line(job.bundle, cfg, job.rollouts, attempt,
                                                 f"ray task failed {attempt} time(s): {type(exc).__name__}: {str(exc)[:200]}",
                                                 job.oracle))
        except BaseException:
            stop.set()
            for ref in running:
                try:
                    ray.cancel(ref, force=True)
                except Exception:  # noqa: BLE001
                    pass
            raise

    def shutdown(self) -> None:
        try:
            import ray

            if ray.is_initialized():
                for agent in self._started_agents:  # agents this run started (nodes no `fleet join` made)
                    try:
                        ray.get(agent.close.remote(), timeout=120)
                        ray.kill(agent)
                    except Exception:  # noqa: BLE001 - `shinken gc` reclaims what a dead agent left
                        pass
                self._started_agents = []
                ray.shutdown()
        except ImportError:
            pass


def make_executor(kind: str, concurrency: int, *, ray_address: str | None = None,
                  provider_factory: ProviderFactory | None = None) -> LocalExecutor | RayExecutor:
    if kind == "local":
        return LocalExecutor(concurrency, provider_factory)
    if kind == "ray":
        return RayExecutor(concurrency, address=ray_address)
    raise ValueError(kind)
