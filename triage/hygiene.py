"""Dataset hygiene over a whole triaged root: each task's benchmark matches (a task that is an
evaluation benchmark's test task gets the reason `benchmark_overlap`, a blocker unless the
run keeps such tasks) and its family (near-duplicates that a split keeps on one side)."""

from __future__ import annotations

import hashlib
from collections import Counter
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import orjson

from shinken.triage.benchmarks import SHIPPED, BenchmarkSet, load_benchmarks
from shinken.triage.cache import HygieneMemo
from shinken.triage.codes import BLOCKER, NOTE, verdict_of
from shinken.triage.families import FamilySettings, assign_families, family_sizes
from shinken.triage.overlap import CONTAINED, CONTAINED_RATIO, CONTAINED_WORDS, MIN_SHARED, THRESHOLD, Match, \
    OverlapIndex
from shinken.triage.wording import Wording, read

OVERLAP_CODE = "benchmark_overlap"
HYGIENE_VERSION = 1  # bump when what the pass computes changes in a way the settings do not show


@dataclass(frozen=True)
class HygieneOptions:
    benchmark_dirs: tuple[Path, ...] = ()  # --benchmark DIR
    shipped: tuple[str, ...] = SHIPPED
    keep_overlap: bool = False  # --keep-benchmark-overlap: flagged tasks stay runnable (a note)
    threshold: float = THRESHOLD
    families: FamilySettings = FamilySettings()


@dataclass
class Hygiene:
    """The loaded benchmarks and their index, for one run."""

    options: HygieneOptions
    benchmarks: list[BenchmarkSet] = field(default_factory=list)
    _index: OverlapIndex | None = field(default=None, init=False)

    @classmethod
    def load(cls, options: HygieneOptions) -> "Hygiene":
        return cls(options, load_benchmarks(list(options.benchmark_dirs), shipped_names=options.shipped))

    @property
    def index(self) -> OverlapIndex | None:
        """Built when first matched against (an unchanged re-run never needs it)."""
        if self._index is None:
            tasks = [t for s in self.benchmarks for t in s.tasks]
            self._index = OverlapIndex(tasks, threshold=self.options.threshold) if tasks else None
        return self._index

    def settings(self) -> dict[str, Any]:
        """What the report and the dataset card say about the check."""
        return {
            "benchmarks": [s.describe() for s in self.benchmarks],
            "policy": "keep" if self.options.keep_overlap else "drop",
            "overlap": {"threshold": self.options.threshold, "min_shared_words": MIN_SHARED,
                        "contained_share": CONTAINED, "contained_min_words": CONTAINED_WORDS,
                        "contained_max_ratio": CONTAINED_RATIO,
                        "method": "IDF-weighted Jaccard of templates (parameters as slots) or of plain words, one "
                                  "unquoted name may differ; or the task contains the benchmark task"},
            "families": self.options.families.as_json(),
        }

    def fingerprint(self, ids: list[str], instructions: list[str | None]) -> str:
        """Everything the pass reads: the settings, the benchmarks' tasks, and every task's
        id and instruction in order. Equal fingerprints, equal families and matches."""
        h = hashlib.sha256(orjson.dumps([HYGIENE_VERSION, self.settings(),
                                         [[t.benchmark, t.task_id, t.wording.text] for s in self.benchmarks
                                          for t in s.tasks]]))
        for tid, text in zip(ids, instructions):
            h.update(tid.encode("utf-8", "surrogatepass") + b"\0" + (text or "").encode("utf-8", "surrogatepass") + b"\1")
        return h.hexdigest()[:32]

    def apply(self, tasks: list[dict[str, Any]], instructions: list[str | None],
              memo_dir: Path | None = None) -> tuple[list[dict[str, Any]], bool]:
        """New task entries with `family`, `benchmark_matches` and, when matched, the
        `benchmark_overlap` reason and the verdict it gives. `instructions[i]` is task i's.
        `memo_dir`: where the last run's families and matches are kept, reused when nothing
        the pass reads changed (an unchanged re-run skips the reading and the matching); the
        second value says whether they were."""
        ids = [t["id"] for t in tasks]
        memo = HygieneMemo(memo_dir, self.fingerprint(ids, instructions)) if memo_dir is not None else None
        known = memo.load(len(tasks)) if memo is not None else None
        reused = known is not None
        if known is None:
            known = self._compute(ids, instructions)
            if memo is not None:
                memo.save(known)
        out = []
        for t, (fam, matches) in zip(tasks, known):
            entry = {**t, "family": fam, "benchmark_matches": matches}
            if matches:
                entry["reasons"] = [*t["reasons"], self._reason(matches)]
                entry["verdict"] = verdict_of(entry["reasons"])
            out.append(entry)
        return out, reused

    def _compute(self, ids: list[str], instructions: list[str | None]) -> list[tuple[str, list[dict[str, Any]]]]:
        readings: dict[str, Wording] = {}
        found: dict[str, list[Match]] = {}
        wordings: list[Wording | None] = []
        index = self.index
        for text in instructions:
            if not isinstance(text, str) or not text.strip():
                wordings.append(None)
                continue
            w = readings.get(text)
            if w is None:
                w = readings[text] = read(text)
                if index is not None:
                    found[text] = index.matches(w)
            wordings.append(w)
        families = assign_families(ids, wordings, self.options.families)
        return [(fam, [m.as_json() for m in found.get(text, [])] if isinstance(text, str) else [])
                for text, fam in zip(instructions, families)]

    def _reason(self, matches: list[dict[str, Any]]) -> dict[str, str]:
        best = matches[0]
        differ = "; ".join(f"{d['slot']} {d['benchmark']!r} -> {d['task']!r}" for d in best["slots_differ"])
        others = f", and {len(matches) - 1} more" if len(matches) > 1 else ""
        what = "kept (--keep-benchmark-overlap)" if self.options.keep_overlap else \
            "kept out of the training data (--keep-benchmark-overlap keeps it)"
        return {"code": OVERLAP_CODE, "severity": NOTE if self.options.keep_overlap else BLOCKER,
                "subject": f"{best['benchmark']}:{best['task_id']}",
                "detail": f"matches {best['benchmark']} test task {best['task_id']} (score {best['score']:.2f}"
                          + (f"; differs in {differ}" if differ else "; no parameter differs") + f"{others}); {what}"}


