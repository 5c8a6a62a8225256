"""Install every app's packages from the npm registry npm is configured with.

A CUA-Gym-Hub lockfile records where each tarball came from when it was made (`resolved`);
about half of the public checkout's lockfiles name a mirror registry (registry.npmmirror.com).
`npm ci` fetches those URLs as written, so on a machine that reaches only its configured
registry the build stops with ENOTFOUND. The tarballs are the same everywhere (the lockfile's
`integrity` hashes pin their bytes), so shinken rewrites every registry tarball URL to the same
package and file on the configured registry before the build, keeps every `integrity`, and says
what it rewrote in the app's build log. npm still checks each tarball against its hash.

Scoped registries (`@scope:registry=URL`) and registry credentials (`//host/path/:_authToken=`,
`:_auth`, `:username`/`:_password`) of the user's npm config are honoured: a scoped package is
installed from its scope's registry, and the build gets the credentials in a config file of
its own (mounted for the build only, never in the image, the log or the lockfile copy).
"""

from __future__ import annotations

import base64
import json
import os
import re
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any
from urllib.parse import unquote, urlsplit, urlunsplit

from shinken.errors import ShinkenError

DEFAULT_REGISTRY = "https://registry.npmjs.org/"


def normalize(url: str) -> str:
    """`https://host/path` with exactly one trailing slash; bad input named (credentials in
    the URL are kept: see `split_userinfo`)."""
    parts = urlsplit(url.strip())
    if parts.scheme not in ("http", "https") or not parts.netloc:
        shown = redact(url.strip())
        raise ShinkenError(f"npm registry {shown!r} is not an http(s) URL; pass e.g. --registry https://registry.npmjs.org/")
    return url.strip().rstrip("/") + "/"


def redact(url: str) -> str:
    """The URL without credentials (`https://user:pass@host/` -> `https://***@host/`)."""
    parts = urlsplit(url)
    if "@" not in parts.netloc:
        return url
    return urlunsplit(parts._replace(netloc="***@" + parts.netloc.rsplit("@", 1)[1]))


def split_userinfo(url: str) -> tuple[str, str | None]:
    """(the URL without `user:pass@`, the `_auth` value npm would send for it or None)."""
    parts = urlsplit(url)
    if "@" not in parts.netloc:
        return url, None
    userinfo, host = parts.netloc.rsplit("@", 1)
    auth = base64.b64encode(unquote(userinfo).encode()).decode()
    return urlunsplit(parts._replace(netloc=host)), auth


def nerf_dart(url: str) -> str:
    """npm's key prefix for a registry's credentials: `//host[:port]/path/`."""
    parts = urlsplit(url)
    path = parts.path if parts.path.endswith("/") else parts.path + "/"
    return f"//{parts.netloc.rsplit('@', 1)[-1]}{path}"


_NPMRC_LINE = re.compile(r"^\s*([^=#;\s][^=]*?)\s*=\s*(.*?)\s*$")
_ENV_REF = re.compile(r"(?<!\\)\$\{([^}?]+)(\?)?\}")
_AUTH_KEYS = ("_authToken", "_auth", "username", "_password")


@dataclass
class NpmConfig:
    """The npm settings a build needs: the registry, scoped registries and the credentials
    for registries (secrets: only ever written into the build's own npmrc, see `npmrc`)."""

    registry: str
    source: str  # where the registry setting came from
    scopes: dict[str, str] = field(default_factory=dict)  # "@acme" -> its registry URL
    auth: dict[str, str] = field(default_factory=dict)  # "//host/path/:_authToken" -> value
    npmrc_path: str = "npm config"  # the user config file the scopes and credentials came from

    def registry_for(self, package: str) -> str:
        """The registry npm installs `package` from: its scope's, else the default one."""
        if package.startswith("@") and "/" in package:
            return self.scopes.get(package.split("/", 1)[0], self.registry)
        return self.registry

    def npmrc(self) -> bytes:
        """The build's user config: registries and credentials (holds secrets: written to a
        private file mounted into the build container only)."""
        lines = [f"registry={self.registry}"]
        lines += [f"{scope}:registry={url}" for scope, url in sorted(self.scopes.items())]
        lines += [f"{key}={value}" for key, value in sorted(self.auth.items())]
        return ("\n".join(lines) + "\n").encode()

    def secrets(self) -> list[str]:
        return [v for k, v in self.auth.items() if not k.endswith(":username") and v]

    def log_lines(self) -> list[str]:
        """What the build log says about the settings (never a credential's value)."""
        lines = []
        for scope, url in sorted(self.scopes.items()):
            lines.append(f"shinken: {scope} packages install from {url} (@scope:registry in {self.npmrc_path})")
        hosts = sorted({k.rsplit(":", 1)[0] for k in self.auth})
        if hosts:
            lines.append(f"shinken: credentials for {', '.join(hosts)} passed to the build (not kept in the image)")
        return lines


def _unquote(value: str) -> str:
    if len(value) >= 2 and value[0] == value[-1] and value[0] in "\"'":
        return value[1:-1]
    return value


def _expand(value: str, env: dict[str, str], where: str) -> str:
    """npm's `${VAR}` in a config value (`${VAR?}`: empty when unset)."""
    def sub(m: re.Match[str]) -> str:
        if m.group(1) in env:
            return env[m.group(1)]
        if m.group(2):
            return ""
        raise ShinkenError(f"{where} uses ${{{m.group(1)}}}, which is not set; export it (npm reads it from the "
                           "environment) or write the value into the file")
    return _ENV_REF.sub(sub, value)


