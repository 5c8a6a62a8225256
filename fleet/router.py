"""FleetEngine: the RolloutEngine contract (computer/contract.py) over the fleet's host agents.

Every seed carries the server's EngineConfig.rollout() (fleet/wire.py SeedRequest): the host serves
the rollout with the server's image, tier policy, profile, judge and mock web, or refuses it naming
the difference. An exception a host's engine raises comes back as the failure table's answer and is
raised here again as one the server answers the same way (wire.Failed.exception).

Placement: a task's home host is fleet.nodes.home_index of its id over the fleet's host names
(rendezvous hashing; the probe's Ray executor uses the same), so its golden is usually there already; a home host with no free slot
spills the seed to the host with the most free slots, which builds the golden from the bundle
(sent along when the host lacks it). A seed that finds no free slot within `seed_timeout_s` is an
InfraError (the server answers HTTP 503, masked), never a task failure and never an unbounded queue.

The router keeps no rollout state: the generation token it returns is
`<host>~<agent incarnation>~<engine token>`, so any router process (any server worker) can route a
later call, and a token from a host whose agent has since restarted is recognised as a lost rollout.
A host that fails (its node, its agent or its Docker engine) is avoided by new seeds until its agent
answers healthy again; its rollouts end masked (Gym's failure kinds: provider_unavailable, session_lost)."""

from __future__ import annotations

import logging
import threading
import time
from collections import OrderedDict
from typing import Any

from shinken.bundles.catalog import BundleCatalog
from shinken.bundles.model import Bundle
from shinken.computer.actions import ToolOutput
from shinken.computer.contract import EngineConfig, EngineStatus, RolloutEngine, VerifyResult
from shinken.errors import ShinkenError
from shinken.fleet import cluster, wire
from shinken.fleet.nodes import bundle_payload, home_index
from shinken.sandbox.api import InfraError, SessionError

log = logging.getLogger("shinken.fleet")

SEP = "~"
HOSTS_TTL_S = 2.0  # how long a view of the hosts and their free slots is reused
INFRA_TOOL_ANSWER = "error: the computer failed (infrastructure); this rollout will not be scored"


def split_token(generation: str | None) -> tuple[str, str, str] | None:
    parts = str(generation or "").split(SEP)
    return (parts[0], parts[1], parts[2]) if len(parts) == 3 and all(parts) else None


