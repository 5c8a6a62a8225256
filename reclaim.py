"""One reclaiming pass over everything dead shinken processes left behind: containers,
the mock web's run networks and hub sids, golden images, registered temporary folders.

It sits above shinken.sandbox.gc (containers, goldens, folders) and shinken.mockweb.reclaim
(networks, sids), which each know their own resources and import nothing of each other.
`shinken gc` and the engine's dead-owner sweep call `find_reclaimable` then `reclaim`.
The safety rules are sandbox.gc's (docs/gc.md).
"""

from __future__ import annotations

import time
from dataclasses import replace
from pathlib import Path
from typing import Any, Mapping

from shinken.mockweb import reclaim as web
from shinken.runtime import Liveness, runtime_root
from shinken.sandbox import gc
from shinken.sandbox.gc import Failure, Reclaimable

ALREADY_GONE = "already gone: removed by another process since the scan"


def find_reclaimable(client: Any, *, include_goldens: bool = False, older_than: float | None = None,
                     all_: bool = False, label_filter: Mapping[str, str] | None = None,
                     temp_root: Path | None = None, include_temp_dirs: bool = True) -> list[Reclaimable]:
    """Everything shinken-labelled that may be reclaimed now, containers first, then golden
    images, then temporary folders (the order `reclaim` removes them in).

    client: a docker.DockerClient, or None to look at temporary folders only.
    older_than: seconds; resources created longer ago are reclaimable even if their owner lives
    (golden images excepted: a live holder always keeps them).
    label_filter: only resources carrying all these labels (temp folders: the labels they were
    registered with)."""
    now = time.time()
    items: list[Reclaimable] = []
    if client is not None:
        containers = gc.find_containers(client, older_than=older_than, all_=all_, label_filter=label_filter, now=now)
        items += containers
        items += _find_web_leftovers(client, {c.id for c in containers if c.kind == "hub"}, older_than=older_than,
                                     all_=all_, label_filter=label_filter, now=now)
        if include_goldens:
            items += gc.find_goldens(client, {c.id for c in containers}, older_than=older_than, all_=all_,
                                     label_filter=label_filter, now=now)
    if include_temp_dirs:
        items += gc.find_temp_dirs(temp_root or runtime_root(), older_than=older_than, all_=all_,
                                   label_filter=label_filter, now=now)
    return items


def _find_web_leftovers(client: Any, reclaimed_hubs: set[str], *, older_than: float | None, all_: bool,
                        label_filter: Mapping[str, str] | None, now: float) -> list[Reclaimable]:
    """Run networks and hub sids of dead owners (shinken.mockweb.reclaim)."""

    def decide(liveness: Liveness, created: float | None) -> str | None:
        return gc.decide(liveness, created, older_than=older_than, all_=all_, now=now)

    items = web.find_networks(client, decide=decide, verdict_of=gc.labelled_owner_liveness, label_filter=label_filter)
    items += web.find_sids(client, decide=decide, verdict_of=gc.labelled_owner_liveness, older_than=older_than,
                           all_=all_, skip_hubs=reclaimed_hubs, label_filter=label_filter, now=now)
    return items


def reclaim(client: Any, items: list[Reclaimable]) -> tuple[list[Reclaimable], list[Failure]]:
    """Remove `items` (as returned by find_reclaimable): containers, then images, then folders.
    Never raises for one item's failure: it lands in the failure list with Docker's reason.
    A container or image that no longer exists counts as reclaimed (its reason says it was
    already gone): another gc, e.g. an engine's maintenance pass, got there first, and the
    user's `shinken gc --force` has nothing to report as failed."""
    order = {"container": 0, "sid": 1, "network": 2, "image": 3, "tempdir": 4}
    reclaimed: list[Reclaimable] = []
    failed: list[Failure] = []
    for item in sorted(items, key=lambda i: order.get(i.resource, 3)):
        gone: bool | None = None
        try:
            if item.resource == "container":
                gone = gc.remove_container(client, item)
            elif item.resource == "image":
                gone = gc.remove_image(client, item)
            elif item.resource == "tempdir":
                gc.remove_temp_dir(item)
            elif item.resource in ("sid", "network"):
                (web.reclaim_sid if item.resource == "sid" else web.reclaim_network)(gc.require_client(client), item)
            else:
                raise ValueError(f"unknown resource type {item.resource!r}")
        except Exception as exc:
            failed.append(Failure(item.id, gc.explain(exc), item.kind, item.resource))
        else:
            reclaimed.append(replace(item, reason=f"{item.reason}; {ALREADY_GONE}") if gone is True else item)
    return reclaimed, failed
