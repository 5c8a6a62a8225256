"""Rebuild triage/benchmark_data/osworld.json, the OSWorld test-set index shinken ships, from
a checkout of OSWorld (or a fork carrying `evaluation_examples/`).

    .venv/bin/python scripts/osworld_index.py --checkout PATH/TO/OSWorld [--commit SHA] [--repository URL]
    .venv/bin/python scripts/osworld_index.py --refresh    # re-derive templates after triage/wording.py changed

Reads `evaluation_examples/test_all.json` (app -> task ids) and each task's
`evaluation_examples/examples/<app>/<id>.json`; keeps its id, app, file and instruction
(whitespace-normalised) and the template and slots shinken reads from it. Nothing else of
OSWorld is kept. The index records the commit (from git when the checkout is a git work tree)
and OSWorld's Apache-2.0 notice; its license text ships beside it (OSWORLD_LICENSE).
"""

from __future__ import annotations

import argparse
import subprocess
from pathlib import Path

import orjson

REPO = Path(__file__).resolve().parent.parent
from shinken.schemas import check_own, write_bytes
from shinken.triage.wording import WORDING_VERSION, normalize, read

OUT = REPO / "triage" / "benchmark_data" / "osworld.json"
NOTICE = ("Derived from OSWorld (https://github.com/xlang-ai/OSWorld), Copyright 2024 XLANG NLP Lab, licensed under "
          "the Apache License, Version 2.0 (OSWORLD_LICENSE beside this file). Modified: only each test task's id, "
          "app, file name and whitespace-normalised instruction are kept, with the template and slots shinken "
          "derives from the instruction.")


def entry(app: str, tid: str, instruction: str) -> dict[str, object]:
    text = normalize(instruction)
    w = read(text)
    return {"id": tid, "app": app, "source": f"{app}/{tid}.json", "instruction": text, "template": w.template,
            "slots": [[s.kind, s.value] for s in w.slots]}


def from_checkout(checkout: Path) -> list[dict[str, object]]:
    ex = checkout / "evaluation_examples"
    test_all = orjson.loads((ex / "test_all.json").read_bytes())
    out = []
    for app, ids in test_all.items():
        for tid in ids:
            task = orjson.loads((ex / "examples" / app / f"{tid}.json").read_bytes())
            out.append(entry(app, tid, task["instruction"]))
    return out


def git_commit(checkout: Path) -> str | None:
    p = subprocess.run(["git", "-C", str(checkout), "rev-parse", "HEAD"], capture_output=True, text=True)
    return p.stdout.strip() if p.returncode == 0 else None


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--checkout", type=Path, help="an OSWorld checkout (holding evaluation_examples/)")
    ap.add_argument("--commit", help="the commit the checkout is at (read from git when it is a work tree)")
    ap.add_argument("--repository", default="github.com/xlang-ai/OSWorld (fetched from the fork pkueecszc/OSWorld)")
    ap.add_argument("--refresh", action="store_true", help="re-derive templates and slots of the shipped index")
    a = ap.parse_args()
    if a.refresh:
        doc = orjson.loads(OUT.read_bytes())
        doc["tasks"] = [entry(str(t["app"]), str(t["id"]), str(t["instruction"])) for t in doc["tasks"]]
    else:
        if a.checkout is None:
            ap.error("give --checkout (or --refresh)")
        commit = a.commit or git_commit(a.checkout)
        if not commit:
            ap.error("the checkout is not a git work tree; give --commit")
        doc = {
            "schema": "shinken.benchmark_index/1",
            "benchmark": "osworld",
            "title": "OSWorld test set (evaluation_examples/test_all.json)",
            "source": {"repository": a.repository, "commit": commit,
                       "files": "evaluation_examples/test_all.json, evaluation_examples/examples/<app>/<id>.json"},
            "license": "Apache-2.0",
            "notice": NOTICE,
            "wording_version": WORDING_VERSION,
            "tasks": from_checkout(a.checkout),
        }
    doc["wording_version"] = WORDING_VERSION
    check_own("benchmark_index", doc, str(OUT))
    # One task a line: compact, and a rebuild diffs task by task.
    head = orjson.dumps({k: v for k, v in doc.items() if k != "tasks"}, option=orjson.OPT_INDENT_2)
    lines = b",\n".join(b"  " + orjson.dumps(t) for t in doc["tasks"])
    write_bytes(OUT, head[:-2] + b',\n  "tasks": [\n' + lines + b"\n  ]\n}\n")
    print(f"{OUT}: {len(doc['tasks'])} tasks")


if __name__ == "__main__":
    main()
