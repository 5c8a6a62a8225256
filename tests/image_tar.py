"""Tiny images made by hand for the registry and golden tests: one layer holding one file, the
labels and creation date chosen by the test (what anyone who can push or load an image chooses
too), loaded into the engine as a `docker save` archive."""

from __future__ import annotations

import hashlib
import json
from typing import Any


def _tar(files: dict[str, bytes]) -> bytes:
    from shinken.mockweb.build import _tar as tar_of  # a plain tar of named byte strings

    return tar_of(files).getvalue()


def load_image(api: Any, tag: str, *, labels: dict[str, str], created: str = "2026-01-01T00:00:00Z",
               payload: bytes = b"hello\n") -> str:
    """Load an image named `tag` (one layer: /payload.txt) into the engine; its id."""
    layer = _tar({"payload.txt": payload})
    diff_id = "sha256:" + hashlib.sha256(layer).hexdigest()
    config = json.dumps({"architecture": "amd64", "os": "linux", "created": created,
                         "config": {"Labels": labels, "Cmd": ["/bin/true"]},
                         "rootfs": {"type": "layers", "diff_ids": [diff_id]},
                         "history": [{"created": created, "created_by": "shinken test image"}]}).encode()
    config_name = hashlib.sha256(config).hexdigest() + ".json"
    manifest = json.dumps([{"Config": config_name, "RepoTags": [tag], "Layers": ["layer/layer.tar"]}]).encode()
    archive = _tar({"layer/layer.tar": layer, config_name: config, "manifest.json": manifest})
    for _ in api.load_image(archive):
        pass
    return str(api.inspect_image(tag)["Id"])
