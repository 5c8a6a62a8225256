"""The task browser: a folder that opens from disk in a browser (no server; `file://` allows
scripts and images beside the page, not fetch, so data comes as script files).

    DIR/index.html            the page (inline CSS and script)
    DIR/data/index.js         the index: a column per filterable field (report/task_rows.py)
    DIR/data/details-N.js     the details of tasks N*CHUNK .. N*CHUNK+CHUNK-1, loaded when a row opens
    DIR/media/<sha256>.webp   start screenshots and recordings, copied from the probe's run dir

The page shows PAGE_ROWS rows at a time, filtered in the page over the index; 10,910 rows open
as fast as a few dozen (benchmarks/bench_task_browser.py)."""

from __future__ import annotations

import datetime as _dt
import json
import os
import shutil
from pathlib import Path
from typing import Any

from shinken import __version__
from shinken.errors import ShinkenError
from shinken.report.task_page import page_html
from shinken.report.task_rows import media_files, task_rows

CHUNK = 250  # tasks per details file


def _script(var: str, doc: Any) -> str:
    """A script that sets `var` from a JSON text: JSON.parse of a string literal parses faster than
    the same object as a literal, and '</script>' or U+2028 in a task's text cannot end it."""
    text = json.dumps(doc, ensure_ascii=False, separators=(",", ":"))
    return f"{var}=JSON.parse({json.dumps(text, ensure_ascii=True)});\n"


def _write(path: Path, text: str) -> None:
    tmp = path.with_name(f".{path.name}.part")
    tmp.write_text(text, encoding="utf-8")
    os.replace(tmp, path)


def write_task_site(dest: Path, triage: dict | None, receipt: dict | None, profile: dict | None, *,
                    sources: dict[str, str], task_root: Path | None = None, media_root: Path | None = None,
                    generated_at: str | None = None) -> dict[str, Any]:
    """Write the browser into `dest` (created; files of an earlier browser there are replaced).
    `media_root`: where the receipt's media paths point (default: the receipt's run dir). Returns
    counts for the command's summary: tasks, details files, media copied and media missing."""
    index, details = task_rows(triage, receipt, profile, task_root)
    dest = Path(dest)
    if dest.exists() and not dest.is_dir():
        raise ShinkenError(f"--tasks {dest}: not a folder; pass a folder to write the task browser into")
    (dest / "data").mkdir(parents=True, exist_ok=True)
    for old in (dest / "data").glob("details-*.js"):
        old.unlink()
    wanted = media_files(details)
    root = media_root or (Path(receipt["run_dir"]) if receipt and receipt.get("run_dir") else None)
    missing: list[str] = []
    if wanted:
        (dest / "media").mkdir(exist_ok=True)
    for rel in wanted:
        src, dst = (root / rel) if root else None, dest / rel
        if dst.exists():
            continue
        if src is None or not src.is_file():
            missing.append(rel)
            continue
        shutil.copyfile(src, dst)
    gone = set(missing)
    for d in details:  # a missing file is said in its task's details, never shown as a broken image
        m = d.get("media")
        if not m:
            continue
        if m["start"] and m["start"]["path"] in gone:
            m["errors"].append("the start screenshot's file is not in the run dir (pass --media DIR)")
            m["start"] = None
        lost = [r for r in m["recordings"] if r["path"] in gone]
        if lost:
            m["errors"].append(f"{len(lost)} recording file(s) are not in the run dir (pass --media DIR)")
            m["recordings"] = [r for r in m["recordings"] if r["path"] not in gone]
    if gone:
        index.cols["start"] = ["" if p in gone else p for p in index.cols["start"]]
    when = generated_at or _dt.datetime.now(_dt.timezone.utc).strftime("%Y-%m-%d %H:%M UTC")
    meta = {"version": __version__, "generated": when, "sources": sources, "chunk": CHUNK,
            "probe_summary": {k: (receipt or {}).get("summary", {}).get(k) for k in ("total", "kept", "dropped")}
            if receipt else None}
    _write(dest / "data" / "index.js", _script("window.SHINKEN_INDEX", {**index.to_json(), "meta": meta})
           + "window.SHINKEN_INDEX_MS=performance.now();\n")  # when the index was parsed (the benchmark's split)
    for n in range(0, len(details), CHUNK):
        chunk = {d["id"]: d for d in details[n:n + CHUNK]}
        _write(dest / "data" / f"details-{n // CHUNK}.js",
               f"window.shinkenDetails({n // CHUNK},{json.dumps(json.dumps(chunk, ensure_ascii=False))});\n")
    _write(dest / "index.html", page_html())
    return {"tasks": len(details), "details_files": -(-len(details) // CHUNK), "media": len(wanted) - len(missing),
            "media_missing": len(missing), "index": str(dest / "index.html")}
