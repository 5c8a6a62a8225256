"""The mock apps of a CUA-Gym-Hub checkout and the names each one is known by.

A checkout holds `websites/<name>_mock/` folders, each a Vite project with its own state
middleware. Tasks name an app by placeholder (`__CUA_GYM_<KEY>_URL__` / `_HOST__`), by
`app_type` (`<name>_mock`) or, in pipeline exports, by its hosted address
(`https://cua-gym-<name-with-hyphens>.xlang.ai`). Inside a run the hub answers for every app
under the network alias `cua-gym-<name-with-hyphens>` (port 80), so a materialized task file
reads `http://cua-gym-gmail` whatever hub container serves it.
"""

from __future__ import annotations

import hashlib
import os
import re
from dataclasses import dataclass
from pathlib import Path

from shinken.errors import ShinkenError

APP_SUFFIX = "_mock"
ALIAS_PREFIX = "cua-gym-"
HOSTED_DOMAIN = "xlang.ai"
PLACEHOLDER_RE = re.compile(rb"__CUA_GYM_([A-Z0-9_]+?)_(URL|HOST)__")
HOSTED_URL_RE = re.compile(rb"https?://(cua-gym-[a-z0-9-]+)\.xlang\.ai")
CONFIG_NAMES = ("vite.config.js", "vite.config.mjs", "vite.config.ts", "vite.config.mts")
# What a checkout folder may hold that is not source: build output, installed modules, runtime state.
SKIP_DIRS = frozenset({"node_modules", "dist", ".git", ".mock-states", ".mock-files", ".mock-uploads", ".vite"})
SKIP_FILES = frozenset({".mock-state.json", ".mock-state.initial.json", ".DS_Store"})


def app_key(name: str) -> str:
    """`google_docs` -> `GOOGLE_DOCS`, `Canvas-LMS` -> `CANVAS_LMS` (the placeholder's middle part)."""
    return re.sub(r"[^A-Z0-9]+", "_", name.upper()).strip("_")


def app_alias(name: str) -> str:
    """`google_docs` -> `cua-gym-google-docs`: the host name the hub answers to inside a run,
    the hosted name without its domain."""
    return ALIAS_PREFIX + re.sub(r"[^a-z0-9]+", "-", name.lower()).strip("-")


def url_placeholder(name: str) -> str:
    return f"__CUA_GYM_{app_key(name)}_URL__"


def host_placeholder(name: str) -> str:
    return f"__CUA_GYM_{app_key(name)}_HOST__"


@dataclass(frozen=True)
class MockApp:
    name: str  # folder name without `_mock`: gmail, google_docs, Canvas-LMS
    folder: Path

    @property
    def key(self) -> str:
        return app_key(self.name)

    @property
    def alias(self) -> str:
        return app_alias(self.name)

    @property
    def has_lockfile(self) -> bool:
        return (self.folder / "package-lock.json").is_file()


def source_files(folder: Path) -> list[tuple[str, Path]]:
    """(relative path, file) of an app's sources: everything but build output, installed
    modules and runtime state, in a stable order. Symlinks are skipped (never followed)."""
    out: list[tuple[str, Path]] = []
    for dirpath, dirnames, filenames in os.walk(folder):
        dirnames[:] = sorted(d for d in dirnames if d not in SKIP_DIRS and not os.path.islink(os.path.join(dirpath, d)))
        for fn in sorted(filenames):
            p = Path(dirpath) / fn
            if fn in SKIP_FILES or p.is_symlink() or not p.is_file():
                continue
            out.append((p.relative_to(folder).as_posix(), p))
    return out


def source_hash(app: MockApp) -> str:
    """Content hash of an app's sources and lockfile: the cache key of its built image."""
    h = hashlib.sha256(f"app={app.name}\n".encode())
    for rel, p in source_files(app.folder):
        data = p.read_bytes()
        h.update(f"{rel}\0{len(data)}\0".encode())
        h.update(data)
    return h.hexdigest()[:12]


def discover_apps(source: Path) -> list[MockApp]:
    """Every `websites/<name>_mock/` app of a CUA-Gym-Hub checkout (or of a folder that is
    itself the `websites/` folder), sorted by folder name as deploy-all.sh orders them."""
    source = Path(source)
    if not source.is_dir():
        raise ShinkenError(f"{source}: not a folder; pass the path of a CUA-Gym-Hub checkout (it holds websites/)")
    sites = source / "websites" if (source / "websites").is_dir() else source
    apps: list[MockApp] = []
    for d in sorted(sites.iterdir(), key=lambda p: p.name):
        if not d.name.endswith(APP_SUFFIX) or not d.is_dir() or d.is_symlink():
            continue
        if not (d / "package.json").is_file() or not any((d / c).is_file() for c in CONFIG_NAMES):
            continue  # not a Vite project with a state middleware; nothing to serve
        apps.append(MockApp(d.name[: -len(APP_SUFFIX)], d))
    if not apps:
        raise ShinkenError(f"{sites}: no <name>_mock folders with package.json and vite.config.*; "
                           "pass the path of a CUA-Gym-Hub checkout")
    return apps


def select_apps(apps: list[MockApp], wanted: list[str] | None) -> list[MockApp]:
    """The apps named in `wanted` (names with or without `_mock`, any case), all when None."""
    if not wanted:
        return apps
    by_name = {a.name.lower(): a for a in apps}
    chosen: dict[str, MockApp] = {}
    unknown = []
    for w in wanted:
        n = w.strip().lower().removesuffix(APP_SUFFIX)
        if not n:
            continue
        if n in by_name:
            chosen[by_name[n].name] = by_name[n]
        else:
            unknown.append(w.strip())
    if unknown:
        sample = ", ".join(a.name for a in apps[:8]) + (", ..." if len(apps) > 8 else "")
        raise ShinkenError(f"--apps: {', '.join(unknown)} not in the checkout (it has {len(apps)} apps: {sample})")
    if not chosen:
        raise ShinkenError("--apps names no app; e.g. --apps gmail,slack")
    return sorted(chosen.values(), key=lambda a: a.name)
