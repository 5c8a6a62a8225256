"""The vandal probe: can damage pass the reward? On forks of the start state, every file the setup
created or changed under the user's home and the task's paths (the golden's diff against the base
image) is removed (variant `remove`) or overwritten with seeded garbage of the same size, names
kept (variant `garbage`); a web task's hub sid is reset in both (the State API's `reset`: its
mock apps serve their default state again). Then the reward runs. A reward that reaches 1.0 in both variants pays for
destruction (`reward_passes_vandalism`, dropped); in one variant only it is kept and flagged (a
task whose goal is to delete a file passes `remove`)."""

from __future__ import annotations

import json
import re
from typing import Any

from shinken.bundles.model import TASK_HOME, Bundle
from shinken.mockweb.session import SID_FILE

VARIANTS = ("remove", "garbage")
OUTCOMES = ("vandal_resists", "vandal_passes_remove", "vandal_passes_garbage", "reward_passes_vandalism",
            "vandal_no_files", "vandal_not_recorded")
_PATH_RE = re.compile(r"/[A-Za-z0-9._~+@%-]+(?:/[A-Za-z0-9._~+@%-]+)+")

# Runs as root in the fork (python3 of the task image): argv[1] the variant, argv[2] a JSON list of
# paths; regular files only (never through a symlink). Prints the JSON list of files it damaged.
SCRIPT = r"""
import json, os, random, sys
mode, paths, done = sys.argv[1], json.loads(sys.argv[2]), []
rng = random.Random(0)
for p in paths:
    if not os.path.isfile(p) or os.path.islink(p):
        continue
    if mode == "remove":
        os.remove(p)
    else:
        n = os.path.getsize(p)
        with open(p, "r+b") as f:
            f.write(rng.randbytes(n))
    done.append(p)
print(json.dumps(done))
"""


# Older goldens carry no diff: regular files under the roots written since the setup started (hidden
# folders and shinken's own files left out), at most `cap`. argv: JSON roots, since (epoch s), cap.
SCAN = r"""
import json, os, sys
roots, since, cap, out = json.loads(sys.argv[1]), float(sys.argv[2]), int(sys.argv[3]), []
for root in roots:
    if os.path.isfile(root):
        if os.stat(root).st_mtime >= since:
            out.append(root)
        continue
    for d, dirs, files in os.walk(root):
        dirs[:] = sorted(x for x in dirs if not x.startswith("."))
        for f in sorted(files):
            p = os.path.join(d, f)
            if not f.startswith(".") and "shinken" not in p and os.path.isfile(p) and not os.path.islink(p) \
                    and os.stat(p).st_mtime >= since:
                out.append(p)
print(json.dumps(sorted(set(out))[:cap]))
"""


def scan_roots(bundle: Bundle) -> list[str]:
    """Where to look for the setup's files when the golden has no diff: home and the paths the task names."""
    return [TASK_HOME, *sorted(p for p in _named(bundle) if not p.startswith(TASK_HOME + "/"))]


def _named(bundle: Bundle) -> set[str]:
    text = bundle.instruction + "\n" + json.dumps(bundle.raw.get("config") or [])
    reward = bundle.reward_path
    if reward is not None:
        try:
            text += "\n" + reward.read_text(encoding="utf-8", errors="replace")
        except OSError:
            pass
    return set(_PATH_RE.findall(text))


def targets(bundle: Bundle, touched: list[str]) -> list[str]:
    """The setup's paths under the user's home, plus those elsewhere the task names (its
    instruction, reward.py or setup steps mention the path or a folder above it)."""
    named = _named(bundle)
    out = []
    for p in touched:
        if p.startswith(TASK_HOME + "/") or p in named or any(p.startswith(n.rstrip("/") + "/") for n in named):
            out.append(p)
    return out


def without_web_plumbing(files: list[str], web_sid: str | None) -> list[str]:
    """A web task's sid file is shinken's plumbing (each fork's is rewritten to its own sid), not
    the task's state: its hub state is reset instead of the pointer to it being damaged."""
    return [p for p in files if p != SID_FILE] if web_sid else files


def judge(rewards: dict[str, float | None]) -> str:
    passed = [v for v in VARIANTS if (rewards.get(v) or 0.0) >= 1.0 - 1e-6]
    if len(passed) == len(VARIANTS):
        return "reward_passes_vandalism"
    return f"vandal_passes_{passed[0]}" if passed else "vandal_resists"


def describe(rec: dict[str, Any]) -> str:
    files = rec["files"]
    shown = ", ".join(files[:5]) + (f" and {len(files) - 5} more" if len(files) > 5 else "")
    scores = "; ".join(f"{v}: reward {rec['rewards'].get(v)}" for v in VARIANTS)
    web = rec.get("web") or []
    reset = f"the hub state of {', '.join(web)} reset" if web else ""
    if not files and reset:
        return f"{reset}: {scores}"
    damaged = f"{len(files)} file(s) the setup made ({shown}) damaged"
    return f"{damaged}{', ' + reset if reset else ''}: {scores}"
