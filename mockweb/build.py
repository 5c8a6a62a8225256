"""`shinken hub build`: an image serving chosen mock apps of a CUA-Gym-Hub checkout.

Three levels, each cached by content hash so a rebuild only redoes what changed:
- `shinken/hub-node:<h>`: Node.js 20 + npm from Debian trixie on a debootstrapped trixie base
  (h: recipe + base image id);
- `shinken/hub-app-<app>:<h>` per app: the app's sources with `npm ci --ignore-scripts` (or
  `npm install --ignore-scripts` without a lockfile) and its build script done (h: the app's
  sources and lockfile + the node image), in two containers, both as an unprivileged user with
  every capability dropped (docs/security.md). The install sees only package.json and the
  lockfile, runs npm alone (no package's lifecycle script), on the host network with the npm
  cache (~/.cache/shinken/hub-npm-u<uid>), the proxy CA and the registry credentials mounted;
  the build, the app's own code and its dependencies', runs on no network with none of them.
  Nothing of the CA, the cache or the credentials ends up in the image;
- `shinken/hub:<h>`: the node image, every chosen app copied in, the supervisor and the hub
  manifest (label `shinken.hub_manifest`, schema hub_manifest): what `shinken hub up` runs.
"""

from __future__ import annotations

import hashlib
import io
import json
import os
import re
import shutil
import tarfile
import tempfile
import time
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Callable

from shinken.errors import EnvironmentProblem, ShinkenError, WorkFailed
from shinken.runtime import cache_root
from shinken.images.build import (
    LABEL_HASH,
    LABEL_IMAGE,
    LABEL_PARENT,
    _build_lock,
    _client,
    _image_id,
    _read_ca,
    _tag_latest,
    base_hash,
    base_repo,
    apt_mirror,
    ensure_base,
    run_build,
)
from shinken.mockweb.manifest import HUB_SCHEMA, LABEL_HUB_MANIFEST
from shinken.mockweb.apps import MockApp, discover_apps, select_apps, source_files, source_hash
from shinken.mockweb.registry import DEFAULT_REGISTRY, NpmConfig, Rewrite, npm_config, rewrite_lockfile
from shinken.sandbox.docker_client import create_container, patient_api
from shinken.sandbox.ownership import labels_for

HUB_IMAGE_DIR = Path(__file__).resolve().parent / "hub_image"
RECIPE_VERSION = "2"  # 2: install without scripts, build offline as an unprivileged user. Bump when a build step changes in a way the hashed inputs do not show
NODE_REPO = "shinken/hub-node"
APP_REPO_PREFIX = "shinken/hub-app-"
HUB_REPO = "shinken/hub"
LABEL_HUB_APP = "shinken.hub_app"
APPS_ROOT = "/hub/apps"
FIRST_APP_PORT = 8000  # direct ports, numbered like deploy-all.sh (8000 + index in name order)
APP_BUILD_TIMEOUT_S = 1800.0
HUB_UID = 1000
BUILD_UID = 1001  # no user of the node image: an app's install and build write only its own folder
NPMRC_DIR = "/run/shinken-npm"  # where an app build sees its npm user config (a read-only mount)
# Debian suite of the node image: trixie's Node 20.19 (bookworm's 18.20 cannot build or serve
# the apps that lock Vite 7/8, which need Node >= 20.19).
NODE_SUITE = "trixie"

Progress = Callable[[str], None]


def _say(progress: Progress | None, line: str) -> None:
    if progress is not None:
        progress(line)


def _slug(name: str) -> str:
    return re.sub(r"[^a-z0-9]+", "-", name.lower()).strip("-")


@dataclass
class AppBuild:
    name: str
    tag: str
    image_id: str
    source_hash: str
    cached: bool
    seconds: float
    log: str | None = None  # the build log (None when the image was found cached)
    # seconds per step of a build: `install` (npm ci / npm install), `build` (npm run build),
    # `commit` (docker commit of the built container); empty when cached
    phases: dict[str, float] = field(default_factory=dict)


@dataclass
class AppFailure:
    """An app that did not build: left out of the hub image, named in its manifest."""

    name: str
    source_hash: str
    seconds: float
    error: str  # the log's first error line
    log: str | None

    def to_json(self) -> dict[str, Any]:
        return {"name": self.name, "source_hash": self.source_hash, "seconds": round(self.seconds, 2),
                "error": self.error, "log": self.log}


