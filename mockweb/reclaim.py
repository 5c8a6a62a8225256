"""What `shinken gc` reclaims of mock web runs besides containers: run networks of dead
owners, and sids left in running hubs (shinken.reclaim runs these in its pass).

Every sid shinken makes is `shk-<owner key>-<random>`, and each hub holds the owner label of
every key (mockweb.hub.write_owner_lease), so a sid whose owner died is found like any other
leftover. Sids a task's setup made (its own uuid, forked from and then removed at golden
build) carry no owner: one is left only when a build was killed mid-setup, and is reclaimed
by age (`--older-than`). Hubs being reclaimed in the same pass are skipped (their state goes
with them).
"""

from __future__ import annotations

import time
from typing import Any, Mapping

from shinken.mockweb import hub as hubs
from shinken.mockweb.network import remove_run_network, run_networks
from shinken.sandbox.gc import Reclaimable, format_duration
from shinken.sandbox.ownership import LABEL_CREATED, LABEL_OWNER, LABEL_RUN, LABEL_TASK

SID_RESOURCE = "sid"
NETWORK_RESOURCE = "network"


def find_networks(client: Any, *, decide: Any, verdict_of: Any, label_filter: Mapping[str, str] | None) -> list[Any]:
    found = []
    for n in run_networks(client):
        labels = n.get("Labels") or {}
        if not all(labels.get(k) == v for k, v in (label_filter or {}).items()):
            continue
        created = float(labels[LABEL_CREATED]) if labels.get(LABEL_CREATED, "").isdigit() else None
        reason = decide(verdict_of(labels), created)
        if reason is None:
            continue
        found.append(Reclaimable(resource=NETWORK_RESOURCE, kind="network", id=n["Id"], task=labels.get(LABEL_TASK),
                                 owner=labels.get(LABEL_OWNER), reason=reason, bytes=None, name=n.get("Name")))
    return found


def find_sids(client: Any, *, decide: Any, verdict_of: Any, older_than: float | None, all_: bool,
              skip_hubs: set[str], label_filter: Mapping[str, str] | None = None,
              now: float | None = None) -> list[Any]:
    """Leftover sids. A label filter matches a sid through its lease (owner and run labels
    only); unleased sids match no filter."""
    now = time.time() if now is None else now
    if set(label_filter or {}) - {LABEL_OWNER, LABEL_RUN}:
        return []  # no lease carries such a label: no need to ask every hub on the daemon
    found = []
    for h in hubs.find_hubs(client):
        if h.id in skip_hubs:
            continue
        try:
            stored = hubs.list_sids(client, h.id)
        except Exception:  # noqa: BLE001 - a hub that does not answer is not ours to judge now
            continue
        per_sid: dict[str, list[hubs.StoredSid]] = {}
        for s in stored:
            per_sid.setdefault(s.sid, []).append(s)
        for sid, entries in sorted(per_sid.items()):
            owner = entries[0].owner
            lease = {LABEL_OWNER: owner, LABEL_RUN: entries[0].run}
            if label_filter and not all(lease.get(k) == v for k, v in label_filter.items()):
                continue
            newest = max(e.mtime for e in entries)
            if sid.startswith(hubs.SID_PREFIX):
                if owner is None:
                    reason = decide(_unknown("no owner lease in the hub"), newest)
                else:
                    reason = decide(verdict_of({LABEL_OWNER: owner}), newest)
            elif all_ or older_than is None:
                continue  # not shinken's sid: only age can tell it was left behind
            elif now - newest > older_than:
                reason = f"setup sid unchanged for {format_duration(now - newest)} (older than {format_duration(older_than)})"
            else:
                continue
            if reason is None:
                continue
            found.append(Reclaimable(resource=SID_RESOURCE, kind="sid", id=f"{h.id}/{sid}", task=None, owner=owner,
                                     reason=reason, bytes=sum(e.bytes for e in entries),
                                     name=f"{h.name}: {', '.join(sorted({e.app for e in entries}))}"))
    return found


def _unknown(why: str) -> Any:
    from shinken.runtime import Liveness

    return Liveness("unknown", why)


def reclaim_sid(client: Any, item: Any) -> None:
    hub_id, _, sid = item.id.partition("/")
    hubs.remove_sids(client, hub_id, [sid])


def reclaim_network(client: Any, item: Any) -> None:
    remove_run_network(client, item.id)
