"""Placeholders to real addresses, per run.

Release tasks name the mocks by `__CUA_GYM_<KEY>_URL__` / `__CUA_GYM_<KEY>_HOST__`; pipeline
exports hard-code the hosted `https://cua-gym-<app>.xlang.ai`. Before a web task runs, its text
files are rewritten to where the mocks really answer:
- a hub run: `http://cua-gym-<app>` (the hub's alias on the run network; the same in every run,
  so goldens built once are found again);
- `--mock-urls` (the user runs mocks elsewhere): the URL given per placeholder, flat
  (`{"__CUA_GYM_GMAIL_URL__": "http://10.0.0.5:8006"}`) or url_variables.json-shaped
  (`{"variables": {"__CUA_GYM_GMAIL_URL__": {"env": "CUA_GYM_GMAIL_URL", "kind": "url",
  "default": "https://cua-gym-gmail.xlang.ai"}}}`; the env var's value is used when set, and
  the hosted default only ever names which app a placeholder means).

The rewritten copy lives in a content-addressed cache folder with a marker file
(`.shinken-mockweb.json`, schema mockweb_bundle) naming the apps, their URLs and versions, so
its bundle hash (and with it the golden) changes when any of those change.
"""

from __future__ import annotations

import hashlib
import json
import os
import re
import shutil
import tempfile
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Mapping
from urllib.parse import urlparse

from shinken.bundles.loader import load_bundle
from shinken.bundles.model import Bundle
from shinken.errors import ShinkenError
from shinken.mockweb.apps import ALIAS_PREFIX, APP_SUFFIX, HOSTED_URL_RE, PLACEHOLDER_RE, app_key
from shinken.mockweb.manifest import HubManifest

from shinken.sandbox.policy import MOCK_WEB_MARKER_FILE as MARKER
MARKER_SCHEMA = "shinken.mockweb_bundle/1"
TEXT_SUFFIXES = frozenset({".json", ".py", ".sh", ".txt", ".md", ".yaml", ".yml", ".js", ".html", ".csv"})
_HOSTED_HOST_RE = re.compile(r"^(cua-gym-[a-z0-9-]+)\.xlang\.ai$")


@dataclass(frozen=True)
class AppTarget:
    """Where one app answers in this run."""

    name: str
    url: str  # base URL, no trailing slash
    version: str  # the app's source hash in the hub image, "" when run elsewhere
    alias: str | None = None  # the hub alias (hosted names rewritten to it)


@dataclass
class UrlMap:
    """Placeholder -> app target for one run."""

    targets: dict[str, AppTarget] = field(default_factory=dict)  # app key -> target
    placeholder_keys: dict[str, str] = field(default_factory=dict)  # nonstandard placeholder -> app key
    source: str = ""  # "hub <image id>" / "--mock-urls FILE": said in messages

    def target_for_placeholder(self, key: str) -> AppTarget | None:
        return self.targets.get(self.placeholder_keys.get(key, key))

    def target_for_alias(self, alias: str) -> AppTarget | None:
        return next((t for t in self.targets.values() if t.alias == alias), None)

    def target_for_app(self, name: str) -> AppTarget | None:
        return self.targets.get(app_key(name))

    def mock_urls(self) -> dict[str, str]:
        """The flat `--mock-urls` form of this map (what triage's evaluator reads)."""
        out: dict[str, str] = {}
        for key, t in self.targets.items():
            out[f"__CUA_GYM_{key}_URL__"] = t.url
            out[f"__CUA_GYM_{key}_HOST__"] = urlparse(t.url).netloc
        for ph, key in self.placeholder_keys.items():
            bound = self.targets.get(key)
            if bound is not None:
                out[f"__CUA_GYM_{ph}_URL__"] = bound.url
                out[f"__CUA_GYM_{ph}_HOST__"] = urlparse(bound.url).netloc
        return out


def hub_url_map(manifest: HubManifest) -> UrlMap:
    return UrlMap({a.key: AppTarget(a.name, a.url, a.source_hash, a.alias) for a in manifest.apps},
                  source=f"hub image {manifest.image_id[7:19]}")