class AppBuildFailed(WorkFailed):
    """One app's npm build failed (or could not run); `build_hub` goes on without it."""

    def __init__(self, app: MockApp, message: str, first_error: str, log: Path | None, seconds: float = 0.0) -> None:
        super().__init__(message)
        self.app = app
        self.first_error = first_error
        self.log = log
        self.seconds = seconds


class NothingBuilt(WorkFailed):
    """Not one chosen app built: there is no hub image to make."""

    def __init__(self, failures: list[AppFailure]) -> None:
        names = ", ".join(f.name for f in failures[:6]) + (", ..." if len(failures) > 6 else "")
        super().__init__(f"no app built ({len(failures)} failed: {names}); the table names each one's first "
                         "error and log; fix the apps or the npm registry settings (--registry)")
        self.failures = failures


@dataclass
class HubBuild:
    tag: str
    image_id: str
    content_hash: str
    cached: bool
    seconds: float
    manifest: dict[str, Any]
    apps: list[AppBuild] = field(default_factory=list)
    node_seconds: float = 0.0
    failed: list[AppFailure] = field(default_factory=list)
    registry: str = DEFAULT_REGISTRY

    def to_json(self) -> dict[str, Any]:
        return {
            "tag": self.tag, "latest": f"{HUB_REPO}:latest", "id": self.image_id, "content_hash": self.content_hash,
            "cached": self.cached, "seconds": round(self.seconds, 2), "node_seconds": round(self.node_seconds, 2),
            "registry": self.registry,
            "apps": [{"name": a.name, "tag": a.tag, "id": a.image_id, "source_hash": a.source_hash,
                      "cached": a.cached, "seconds": round(a.seconds, 2), "log": a.log, "phases": a.phases}
                     for a in self.apps],
            "failed": [f.to_json() for f in self.failed],
            "manifest": self.manifest,
        }


# ---------------------------------------------------------------- node image


def _tar(files: dict[str, bytes]) -> io.BytesIO:
    buf = io.BytesIO()
    with tarfile.open(fileobj=buf, mode="w") as tar:
        for name, data in sorted(files.items()):
            info = tarfile.TarInfo(name)
            info.size, info.mode, info.mtime = len(data), 0o644, 0
            tar.addfile(info, io.BytesIO(data))
    buf.seek(0)
    return buf


def ensure_node_image(client: Any, progress: Progress | None = None) -> tuple[str, str, bool]:
    """(tag, image id, cached) of shinken/hub-node for the current base image."""
    base_id = ensure_base(client, progress=progress, suite=NODE_SUITE)
    dockerfile = (HUB_IMAGE_DIR / "node.Dockerfile").read_bytes()
    h = hashlib.sha256(b"recipe=" + RECIPE_VERSION.encode() + b"\nbase=" + base_id.encode() + b"\n" + dockerfile).hexdigest()[:12]
    tag = f"{NODE_REPO}:{h}"
    with _build_lock("hub-node"):
        found = _image_id(client, tag)
        if found:
            return tag, found, True
        _say(progress, f"building {tag} (Node.js and npm from Debian)")
        image_id = run_build(client, _tar({"Dockerfile": dockerfile}), tag, f"hub-node-{h}",
                             buildargs={"BASE_IMAGE": f"{base_repo(NODE_SUITE)}:{base_hash(apt_mirror(), NODE_SUITE)}"},
                             labels={LABEL_HASH: h, LABEL_IMAGE: "hub-node", LABEL_PARENT: base_id},
                             progress=progress, nocache=False)
        _tag_latest(client, image_id, NODE_REPO)
        return tag, image_id, False


# ---------------------------------------------------------------- one app


def app_content_hash(app: MockApp, node_id: str) -> str:
    return hashlib.sha256(f"recipe={RECIPE_VERSION}\nnode={node_id}\nsource={source_hash(app)}\n".encode()).hexdigest()[:12]


INSTALL_INPUTS = ("package.json", "package-lock.json")  # all `npm ci` reads; the install sees nothing else


