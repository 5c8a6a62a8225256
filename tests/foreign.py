"""Containers a person makes by hand (`docker run <image>`), with no shinken labels of their own:
what `shinken gc` must leave alone, whatever labels they inherited from their image.

The one place the tests create a container outside the Docker door (sandbox/docker_client.py,
which refuses a create without an owner; tests/test_container_door.py allows this module only).
gc can never claim such a container, so each one removes itself: it runs `sleep LIFETIME_S`
with auto_remove, and a test killed before its clean-up leaves it behind for that long at most."""

from __future__ import annotations

from typing import Any

import docker.errors

LIFETIME_S = 900


def run_foreign(client: Any, image: str, labels: dict[str, str] | None = None) -> Any:
    """A running container of `image` (network none) with only `labels` of its own (no shinken.*
    ones: a test's scope label at most); it removes itself after LIFETIME_S."""
    assert not any(k.startswith("shinken.") for k in labels or {}), labels
    return client.containers.run(image, ["sleep", str(LIFETIME_S)], detach=True, init=True, network_mode="none",
                                 auto_remove=True, labels=dict(labels or {}))


def remove_foreign(container: Any) -> None:
    """Remove it now (gone already, or going by itself, counts as removed)."""
    try:
        container.remove(force=True)
    except docker.errors.NotFound:
        pass
    except docker.errors.APIError as exc:
        if "already in progress" not in str(exc):
            raise