_PH_NAME_RE = re.compile(r"^__CUA_GYM_([A-Z0-9_]+?)_(URL|HOST)__$")


def add_mock_urls(urls: UrlMap, doc: Mapping[str, Any], where: str, *, bind_only: bool = False,
                  env: Mapping[str, str] | None = None) -> UrlMap:
    """Entries of a `--mock-urls` document on top of `urls`. With bind_only (a hub run) the
    document may only say which app a placeholder means (its hosted default); an address in it
    is refused, since forks of a hub run reach nothing but the hub."""
    env = os.environ if env is None else env
    variables = doc.get("variables")
    entries: Mapping[str, Any] = variables if isinstance(variables, dict) else doc
    hosts: dict[str, str] = {}
    for ph, spec in entries.items():
        m = _PH_NAME_RE.match(str(ph))
        if not m:
            raise ShinkenError(f"{where}: {ph!r} is not a __CUA_GYM_<APP>_URL__/_HOST__ placeholder")
        key, kind = m.group(1), m.group(2)
        value: str | None = spec if isinstance(spec, str) else None
        default: str | None = None
        if isinstance(spec, dict):
            name = spec.get("env")
            value = (env.get(name) if isinstance(name, str) else None) or next(
                (spec[k] for k in ("url", "value") if isinstance(spec.get(k), str) and spec[k]), None)
            default = spec.get("default") if isinstance(spec.get("default"), str) else None
        if value is None or bind_only:
            # The hosted default (or a hosted address) still tells which hub app is meant.
            hint = value or default or ""
            hm = _HOSTED_HOST_RE.match(urlparse(hint).netloc if "://" in hint else hint)
            t = urls.target_for_alias(hm.group(1)) if hm else None
            if t is not None and app_key(t.name) != key:
                urls.placeholder_keys[key] = app_key(t.name)
            elif bind_only and value is not None and t is None and urls.target_for_placeholder(key) is None:
                raise ShinkenError(f"{where}: {ph} = {value!r}: with --hub, forks reach only the hub; "
                                   "drop --hub to use mocks you run elsewhere")
            continue
        if kind == "HOST":
            hosts[key] = value
            continue
        if "://" not in value:
            raise ShinkenError(f"{where}: {ph} = {value!r} is not a URL (expected e.g. http://10.0.0.5:8006)")
        urls.targets[key] = AppTarget(key.lower(), value.rstrip("/"), "")
    for key, host in hosts.items():
        urls.targets.setdefault(key, AppTarget(key.lower(), f"http://{host}", ""))
    urls.source = f"{urls.source} + {where}" if urls.source else where
    return urls


@dataclass
class Materialized:
    bundle: Bundle
    apps: dict[str, AppTarget]  # app name -> target, the apps the task uses
    missing: list[str]  # placeholders / apps no target is known for


def _text(name: str, data: bytes) -> str | None:
    if os.path.splitext(name)[1].lower() not in TEXT_SUFFIXES and name not in ("task.json", "config.json"):
        return None
    try:
        return data.decode("utf-8")
    except UnicodeDecodeError:
        return None


def needs_materializing(bundle: Bundle) -> bool:
    """Does any text file of the bundle name a mock (placeholder or hosted address)?"""
    keys, hosted = _scan(bundle)
    return bool(keys or hosted or _mock_app_types(bundle))


def _mock_app_types(bundle: Bundle) -> list[str]:
    return [a.strip()[: -len(APP_SUFFIX)] for a in bundle.app_type.split(",") if a.strip().endswith(APP_SUFFIX)]


def _scan(bundle: Bundle) -> tuple[set[str], set[str]]:
    keys: set[str] = set()
    hosted: set[str] = set()
    for name in bundle.files:
        if name == MARKER:
            continue
        path = bundle.file_path(name)
        try:
            data = path.read_bytes()
        except OSError:
            continue
        if _text(name, data) is None:
            continue
        keys.update(m.group(1).decode() for m in PLACEHOLDER_RE.finditer(data))
        hosted.update(m.group(1).decode() for m in HOSTED_URL_RE.finditer(data))
    return keys, hosted