def _source_tar(app: MockApp, npm: NpmConfig, owner: tuple[int, int] = (0, 0),
                only: tuple[str, ...] | None = None) -> tuple[bytes, Rewrite | None]:
    """The app's sources (or the files `only` names) as a tar, owned by `owner` (uid, gid) with an
    entry for every folder, so the build user can write in them; its lockfile's tarball URLs on
    the configured registry (a scoped package's on its scope's registry) (what was rewritten, or
    None without a lockfile)."""
    buf = io.BytesIO()
    rewrite: Rewrite | None = None
    uid, gid = owner
    folders: set[str] = set()

    def folder(name: str) -> None:
        if name in folders:
            return
        parent = name.rpartition("/")[0]
        if parent:
            folder(parent)
        folders.add(name)
        info = tarfile.TarInfo(name)
        info.type, info.mode, info.uid, info.gid = tarfile.DIRTYPE, 0o755, uid, gid
        tar.addfile(info)

    with tarfile.open(fileobj=buf, mode="w") as tar:
        folder(app.name)
        for rel, path in source_files(app.folder):
            if only is not None and rel not in only:
                continue
            folder(f"{app.name}/{rel}".rpartition("/")[0])
            info = tar.gettarinfo(str(path), arcname=f"{app.name}/{rel}")
            info.uid, info.gid = uid, gid
            info.uname = info.gname = ""
            data = path.read_bytes()
            if rel == "package-lock.json":
                data, rewrite = rewrite_lockfile(data, npm.registry, npm.scopes)
            info.size = len(data)
            tar.addfile(info, io.BytesIO(data))
    return buf.getvalue(), rewrite


def build_user() -> tuple[int, int]:
    """(uid, gid) the app's install and build run as: BUILD_UID, which owns nothing in the node
    image but the app's folder it is given (not even /hub, the `hub` user's), or this process's
    own user when it is not root (then the files it mounts are already its own)."""
    return (BUILD_UID, BUILD_UID) if os.geteuid() == 0 else (os.getuid(), os.getgid())


def _owned_by(path: Path, owner: tuple[int, int]) -> None:
    """Give a folder this build mounts writable (the npm cache) to the build user: once, when
    it is not theirs yet (a cache written by an earlier root build)."""
    if os.geteuid() != 0 or path.stat().st_uid == owner[0]:
        return
    for dirpath, dirnames, filenames in os.walk(path):
        for name in [*dirnames, *filenames]:
            os.lchown(os.path.join(dirpath, name), *owner)
    os.chown(path, *owner)


# Both steps of an app build: $1 the app's folder. `shinken-phase: NAME START END` lines time the
# steps (parsed into AppBuild.phases). A line every few seconds while npm works quietly (`npm ci`
# prints nothing for minutes on a busy machine): the caller's read of the exec's output would
# otherwise time out (the Docker SDK's 60 s), and the user sees the build is alive. sleep's output
# goes nowhere so that no orphan keeps the exec's stream open. HOME and npm's logs are on a tmpfs
# (never committed).
_PRELUDE = r"""set -e
cd "$1"
( while sleep "${SHINKEN_HEARTBEAT_S:-20}" >/dev/null 2>&1; do echo "shinken-heartbeat: ${SECONDS}s"; done ) &
hb_pid=$!
trap 'kill $hb_pid 2>/dev/null || true' EXIT
export HOME=/tmp/home npm_config_logs_dir=/tmp/npm-logs
mkdir -p "$HOME"
export npm_config_update_notifier=false npm_config_fund=false npm_config_audit=false npm_config_progress=false
t0=$EPOCHREALTIME
"""

# The install: npm alone, with --ignore-scripts (no package's preinstall/install/postinstall, nor
# the app's own, runs here, where the registry credentials are). $2 is the configured registry:
# the lockfile's tarball URLs were rewritten to it (mockweb.registry). npm reads the proxy CA both
# as its own `cafile` and as Node's extra CAs; the user config it reads ($npm_config_userconfig) is
# shinken's, mounted read-only for this step only: the registries, scoped registries and their
# credentials. `npm ci` needs a lockfile that matches package.json, `npm install` works without one.
_INSTALL_SCRIPT = _PRELUDE + r"""export npm_config_registry="$2" npm_config_cache=/npm-cache npm_config_ignore_scripts=true
# a build at a low CPU weight on a busy machine can be starved for minutes: patient fetches
export npm_config_fetch_timeout=900000 npm_config_fetch_retries=5 npm_config_fetch_retry_maxtimeout=120000
if [ -s /shinken-ca.pem ]; then export npm_config_cafile=/shinken-ca.pem NODE_EXTRA_CA_CERTS=/shinken-ca.pem; fi
# --prefer-offline: a package the cache holds is not asked for again (tarballs are read from it by
# integrity either way; metadata, what `npm install` without a lockfile resolves, is revalidated
# only when missing)
export npm_config_prefer_offline=true
if [ -f package-lock.json ]; then npm ci --ignore-scripts --loglevel=warn; else npm install --ignore-scripts --loglevel=warn; fi
t1=$EPOCHREALTIME
echo "shinken-phase: install $t0 $t1"
"""