def overlap_summary(tasks: list[dict[str, Any]], settings: dict[str, Any]) -> dict[str, Any]:
    """Tasks matching each benchmark (and how many of its tasks they match) for the report."""
    per: dict[str, set[str]] = {}
    hit: dict[str, set[str]] = {}
    flagged = 0
    for t in tasks:
        ms = t.get("benchmark_matches") or []
        if ms:
            flagged += 1
        for m in ms:
            per.setdefault(m["benchmark"], set()).add(t["id"])
            hit.setdefault(m["benchmark"], set()).add(m["task_id"])
    benchmarks = [{**b, "flagged": len(per.get(b["name"], ())), "benchmark_tasks_matched": len(hit.get(b["name"], ()))}
                  for b in settings["benchmarks"]]
    return {"flagged": flagged, "policy": settings["policy"], "benchmarks": benchmarks, "settings": settings["overlap"]}


def families_summary(tasks: list[dict[str, Any]], settings: dict[str, Any]) -> dict[str, Any]:
    fams = [t["family"] for t in tasks]
    counts = Counter(fams)
    largest = min(counts.items(), key=lambda kv: (-kv[1], kv[0])) if counts else ("", 0)
    return {"families": len(counts), "with_variants": sum(1 for n in counts.values() if n > 1),
            "tasks_in_variants": sum(n for n in counts.values() if n > 1),
            "largest": {"family": largest[0], "tasks": largest[1]}, "sizes": family_sizes(fams),
            "settings": settings["families"]}
