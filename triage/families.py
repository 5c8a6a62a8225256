"""Task families: near-duplicate tasks, so that a train/validation split keeps each family
on one side.

Two tasks are one family when their templates (`wording.read`: content words with every
parameter as a typed slot) are equal, which puts "set line spacing to double" and "... to
1.5" together; when short templates differ in one span of up to three words and keep the
rest ("install the Python extension in VS Code" and "... the Prettier extension ...", "make
Times New Roman the default font" and "make Arial ...": a name changed without quotes; never
the first word, mostly the action); or when they are similar enough: a Jaccard similarity of at least
FAMILY_THRESHOLD over the templates' words and word pairs. Families are the connected
components of those links.

Similar pairs come from a set-similarity join with prefix filtering: shingles are ranked
rarest first, and a pair at or above the threshold must share one of the first
|S| - ceil(t|S|) + 1 shingles of each set, so only tasks sharing such a shingle are
compared, never all pairs. A shingle held by more than `max(COMMON_FLOOR, n / COMMON_SHARE)`
templates proposes no pairs (it is boilerplate; equal templates are grouped before).
"""

from __future__ import annotations

import math
from collections import Counter
from collections.abc import Sequence
from dataclasses import dataclass

from shinken.triage.wording import Wording, normalize

FAMILY_THRESHOLD = 0.6
SUBSTITUTION_MIN_SHARED = 3
SUBSTITUTION_MAX_WORDS = 12  # longer templates: the Jaccard join
SPAN_WORDS = 3
COMMON_FLOOR = 64
COMMON_SHARE = 100


@dataclass(frozen=True)
class FamilySettings:
    threshold: float = FAMILY_THRESHOLD
    common_floor: int = COMMON_FLOOR
    common_share: int = COMMON_SHARE

    def as_json(self) -> dict[str, object]:
        return {"method": f"equal templates, templates of up to {SUBSTITUTION_MAX_WORDS} words differing in one "
                          f"span of up to {SPAN_WORDS} words (not the first; at least {SUBSTITUTION_MIN_SHARED} and "
                          "half kept), or Jaccard of template words and word pairs (prefix-filtered join)",
                "threshold": self.threshold,
                "common_shingle_cap": f"max({self.common_floor}, tasks / {self.common_share})"}


def _shingles(words: tuple[str, ...]) -> frozenset[str]:
    return frozenset(words) | frozenset(f"{a} {b}" for a, b in zip(words, words[1:]))


class _Union:
    def __init__(self, n: int) -> None:
        self.parent = list(range(n))

    def find(self, i: int) -> int:
        p = self.parent
        while p[i] != i:
            p[i] = p[p[i]]
            i = p[i]
        return i

    def join(self, i: int, j: int) -> None:
        a, b = self.find(i), self.find(j)
        if a != b:
            self.parent[max(a, b)] = min(a, b)


def assign_families(ids: Sequence[str], wordings: Sequence[Wording | None],
                    settings: FamilySettings = FamilySettings()) -> list[str]:
    """The family id of each task (`ids[i]` read as `wordings[i]`; None: no instruction, a
    family of its own): the smallest task id of its family."""
    keys: dict[object, int] = {}  # template (or, with no content words, the whole text) -> key index
    key_of: list[int] = []
    for w in wordings:
        if w is None:
            key_of.append(-1)
            continue
        k: object = w.words if w.words else ("\0", normalize(w.text).casefold())
        key_of.append(keys.setdefault(k, len(keys)))
    templates = list(keys)
    links = _Union(len(templates))
    words = [t if isinstance(t, tuple) and t and t[0] != "\0" else () for t in templates]
    _join_substitutions(words, links)
    _join_similar(words, links, settings)
    smallest: dict[int, str] = {}
    for tid, k in zip(ids, key_of):
        if k >= 0:
            root = links.find(k)
            if root not in smallest or tid < smallest[root]:
                smallest[root] = tid
    return [tid if k < 0 else smallest[links.find(k)] for tid, k in zip(ids, key_of)]


def _join_substitutions(templates: list[tuple[str, ...]], links: _Union) -> None:
    """Join short templates equal but for one span of up to SPAN_WORDS words on each side
    (a name of one or more words changed without quotes, a word added): each is filed under
    every (words before, words after) pair around such a span, when those keep at least
    SUBSTITUTION_MIN_SHARED words and half the template and the span is not the first word
    (mostly the action); two filed under one key differ in that span only. Longer templates
    are left to the Jaccard join, which a small change there does not defeat."""
    seen: dict[tuple[tuple[str, ...], tuple[str, ...]], int] = {}
    for i, words in enumerate(templates):
        n = len(words)
        if not SUBSTITUTION_MIN_SHARED <= n <= SUBSTITUTION_MAX_WORDS:
            continue
        heads = [words[:k] for k in range(n + 1)]
        tails = [words[k:] for k in range(n + 1)]
        for start in range(1, n + 1):
            for end in range(start, min(start + SPAN_WORDS, n) + 1):
                kept = n - (end - start)
                if kept < SUBSTITUTION_MIN_SHARED or 2 * kept < n:
                    continue
                j = seen.setdefault((heads[start], tails[end]), i)
                if j != i:
                    links.join(i, j)


def _join_similar(templates: list[tuple[str, ...]], links: _Union, settings: FamilySettings) -> None:
    t = settings.threshold
    sets = [_shingles(words) for words in templates]
    df: Counter[str] = Counter()
    for s in sets:
        df.update(s)
    cap = max(settings.common_floor, len(sets) // settings.common_share)
    # Rarest first; ties by the shingle, so the order (and so the result) is deterministic.
    ranked = [sorted(s, key=lambda x: (df[x], x)) for s in sets]
    order = sorted(range(len(sets)), key=lambda i: len(sets[i]))
    postings: dict[str, list[int]] = {}
    for i in order:
        s = sets[i]
        n = len(s)
        if n == 0:
            continue
        prefix = ranked[i][: n - math.ceil(t * n) + 1]
        seen: set[int] = set()
        for x in prefix:
            if df[x] > cap:
                continue
            for j in postings.get(x, ()):
                if j in seen:
                    continue
                seen.add(j)
                other = sets[j]
                if len(other) < t * n:  # sets come in size order: other is no larger
                    continue
                inter = len(s & other)
                if inter >= t * (n + len(other) - inter):
                    links.join(i, j)
        for x in prefix:
            if df[x] <= cap:
                postings.setdefault(x, []).append(i)


def family_sizes(families: Sequence[str]) -> dict[str, int]:
    """How many families have each size, smallest size first (sizes as strings, for JSON)."""
    sizes = Counter(Counter(families).values())
    return {str(k): sizes[k] for k in sorted(sizes)}
