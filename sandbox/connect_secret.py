"""The owner secret a sandbox is connected to by: made with the container, handed only to whoever
created it (a NeMo Gym provider's serialize_handle, a resources server's seed response), and
asked back by the `shinken` provider's connect. A container id alone names a sandbox to anyone
who can list containers or read a log; the secret does not leave its creator's hands.

The container carries only the secret's sha256 (labels are readable through the engine), and a
sandbox is named for connect as `<container id>:<secret>`: Gym's sandbox agents pass the seed
response's `sandbox_handle` to connect as the descriptor's `sandbox_id`, so the secret travels
inside it.
"""

from __future__ import annotations

import hashlib
import hmac
import secrets
from collections.abc import Mapping

LABEL_SECRET = "shinken.connect_secret_sha256"
SEPARATOR = ":"


def new() -> tuple[str, dict[str, str]]:
    """A fresh secret and the label its container carries."""
    secret = secrets.token_urlsafe(24)
    return secret, {LABEL_SECRET: _digest(secret)}


def _digest(secret: str) -> str:
    return hashlib.sha256(secret.encode("utf-8")).hexdigest()


def handle(container_id: str, secret: str) -> str:
    """What connect is given: the container and the secret that opens it."""
    return f"{container_id}{SEPARATOR}{secret}"


def split(sandbox_id: str) -> tuple[str, str | None]:
    """(container id, secret or None) of a `handle()` (or of a bare container id)."""
    cid, sep, secret = sandbox_id.partition(SEPARATOR)
    return cid, (secret or None) if sep else None


def check(labels: Mapping[str, str], secret: str | None) -> str | None:
    """None when `secret` opens the container with these labels, else why not."""
    want = labels.get(LABEL_SECRET)
    if not want:
        return "it carries no owner secret (made before connect needed one, or not made to be connected to)"
    if not secret:
        return ("no owner secret was given; pass the descriptor serialize_handle returned, or the seed response's "
                "sandbox_handle, whole")
    if not hmac.compare_digest(_digest(secret), want):
        return "the owner secret does not match"
    return None