# The build: the app's code and its dependencies' run here, with no network, no credentials and
# no cache. $2: the app's build script when it can run without npm (see `direct_script`): what
# `npm run build` would run, with node_modules/.bin on PATH, minus npm's own start (seconds under
# load).
_BUILD_SCRIPT = _PRELUDE + r"""if [ -n "$2" ]; then
  echo "> $2"
  PATH="$PWD/node_modules/.bin:$PATH" npm_lifecycle_event=build sh -c "$2"
else
  npm run build
fi
t1=$EPOCHREALTIME
echo "shinken-phase: build $t0 $t1"
test -f dist/index.html || { echo "error: npm run build wrote no dist/index.html" >&2; exit 3; }
"""
_PHASE = re.compile(r"^shinken-phase: (\w+) ([0-9.]+) ([0-9.]+)\s*$")
_HEARTBEAT = re.compile(r"^shinken-heartbeat: (\d+)s\s*$")
HEARTBEAT_S = 20.0
ENGINE_PATIENCE_S = 600.0

_ERROR_LINE = re.compile(r"\b\w*(error|ERROR|Error)\b|ERR!|ENOTFOUND|EAI_AGAIN|ETIMEDOUT|ECONNREFUSED|requires Node")
_FAILED_LINE = re.compile(r"\b(failed|FAILED|Failed)\b")  # weaker: `x Build failed in 695ms` comes before the error
_NPM_CODE_ONLY = re.compile(r"npm ERR! (code|errno|syscall) \S+\s*$")


def direct_script(folder: Path, name: str) -> str | None:
    """The package.json script `name` when `npm run <name>` would only run it (no `pre<name>`
    or `post<name>` hook): shinken then runs it with `sh -c` and node_modules/.bin on PATH, as
    npm does, without starting npm (Debian's npm takes seconds to start under load). None: use
    `npm run` (hooks, or a package.json that cannot be read)."""
    try:
        scripts = json.loads((folder / "package.json").read_text(encoding="utf-8")).get("scripts") or {}
    except (OSError, ValueError, AttributeError):
        return None
    script = scripts.get(name) if isinstance(scripts, dict) else None
    if not isinstance(script, str) or not script.strip() or f"pre{name}" in scripts or f"post{name}" in scripts:
        return None
    return script


class ErrorLines:
    """The lines of a build's output that name what went wrong (the first `limit`), for the
    summary table. An error line that ends with ':' keeps the line after it, which holds the
    message (vite/rollup: `error during build:` then `src/x.jsx (4:13): "XitHub" is not
    exported by ...`, a line no error pattern matches)."""

    def __init__(self, limit: int = 40) -> None:
        self.lines: list[str] = []
        self.limit = limit
        self._more = False

    def take(self, line: str) -> None:
        if len(self.lines) >= self.limit:
            return
        if self._more:
            self.lines.append(line)
            self._more = False
        elif _ERROR_LINE.search(line) or _FAILED_LINE.search(line):
            self.lines.append(line)
            self._more = line.rstrip().endswith(":")


def first_error_line(lines: list[str]) -> str:
    """The line of a build log that says what went wrong first: npm's first message line
    (past its bare `code`/`errno` lines), else the first line naming an error, else the last."""
    text = [ln.strip() for ln in lines if ln.strip()]
    npm = [ln for ln in text if "npm ERR!" in ln]
    if npm:
        return next((ln for ln in npm if not _NPM_CODE_ONLY.search(ln)), npm[0])[:300]
    for pattern in (_ERROR_LINE, _FAILED_LINE):
        for i, ln in enumerate(text):
            if pattern.search(ln) and not ln.startswith("shinken:"):
                if ln.endswith(":") and i + 1 < len(text):
                    return f"{ln} {text[i + 1]}"[:300]
                return ln[:300]
    return (text[-1] if text else "no output")[:300]


