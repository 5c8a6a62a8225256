"""Benchmark overlap: which tasks are an evaluation benchmark's test task, verbatim,
reworded or with a parameter changed.

Each instruction is read once (`wording.read`) into a template (content words, slots as
`<kind>`) and a plain word set. A task and a benchmark task score the larger of two
IDF-weighted Jaccard similarities: of their templates (survives a changed number, name,
file or path) and of their plain words (survives rewording that drops quotes); one name the
benchmark task writes capitalised may be swapped for the task's rarest word of its own (a name
changed without quotes); a task that holds nearly all of a benchmark task contains it. The IDF
is taken over the benchmarks' own tasks, so words every benchmark task uses weigh little and a
word no benchmark task uses weighs most. Each benchmark task is indexed under its rarest words,
enough that a task reaching the threshold holds one of them (prefix filtering), so a task is
only compared with the few benchmark tasks it shares such a word with, never with all. A match
also needs shared words enough that generic instructions ("save the file") never match on
their few common words.
"""

from __future__ import annotations

import math
from collections.abc import Iterable
from dataclasses import dataclass, field

from shinken.triage.wording import Slot, Wording, content_words, read

THRESHOLD = 0.6  # score at or above which a task is a benchmark task (docs/triage.md: how it was chosen)
MIN_SHARED = 3  # content words (not slots) a match must share, so short generic instructions never match
CONTAINED = 0.9  # share of a benchmark task's weight a longer task must hold to contain it
CONTAINED_WORDS = 5  # ... when the benchmark task has at least this many content words
CONTAINED_RATIO = 2.5  # ... and the task weighs at most this many times as much
MAX_MATCHES = 5  # matches reported per task, best first


@dataclass(frozen=True)
class BenchmarkTask:
    benchmark: str  # e.g. "osworld"
    task_id: str
    source: str  # where it came from inside the benchmark (e.g. "chrome/<id>.json")
    wording: Wording


@dataclass(frozen=True)
class Match:
    benchmark: str
    task_id: str
    score: float
    slots_differ: tuple[dict[str, str | None], ...]

    def as_json(self) -> dict[str, object]:
        return {"benchmark": self.benchmark, "task_id": self.task_id, "score": self.score,
                "slots_differ": [dict(s) for s in self.slots_differ]}


def _template_set(w: Wording) -> frozenset[str]:
    """The template's words as a set, a repeated slot counted (`<num>`, `<num>2`)."""
    seen: dict[str, int] = {}
    out = []
    for t in w.words:
        if t[0] == "<":
            n = seen[t] = seen.get(t, 0) + 1
            out.append(t if n == 1 else f"{t}{n}")
        else:
            out.append(t)
    return frozenset(out)


@dataclass
class _Entry:
    task: BenchmarkTask
    template: frozenset[str]
    plain: frozenset[str]
    t_weight: float = 0.0
    p_weight: float = 0.0
    t_swap: float = 0.0  # weight of the heaviest name in the template / plain words (one may be swapped)
    p_swap: float = 0.0


