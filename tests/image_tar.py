"""Tiny images made by hand for the registry and golden tests: one layer holding one file, the
labels and creation date chosen by the test (what anyone who can push or load an image chooses
too), loaded into the engine as a `docker save` archive."""

from __future__ import annotations

import hashlib
import io
import json
import tarfile
from typing import Any


def _tar(files: dict[str, bytes]) -> bytes:
    buf = io.BytesIO()
    with tarfile.open(fileobj=buf, mode="w") as tar:
        for name, data in sorted(files.items()):
            info = tarfile.TarInfo(name)
            info.size, info.mode, info.mtime = len(data), 0o644, 0
            tar.addfile(info, io.BytesIO(data))
    return buf.getvalue()


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
