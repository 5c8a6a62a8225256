"""Install every app's packages from the npm registry npm is configured with.

A CUA-Gym-Hub lockfile records where each tarball came from when it was made (`resolved`);
about half of the public checkout's lockfiles name a mirror registry (registry.npmmirror.com).
`npm ci` fetches those URLs as written, so on a machine that reaches only its configured
registry the build stops with ENOTFOUND. The tarballs are the same everywhere (the lockfile's
`integrity` hashes pin their bytes), so shinken rewrites every registry tarball URL to the same
package and file on the configured registry before the build, keeps every `integrity`, and says
what it rewrote in the app's build log. npm still checks each tarball against its hash.
"""

from __future__ import annotations

import json
import os
import re
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any
from urllib.parse import unquote, urlsplit

from shinken.errors import ShinkenError

DEFAULT_REGISTRY = "https://registry.npmjs.org/"
_NPMRC_REGISTRY = re.compile(r"^\s*registry\s*=\s*(\S+)\s*$", re.MULTILINE)


def normalize(url: str) -> str:
    """`https://host/path` with exactly one trailing slash; bad input named."""
    parts = urlsplit(url.strip())
    if parts.scheme not in ("http", "https") or not parts.netloc:
        raise ShinkenError(f"npm registry {url!r} is not an http(s) URL; pass e.g. --registry https://registry.npmjs.org/")
    return url.strip().rstrip("/") + "/"


def configured_registry(explicit: str | None = None, *, env: dict[str, str] | None = None,
                        home: Path | None = None) -> tuple[str, str]:
    """(registry URL, where it came from): `--registry`, else npm's own settings the way npm
    reads them (the `npm_config_registry` environment variable, then `registry=` in the
    user's ~/.npmrc), else npm's default registry."""
    if explicit:
        return normalize(explicit), "--registry"
    env = dict(os.environ) if env is None else env
    for name in ("npm_config_registry", "NPM_CONFIG_REGISTRY"):
        if env.get(name):
            return normalize(env[name]), f"${name}"
    npmrc = (home if home is not None else Path.home()) / ".npmrc"
    try:
        m = _NPMRC_REGISTRY.search(npmrc.read_text(encoding="utf-8", errors="replace"))
    except OSError:
        m = None
    if m:
        return normalize(m.group(1)), str(npmrc)
    return DEFAULT_REGISTRY, "npm's default"


@dataclass
class Rewrite:
    """What rewriting one lockfile did: tarball URLs moved per original host, and URLs left
    as written because they are not registry tarballs (git, file or plain http archives)."""

    registry: str
    moved: dict[str, int] = field(default_factory=dict)
    kept: int = 0
    foreign: list[str] = field(default_factory=list)

    @property
    def total_moved(self) -> int:
        return sum(self.moved.values())

    def log_lines(self, lockfile: str = "package-lock.json") -> list[str]:
        lines = []
        for host, n in sorted(self.moved.items()):
            lines.append(f"shinken: {lockfile} resolves {n} package(s) from {host}; installing them from the "
                         f"configured registry {self.registry} instead (integrity hashes unchanged)")
        if self.foreign:
            lines.append(f"shinken: {len(self.foreign)} resolved URL(s) are not registry tarballs and are fetched as "
                         f"written, e.g. {self.foreign[0]}")
        if not lines and self.kept:
            lines.append(f"shinken: {lockfile} already resolves every package from {self.registry}")
        elif not lines:
            lines.append(f"shinken: {lockfile} names no tarball URLs; npm installs from {self.registry}")
        return lines


def _tarball_path(url: str) -> str | None:
    """`<package name>/-/<file>` of a registry tarball URL (any host, any path prefix), or
    None when the URL is not one."""
    path = urlsplit(url).path
    if "/-/" not in path:
        return None
    left, file = path.rsplit("/-/", 1)
    if not file or "/" in file:
        return None
    segs = [s for s in left.split("/") if s]
    if not segs:
        return None
    last = unquote(segs[-1])
    if last.startswith("@") and "/" in last:  # @scope%2fname
        name = last
    elif len(segs) >= 2 and unquote(segs[-2]).startswith("@"):
        name = f"{unquote(segs[-2])}/{last}"
    else:
        name = last
    return f"{name}/-/{file}"


def _walk_v1(deps: Any, visit: Any) -> None:
    if not isinstance(deps, dict):
        return
    for entry in deps.values():
        if isinstance(entry, dict):
            visit(entry)
            _walk_v1(entry.get("dependencies"), visit)


def rewrite_lockfile(data: bytes, registry: str) -> tuple[bytes, Rewrite]:
    """The lockfile with every registry tarball URL on the configured registry (same package
    and file, `integrity` untouched), and what was rewritten. An unreadable lockfile is
    returned as it is (npm ci then says what is wrong with it)."""
    registry = normalize(registry)
    rw = Rewrite(registry)
    try:
        doc = json.loads(data.decode("utf-8"))
    except (UnicodeDecodeError, ValueError):
        return data, rw
    if not isinstance(doc, dict):
        return data, rw

    counting = True  # a v2 lockfile holds every package twice (`packages` and v1 `dependencies`)

    def visit(entry: dict[str, Any]) -> None:
        url = entry.get("resolved")
        if not isinstance(url, str) or not url.startswith(("http://", "https://")):
            return
        if url.startswith(registry):
            rw.kept += counting
            return
        tail = _tarball_path(url)
        if tail is None:
            if counting:
                rw.foreign.append(url)
            return
        if counting:
            host = urlsplit(url).netloc
            rw.moved[host] = rw.moved.get(host, 0) + 1
        entry["resolved"] = registry + tail

    packages = doc.get("packages")
    if isinstance(packages, dict):
        for key, entry in packages.items():
            if key and isinstance(entry, dict):
                visit(entry)
        counting = False
    _walk_v1(doc.get("dependencies"), visit)
    if not rw.moved:
        return data, rw  # byte for byte as the checkout has it
    return (json.dumps(doc, indent=2, ensure_ascii=False) + "\n").encode("utf-8"), rw