@dataclass
class OverlapIndex:
    tasks: list[BenchmarkTask]
    threshold: float = THRESHOLD
    min_shared: int = MIN_SHARED
    _entries: list[_Entry] = field(default_factory=list, init=False)
    _idf: dict[str, float] = field(default_factory=dict, init=False)
    _unseen: float = 0.0
    _postings: dict[str, list[int]] = field(default_factory=dict, init=False)

    def __post_init__(self) -> None:
        entries = [_Entry(t, _template_set(t.wording), t.wording.plain) for t in self.tasks]
        df: dict[str, int] = {}
        for e in entries:
            for tok in e.template | e.plain:
                df[tok] = df.get(tok, 0) + 1
        n = len(entries)
        self._idf = {tok: math.log((n + 1) / (c + 0.5)) for tok, c in df.items()}
        self._unseen = math.log((n + 1) / 0.5)
        for i, e in enumerate(entries):
            e.t_weight = self._weight(e.template)
            e.p_weight = self._weight(e.plain)
            names = e.task.wording.names
            e.t_swap = max((self._idf[t] for t in names if t in e.template), default=0.0)
            e.p_swap = max((self._idf[t] for t in names if t in e.plain), default=0.0)
            for tokens, total in ((e.template, e.t_weight), (e.plain, e.p_weight)):
                for tok in self._prefix(tokens, total, e.task.wording.names):
                    self._postings.setdefault(tok, []).append(i)
        self._entries = entries

    def _weight(self, tokens: Iterable[str]) -> float:
        idf, unseen = self._idf, self._unseen
        return sum(idf.get(t, unseen) for t in tokens)

    def _prefix(self, tokens: frozenset[str], total: float, names: frozenset[str]) -> list[str]:
        """A benchmark task's rarest tokens, enough that a task scoring at or above the
        threshold holds one of them: the rest weighs less than the threshold's share of the
        task's weight without its heaviest name (one name may be swapped), and less than the
        share a task containing it must hold."""
        idf = self._idf
        ranked = sorted(tokens, key=lambda t: (-idf[t], t))
        swappable = max((idf[t] for t in names if t in tokens), default=0.0)
        need = max(total - self.threshold * (total - swappable), (1 - CONTAINED) * total)
        out, acc = [], 0.0
        for t in ranked:
            out.append(t)
            acc += idf[t]
            if acc > need:
                break
        return out

    def matches(self, wording: Wording) -> list[Match]:
        if not self._entries or not wording.plain:
            return []
        template, plain = _template_set(wording), wording.plain
        tw, pw = self._weight(template), self._weight(plain)
        postings = self._postings
        cands: set[int] = set()
        for tok in template | plain:
            hit = postings.get(tok)
            if hit is not None:
                cands.update(hit)
        if not cands:
            return []
        th, entries, idf, unseen = self.threshold, self._entries, self._idf, self._unseen
        t_heavy = max((idf.get(t, unseen) for t in template), default=0.0)
        p_heavy = max((idf.get(t, unseen) for t in plain), default=0.0)
        task_slots = frozenset(wording.slots)
        found: list[tuple[float, int, tuple[dict[str, str | None], ...]]] = []
        for i in cands:
            e = entries[i]
            best, swapped = 0.0, None
            for mine, theirs, w_mine, w_theirs, heavy, swap_e in (
                    (template, e.template, tw, e.t_weight, t_heavy, e.t_swap),
                    (plain, e.plain, pw, e.p_weight, p_heavy, e.p_swap)):
                # Bounds from the weights alone (the intersection weighs at most the lighter
                # side): most candidates end here, before any set is intersected.
                if not ((w_theirs >= th * (w_mine - heavy) and w_mine >= th * (w_theirs - swap_e))
                        or CONTAINED * w_theirs <= w_mine <= CONTAINED_RATIO * w_theirs):
                    continue
                score, swap = self._score(mine, theirs, w_mine, w_theirs, e, task_slots if mine is template else None,
                                          heavy, swap_e)
                if score > best:
                    best, swapped = score, swap
            if best >= th:
                differ = slots_differ(e.task.wording.slots, wording.slots)
                if swapped is not None and not any(swapped[0] in content_words(d["benchmark"] or "") for d in differ):
                    # A name changed outside any slot already named.
                    differ += ({"slot": "name", "benchmark": e.task.wording.as_written(swapped[0]),
                                "task": wording.as_written(swapped[1])},)
                found.append((best, i, differ))
        found.sort(key=lambda f: (-f[0], entries[f[1]].task.benchmark, entries[f[1]].task.task_id))
        return [Match(entries[i].task.benchmark, entries[i].task.task_id, round(s, 3), differ)
                for s, i, differ in found[:MAX_MATCHES]]

    def _score(self, mine: frozenset[str], theirs: frozenset[str], w_mine: float, w_theirs: float, e: _Entry,
               task_slots: frozenset[Slot] | None, heavy: float, swap_e: float) -> tuple[float, tuple[str, str] | None]:
        """Weighted Jaccard of `mine` and `theirs`, or with one name of the benchmark task
        swapped for the task's rarest word of its own (a name changed without quotes), and the
        pair swapped; or the threshold when the task contains the benchmark task. 0 when
        below the threshold or when they share too few words to tell."""
        idf, unseen, th = self._idf, self._unseen, self.threshold
        shared = mine & theirs
        inter = sum([idf[t] for t in shared])  # shared tokens are the index's: all weighed
        union = w_mine + w_theirs - inter
        score, swap = inter / union, None
        contained = score < th and (inter >= CONTAINED * w_theirs and w_mine <= CONTAINED_RATIO * w_theirs
                                    and sum(1 for t in theirs if t[0] != "<") >= CONTAINED_WORDS)
        if swap_e and union - swap_e - heavy > 0 and inter >= th * (union - swap_e - heavy):
            # One name of the benchmark task swapped for the task's rarest word of its own;
            # tried when it could reach the threshold, and named when it scores best.
            lost = [t for t in e.task.wording.names if t in theirs and t not in mine]
            extra = [t for t in mine if t not in theirs and t[0] != "<"]
            if len(lost) == 1 and extra:
                came = max(extra, key=lambda t: (idf.get(t, unseen), t))
                rest = union - idf[lost[0]] - idf.get(came, unseen)
                if rest > 0 and inter / rest > score:
                    score, swap = inter / rest, (lost[0], came)
        if score < th:
            if not contained:
                return 0.0, None
            # The benchmark task inside a longer one ("The sheet is open in Calc. <task> Save.").
            score = th
        words = sum(1 for t in shared if t[0] != "<")
        if task_slots is not None:
            # A template's own words must carry it: slot values that agree count as evidence,
            # differing ones do not ("set <quote> in settings" alone says nothing).
            words += sum(1 for sl in e.task.wording.slots if sl in task_slots)
            enough = self.min_shared
        else:  # plain words: a benchmark task of two words matches only itself
            enough = min(self.min_shared, len(theirs))
        return (score, swap) if words >= enough else (0.0, None)


def slots_differ(benchmark: tuple[Slot, ...], task: tuple[Slot, ...]) -> tuple[dict[str, str | None], ...]:
    """The parameters that differ, paired by kind in order: `{"slot", "benchmark", "task"}`
    (a side is None when it has no such slot)."""
    out: list[dict[str, str | None]] = []
    kinds = list(dict.fromkeys([s.kind for s in benchmark] + [s.kind for s in task]))
    for kind in kinds:
        mine = [s.value for s in benchmark if s.kind == kind]
        theirs = [s.value for s in task if s.kind == kind]
        common = set(mine) & set(theirs)
        mine = [v for v in mine if v not in common]
        theirs = [v for v in theirs if v not in common]
        for i in range(max(len(mine), len(theirs))):
            out.append({"slot": kind, "benchmark": mine[i] if i < len(mine) else None,
                        "task": theirs[i] if i < len(theirs) else None})
    return tuple(out)


def benchmark_task(benchmark: str, task_id: str, source: str, instruction: str) -> BenchmarkTask:
    return BenchmarkTask(benchmark, task_id, source, read(instruction, names=True))