class FleetEngine:
    """Same calls as ComputerEngine; every Docker call happens in a host agent."""

    def __init__(self, address: str, config: EngineConfig, *, agent_kwargs: dict[str, Any] | None = None) -> None:
        self.address = address
        self._config = config
        self._rollout = config.rollout()  # sent with every seed
        self.task_root = config.task_root
        self.image = config.image
        self.seed_timeout_s = float(config.seed_timeout_s)
        self.call_timeout_s = float(config.call_timeout_s)
        self.agent_kwargs = dict(agent_kwargs or {})
        self.catalog = BundleCatalog(self.task_root)
        self._lock = threading.Lock()
        self._view: tuple[float, list[cluster.Host], dict[str, dict[str, Any]]] | None = None
        self._down: dict[str, str] = {}  # host -> why new seeds avoid it (until its agent answers healthy)
        # host -> its agent's actor handle: a name lookup is a round trip to the head (GCS), as long
        # as the call itself; refreshed with the view and whenever a call through it fails.
        self._agents: dict[str, Any] = {}
        self.ray = cluster.connect(address)
        self.stats = {"spilled": 0, "refused_full": 0, "placed": 0, "infra": 0}
        # The last seeds' timings as their hosts told them (how the golden came: warm, cached, built,
        # copied through the registry; seconds): diagnostics only, bounded, never used to route.
        self._timings: OrderedDict[str, dict[str, Any]] = OrderedDict()

    @property
    def config(self) -> EngineConfig:
        return self._config

    # ------------------------------------------------------------------ tasks

    def bundle(self, task_id: str) -> Bundle:
        """The task's bundle as it is on disk: a host prepares a web task for its own hub."""
        return self.catalog.raw(task_id)

    # ------------------------------------------------------------------ hosts

    def view(self, fresh: bool = False) -> tuple[list[cluster.Host], dict[str, dict[str, Any]]]:
        """The fleet's hosts (stable order) and their agents' info, reused for HOSTS_TTL_S."""
        with self._lock:
            if not fresh and self._view is not None and time.monotonic() - self._view[0] < HOSTS_TTL_S:
                return self._view[1], self._view[2]
        found = cluster.hosts(self.ray)
        for h in found:
            if cluster.find_agent(self.ray, h.name) is None:
                try:  # a node that advertises the resource but was started without `fleet join`
                    h.agent = cluster.start_agent(self.ray, h, self.image, **self.agent_kwargs)
                except ShinkenError as exc:
                    log.warning("host %s: %s", h.name, exc)
        info = cluster.infos(self.ray, found)
        with self._lock:
            self._agents.update({h.name: h.agent for h in found if h.agent is not None})
            for name, i in info.items():
                if "error" not in i and i.get("docker_ok"):
                    self._down.pop(name, None)  # back: used again
            self._view = (time.monotonic(), found, info)
        return found, info

    def _mark_down(self, host: str, why: str) -> None:
        with self._lock:
            self._down[host] = why
            self._view = None
            self._agents.pop(host, None)
        log.warning("fleet host %s avoided by new seeds: %s", host, why)

    def _agent(self, host: str, fresh: bool = False) -> Any:
        with self._lock:
            agent = None if fresh else self._agents.get(host)
        if agent is None:
            agent = cluster.find_agent(self.ray, host)
            if agent is None:
                raise InfraError(f"fleet host {host} has no agent (its node left or died)")
            with self._lock:
                self._agents[host] = agent
        return agent

    def _call(self, host: str, method: str, *args: Any, timeout: float | None = None) -> Any:
        """One agent call (its wire answer); a dead node or agent is InfraError (and the host is avoided)."""
        agent = self._agent(host)
        try:
            return self._ray_call(agent, method, args, timeout)
        except Exception as exc:  # noqa: BLE001 - RayActorError, node death, timeouts: the host failed
            why = f"{type(exc).__name__}: {str(exc)[:200]}"
            try:  # the handle may be of an agent since replaced (the host left and joined again): ask its successor
                again = self._agent(host, fresh=True)
            except Exception:  # noqa: BLE001 - no agent by that name now, or the head is unreachable
                again = agent
            try:
                if again == agent:
                    raise InfraError(why)
                return self._ray_call(again, method, args, timeout)
            except Exception as exc2:  # noqa: BLE001
                why = why if isinstance(exc2, InfraError) else f"{type(exc2).__name__}: {str(exc2)[:200]}"
                self._mark_down(host, why)
                raise InfraError(f"fleet host {host} failed during {method}: {why}") from None

    def _ray_call(self, agent: Any, method: str, args: tuple[Any, ...], timeout: float | None) -> Any:
        return self.ray.get(getattr(agent, method).remote(*args), timeout=timeout or self.call_timeout_s)

    # ------------------------------------------------------------------ placement

    def _adjust_free(self, host: str, delta: int) -> None:
        """Keep the cached view's free slots of `host` in step with a seed placed or a rollout
        ended through this router: a group's next seed within HOSTS_TTL_S of an end would
        otherwise pass over its home host as full and spill (seen in a suite run)."""
        with self._lock:
            if self._view is not None and "free" in self._view[2].get(host, {}):
                self._view[2][host]["free"] = max(0, int(self._view[2][host]["free"]) + delta)

    def _candidates(self, task_id: str) -> list[str]:
        """Hosts to try, the task's home first (if it has a free slot), then by most free slots."""
        found, info = self.view()
        with self._lock:
            down = set(self._down)
        ok = [h.name for h in found if "error" not in info.get(h.name, {"error": 1})
              and info[h.name].get("docker_ok") and h.name not in down]
        if not found:
            return []
        home = found[home_index(task_id, [h.name for h in found])].name
        free = {n: int(info[n].get("free", 0)) for n in ok}
        rest = sorted((n for n in ok if n != home and free[n] > 0), key=lambda n: (-free[n], n))
        return ([home] if home in free and free[home] > 0 else []) + rest

    def home(self, task_id: str) -> str | None:
        found, _ = self.view()
        return found[home_index(task_id, [h.name for h in found])].name if found else None

    def seed(self, session: str, task_id: str, generation: str | None = None, tier: Any = None) -> str:
        bundle = self.bundle(task_id)
        old = split_token(generation)
        if old is not None:  # the session's earlier rollout ends where it lives (a stale token is refused there)
            try:
                answer = self._call(old[0], "end", session, old[2])
                if isinstance(answer, wire.Failed) and answer.stale and old[1] == self._incarnation(old[0]):
                    raise answer.exception()
            except InfraError:
                pass  # its host is gone, and the rollout with it
        tier_name = getattr(tier, "value", tier)
        req = wire.SeedRequest(session, task_id, bundle.path.name, bundle.bundle_hash, self._rollout,
                               None if tier_name is None else str(tier_name))
        deadline = time.monotonic() + self.seed_timeout_s
        tried_home = self.home(task_id)
        refusals: dict[str, str] = {}  # host -> why it would not serve this config (said when no host could)
        while True:
            candidates = self._candidates(task_id)
            for host in candidates:
                try:
                    answer = self._call(host, "seed", req)
                    if isinstance(answer, wire.Refused) and answer.reason == "need_task":
                        self._call(host, "add_task", bundle_payload(bundle))
                        answer = self._call(host, "seed", req)
                except InfraError as exc:
                    log.warning("seed of %s on %s: %s", task_id, host, exc)
                    continue
                if isinstance(answer, wire.Seeded):
                    self._placed(session, host, tried_home, answer)
                    return SEP.join((host, answer.incarnation, answer.generation))
                if isinstance(answer, wire.Refused):
                    if answer.reason == "config":
                        refusals[host] = answer.detail
                        log.warning("seed of %s: %s", task_id, answer.detail)
                    continue  # full (or its bundle still missing): another host may take it
                if answer.infra:  # this host's engine failed: avoided until it answers healthy, another tries
                    self._mark_down(host, answer.detail)
                    log.warning("seed of %s on %s: %s", task_id, host, answer.detail)
                    continue
                raise answer.exception()  # the task's, the session's or a bug: as a local engine raises it
            said = "; ".join(refusals.values())
            if candidates and all(h in refusals for h in candidates):  # a config no host serves: waiting changes nothing
                raise InfraError(f"no fleet host serves this server's config ({said}); this rollout is not scored")
            if time.monotonic() >= deadline:
                with self._lock:
                    self.stats["refused_full"] += 1
                raise InfraError(f"no fleet host could start task {task_id} within {self.seed_timeout_s:.0f}s "
                                 + (f"({said})" if said else "(every slot busy or every host down)")
                                 + "; this rollout is not scored")
            time.sleep(0.25)
            self.view(fresh=True)

    def _placed(self, session: str, host: str, home: str | None, seeded: wire.Seeded) -> None:
        self._adjust_free(host, -1)
        with self._lock:
            self.stats["placed"] += 1
            if host != home:
                self.stats["spilled"] += 1
            self._timings[session] = {**dict(seeded.timing), "host": host, "spilled": host != home}
            self._timings.move_to_end(session)
            while len(self._timings) > 1024:
                self._timings.popitem(last=False)

    def seed_timing(self, session: str) -> dict[str, Any]:
        """The session's last seed as its host told it (ComputerEngine.seed_timing plus host and spilled)."""
        with self._lock:
            return dict(self._timings.get(session, {}))

    def _incarnation(self, host: str) -> str | None:
        _, info = self.view()
        inc = info.get(host, {}).get("incarnation")
        return str(inc) if inc else None

    def _route(self, session: str, generation: str | None) -> tuple[str, str, str]:
        token = split_token(generation)
        if token is None:
            raise SessionError(f"session {session!r}: stale or unknown generation; reseed to start a new rollout")
        return token

    def tool(self, session: str, generation: str, name: str, arguments: dict[str, Any]) -> str:
        return self.step(session, generation, name, arguments).text

    def step(self, session: str, generation: str, name: str, arguments: Any) -> ToolOutput:
        """One tool call on the rollout's host (what the server's tool routes call)."""
        out = self._observe(session, generation, "step", name, arguments)
        assert out is not None  # a tool call always answers text
        return out

    def first_observation(self, session: str, generation: str) -> ToolOutput | None:
        """The screen the rollout starts from (screenshot profiles), from its host; None otherwise."""
        return self._observe(session, generation, "first_observation")

    def sandbox_id(self, session: str, generation: str) -> str | None:
        """None: a fleet rollout's computer lives on another host, no sandbox provider here can borrow it."""
        self._route(session, generation)
        return None

    def _observe(self, session: str, generation: str, method: str, *args: Any) -> ToolOutput | None:
        host, _, gen = self._route(session, generation)
        try:
            answer = self._call(host, method, session, gen, *args)
        except InfraError:
            return ToolOutput(INFRA_TOOL_ANSWER)
        if isinstance(answer, wire.Failed):
            raise answer.exception()
        out: ToolOutput | None = answer.output
        return out

    def verify(self, session: str, generation: str) -> VerifyResult:
        host, inc, gen = self._route(session, generation)
        try:
            answer = self._call(host, "verify", session, gen)
        except InfraError as exc:
            return VerifyResult.masked("infra", "verification", str(exc))
        if isinstance(answer, wire.Failed):
            if answer.stale and self._incarnation(host) != inc:  # the host's agent restarted: the rollout went with it
                return VerifyResult.masked("fork_lost", "verification", f"fleet host {host} restarted during the rollout")
            raise answer.exception()
        result: VerifyResult = answer.result
        return result

    def end(self, session: str, generation: str | None = None) -> None:
        token = split_token(generation)
        if generation is not None and token is None:
            raise SessionError(f"session {session!r}: stale or unknown generation")
        targets = [token[0]] if token else [h.name for h in self.view()[0]]
        for host in targets:
            try:
                answer = self._call(host, "end", session, token[2] if token else None)
            except InfraError:
                continue  # the host is gone, and the rollout's computer with it
            if isinstance(answer, wire.Failed):
                if answer.stale and not (token and self._incarnation(host) == token[1]):
                    continue  # no such rollout there (a close without a token, or a restarted agent)
                raise answer.exception()
            if answer.freed:
                self._adjust_free(host, +1)

    # ------------------------------------------------------------------ status and teardown

    def sessions(self) -> dict[str, int]:
        """host -> live sessions (the rollouts themselves live in the agents)."""
        _, info = self.view(fresh=True)
        return {h: int(i.get("sessions", 0)) for h, i in info.items() if "error" not in i}

    def goldens(self) -> dict[str, list[str]]:
        _, info = self.view(fresh=True)
        return {h: list(i.get("goldens", [])) for h, i in info.items() if "error" not in i}

    def status(self) -> EngineStatus:
        _, info = self.view(fresh=True)
        up = {h: i for h, i in info.items() if "error" not in i}
        return EngineStatus(sessions={h: int(i.get("sessions", 0)) for h, i in up.items()},
                            goldens={h: list(i.get("goldens", [])) for h, i in up.items()})

    def close(self) -> None:
        """The agents and their rollouts outlive a router (other server workers share them)."""
        with self._lock:
            self._view = None

    def __enter__(self) -> "FleetEngine":
        return self

    def __exit__(self, *exc: Any) -> None:
        self.close()


def rollout_engine(config: EngineConfig, fleet_address: str | None = None, **local: Any) -> RolloutEngine:
    """The engine a resources server serves `config` with: the fleet whose Ray head is at
    `fleet_address`, else this machine's Docker engine (`local`: ComputerEngine's own keywords,
    which concern this machine's engine only)."""
    if fleet_address:
        return FleetEngine(fleet_address, config)
    from shinken.computer.engine import ComputerEngine

    return ComputerEngine(config, **local)
