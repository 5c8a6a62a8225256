"""A release-shaped synthetic CUA-Gym corpus, for benchmarks and tests.

The real export cannot be downloaded on these machines, so this writes N task folders
shaped like it (docs: /work/shared/reference/cua-gym-bundles.md): `<uuid>/task.json`,
`reward.py` and exactly one `initial_setup.{py,sh,xlsx,docx,pptx}`, i.e. 3 members per
task, and packs them as a `.tar.zst` whose members are `<uuid>/<file>` with no leading
folder. Files are small but realistic in shape, and what they import, launch and fetch
follows the release's mix (benchmarks/release_mix.py: its weights are estimates, written
down there); everything is deterministic in `seed`.

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

try:  # run as a script (benchmarks/ on sys.path) or imported as benchmarks.synthetic_release
    from benchmarks.release_mix import APPS, PAUSE, App
except ImportError:  # pragma: no cover
    from release_mix import APPS, PAUSE, App

RELEASE_SIZE = 10_910

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
{imports}
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

# Desktop setups write their document, then start the app without waiting (the release's
# convention); web setups POST the initial state to the mock and open it in Chrome.
_LAUNCH_GUI = '''

def launch_gui(command, delay_sec=2.0):
    env = os.environ.copy()
    env["DISPLAY"] = ":0"
    subprocess.Popen(shlex.split(command), env=env, start_new_session=True,
                     stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    time.sleep(delay_sec)


launch_gui(f\'{launch}\')
'''

_SETUP_PY = '''import json
import os
import shlex
import subprocess
import time
os.makedirs("/home/user", exist_ok=True)
DOC = "/home/user/{name}"
DATA = {data}
with open(DOC, "w") as fh:
    json.dump(DATA, fh)
print("setup done")
'''

_SETUP_WEB = '''import json
import os
import shlex
import subprocess
import time
import uuid

import requests

BASE_URL = "__CUA_GYM_{mock}_URL__"
sid = str(uuid.uuid4())
with open("/tmp/task_web_sid", "w") as f:
    f.write(sid)
state = {data}
resp = requests.post(f"{{BASE_URL}}/post?sid={{sid}}", json={{"action": "set", "state": state}}, timeout=30)
assert resp.status_code == 200, resp.text
'''

_WEB_REWARD_CHECK = (
    'sid = open("/tmp/task_web_sid").read().strip()',
    'state = requests.get(f"__CUA_GYM_{mock}_URL__/go?sid={{sid}}", timeout=30).json()',
    'score += 0.5 if state.get("state_diff") else 0.0',
)

_SETUP_SH = '''#!/bin/bash
set -euo pipefail
mkdir -p /home/user/work
{lines}
echo setup done
'''

_APP_WEIGHTS = [a.weight for a in APPS]


def _sentence(rng: random.Random, n: int) -> str:
    return " ".join(rng.choice(_WORDS) for _ in range(n))


def _pick(rng: random.Random, weighted: tuple[tuple[str, float], ...]) -> str:
    return rng.choices([k for k, _ in weighted], [w for _, w in weighted])[0]


def _reward(rng: random.Random, tid: str, app: App, doc_name: str) -> str:
    imports: list[str] = []
    body: list[str] = []
    for use in app.uses:
        if rng.random() < use.p:
            imports.extend(i for i in use.imports if i not in imports)
            body.extend(use.lines)
    if app.mock:
        imports.append("import requests")
        body.extend(x.format(mock=app.mock) for x in _WEB_REWARD_CHECK)
    for i in range(rng.randint(2, 8)):
        body.append(f"# component {i}: {_sentence(rng, 6)}")
        body.append(f"score += {1 / 4:.2f} if os.path.getsize(TARGET) > {i} else 0.0")
    imports = [i for i in imports if i not in ("import json", "import os", "import sys")]
    return _REWARD_TEMPLATE.format(tid=tid, name=doc_name, imports="".join(i + "\n" for i in imports),
                                   components="\n".join("    " + b for b in body))


def _task_files(rng: random.Random, tid: str) -> dict[str, bytes]:
    app = rng.choices(APPS, _APP_WEIGHTS)[0]
    kind = _pick(rng, app.kinds)
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
        "app_type": app.name,
        "config": config,
        "evaluator": {"type": "python", "url": "./reward.py"},
    }
    if rng.random() < 7365 / 10910:
        task["difficulty"] = rng.choice(_DIFFICULTIES)
    if not app.mock:
        task["evaluator"]["postconfig"] = [
            {"type": "execute", "parameters": {"command": list(PAUSE)}},
            {"type": "sleep", "parameters": {"seconds": 0.5}},
        ]
    reward = _reward(rng, tid, app, doc_name)
    data = {f"k{i}": _sentence(rng, 4) for i in range(rng.randint(5, 60))}
    if app.mock:
        # Seeded state holds URLs that are data (avatars), never fetched.
        data["user"] = {"name": "Demo User", "avatar": f"https://avatars.example-cdn.net/{tid[:6]}.png"}
        setup = _SETUP_WEB.format(mock=app.mock, data=repr(data))
        setup += _LAUNCH_GUI.format(launch='google-chrome "{BASE_URL}/?sid={sid}"')
    elif kind == "py":
        setup = _SETUP_PY.format(data=repr(data), name=doc_name)
        if app.launch:
            setup += _LAUNCH_GUI.format(launch=app.launch.replace("{doc}", "{DOC}"))
    elif kind == "sh":
        lines = [f"echo '{_sentence(rng, 5)}' > /home/user/work/f{i}.txt" for i in range(rng.randint(3, 40))]
        if app.name == "vlc":
            lines.append("ffmpeg -v error -f lavfi -i testsrc=duration=5:size=320x240 -y /home/user/clip.mp4")
        if app.launch:
            lines.append(f"nohup {app.launch.replace('{doc}', '/home/user/clip.mp4')} >/dev/null 2>&1 &")
        setup = _SETUP_SH.format(lines="\n".join(lines))
    else:
        # Office files are zip containers: a PK header then incompressible-ish bytes.
        return {
            "task.json": orjson.dumps(task, option=orjson.OPT_INDENT_2),
            "reward.py": reward.encode(),
            setup_name: b"PK\x03\x04" + rng.randbytes(rng.randint(4_000, 24_000)),
        }
    return {
        "task.json": orjson.dumps(task, option=orjson.OPT_INDENT_2),
        "reward.py": reward.encode(),
        setup_name: setup.encode(),
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