def build_app(client: Any, app: MockApp, node_tag: str, node_id: str, ca_pem: bytes, *,
              progress: Progress | None = None, nocache: bool = False, npm_cache: Path | None = None,
              registry: str = DEFAULT_REGISTRY, cpu_shares: int | None = None,
              npm: NpmConfig | None = None, run_directly: bool = True,
              heartbeat_s: float = HEARTBEAT_S) -> AppBuild:
    """The built image of one app, cached by the hash of its sources and the node image.
    npm_cache: the npm cache folder the build mounts (default ~/.cache/shinken/hub-npm, shared
    by every app build; the benchmark passes an empty one to time a cold build). registry: the
    npm registry every package is installed from, whatever host the lockfile names (the
    tarballs' integrity hashes are kept, so the image is the same whichever registry served
    them). npm: the npm settings (registry, scoped registries, credentials; default: `registry`
    alone); credentials reach the build through a private file mounted for it only.
    run_directly: run the build script without npm when npm would only run it (False: always
    `npm run build`, for comparing the two). heartbeat_s: how often the build says it is alive
    while npm prints nothing (keeps the output stream's reads inside the SDK's timeout). cpu_shares: the build container's CPU weight (Docker's --cpu-shares; default 1024:
    128 lets a long survey use idle CPU and yield to other work). A failed build raises
    AppBuildFailed."""
    t0 = time.monotonic()
    h = app_content_hash(app, node_id)
    src = source_hash(app)
    tag = f"{APP_REPO_PREFIX}{_slug(app.name)}:{h}"
    with _build_lock(f"hub-app-{_slug(app.name)}"):
        found = _image_id(client, tag)
        if found and not nocache:
            return AppBuild(app.name, tag, found, src, True, time.monotonic() - t0)
        _say(progress, f"building {tag} ({app.name}: npm {'ci' if app.has_lockfile else 'install'} + npm run build)")
        try:
            image_id, log, phases = _build_app_in_container(client, app, tag, h, node_tag, node_id, ca_pem, progress,
                                                            npm_cache or cache_root() / f"hub-npm-u{build_user()[0]}",
                                                            npm or NpmConfig(registry, "--registry"), cpu_shares,
                                                            run_directly, heartbeat_s)
        except AppBuildFailed as exc:
            exc.seconds = time.monotonic() - t0
            raise
    return AppBuild(app.name, tag, image_id, src, False, time.monotonic() - t0, str(log), phases)


