"""FleetEngine: ComputerEngine's session API (seed / tool / verify / end) over the fleet's host agents.

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
import os
import threading
import time
from collections import OrderedDict
from pathlib import Path
from typing import Any

from shinken.bundles.loader import discover, load_bundle
from shinken.bundles.model import Bundle
from shinken.computer.actions import ToolOutput
from shinken.computer.engine import VerifyResult
from shinken.computer.screen import Screenshot
from shinken.errors import ShinkenError
from shinken.fleet import cluster
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

    def __init__(self, address: str, task_root: str | os.PathLike[str], image: str, *, seed_timeout_s: float = 60.0,
                 call_timeout_s: float = 600.0, agent_kwargs: dict[str, Any] | None = None) -> None:
        self.address = address
        self.task_root = Path(task_root)
        self.image = image
        self.seed_timeout_s = float(seed_timeout_s)
        self.call_timeout_s = float(call_timeout_s)
        self.agent_kwargs = dict(agent_kwargs or {})
        self._folders = {p.name: p for p in discover(self.task_root)}
        self._bundles: dict[str, Bundle] = {}
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

    # ------------------------------------------------------------------ tasks

    def bundle(self, task_id: str) -> Bundle:
        with self._lock:
            b = self._bundles.get(task_id)
        if b is not None:
            return b
        folder = self._folders.get(task_id)
        b = load_bundle(folder) if folder is not None else None
        if b is None:
            for f in self._folders.values():  # a folder not named by its id: one scan
                cand = load_bundle(f)
                if cand.id == task_id:
                    b = cand
                    break
        if b is None:
            raise ShinkenError(f"task {task_id!r}: not found under {self.task_root}")
        if not b.ok:
            raise ShinkenError(f"task {task_id!r}: the bundle is defective ({b.why_defective()}); run `shinken triage`")
        with self._lock:
            self._bundles[task_id] = b
        return b

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

    def _call(self, host: str, method: str, *args: Any, timeout: float | None = None) -> dict[str, Any]:
        """One agent call; a dead node or agent is InfraError (and the host is avoided)."""
        agent = self._agent(host)
        try:
            result = self._ray_call(agent, method, args, timeout)
        except Exception as exc:  # noqa: BLE001 - RayActorError, node death, timeouts: the host failed
            why = f"{type(exc).__name__}: {str(exc)[:200]}"
            try:  # the handle may be of an agent since replaced (the host left and joined again): ask its successor
                again = self._agent(host, fresh=True)
            except Exception:  # noqa: BLE001 - no agent by that name now, or the head is unreachable
                again = agent
            try:
                if again == agent:
                    raise InfraError(why)
                result = self._ray_call(again, method, args, timeout)
            except Exception as exc2:  # noqa: BLE001
                why = why if isinstance(exc2, InfraError) else f"{type(exc2).__name__}: {str(exc2)[:200]}"
                self._mark_down(host, why)
                raise InfraError(f"fleet host {host} failed during {method}: {why}") from None
        if result.get("error") == "infra" and method == "seed":
            self._mark_down(host, result.get("detail", "infra"))
        return result

    def _ray_call(self, agent: Any, method: str, args: tuple[Any, ...], timeout: float | None) -> dict[str, Any]:
        result: dict[str, Any] = self.ray.get(getattr(agent, method).remote(*args), timeout=timeout or self.call_timeout_s)
        return result

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
                if answer.get("error") == "session" and old[1] == self._incarnation(old[0]):
                    raise SessionError(answer.get("detail", "stale session"))
            except InfraError:
                pass  # its host is gone, and the rollout with it
        tier_name = getattr(tier, "value", tier)
        deadline = time.monotonic() + self.seed_timeout_s
        tried_home = self.home(task_id)
        while True:
            for host in self._candidates(task_id):
                try:
                    answer = self._call(host, "seed", session, task_id, bundle.path.name, bundle.bundle_hash,
                                        tier_name, None)
                    if answer.get("error") == "need_task":
                        self._call(host, "add_task", bundle_payload(bundle))
                        answer = self._call(host, "seed", session, task_id, bundle.path.name, bundle.bundle_hash,
                                            tier_name, None)
                except InfraError as exc:
                    log.warning("seed of %s on %s: %s", task_id, host, exc)
                    continue
                kind = answer.get("error")
                if kind is None:
                    self._adjust_free(host, -1)
                    with self._lock:
                        self.stats["placed"] += 1
                        if host != tried_home:
                            self.stats["spilled"] += 1
                        self._timings[session] = {**dict(answer.get("timing") or {}), "host": host,
                                                  "spilled": host != tried_home}
                        self._timings.move_to_end(session)
                        while len(self._timings) > 1024:
                            self._timings.popitem(last=False)
                    return SEP.join((host, str(answer["incarnation"]), str(answer["generation"])))
                if kind == "full":
                    continue
                if kind == "session":
                    raise SessionError(answer.get("detail", ""))
                if kind == "task":
                    raise ShinkenError(answer.get("detail", ""))
                log.warning("seed of %s on %s: %s", task_id, host, answer.get("detail"))  # infra: try another
            if time.monotonic() >= deadline:
                with self._lock:
                    self.stats["refused_full"] += 1
                raise InfraError(f"no fleet host could start task {task_id} within {self.seed_timeout_s:.0f}s "
                                 "(every slot busy or every host down); this rollout is not scored")
            time.sleep(0.25)
            self.view(fresh=True)

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

    def _observe(self, session: str, generation: str, method: str, *args: Any) -> ToolOutput | None:
        host, _, gen = self._route(session, generation)
        try:
            answer = self._call(host, method, session, gen, *args)
        except InfraError:
            return ToolOutput(INFRA_TOOL_ANSWER)
        if answer.get("error") == "session":
            raise SessionError(answer.get("detail", ""))
        if answer.get("error"):
            raise ShinkenError(answer.get("detail", ""))
        if answer.get("output") is None:
            return None
        shot = answer.get("screenshot")
        return ToolOutput(str(answer["output"]), Screenshot(**shot) if shot else None)

    def verify(self, session: str, generation: str) -> VerifyResult:
        host, inc, gen = self._route(session, generation)
        try:
            answer = self._call(host, "verify", session, gen)
        except InfraError as exc:
            return VerifyResult.masked("infra", "verification", str(exc))
        if answer.get("error") == "session":
            if self._incarnation(host) != inc:  # the host's agent restarted: the rollout was lost with it
                return VerifyResult.masked("fork_lost", "verification", f"fleet host {host} restarted during the rollout")
            raise SessionError(answer.get("detail", ""))
        if answer.get("error"):
            raise ShinkenError(answer.get("detail", ""))
        return VerifyResult(float(answer["reward"]), bool(answer["mask_sample"]), answer.get("failure_kind"),
                            answer.get("failure_reason"), str(answer.get("reward_output_tail", "")),
                            answer.get("failure_stage"))

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
            if answer.get("error") == "session" and token and self._incarnation(host) == token[1]:
                raise SessionError(answer.get("detail", ""))
            if answer.get("freed"):
                self._adjust_free(host, +1)

    # ------------------------------------------------------------------ status and teardown

    def sessions(self) -> dict[str, int]:
        """host -> live sessions (the rollouts themselves live in the agents)."""
        _, info = self.view(fresh=True)
        return {h: int(i.get("sessions", 0)) for h, i in info.items() if "error" not in i}

    def goldens(self) -> dict[str, list[str]]:
        _, info = self.view(fresh=True)
        return {h: list(i.get("goldens", [])) for h, i in info.items() if "error" not in i}

    def close(self) -> None:
        """The agents and their rollouts outlive a router (other server workers share them)."""
        with self._lock:
            self._view = None

    def __enter__(self) -> "FleetEngine":
        return self

    def __exit__(self, *exc: Any) -> None:
        self.close()