def materialize(bundle: Bundle, urls: UrlMap, cache_root: Path) -> Materialized:
    """The bundle with every mock address rewritten for this run (or the bundle itself when it
    names no mock). `missing` lists what the run cannot serve; the task cannot run then."""
    keys, hosted = _scan(bundle)
    apps: dict[str, AppTarget] = {}
    missing: list[str] = []
    values: dict[str, str] = {}
    for key in sorted(keys):
        t = urls.target_for_placeholder(key)
        if t is None:
            missing.append(f"__CUA_GYM_{key}_URL__")
            continue
        apps[t.name] = t
        values[f"__CUA_GYM_{key}_URL__"] = t.url
        values[f"__CUA_GYM_{key}_HOST__"] = urlparse(t.url).netloc
    hosted_values: dict[str, str] = {}
    for alias in sorted(hosted):
        t = urls.target_for_alias(alias) or urls.target_for_placeholder(app_key(alias[len(ALIAS_PREFIX):]))
        if t is None:
            missing.append(f"https://{alias}.xlang.ai")
            continue
        apps[t.name] = t
        hosted_values[alias] = t.url
    for name in _mock_app_types(bundle):
        t = urls.target_for_app(name)
        if t is None:
            missing.append(f"{name}{APP_SUFFIX}")
        else:
            apps[t.name] = t
    if not values and not hosted_values and not apps:
        return Materialized(bundle, {}, missing)
    marker = {
        "schema": MARKER_SCHEMA,
        "source_bundle_hash": bundle.bundle_hash,
        "apps": {n: {"url": t.url, "version": t.version} for n, t in sorted(apps.items())},
        "placeholders": dict(sorted(values.items())),
        "hosted": dict(sorted(hosted_values.items())),
    }
    marker_bytes = json.dumps(marker, indent=1, sort_keys=True).encode() + b"\n"
    key = hashlib.sha256(bundle.bundle_hash.encode() + b"\0" + marker_bytes).hexdigest()[:16]
    dest = Path(cache_root) / key / bundle.path.name
    if not (dest / MARKER).is_file():
        _write_copy(bundle, dest, values, hosted_values, marker_bytes)
    return Materialized(load_bundle(dest), apps, missing)


def _rewrite(text: str, values: dict[str, str], hosted: dict[str, str]) -> str:
    if values:
        text = re.sub(r"__CUA_GYM_[A-Z0-9_]+?_(?:URL|HOST)__", lambda m: values.get(m.group(0), m.group(0)), text)
    if hosted:
        text = re.sub(r"https?://(cua-gym-[a-z0-9-]+)\.xlang\.ai",
                      lambda m: hosted.get(m.group(1), m.group(0)), text)
    return text


def _write_copy(bundle: Bundle, dest: Path, values: dict[str, str], hosted: dict[str, str], marker: bytes) -> None:
    dest.parent.mkdir(parents=True, exist_ok=True)
    tmp = Path(tempfile.mkdtemp(prefix=".tmp-", dir=dest.parent))
    try:
        for name in bundle.files:
            src = bundle.file_path(name)
            data = src.read_bytes()
            text = _text(name, data)
            out = tmp / name
            if text is None:
                shutil.copyfile(src, out)
            else:
                out.write_bytes(_rewrite(text, values, hosted).encode("utf-8"))
            shutil.copymode(src, out)
        (tmp / MARKER).write_bytes(marker)
        try:
            tmp.rename(dest)
        except OSError:
            if not (dest / MARKER).is_file():  # lost a race to another process: theirs is the same
                raise
    finally:
        if tmp.exists():
            shutil.rmtree(tmp, ignore_errors=True)


def marker_of(bundle: Bundle) -> dict[str, Any] | None:
    """The marker of a materialized bundle, or None."""
    if MARKER not in bundle.files:
        return None
    try:
        doc: dict[str, Any] = json.loads(bundle.file_path(MARKER).read_text(encoding="utf-8"))
        return doc
    except (OSError, ValueError):
        return None


def default_cache_root() -> Path:
    from shinken.runtime import cache_root

    return cache_root() / "mockweb" / "bundles"
