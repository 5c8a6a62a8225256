"""Goldens copied between fleet hosts through the fleet's registry instead of rebuilt.

A seed that spills to a host without its task's golden would rebuild it there (the whole setup,
9.4 s for the cheapest task measured, minutes for a desktop app's); a copy moves only the golden's
own layer (0.1-83.5 MB here) and took 0.7-1.7 s (docs/fleet.md, "A warm golden on a host that
lacks it"). The host that builds a golden pushes it to the registry, into the task image's
repository (whose base layers the registry holds already), tagged by the golden's content hash
(`golden-<sha256 of the golden format, the bundle hash and the base image id>`) and records the
manifest digest and image id it pushed in the fleet's ledger (fleet/provenance.py). A host that
lacks it pulls that digest (not the tag: whoever can write the registry can move a tag), checks
the image id is the recorded one and the labels name the same bundle and base image, and only
then tags it as its own golden (which is what find_golden serves); anything else is untagged.
When the fleet has no record, or the pull or a check fails, the host rebuilds, and the seed's
timing says which happened and why.

Web tasks' goldens are not copied: their hub state names uploads that live in the hub of the host
that built them."""

from __future__ import annotations

import hashlib
import logging
import threading
import time
from dataclasses import dataclass, field
from typing import Any

from shinken.bundles.model import Bundle
from shinken.errors import EnvironmentProblem
from shinken.fleet import registry as reg
from shinken.fleet.provenance import Ledger, Pin, golden_key as pin_key
from shinken.sandbox import goldens
from shinken.sandbox.api import Golden

log = logging.getLogger("shinken.fleet")


def golden_key(bundle_hash: str, base_id: str) -> str:
    """A golden's content hash: what it is built from (format, bundle, base image)."""
    return hashlib.sha256(f"{goldens.GOLDEN_FORMAT}\0{bundle_hash}\0{base_id}".encode()).hexdigest()[:40]


@dataclass
class GoldenCopier:
    """`ensure` stands in for DockerProvider.ensure_golden in a host agent's engine: the golden
    found here, else copied from the registry, else built (and then pushed for the other hosts)."""

    registry: str  # [http://]HOST:PORT
    repository: str  # the task image's repository, e.g. shinken/sandbox-cua
    ledger: Ledger  # where pushes are recorded and pulls checked against (the fleet's)
    host: str = ""  # who pushes: recorded with each push
    push_async: bool = True
    stats: dict[str, int] = field(default_factory=lambda: {"goldens_built": 0, "goldens_copied": 0, "copy_fallbacks": 0,
                                                           "goldens_pushed": 0, "push_failures": 0})
    pushed: list[str] = field(default_factory=list)  # task ids whose golden this host pushed
    _lock: threading.Lock = field(default_factory=threading.Lock)

    def tag(self, bundle: Bundle, base_id: str) -> str:
        return f"golden-{golden_key(bundle.bundle_hash, base_id)}"

    def ensure(self, provider: Any, bundle: Bundle, base_id: str) -> Golden:
        base_id = provider.resolve_image(base_id)
        found = goldens.find_golden(provider.api, bundle, base_id)
        if found is not None:
            found.origin = "cached"
            return found
        t0 = time.perf_counter()
        note = ""
        if not bundle.ok or _is_web(bundle):
            note = "not copied: a web task's golden names its host's hub"
        else:
            try:
                copied, note = self.fetch(provider, bundle, base_id)
            except Exception as exc:  # noqa: BLE001 - any failure of the copy: rebuild
                copied, note = None, f"copy failed ({type(exc).__name__}: {str(exc)[:200]})"
            if copied is not None:
                copied.origin, copied.origin_s = "copied", round(time.perf_counter() - t0, 3)
                with self._lock:
                    self.stats["goldens_copied"] += 1
                return copied
            with self._lock:
                self.stats["copy_fallbacks"] += 1
        built: Golden = provider.ensure_golden(bundle, base_id)
        built.origin, built.origin_s, built.origin_note = "built", round(time.perf_counter() - t0, 3), note
        with self._lock:
            self.stats["goldens_built"] += 1
        if not built.reused and not built.network:
            if self.push_async:
                threading.Thread(target=self._push_quietly, args=(provider, built, bundle), daemon=True,
                                 name="shinken-golden-push").start()
            else:
                self._push_quietly(provider, built, bundle)
        return built

    def fetch(self, provider: Any, bundle: Bundle, base_id: str) -> tuple[Golden | None, str]:
        """(the golden pulled from the registry, "") or (None, why not)."""
        tag = self.tag(bundle, base_id)
        pin = self.ledger.lookup(pin_key(self.repository, tag))
        if pin is None:
            return None, "the registry has no copy"
        remote = f"{reg.host_port(self.registry)}/{self.repository}"
        api = provider.api
        got = reg.pull_pinned(api, remote, pin.digest, pin.image_id, f"the golden of {bundle.id}")
        golden_name = goldens.golden_tag(bundle, base_id)
        local_repo, local_tag = golden_name.split(":")
        api.tag(got, local_repo, local_tag)
        reg.untag(api, f"{remote}@{pin.digest}")  # the golden keeps its own name
        golden = goldens.find_golden(api, bundle, base_id)
        if golden is None or golden.image_id != got:
            reg.untag(api, golden_name)
            return None, "the copy's labels name another bundle, base image or golden format"
        return golden, ""

    def push(self, provider: Any, golden: Golden, bundle: Bundle) -> float:
        """Push `golden` under its content hash; seconds taken."""
        t0 = time.perf_counter()
        tag = self.tag(bundle, golden.base_image_id)
        remote = f"{reg.host_port(self.registry)}/{self.repository}"
        api = provider.api
        api.tag(golden.image_id, remote, tag)
        try:
            digest = reg._stream(reg._lazy(lambda: api.push(remote, tag=tag, stream=True, decode=True)),
                                 f"pushing {remote}:{tag}")
        finally:
            try:
                api.remove_image(f"{remote}:{tag}", noprune=True)
            except Exception:  # noqa: BLE001 - a leftover tag on the golden is harmless
                pass
        if not digest:
            raise EnvironmentProblem(f"pushing {remote}:{tag}: the engine reported no digest")
        self.ledger.record(Pin.made(pin_key(self.repository, tag), digest, golden.image_id, self.host or None))
        return time.perf_counter() - t0

    def _push_quietly(self, provider: Any, golden: Golden, bundle: Bundle) -> None:
        try:
            seconds = self.push(provider, golden, bundle)
            with self._lock:
                self.stats["goldens_pushed"] += 1
                self.pushed.append(bundle.id)
                del self.pushed[:-256]
            log.info("golden of %s pushed to %s in %.2fs", bundle.id, self.registry, seconds)
        except Exception as exc:  # noqa: BLE001 - other hosts rebuild then; said in their timing
            with self._lock:
                self.stats["push_failures"] += 1
            log.warning("pushing the golden of %s to %s failed: %s", bundle.id, self.registry, exc)


def _is_web(bundle: Bundle) -> bool:
    from shinken.sandbox.policy import task_needs

    return task_needs(bundle).network