def _build_app_in_container(client: Any, app: MockApp, tag: str, h: str, node_tag: str, node_id: str,
                            ca_pem: bytes, progress: Progress | None, npm_cache: Path,
                            npm: NpmConfig, cpu_shares: int | None = None,
                            run_directly: bool = True,
                            heartbeat_s: float = HEARTBEAT_S) -> tuple[str, Path, dict[str, float]]:
    """The two steps of an app build, each in a container of its own (see the module's doc): the
    install (npm alone, credentials and cache mounted) committed, then the build on that image with
    no network and nothing mounted, committed as the app's image."""
    import docker.errors
    import requests.exceptions

    # an engine too busy to answer within the SDK's timeout raises requests' errors, not APIError
    engine_errors = (docker.errors.APIError, requests.exceptions.RequestException)
    # A build's engine calls get a patient read timeout: committing a large app took 27 s at load
    # 15 and over the SDK's 60 s at load 20-60 (the commit went on in the engine: the next try
    # found the image).
    api = patient_api(client, ENGINE_PATIENCE_S)
    owner = build_user()
    npm_cache.mkdir(parents=True, exist_ok=True)
    _owned_by(npm_cache, owner)
    ca_file = cache_root() / "hub-ca.pem"
    ca_file.write_bytes(ca_pem)
    ca_file.chmod(0o644)  # a public certificate, read by the build user
    log_dir = cache_root() / "build-logs"
    log_dir.mkdir(parents=True, exist_ok=True)
    log_path = log_dir / f"hub-app-{_slug(app.name)}-{h}.log"
    registry = npm.registry
    inputs, rewrite = _source_tar(app, npm, owner, only=INSTALL_INPUTS)
    notes = npm.log_lines()
    notes += rewrite.log_lines() if rewrite is not None else [f"shinken: no package-lock.json; npm install from {registry}"]
    secrets = npm.secrets()

    def scrub(text: str) -> str:  # npm redacts tokens itself; this keeps any echo of one out of the log too
        for secret in secrets:
            text = text.replace(secret, "***")
        return text

    with open(log_path, "w", encoding="utf-8") as log:
        log.write("".join(n + "\n" for n in notes))
    for n in notes:
        _say(progress, f"[{app.name}] {n}")

    def failed(message: str, lines: list[str]) -> AppBuildFailed:
        return AppBuildFailed(app, f"{app.folder}: {message}; fix the app or leave it out of --apps\n"
                              + "\n".join(lines[-12:]) + f"\n(full log: {log_path})",
                              first_error_line(lines) if lines else message, log_path)

    tail: list[str] = []
    errors = ErrorLines()  # the first lines that name an error, for the summary table
    phases: dict[str, float] = {}
    deadline = time.monotonic() + APP_BUILD_TIMEOUT_S

    def take(line: str) -> None:
        nonlocal tail
        if hb := _HEARTBEAT.match(line):
            _say(progress, f"[{app.name}] still building ({hb.group(1)} s)")
            return
        m = _PHASE.match(line)
        if m:
            phases[m.group(1)] = round(float(m.group(3)) - float(m.group(2)), 2)
        elif line.strip():
            tail = (tail + [line])[-30:]
            errors.take(line)
            _say(progress, f"[{app.name}] {line}")

    def step(image: str, archive: bytes, script: str, args: list[str], *, network: str,
             binds: dict[str, dict[str, str]], env: dict[str, str], what: str, labels_extra: dict[str, str] | None) -> str:
        """One container: `archive` put under APPS_ROOT, `script` run as the build user, then
        committed; the new image's id. The container is removed whatever happens."""
        hc = api.create_host_config(binds=binds or None, network_mode=network, init=True, cpu_shares=cpu_shares,
                                    cap_drop=["ALL"], security_opt=["no-new-privileges"],
                                    tmpfs={"/tmp": "rw,nosuid,nodev,size=1g"})
        try:
            cid = create_container(api, image, labels=labels_for("build", task=f"hub-app-{app.name}"),
                                   command=["sleep", "infinity"], host_config=hc, working_dir=APPS_ROOT,
                                   user=f"{owner[0]}:{owner[1]}", detach=True)
        except engine_errors as exc:
            raise EnvironmentProblem(f"cannot create the build container for {app.name}: {exc} (retry when the "
                                     "Docker engine answers again)") from None
        try:
            api.start(cid)
            api.put_archive(cid, APPS_ROOT, archive)
            ex = api.exec_create(cid, ["bash", "-c", script, what, f"{APPS_ROOT}/{app.name}", *args],
                                 environment={**env, "SHINKEN_HEARTBEAT_S": f"{heartbeat_s:g}"})
            pending = b""  # a chunk can end mid-line (mid-character too): lines are read whole
            with open(log_path, "a", encoding="utf-8") as log:
                for chunk in api.exec_start(ex["Id"], stream=True):
                    *whole, pending = (pending + chunk).split(b"\n")
                    for raw in whole:
                        line = scrub(raw.decode("utf-8", "replace"))
                        log.write(line + "\n")
                        take(line.rstrip("\r"))
                    if time.monotonic() > deadline:
                        raise failed(f"building {app.name} took over {APP_BUILD_TIMEOUT_S:.0f}s", errors.lines + tail)
                if pending:
                    line = scrub(pending.decode("utf-8", "replace"))
                    log.write(line + "\n")
                    take(line)
            code = api.exec_inspect(ex["Id"]).get("ExitCode")
            if code != 0:
                raise failed(f"npm {what} of {app.name} failed (exit {code})", errors.lines + tail if errors.lines else tail)
            tc = time.monotonic()
            if labels_extra is None:  # the install: an intermediate image, parent of the app's
                res = api.commit(cid)
            else:
                repo, version = tag.split(":")
                res = api.commit(cid, repository=repo, tag=version,
                                 conf={"Labels": labels_extra, "Cmd": ["sleep", "infinity"], "User": "root"})
            phases["commit"] = round(phases.get("commit", 0.0) + time.monotonic() - tc, 2)
            return str(res["Id"])
        except engine_errors as exc:
            raise EnvironmentProblem(f"building {app.name} failed: {exc} (log: {log_path}; retry when the Docker "
                                     "engine answers again)") from None
        finally:
            try:
                api.remove_container(cid, force=True, v=True)
            except engine_errors:
                pass  # labelled `build`: `shinken gc` reclaims it

    # The build's npm user config (registries, credentials) in a private folder of its own, given to
    # the build user, mounted read-only for the install only and removed after it.
    npmrc_dir = Path(tempfile.mkdtemp(prefix="shinken-npmrc-"))
    try:
        (npmrc_dir / "npmrc").write_bytes(npm.npmrc())
        (npmrc_dir / "npmrc").chmod(0o600)
        if os.geteuid() == 0:
            for p in (npmrc_dir, npmrc_dir / "npmrc"):
                os.chown(p, *owner)
        installed = step(node_tag, inputs, _INSTALL_SCRIPT, [registry], network="host", what="install",
                         binds={str(npm_cache): {"bind": "/npm-cache", "mode": "rw"},
                                str(ca_file): {"bind": "/shinken-ca.pem", "mode": "ro"},
                                str(npmrc_dir): {"bind": NPMRC_DIR, "mode": "ro"}},
                         env={"npm_config_userconfig": f"{NPMRC_DIR}/npmrc"}, labels_extra=None)
    finally:
        shutil.rmtree(npmrc_dir, ignore_errors=True)
    sources, _ = _source_tar(app, npm, owner)
    direct = direct_script(app.folder, "build") if run_directly else None
    img_labels = {LABEL_HASH: h, LABEL_IMAGE: "hub-app", LABEL_PARENT: node_id, LABEL_HUB_APP: app.name}
    try:
        image_id = step(installed, sources, _BUILD_SCRIPT, [direct or ""], network="none", what="build", binds={},
                        env={}, labels_extra=img_labels)
    finally:
        try:  # removed when the build failed; otherwise the app's image keeps it as its parent (refused)
            api.remove_image(installed, noprune=True)
        except engine_errors:
            pass
    with open(log_path, "a", encoding="utf-8") as log:
        log.write("shinken: seconds per step: " + ", ".join(f"{k} {v:.1f}" for k, v in phases.items()) + "\n")
    return image_id, log_path, phases


