"""Deterministic, stratified train/validation split.

Tasks of one family (triage/families.py: parameter variants and other near-duplicates over
the whole task root, which includes every task sharing an instruction) form one unit and
always land on the same side, so validation never repeats a task the learner trained on
with another number or name.
"""

from __future__ import annotations

import hashlib
import math
import random
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Callable, Mapping, Sequence, TypeVar

from shinken.triage.families import FamilySettings, assign_families
from shinken.triage.wording import read

if TYPE_CHECKING:
    from shinken.bundles.model import Bundle

T = TypeVar("T")


def normalize_instruction(text: str) -> str:
    return " ".join(text.split()).casefold()


@dataclass(frozen=True)
class Split:
    train: list[str]
    validation: list[str]
    # family id -> its tasks in the split, for families of more than one (the split record)
    families: dict[str, list[str]] = field(default_factory=dict)


def _unit_rng(seed: int, stratum: str) -> random.Random:
    # A per-stratum generator: adding tasks of one stratum never reshuffles another.
    digest = hashlib.sha256(f"{seed}\x00{stratum}".encode()).digest()
    return random.Random(int.from_bytes(digest[:8], "big"))


def _allocate(sizes: dict[str, int], total: int) -> dict[str, int]:
    """Largest-remainder allocation of `total` validation units across strata,
    proportional to stratum size; never a whole stratum when it has more than one unit."""
    n = sum(sizes.values())
    if n == 0 or total == 0:
        return {k: 0 for k in sizes}
    exact = {k: total * v / n for k, v in sizes.items()}
    alloc = {k: math.floor(x) for k, x in exact.items()}
    for k in sorted(sizes, key=lambda k: (-(exact[k] - alloc[k]), k)):
        if sum(alloc.values()) >= total:
            break
        alloc[k] += 1
    for k, v in sizes.items():
        if v > 1 and alloc[k] >= v:
            alloc[k] = v - 1
    return alloc


def split_ids(
    items: Sequence[T],
    *,
    key: Callable[[T], str],
    family: Callable[[T], str],
    stratum: Callable[[T], str],
    val_fraction: float,
    seed: int,
) -> Split:
    """Split `items` (unique keys) into train/validation ids, each family (units of items
    with one `family`) wholly on one side.

    The number of validation units is round(units * fraction), at least one when there are
    two or more units and the fraction is positive (a tiny set still gets a validation
    signal), and never all of them.
    """
    if not 0.0 <= val_fraction < 1.0:
        raise ValueError("val_fraction must be in [0, 1)")
    units: dict[str, list[T]] = {}
    for it in items:
        units.setdefault(family(it), []).append(it)
    by_stratum: dict[str, list[list[T]]] = {}
    for members in units.values():
        members.sort(key=key)
        by_stratum.setdefault(stratum(members[0]) or "<none>", []).append(members)
    for s, us in by_stratum.items():
        us.sort(key=lambda u: key(u[0]))
        _unit_rng(seed, s).shuffle(us)

    n_units = len(units)
    total = round(n_units * val_fraction)
    if val_fraction > 0 and n_units >= 2:
        total = min(max(total, 1), n_units - 1)
    alloc = _allocate({s: len(us) for s, us in by_stratum.items()}, total)

    train: list[str] = []
    val: list[str] = []
    for s in sorted(by_stratum):
        us = by_stratum[s]
        k = alloc[s]
        for u in us[:k]:
            val.extend(key(m) for m in u)
        for u in us[k:]:
            train.extend(key(m) for m in u)
    families = {f: sorted(key(m) for m in members) for f, members in units.items() if len(members) > 1}
    return Split(sorted(train), sorted(val), dict(sorted(families.items())))


def root_families(bundles: Sequence["Bundle"], settings: FamilySettings = FamilySettings()) -> dict[str, str]:
    """Task id -> family over every bundle of a task root, as triage assigns them (the same
    reading and clustering over the same tasks give the same families)."""
    ids = [b.id for b in bundles]
    wordings = [read(b.instruction) if b.instruction.strip() else None for b in bundles]
    return dict(zip(ids, assign_families(ids, wordings, settings)))


def split_bundles(bundles: Sequence["Bundle"], *, val_fraction: float, seed: int, stratify: str,
                  families: Mapping[str, str]) -> Split:
    """The train/validation split of task bundles that make-workspace writes and publish
    publishes: units of one family (`families`: task id -> family, from root_families over
    the whole task root; a task it lacks is a family of its own), stratified by the task
    field `stratify` (`none`: one stratum)."""
    return split_ids(
        bundles,
        key=lambda b: b.id,
        family=lambda b: families.get(b.id, b.id),
        stratum=lambda b: str(b.raw.get(stratify) or "") if stratify != "none" else "",
        val_fraction=val_fraction,
        seed=seed,
    )
