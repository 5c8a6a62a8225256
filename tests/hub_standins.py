"""Stand-in CUA-Gym-Hub checkouts made from the stand-in mailbox app (tests/data/hub), each app a
copy of it with one known fault, written into a temporary folder by the tests:

- `mirrorlock`: its package-lock.json resolves every package from a host that cannot be reached
  (`registry.unreachable.invalid`), with the same integrity hashes: builds only from the
  configured registry;
- `broken`: its source does not compile (`npm run build` fails);
- `stale`: `/go` diffs current against nothing (a fresh sid's state_diff is not empty);
- `firstlost`: the sid's initial state is recorded at its first `set_current`, so the first
  change goes into initial_state and never shows in state_diff;
- `leaky`: three faults that do not mask one another: `reset` answers success and does nothing;
  request bodies are decoded chunk by chunk (multi-byte characters on chunk boundaries break,
  the upstream UTF-8 chunking bug); its preview server binds IPv4 only whatever host it is given.

Each fault is a text replacement in the copy's vite.config.js (the state middleware) or its
sources; `make_checkout` fails loudly when a replacement no longer matches the mailbox app.
"""

from __future__ import annotations

import json
import shutil
from pathlib import Path

REPO = Path(__file__).resolve().parent.parent
MAILBOX = REPO / "tests" / "data" / "hub" / "websites" / "mailbox_mock"
UNREACHABLE = "registry.unreachable.invalid"

_STALE = [("state_diff: topLevelDiff(initial, now)", "state_diff: topLevelDiff(null, now)")]
_FIRSTLOST = [(
    "    const initial = action === 'set' ? next : (payload.initial_state ?? DEFAULT_STATE);\n    writeJson(files.initial, initial);",
    "    if (action === 'set_current') writeJson(files.initial, next);",
)]
_LEAKY = [
    ("    for (const f of [files.current, files.initial]) fs.rmSync(f, { force: true });\n", ""),
    ("  const chunks = [];\n  for await (const c of req) chunks.push(c);\n  return Buffer.concat(chunks);",
     "  let text = '';\n  for await (const c of req) text += c;\n  return Buffer.from(text);"),
    ("plugins: [{ name: 'shinken-standin-state-api', configureServer: stateApi, configurePreviewServer: stateApi }],",
     "plugins: [{ name: 'shinken-standin-state-api', configureServer: stateApi, configurePreviewServer: stateApi },\n"
     "    { name: 'ipv4-only', config: () => ({ preview: { host: '0.0.0.0' } }) }],"),
]
FAULTS: dict[str, list[tuple[str, str]]] = {"stale": _STALE, "firstlost": _FIRSTLOST, "leaky": _LEAKY}
# What `shinken hub check` must find in each app (check -> the /go fields it finds wrong).
EXPECTED: dict[str, dict[str, set[str]]] = {
    "mailbox": {},
    "mirrorlock": {},
    "stale": {"fresh_diff_empty": {"state_diff"}, "reset": {"state_diff"}},
    "firstlost": {"change_shows": {"state_diff", "initial_state"}},
    "leaky": {"reset": {"current_state", "state_diff"}, "utf8_large": {"current_state", "initial_state"}, "dual_stack": set()},
}


def _copy(dest: Path, name: str) -> Path:
    folder = dest / "websites" / f"{name}_mock"
    shutil.copytree(MAILBOX, folder, ignore=shutil.ignore_patterns("node_modules", "dist", ".mock-*"))
    return folder


def _patch(folder: Path, rel: str, replacements: list[tuple[str, str]]) -> None:
    path = folder / rel
    text = path.read_text()
    for old, new in replacements:
        if text.count(old) != 1:
            raise AssertionError(f"stand-in fault no longer matches {rel}: {old[:60]!r}")
        text = text.replace(old, new)
    path.write_text(text)


def unreachable_lockfile(folder: Path) -> int:
    """Give every package of the copy's lockfile a `resolved` URL on the unreachable host; how many."""
    path = folder / "package-lock.json"
    doc = json.loads(path.read_text())
    n = 0
    for key, entry in doc["packages"].items():
        if not key:
            continue
        name = key.rsplit("node_modules/", 1)[1]
        entry["resolved"] = f"https://{UNREACHABLE}/{name}/-/{name.rsplit('/', 1)[-1]}-{entry['version']}.tgz"
        n += 1
    path.write_text(json.dumps(doc, indent=2) + "\n")
    return n


def make_checkout(dest: Path, names: tuple[str, ...]) -> Path:
    """A checkout at `dest` holding the named stand-in apps (and `mailbox`, the good one, when named)."""
    for name in names:
        folder = _copy(dest, name)
        if name == "mirrorlock":
            unreachable_lockfile(folder)
        elif name == "broken":
            (folder / "src" / "main.js").write_text((folder / "src" / "main.js").read_text() + "\n}}} not javascript\n")
        elif name in FAULTS:
            _patch(folder, "vite.config.js", FAULTS[name])
    return dest