# ---------------------------------------------------------------- the hub image


def check_aliases(apps: list[MockApp]) -> None:
    seen: dict[str, str] = {}
    for a in apps:
        other = seen.get(a.alias) or seen.get(a.key)
        if other is not None:
            raise ShinkenError(f"apps {other!r} and {a.name!r} would share the host name {a.alias} "
                               "(or the placeholder key); leave one out with --apps")
        seen[a.alias] = seen[a.key] = a.name


def hub_manifest(apps: list[MockApp], builds: list[AppBuild], node_id: str,
                 failed: list[AppFailure] | None = None) -> dict[str, Any]:
    """What the hub image holds (`apps`, numbered in name order), and the apps of the
    checkout that were chosen but did not build (`left_out`, only when there are some)."""
    by_name = {b.name: b for b in builds}
    doc: dict[str, Any] = {
        "schema": HUB_SCHEMA,
        "node_image": node_id,
        "apps": [
            {"name": a.name, "key": a.key, "alias": a.alias, "port": FIRST_APP_PORT + i,
             "dir": f"{APPS_ROOT}/{a.name}", "source_hash": by_name[a.name].source_hash,
             "image": by_name[a.name].image_id}
            for i, a in enumerate(apps)
        ],
    }
    if failed:
        # name and sources only: the error text would make the image's content hash vary by run
        doc["left_out"] = [{"name": f.name, "source_hash": f.source_hash} for f in failed]
    return doc


def _hub_dockerfile(apps: list[MockApp], builds: list[AppBuild]) -> bytes:
    by_name = {b.name: b for b in builds}
    lines = ["ARG BASE_IMAGE", "FROM ${BASE_IMAGE}"]
    for a in apps:
        d = f"{APPS_ROOT}/{a.name}"
        lines.append(f"COPY --from={by_name[a.name].tag} --chown={HUB_UID}:{HUB_UID} {d} {d}")
    lines += ["COPY hub.json supervisor.mjs loopback_only.cjs /hub/", "USER hub", "WORKDIR /hub", "EXPOSE 80",
              'CMD ["node", "/hub/supervisor.mjs"]']
    return ("\n".join(lines) + "\n").encode()


