"""The share of the release-shaped synthetic corpus (benchmarks/synthetic_release.py) that
triage finds runnable on a task image, before and after a change of the image.

Each bundle is analysed once; the analysis is then matched against each manifest, alone and
with the mock web hub and an LLM judge configured (every mock app mapped, --judge-url),
since those tasks need services beside the image rather than the image itself.

    python benchmarks/runnable_share.py                          # before: the pinned sandbox-cua manifest;
                                                                 # after: shinken/sandbox-cua:latest (Docker)
    python benchmarks/runnable_share.py --after manifest.json --n 2000 --json
"""

from __future__ import annotations

import argparse
import json
import os
import sys
import tempfile
import time
from collections import Counter
from pathlib import Path

REPO = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(REPO))

from benchmarks.synthetic_release import RELEASE_SIZE, make_corpus  # noqa: E402

BEFORE = REPO / "benchmarks" / "data" / "sandbox-cua-889314ac40e1.manifest.json"
AFTER = "shinken/sandbox-cua:latest"


def _manifest(spec: str) -> dict:
    from shinken.triage.manifest import load_manifest_file, manifest_for_image

    return load_manifest_file(Path(spec)) if Path(spec).is_file() else manifest_for_image(spec)


def _hub_map(analyses: list[dict]) -> dict[str, str]:
    """A --mock-urls map naming every mock app the corpus uses (the hub serving them all)."""
    apps: set[str] = set()
    for a in analyses:
        for kind, alts, _where in a["needs"]:
            if kind == "placeholder":
                apps.add(alts[0][len("__CUA_GYM_"):].rsplit("_", 2)[0])
            elif kind == "mock" and alts[0] != "mock_websites":
                apps.add(alts[0].upper())
            elif kind == "mock_host":
                apps.add(alts[1].upper())
    return {f"__CUA_GYM_{app}_URL__": "http://hub.invalid" for app in sorted(apps)}


def measure(analyses: list[dict], manifest: dict, hub: dict[str, str]) -> dict:
    from shinken.triage.codes import CLASSES
    from shinken.triage.evaluate import Capabilities, Evaluator

    caps = Capabilities.from_manifest(manifest)
    out: dict = {"image": manifest["image"]["ref"], "image_id": manifest["image"]["id"]}
    for scenario, ev in (("image_only", Evaluator(caps)), ("with_hub_and_judge", Evaluator(caps, hub, judge=True))):
        tasks = [ev.evaluate(a) for a in analyses]
        verdicts = Counter(t["verdict"] for t in tasks)
        blockers: Counter = Counter()
        for t in tasks:
            for key in {(r["code"], r.get("subject") or "") for r in t["reasons"] if r["severity"] == "blocker"}:
                blockers[key] += 1
        by_class = {}
        for c in CLASSES:
            sub = [t for t in tasks if t["class"] == c]
            by_class[c] = {"tasks": len(sub), "runnable": sum(t["verdict"] == "runnable" for t in sub)}
        out[scenario] = {
            "runnable": verdicts["runnable"], "blocked": verdicts["blocked"], "defective": verdicts["defective"],
            "share": round(verdicts["runnable"] / len(tasks), 4) if tasks else 0.0,
            "by_class": by_class,
            "top_blockers": [{"code": c, "subject": s, "tasks": n} for (c, s), n in blockers.most_common(15)],
        }
    return out


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--before", default=str(BEFORE), help="manifest file or image ref (default: the pinned one)")
    ap.add_argument("--after", default=AFTER, help="manifest file or image ref (default: %(default)s)")
    ap.add_argument("--n", type=int, default=RELEASE_SIZE)
    ap.add_argument("--seed", type=int, default=0)
    ap.add_argument("--root", type=Path, help="an existing synthetic corpus to use (else one is written to a temp dir)")
    ap.add_argument("--json", action="store_true", help="the result as JSON on stdout")
    a = ap.parse_args()
    from shinken.triage.evaluate import Capabilities
    from shinken.triage.run import analyze_root

    before, after = _manifest(a.before), _manifest(a.after)
    with tempfile.TemporaryDirectory(prefix="share-") as tmp:
        root = a.root or make_corpus(Path(tmp) / "tasks", a.n, a.seed)
        t0 = time.perf_counter()
        pys = {Capabilities.from_manifest(m).python_version for m in (before, after)}
        analyses = {py: analyze_root(root, py) for py in pys}
        seconds = time.perf_counter() - t0
    doc = {"corpus": {"tasks": len(next(iter(analyses.values()))), "seed": a.seed, "analysis_s": round(seconds, 2),
                      "load_average": round(os.getloadavg()[0], 2)}}
    for label, m in (("before", before), ("after", after)):
        an = analyses[Capabilities.from_manifest(m).python_version]
        doc[label] = measure(an, m, _hub_map(an))
    if a.json:
        print(json.dumps(doc, indent=2))
        return
    n = doc["corpus"]["tasks"]
    print(f"{n} release-shaped tasks (seed {a.seed}), analysed in {seconds:.1f} s, load average "
          f"{doc['corpus']['load_average']}")
    w = 36
    print(f"{'':28}{'before':>{w}}{'after':>{w}}")
    print(f"{'image':28}{doc['before']['image']:>{w}}{doc['after']['image']:>{w}}")
    for scenario, title in (("image_only", "runnable (image alone)"), ("with_hub_and_judge", "runnable (+ hub and judge)")):
        b, f = doc["before"][scenario], doc["after"][scenario]
        cell = lambda x: f"{x['runnable']} ({x['share']:.1%})"  # noqa: E731
        print(f"{title:28}{cell(b):>{w}}{cell(f):>{w}}")
        for c, row in b["by_class"].items():
            fr = f["by_class"][c]
            print(f"{'  ' + c:28}{row['runnable']:>{w - 10}} of {row['tasks']:<6}{fr['runnable']:>{w - 10}} of {fr['tasks']:<6}")
    for label in ("before", "after"):
        print(f"top blockers {label} (image alone; tasks):")
        for row in doc[label]["image_only"]["top_blockers"][:12]:
            print(f"  {row['tasks']:>6}  {row['code']:<22} {row['subject']}")


if __name__ == "__main__":
    main()
