"""Which image the fleet means by a name: the manifest digest and image id its pusher recorded.

A registry serves whatever was pushed last under a tag, and an image's labels say whatever its
maker wrote, so neither tells a host that an image is the one the fleet built. The host that
pushes an image (`shinken image push --address`, or a host agent pushing a golden it built)
records the manifest digest the registry stored and the image id in the fleet's Ray key-value
store, which only holders of the fleet's token reach (fleet/ray_auth.py). A host pulls by that
digest (a content address: the engine checks the bytes against it) and keeps the image only when
its id is the recorded one (fleet/registry.py pull, fleet/golden_copy.py)."""

from __future__ import annotations

import json
import socket
import time
from dataclasses import dataclass
from typing import Any, Protocol

from shinken.schemas import validation_error

NAMESPACE = "shinken-provenance"
SCHEMA = "shinken.image_pin/1"


@dataclass(frozen=True)
class Pin:
    key: str  # image/<repository>:<tag> or golden/<repository>:<tag>
    digest: str  # the manifest digest the registry stored
    image_id: str  # the config digest: the id a pulled image must have
    pushed_by: str
    at: float

    def to_json(self) -> dict[str, Any]:
        return {"schema": SCHEMA, "key": self.key, "digest": self.digest, "image_id": self.image_id,
                "pushed_by": self.pushed_by, "at": self.at}

    @staticmethod
    def made(key: str, digest: str, image_id: str, pushed_by: str | None = None) -> "Pin":
        return Pin(key, digest, image_id, pushed_by or socket.gethostname(), round(time.time(), 3))


def image_key(repository: str, tag: str) -> str:
    return f"image/{repository}:{tag}"


def golden_key(repository: str, tag: str) -> str:
    return f"golden/{repository}:{tag}"


class Ledger(Protocol):
    def record(self, pin: Pin) -> None: ...

    def lookup(self, key: str) -> Pin | None: ...


class FleetLedger:
    """Pins in the fleet's Ray key-value store; this process must be connected to the fleet
    (a driver after cluster.connect, or an actor on one of its nodes)."""

    def record(self, pin: Pin) -> None:
        from ray.experimental.internal_kv import _internal_kv_put

        _internal_kv_put(pin.key.encode(), json.dumps(pin.to_json()).encode(), overwrite=True, namespace=NAMESPACE)

    def lookup(self, key: str) -> Pin | None:
        """The pin recorded under `key`, or None (nothing recorded, or a record that is not one)."""
        from ray.experimental.internal_kv import _internal_kv_get

        raw = _internal_kv_get(key.encode(), namespace=NAMESPACE)
        if not raw:
            return None
        try:
            doc = json.loads(raw)
        except ValueError:
            return None
        if validation_error("image_pin", doc) is not None or doc["key"] != key:
            return None
        return Pin(doc["key"], doc["digest"], doc["image_id"], doc["pushed_by"], float(doc["at"]))