def build_hub(source: Path, app_names: list[str] | None = None, *, client: Any = None,
              ca_bundle: Path | str | None = None, progress: Progress | None = None,
              nocache: bool = False, registry: str | None = None, cpu_shares: int | None = None,
              latest: bool = True) -> HubBuild:
    """Build (or find cached) the hub image serving every app of `app_names` (default: all
    apps of the checkout at `source`) that builds. An app that fails is left out and named
    (HubBuild.failed, the manifest's `left_out`); NothingBuilt when none built.
    registry: the npm registry to install from (default: npm's configured one). cpu_shares:
    the app build containers' CPU weight (see build_app). latest: also tag the image
    shinken/hub:latest (False: only its content-hash tag, for a throwaway hub)."""
    t0 = time.monotonic()
    chosen = select_apps(discover_apps(source), app_names)
    check_aliases(chosen)
    client = _client(client)
    ca_pem = _read_ca(ca_bundle)
    npm = npm_config(registry)
    reg = npm.registry
    _say(progress, f"npm registry: {reg} ({npm.source}); every lockfile's tarball URLs point there"
         + (f" (scoped: {', '.join(f'{k} {v}' for k, v in sorted(npm.scopes.items()))})" if npm.scopes else ""))
    tn = time.monotonic()
    node_tag, node_id, _ = ensure_node_image(client, progress)
    node_seconds = time.monotonic() - tn
    builds: list[AppBuild] = []
    failed: list[AppFailure] = []
    for a in chosen:
        try:
            builds.append(build_app(client, a, node_tag, node_id, ca_pem, progress=progress, nocache=nocache,
                                    registry=reg, cpu_shares=cpu_shares, npm=npm))
        except AppBuildFailed as exc:
            failed.append(AppFailure(a.name, source_hash(a), exc.seconds, exc.first_error,
                                     str(exc.log) if exc.log else None))
            _say(progress, f"{a.name}: FAILED ({exc.first_error}); going on without it (log: {exc.log})")
    if not builds:
        raise NothingBuilt(failed)
    built = {b.name for b in builds}
    apps = [a for a in chosen if a.name in built]
    manifest = hub_manifest(apps, builds, node_id, failed)
    supervisor = (HUB_IMAGE_DIR / "supervisor.mjs").read_bytes()
    loopback_only = (HUB_IMAGE_DIR / "loopback_only.cjs").read_bytes()
    manifest_bytes = json.dumps(manifest, sort_keys=True, separators=(",", ":")).encode()
    dockerfile = _hub_dockerfile(apps, builds)
    h = hashlib.sha256(b"recipe=" + RECIPE_VERSION.encode() + b"\n" + dockerfile + manifest_bytes + supervisor
                       + loopback_only).hexdigest()[:12]
    tag = f"{HUB_REPO}:{h}"
    with _build_lock("hub"):
        found = _image_id(client, tag)
        if found and not nocache:
            if latest:
                _tag_latest(client, found, HUB_REPO)
            return HubBuild(tag, found, h, True, time.monotonic() - t0, manifest, builds, node_seconds, failed, reg)
        _say(progress, f"building {tag} ({len(apps)} app(s): {', '.join(a.name for a in apps)})")
        context = _tar({"Dockerfile": dockerfile, "hub.json": json.dumps(manifest, indent=1).encode(),
                        "supervisor.mjs": supervisor, "loopback_only.cjs": loopback_only})
        image_id = run_build(client, context, tag, f"hub-{h}", buildargs={"BASE_IMAGE": node_tag},
                             labels={LABEL_HASH: h, LABEL_IMAGE: "hub", LABEL_PARENT: node_id,
                                     LABEL_HUB_MANIFEST: manifest_bytes.decode()},
                             progress=progress, nocache=nocache)
        if latest:
            _tag_latest(client, image_id, HUB_REPO)
    return HubBuild(tag, image_id, h, False, time.monotonic() - t0, manifest, builds, node_seconds, failed, reg)

