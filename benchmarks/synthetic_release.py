"""A release-shaped synthetic CUA-Gym corpus, for benchmarks and tests.

The real export cannot be downloaded on these machines, so this writes N task folders
shaped like it (docs: /work/shared/reference/cua-gym-bundles.md): `<uuid>/task.json`,
`reward.py` and exactly one `initial_setup.{py,sh,xlsx,docx,pptx}`, i.e. 3 members per
task, and packs them as a `.tar.zst` whose members are `<uuid>/<file>` with no leading
folder. Files are small but realistic in shape; everything is deterministic in `seed`.

    from benchmarks.synthetic_release import make_corpus, make_archive
    root = make_corpus(tmp / "tasks", n=200, seed=1)
    make_archive(root, tmp / "tasks.tar.zst")

Run as a script: `python benchmarks/synthetic_release.py DEST [--n N] [--archive FILE]`.
"""

from __future__ import annotations

import argparse
import io
import os
import random
import tarfile
import uuid
from pathlib import Path

import orjson
import zstandard

RELEASE_SIZE = 10_910

# Rough mix of the release (7,365 of 10,910 carry a difficulty; setup kinds vary).
_APPS = [
    ("libreoffice_calc", "xlsx"), ("libreoffice_writer", "docx"), ("libreoffice_impress", "pptx"),
    ("vscode", "py"), ("gimp", "py"), ("vlc", "sh"), ("os", "sh"), ("pdf", "py"), ("chrome", "py"),
    ("gmail_mock", "py"), ("slack_mock", "py"), ("notion_mock", "py"), ("jira_mock", "py"),
    ("multi_apps", "py"), ("libreoffice_calc,chrome", "py"),
]
_DIFFICULTIES = ("easy", "medium", "hard")
_WORDS = (
    "open the spreadsheet and fill column total with quantity times price then save the file "
    "rename every report in the documents folder so that its name starts with the date write "
    "a summary paragraph at the end of the document reply to the latest message in the inbox "
    "create a new channel invite the team and post the agenda move the ticket to done"
).split()

_REWARD_TEMPLATE = '''"""Reward for task {tid}."""
import json
import os
import sys

TARGET = "/home/user/{name}"


def check():
    score = 0.0
    if not os.path.exists(TARGET):
        print("missing output", TARGET)
        return 0.0
{components}
    return score


if __name__ == "__main__":
    try:
        r = check()
    except Exception as exc:
        print("error:", exc, file=sys.stderr)
        r = 0.0
    print(f"REWARD: {{r:.3f}}")
'''

_SETUP_PY = '''import os
import json
os.makedirs("/home/user", exist_ok=True)
DATA = {data}
with open("/home/user/{name}", "w") as fh:
    json.dump(DATA, fh)
print("setup done")
'''

_SETUP_SH = '''#!/bin/bash
set -euo pipefail
mkdir -p /home/user/work
{lines}
echo setup done
'''


def _sentence(rng: random.Random, n: int) -> str:
    return " ".join(rng.choice(_WORDS) for _ in range(n))