def _read_npmrc(path: Path, env: dict[str, str]) -> dict[str, str]:
    try:
        text = path.read_text(encoding="utf-8", errors="replace")
    except OSError:
        return {}
    out: dict[str, str] = {}
    for n, line in enumerate(text.splitlines(), 1):
        m = _NPMRC_LINE.match(line)
        if m:
            key = m.group(1).strip()
            out[key] = _expand(_unquote(m.group(2)), env, f"{path} line {n}")
    return out


def npm_config(explicit: str | None = None, *, env: dict[str, str] | None = None,
               home: Path | None = None) -> NpmConfig:
    """npm's settings the way npm reads them for a build: the registry (`--registry`, else
    `$npm_config_registry`, else `registry=` in the user's npmrc (`$npm_config_userconfig`,
    else ~/.npmrc), else npm's default), `@scope:registry=` lines, and credentials
    (`//host/path/:_authToken=`, `:_auth`, `:username`/`:_password`; a top-level `_authToken`
    or `_auth` applies to the default registry; `user:pass@` in a registry URL becomes its
    `_auth`). `${VAR}` in a value is read from the environment, as npm does."""
    env = dict(os.environ) if env is None else env
    userconfig = env.get("npm_config_userconfig") or env.get("NPM_CONFIG_USERCONFIG")
    npmrc = Path(userconfig) if userconfig else (home if home is not None else Path.home()) / ".npmrc"
    rc = _read_npmrc(npmrc, env)
    if explicit:
        raw, source = explicit, "--registry"
    elif env.get("npm_config_registry") or env.get("NPM_CONFIG_REGISTRY"):
        name = "npm_config_registry" if env.get("npm_config_registry") else "NPM_CONFIG_REGISTRY"
        raw, source = env[name], f"${name}"
    elif rc.get("registry"):
        raw, source = rc["registry"], str(npmrc)
    else:
        raw, source = DEFAULT_REGISTRY, "npm's default"
    auth: dict[str, str] = {}
    registry, userinfo = split_userinfo(normalize(raw))
    if userinfo:
        auth[f"{nerf_dart(registry)}:_auth"] = userinfo
    scopes: dict[str, str] = {}
    for key, value in rc.items():
        if key.startswith("@") and key.endswith(":registry") and value:
            url, ui = split_userinfo(normalize(value))
            scopes[key.rsplit(":", 1)[0]] = url
            if ui:
                auth[f"{nerf_dart(url)}:_auth"] = ui
        elif key.startswith("//") and key.rsplit(":", 1)[-1] in _AUTH_KEYS:
            auth[key] = value
        elif key in ("_authToken", "_auth"):
            auth.setdefault(f"{nerf_dart(registry)}:{key}", value)
    return NpmConfig(registry, source, scopes, auth, str(npmrc))


def configured_registry(explicit: str | None = None, *, env: dict[str, str] | None = None,
                        home: Path | None = None) -> tuple[str, str]:
    """(registry URL, where it came from): `--registry`, else npm's own settings the way npm
    reads them (the `npm_config_registry` environment variable, then `registry=` in the
    user's ~/.npmrc), else npm's default registry."""
    cfg = npm_config(explicit, env=env, home=home)
    return cfg.registry, cfg.source


@dataclass
class Rewrite:
    """What rewriting one lockfile did: tarball URLs moved per original host, and URLs left
    as written because they are not registry tarballs (git, file or plain http archives)."""

    registry: str
    moved: dict[str, int] = field(default_factory=dict)
    kept: int = 0
    foreign: list[str] = field(default_factory=list)
    # original host -> target registry -> packages moved there (a scope's registry or the default)
    moved_to: dict[str, dict[str, int]] = field(default_factory=dict)
    scopes: dict[str, str] = field(default_factory=dict)

    @property
    def total_moved(self) -> int:
        return sum(self.moved.values())

    def log_lines(self, lockfile: str = "package-lock.json") -> list[str]:
        lines = []
        scope_of = {url: scope for scope, url in self.scopes.items()}
        for host, targets in sorted(self.moved_to.items()):
            for target, n in sorted(targets.items()):
                which = (f"registry configured for {scope_of[target]}" if target in scope_of and target != self.registry
                         else "configured registry")
                lines.append(f"shinken: {lockfile} resolves {n} package(s) from {host}; installing them from the "
                             f"{which} {target} instead (integrity hashes unchanged)")
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


def rewrite_lockfile(data: bytes, registry: str, scopes: dict[str, str] | None = None) -> tuple[bytes, Rewrite]:
    """The lockfile with every registry tarball URL on the configured registry (same package
    and file, `integrity` untouched; a package of a scope in `scopes` on that scope's
    registry), and what was rewritten. An unreadable lockfile is returned as it is (npm ci
    then says what is wrong with it)."""
    registry = normalize(registry)
    scopes = {k: normalize(v) for k, v in (scopes or {}).items()}
    rw = Rewrite(registry, scopes=scopes)
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
        tail = _tarball_path(url)
        name = tail.split("/-/", 1)[0] if tail else ""
        target = scopes.get(name.split("/", 1)[0], registry) if name.startswith("@") else registry
        if url.startswith(target):
            rw.kept += counting
            return
        if tail is None:
            if counting:
                rw.foreign.append(url)
            return
        if counting:
            host = urlsplit(url).netloc.rsplit("@", 1)[-1]
            rw.moved[host] = rw.moved.get(host, 0) + 1
            per = rw.moved_to.setdefault(host, {})
            per[target] = per.get(target, 0) + 1
        entry["resolved"] = target + tail

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
