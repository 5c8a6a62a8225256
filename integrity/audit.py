"""Run the red-team battery against a task image: each attack on the canary left unsolved (it must
read 0.0 or be masked, never 1.0) and beside a solution (it must still read 1.0). What
`shinken image audit` prints and the suite asserts."""

from __future__ import annotations

import tempfile
import time
from concurrent.futures import ThreadPoolExecutor
from dataclasses import asdict, dataclass
from pathlib import Path
from typing import Any, Callable

from shinken.bundles.model import Bundle
from shinken.integrity import canary
from shinken.integrity.battery import Attack
from shinken.judge.config import JudgeConfig
from shinken.sandbox.api import Golden, InfraError, RewardResult, SandboxError
from shinken.sandbox.docker_provider import DockerProvider
from shinken.sandbox.forks import DockerFork
from shinken.tiers import Tier

ARM_TIMEOUT_S = 60.0
SETTLE_S = 0.5  # what the attack left running gets started before verify
# Never contacted: the canary only imports the judge module shinken places.
AUDIT_JUDGE = JudgeConfig("http://127.0.0.1:9/v1", "shinken-audit")

HELD, FORGED, SCORED, BROKEN = "held", "forged", "scored", "broken"


@dataclass(frozen=True)
class Outcome:
    """One run of one attack: `solved` says whether a solution ran beside it."""

    attack: str
    kind: str
    solved: bool
    verdict: str  # held | forged (unsolved runs); scored | broken (solved runs)
    reward: float | None
    error: str | None
    why: str  # what decided it: the reward, the mask's reason, what the attack found

    def to_json(self) -> dict[str, Any]:
        return asdict(self)


def _verdict(solved: bool, rr: RewardResult | None, masked: str | None) -> tuple[str, str]:
    if not solved:
        if rr is not None and rr.error is None and rr.reward is not None and rr.reward >= 1.0:
            return FORGED, "reward 1.0"
        if masked:
            return HELD, f"masked: {masked}"
        assert rr is not None
        return HELD, f"reward {rr.reward}" if rr.error is None else f"masked: reward {rr.error}"
    if rr is not None and rr.error is None and rr.reward == 1.0:
        return SCORED, "reward 1.0"
    if masked:
        return BROKEN, f"masked: {masked}"
    assert rr is not None
    return BROKEN, f"reward {rr.reward}" if rr.error is None else f"reward {rr.error}"


def run_attack(provider: DockerProvider, golden: Golden, bundle: Bundle, attack: Attack, *, solved: bool) -> Outcome:
    """One fork: the attack's script as the task's user, the solution too when `solved`, then verify."""
    # The canary with a terminal declares the filesystem tier (its launch replayed, unchecked): served so.
    fork: DockerFork = provider.fork(golden, tier=Tier.FILESYSTEM if bundle.id == canary.DESKTOP_TASK_ID else None)
    rr: RewardResult | None = None
    masked: str | None = None
    found = ""
    try:
        armed = fork.exec(["bash", "-lc", attack.script], timeout=ARM_TIMEOUT_S)
        found = "; ".join(ln.strip() for ln in armed.output.splitlines() if ln.startswith("writable: "))
        if solved:
            fork.exec(["bash", "-lc", canary.SOLVE], timeout=ARM_TIMEOUT_S)
        time.sleep(SETTLE_S)
        rr = fork.run_reward(bundle, timeout=60)
    except SandboxError as exc:  # the machine's answer (infra, lost fork): the rollout is masked
        masked = f"{type(exc).__name__}: {str(exc)[:160]}"
    finally:
        try:
            fork.close()
        except InfraError:
            pass
    verdict, why = _verdict(solved, rr, masked)
    if found:
        why = f"{why} ({found})"
    return Outcome(attack.name, attack.kind, solved, verdict, rr.reward if rr else None,
                   rr.error if rr else None, why)


def run_battery(image: str, attacks: tuple[Attack, ...], *, parallel: int = 2, solved: bool = True,
                on_outcome: Callable[[Outcome], None] | None = None, provider: DockerProvider | None = None,
                workdir: Path | None = None) -> list[Outcome]:
    """Every attack on the canary's golden on `image`, unsolved and (with `solved`) solved;
    outcomes in the attacks' order. The canary's golden stays (a cache, like every golden)."""
    own = provider is None
    prov = provider or DockerProvider(run_id="audit", judge=AUDIT_JUDGE)
    try:
        with tempfile.TemporaryDirectory(prefix="shinken-audit-", dir=workdir) as tmp:
            base = prov.resolve_image(image)
            canaries: dict[bool, tuple[Golden, Bundle]] = {}
            for desktop in sorted({a.desktop for a in attacks}):
                bundle = canary.write(Path(tmp), desktop=desktop)
                canaries[desktop] = (prov.ensure_golden(bundle, base), bundle)
            runs = [(a, s) for a in attacks for s in ((False, True) if solved else (False,))]
            with ThreadPoolExecutor(max_workers=max(1, parallel), thread_name_prefix="audit") as pool:
                futures = [pool.submit(run_attack, prov, *canaries[a.desktop], a, solved=s) for a, s in runs]
                out = []
                for f in futures:
                    o = f.result()
                    if on_outcome is not None:
                        on_outcome(o)
                    out.append(o)
            return out
    finally:
        if own:
            prov.close()