def _task_files(rng: random.Random, tid: str) -> dict[str, bytes]:
    app, kind = rng.choice(_APPS)
    setup_name = f"initial_setup.{kind}"
    doc_name = f"task_{tid[:8]}.{kind if kind in ('xlsx', 'docx', 'pptx') else 'json'}"
    config: list[dict] = [
        {"type": "download", "parameters": {"files": [{"url": f"./{setup_name}", "path": f"/home/user/{setup_name}"}]}}
    ]
    if kind == "py":
        config.append({"type": "execute", "parameters": {"command": f"python3 /home/user/{setup_name}"}})
    elif kind == "sh":
        config.append({"type": "execute", "parameters": {"command": ["bash", f"/home/user/{setup_name}"]}})
    else:
        config.append({"type": "open", "parameters": {"path": f"/home/user/{setup_name}"}})
        config.append({"type": "sleep", "parameters": {"seconds": rng.choice([1, 2, 3, 5])}})
    task: dict = {
        "id": tid,
        "instruction": _sentence(rng, rng.randint(12, 60)),
        "app_type": app,
        "config": config,
        "evaluator": {"type": "python", "url": "./reward.py"},
    }
    if rng.random() < 7365 / 10910:
        task["difficulty"] = rng.choice(_DIFFICULTIES)
    if not app.endswith("_mock"):
        task["evaluator"]["postconfig"] = [
            {"type": "execute", "parameters": {"command": ["python3", "-c", "import pyautogui; pyautogui.hotkey('ctrl', 's')"]}},
            {"type": "sleep", "parameters": {"seconds": 0.5}},
        ]
    components = "\n".join(
        f"    # component {i}: {_sentence(rng, 6)}\n    score += {1 / 4:.2f} if os.path.getsize(TARGET) > {i} else 0.0"
        for i in range(rng.randint(2, 8))
    )
    reward = _REWARD_TEMPLATE.format(tid=tid, name=doc_name, components=components)
    if kind == "py":
        data = {f"k{i}": _sentence(rng, 4) for i in range(rng.randint(5, 60))}
        setup = _SETUP_PY.format(data=repr(data), name=doc_name).encode()
    elif kind == "sh":
        lines = "\n".join(f"echo '{_sentence(rng, 5)}' > /home/user/work/f{i}.txt" for i in range(rng.randint(3, 40)))
        setup = _SETUP_SH.format(lines=lines).encode()
    else:
        # Office files are zip containers: a PK header then incompressible-ish bytes.
        setup = b"PK\x03\x04" + rng.randbytes(rng.randint(4_000, 24_000))
    return {
        "task.json": orjson.dumps(task, option=orjson.OPT_INDENT_2),
        "reward.py": reward.encode(),
        setup_name: setup,
    }


def task_ids(n: int, seed: int = 0) -> list[str]:
    rng = random.Random(f"ids-{seed}")
    return [str(uuid.UUID(int=rng.getrandbits(128), version=4)) for _ in range(n)]


def iter_tasks(n: int = RELEASE_SIZE, seed: int = 0):
    """Yield (task_id, {file name: bytes}) for each synthetic task, deterministically."""
    rng = random.Random(seed)
    for tid in task_ids(n, seed):
        yield tid, _task_files(rng, tid)


def make_corpus(dest: Path, n: int = RELEASE_SIZE, seed: int = 0) -> Path:
    """Write N release-shaped task folders under `dest` (created; must not hold other
    tasks) and return `dest`."""
    dest = Path(dest)
    dest.mkdir(parents=True, exist_ok=True)
    for tid, files in iter_tasks(n, seed):
        folder = dest / tid
        folder.mkdir(exist_ok=True)
        for name, data in files.items():
            (folder / name).write_bytes(data)
    return dest


def make_archive(src: Path, archive: Path, *, level: int = 3) -> Path:
    """Pack the task folders under `src` into a `.tar.zst` shaped like the release:
    members `<task-id>/<file>`, regular files only, no leading folder, sorted."""
    src, archive = Path(src), Path(archive)
    archive.parent.mkdir(parents=True, exist_ok=True)
    cctx = zstandard.ZstdCompressor(level=level)
    with open(archive, "wb") as raw, cctx.stream_writer(raw, closefd=False) as zw:
        with tarfile.open(fileobj=zw, mode="w|", format=tarfile.GNU_FORMAT) as tar:
            for folder in sorted(p for p in src.iterdir() if p.is_dir() and not p.name.startswith(".")):
                for f in sorted(folder.iterdir()):
                    if not f.is_file():
                        continue
                    data = f.read_bytes()
                    info = tarfile.TarInfo(f"{folder.name}/{f.name}")
                    info.size = len(data)
                    info.mode = 0o644
                    info.mtime = 1_730_000_000
                    info.uname = info.gname = "root"
                    tar.addfile(info, io.BytesIO(data))
    return archive


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("dest", type=Path)
    ap.add_argument("--n", type=int, default=RELEASE_SIZE)
    ap.add_argument("--seed", type=int, default=0)
    ap.add_argument("--archive", type=Path, help="also write this .tar.zst")
    a = ap.parse_args()
    root = make_corpus(a.dest, a.n, a.seed)
    print(root)
    if a.archive:
        make_archive(root, a.archive)
        print(a.archive, os.path.getsize(a.archive), "bytes")


if __name__ == "__main__":
    main()
