"""What a hub image serves: its manifest (schema hub_manifest), read from the image label."""

from __future__ import annotations

import json
from dataclasses import dataclass, field
from typing import Any

from shinken.errors import EnvironmentProblem, ShinkenError

LABEL_HUB_MANIFEST = "shinken.hub_manifest"
HUB_SCHEMA = "shinken.hub/1"


@dataclass(frozen=True)
class HubApp:
    name: str
    key: str
    alias: str
    port: int
    dir: str
    source_hash: str
    image: str
    # `shinken hub check`'s results for this app in this image (None: never checked)
    checks: dict[str, Any] | None = field(default=None, compare=False, hash=False)

    @property
    def url(self) -> str:
        """Where forks on the run network reach this app (the hub's port 80, by host name)."""
        return f"http://{self.alias}"


@dataclass(frozen=True)
class HubManifest:
    image_id: str
    node_image: str
    apps: tuple[HubApp, ...]
    # apps chosen at build that did not build: ({"name", "source_hash"}, ...)
    left_out: tuple[dict[str, str], ...] = field(default=(), compare=False, hash=False)

    @classmethod
    def from_doc(cls, doc: dict[str, Any], image_id: str) -> "HubManifest":
        return cls(image_id, doc["node_image"], tuple(HubApp(**a) for a in doc["apps"]),
                   tuple(dict(x) for x in doc.get("left_out") or ()))

    def to_doc(self) -> dict[str, Any]:
        """The manifest document (schema hub_manifest) this object was read from."""
        apps = []
        for a in self.apps:
            d = {"name": a.name, "key": a.key, "alias": a.alias, "port": a.port, "dir": a.dir,
                 "source_hash": a.source_hash, "image": a.image}
            if a.checks is not None:
                d["checks"] = a.checks
            apps.append(d)
        doc: dict[str, Any] = {"schema": HUB_SCHEMA, "node_image": self.node_image, "apps": apps}
        if self.left_out:
            doc["left_out"] = [dict(x) for x in self.left_out]
        return doc

    def app(self, name: str) -> HubApp | None:
        low = name.lower()
        return next((a for a in self.apps if a.name.lower() == low), None)

    def by_key(self) -> dict[str, HubApp]:
        return {a.key: a for a in self.apps}

    def by_alias(self) -> dict[str, HubApp]:
        return {a.alias: a for a in self.apps}


def read_manifest(client: Any, image: str) -> HubManifest:
    """The validated manifest of a built hub image, or a one-line error naming the fix."""
    import docker.errors

    from shinken.schemas import validation_error

    try:
        info = client.api.inspect_image(image)
    except docker.errors.ImageNotFound:
        raise EnvironmentProblem(f"hub image {image} not found; build it with `shinken hub build --source DIR`") from None
    except docker.errors.APIError as exc:
        raise EnvironmentProblem(f"cannot inspect hub image {image}: {exc}") from None
    raw = ((info.get("Config") or {}).get("Labels") or {}).get(LABEL_HUB_MANIFEST)
    if not raw:
        raise ShinkenError(f"{image} is not a hub image (no {LABEL_HUB_MANIFEST} label); "
                           "build one with `shinken hub build --source DIR`")
    try:
        doc = json.loads(raw)
    except json.JSONDecodeError as exc:
        raise ShinkenError(f"{image}: unreadable hub manifest ({exc}); rebuild it with `shinken hub build`") from None
    err = validation_error("hub_manifest", doc)
    if err:
        raise ShinkenError(f"{image}: invalid hub manifest ({err}); rebuild it with `shinken hub build`")
    return HubManifest.from_doc(doc, info["Id"])
