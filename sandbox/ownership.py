"""The labels every container and image shinken makes carries, so `shinken gc` can tell
a dead owner's leftovers from a live process's resources (owners: shinken.runtime)."""

from __future__ import annotations

import time

from shinken.runtime import Owner

LABEL_OWNER = "shinken.owner"  # "<host>/<pid>/<process start time in clock ticks>"
LABEL_KIND = "shinken.kind"  # one of KINDS
LABEL_TASK = "shinken.task"
LABEL_RUN = "shinken.run"
LABEL_BUNDLE_HASH = "shinken.bundle_hash"
LABEL_BASE_IMAGE = "shinken.base_image"
LABEL_CREATED = "shinken.created"  # unix seconds
LABEL_MANAGED = "shinken.managed"  # "1" on everything shinken creates
# The component whose own clean-up may reclaim a fork after its owner died (e.g. the computer
# engine's maintenance gc reclaims only forks made by engines; `shinken gc` looks at all).
LABEL_MADE_BY = "shinken.made_by"
# Unix seconds after which the container may be reclaimed whoever owns it (a NeMo Gym sandbox's
# ttl_s): `shinken gc` removes it then, even while its creator lives or after it died.
LABEL_EXPIRES = "shinken.expires"
# On a container meant to outlive the process that made it (a detached hub, no owner): that
# process, "<host>/<pid>/<start>". `shinken gc` reclaims such a container only while it has never
# started and its creator is dead (killed, or its start failed, between create and start).
LABEL_CREATOR = "shinken.creator"

# server: a NeMo Gym runner; hub: the mock web; lease: a never-started container a live process
# holds a golden with (sandbox/goldens.py: goldens are a cache every process on the engine shares)
CONTAINER_KINDS = ("fork", "pool", "build", "server", "hub", "lease")
IMAGE_KINDS = ("golden",)
KINDS = (*CONTAINER_KINDS, *IMAGE_KINDS, "network")  # network: a probe run's mock-web network


def labels_for(kind: str, *, task: str | None = None, run: str | None = None,
               owner: Owner | None = None, extra: dict[str, str] | None = None) -> dict[str, str]:
    """The label set every shinken-created container or image carries."""
    if kind not in KINDS:
        raise ValueError(f"unknown resource kind {kind!r}; one of {', '.join(KINDS)}")
    labels = {
        LABEL_MANAGED: "1",
        LABEL_KIND: kind,
        LABEL_OWNER: (owner or Owner.current()).label(),
        LABEL_CREATED: str(int(time.time())),
    }
    if task:
        labels[LABEL_TASK] = task
    if run:
        labels[LABEL_RUN] = run
    if extra:
        labels.update(extra)
    return labels
