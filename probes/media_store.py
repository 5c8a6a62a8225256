"""The driver's side of the probe's media: each picture a receipt line carries (base64, as a
worker hands it over) written into the run dir once, named by its sha256, and the line keeping
its path. What a fork made is untrusted: only a WebP, or an SVG shinken drew, of bounded size."""

from __future__ import annotations

import base64
import hashlib
import os
from pathlib import Path
from typing import Any

from shinken.probes.media import MAX_BYTES, is_webp

MEDIA_DIR = "media"  # in the run dir
MIMES = {"image/webp": ".webp", "image/svg+xml": ".svg"}


def store(run_dir: Path, line: dict[str, Any]) -> dict[str, Any]:
    """The line with its images written into `run_dir/media/` (named by their sha256; written once,
    atomically) and each image's `data` replaced by its `path` (relative to the run dir), size and
    sha256. An image that is not what it claims to be is left out and named in `media.errors`."""
    media = line.get("media")
    if not isinstance(media, dict):
        return line
    errors = list(media.get("errors") or [])

    def keep(entry: Any) -> dict[str, Any] | None:
        if not isinstance(entry, dict) or "data" not in entry:
            return entry if isinstance(entry, dict) and "path" in entry else None
        data = base64.b64decode(entry["data"])
        ext = MIMES.get(entry.get("mime", ""))
        ok = ext is not None and len(data) <= MAX_BYTES and (
            is_webp(data) if ext == ".webp" else data.startswith(b"<svg "))
        if not ok:
            errors.append(f"an image of {len(data)} bytes ({entry.get('mime')}) was not stored: not a bounded WebP or SVG")
            return None
        digest = hashlib.sha256(data).hexdigest()
        rel = f"{MEDIA_DIR}/{digest}{ext}"
        path = Path(run_dir) / rel
        if not path.exists():
            path.parent.mkdir(parents=True, exist_ok=True)
            tmp = path.with_name(f".{path.name}.{os.getpid()}.part")
            tmp.write_bytes(data)
            os.replace(tmp, path)
        rest = {k: v for k, v in entry.items() if k != "data"}
        return {**rest, "path": rel, "bytes": len(data), "sha256": digest}

    start = keep(media.get("start"))
    recordings = [r for r in (keep(r) for r in media.get("recordings") or []) if r is not None]
    out = {"desktop": bool(media.get("desktop")), "start": start, "recordings": recordings, "errors": errors}
    return {**line, "media": out}
