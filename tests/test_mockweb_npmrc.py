"""Scoped registries and credentials of the user's npm config in `shinken hub build`: a stand-in
app depends on a scoped package that only a loopback registry serves, and only to a request
with its token; its lockfile names another (unreachable) host for it. The build must install
it from the scope's registry with the token, and the token must not be left in the image (its
history, its config, any file of any layer) or in the build log."""

from __future__ import annotations

import base64
import hashlib
import io
import json
import secrets
import tarfile
import tempfile
import threading
import urllib.error
import urllib.request
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path
from typing import Iterator

import pytest

from shinken.images.build import _read_ca
from shinken.mockweb.apps import discover_apps, select_apps
from shinken.mockweb.build import build_app, ensure_node_image
from shinken.mockweb.registry import npm_config
from shinken.sandbox.docker_client import run_container
from shinken.sandbox.ownership import labels_for
from tests.hub_standins import _copy

pytestmark = [pytest.mark.docker, pytest.mark.slow]

GREETING = "hello from the acme registry"


def _package_tgz() -> bytes:
    files = {"package/package.json": json.dumps({"name": "@acme/greet", "version": "1.0.0", "type": "module",
                                                 "main": "index.js"}).encode(),
             "package/index.js": f"export const greet = {json.dumps(GREETING)};\n".encode()}
    raw = io.BytesIO()
    with tarfile.open(fileobj=raw, mode="w:gz") as tar:
        for name, data in files.items():
            info = tarfile.TarInfo(name)
            info.size, info.mode, info.mtime = len(data), 0o644, 0
            tar.addfile(info, io.BytesIO(data))
    return raw.getvalue()


class _Registry:
    """A loopback npm registry serving @acme/greet only to `Authorization: Bearer <token>`."""

    def __init__(self, token: str) -> None:
        self.token, self.tgz, self.seen = token, _package_tgz(), []  # type: ignore[var-annotated]
        reg = self

        class Handler(BaseHTTPRequestHandler):
            def log_message(self, *args: object) -> None:
                pass

            def do_GET(self) -> None:  # noqa: N802
                ok = self.headers.get("Authorization") == f"Bearer {reg.token}"
                reg.seen.append((self.path, ok))
                if not ok:
                    self.send_response(401)
                    self.send_header("WWW-Authenticate", 'Bearer realm="acme"')
                    self.send_header("Content-Length", "0")
                    self.end_headers()
                    return
                if self.path.endswith("/-/greet-1.0.0.tgz"):
                    body, kind = reg.tgz, "application/octet-stream"
                elif self.path.rstrip("/") in ("/@acme%2fgreet", "/@acme%2Fgreet", "/@acme/greet"):
                    body = json.dumps({"name": "@acme/greet", "dist-tags": {"latest": "1.0.0"}, "versions": {"1.0.0": {
                        "name": "@acme/greet", "version": "1.0.0", "dist": {
                            "tarball": f"{reg.url}@acme/greet/-/greet-1.0.0.tgz", "integrity": reg.integrity}}}}).encode()
                    kind = "application/json"
                else:
                    self.send_response(404)
                    self.send_header("Content-Length", "0")
                    self.end_headers()
                    return
                self.send_response(200)
                self.send_header("Content-Type", kind)
                self.send_header("Content-Length", str(len(body)))
                self.end_headers()
                self.wfile.write(body)

        self.server = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
        self.url = f"http://127.0.0.1:{self.server.server_address[1]}/"
        self.integrity = "sha512-" + base64.b64encode(hashlib.sha512(self.tgz).digest()).decode()
        threading.Thread(target=self.server.serve_forever, daemon=True).start()


@pytest.fixture(scope="module")
def registry() -> Iterator[_Registry]:
    reg = _Registry("shk-" + secrets.token_hex(16))
    yield reg
    reg.server.shutdown()


def _checkout(tmp_path: Path, reg: _Registry) -> Path:
    """A checkout with `acme`: a copy of the stand-in mailbox app that imports @acme/greet, its
    lockfile naming an unreachable host for it (with the tarball's real integrity)."""
    folder = _copy(tmp_path, "acme")
    pkg = json.loads((folder / "package.json").read_text())
    pkg["dependencies"] = {"@acme/greet": "1.0.0"}
    (folder / "package.json").write_text(json.dumps(pkg, indent=2) + "\n")
    lock = json.loads((folder / "package-lock.json").read_text())
    lock["packages"][""]["dependencies"] = {"@acme/greet": "1.0.0"}
    lock["packages"]["node_modules/@acme/greet"] = {
        "version": "1.0.0", "resolved": "https://npm.acme.invalid/@acme/greet/-/greet-1.0.0.tgz",
        "integrity": reg.integrity}
    (folder / "package-lock.json").write_text(json.dumps(lock, indent=2) + "\n")
    main = folder / "src" / "main.js"
    main.write_text("import { greet } from '@acme/greet';\n" + main.read_text()
                    + "\ndocument.title = document.title || greet;\nconsole.log(greet);\n")
    return tmp_path


def _npmrc(tmp_path: Path, reg: _Registry, with_token: bool) -> Path:
    rc = tmp_path / f"npmrc-{with_token}"
    lines = [f"@acme:registry={reg.url}"]
    if with_token:
        lines.append(f"//{reg.url.split('//', 1)[1]}:_authToken=${{ACME_NPM_TOKEN}}")
    rc.write_text("\n".join(lines) + "\n")
    return rc


def test_a_scoped_package_installs_from_its_token_registry_and_the_token_stays_out_of_the_image(
        registry: _Registry, docker_client, tmp_path: Path) -> None:
    # The registry refuses a request without the token (so a build that passes used it).
    with pytest.raises(urllib.error.HTTPError) as refused:
        urllib.request.urlopen(f"{registry.url}@acme/greet/-/greet-1.0.0.tgz", timeout=5)
    assert refused.value.code == 401
    registry.seen.clear()
    (app,) = select_apps(discover_apps(_checkout(tmp_path / "hub", registry)), ["acme"])
    node_tag, node_id, _ = ensure_node_image(docker_client)
    ca = _read_ca(None)
    token = registry.token

    # The token comes from the environment, as npm reads ${VAR} in an npmrc.
    cfg = npm_config(None, env={"npm_config_userconfig": str(_npmrc(tmp_path, registry, True)), "ACME_NPM_TOKEN": token})
    assert cfg.secrets() == [token]
    lines: list[str] = []
    built = build_app(docker_client, app, node_tag, node_id, ca, nocache=True, npm=cfg, progress=lines.append)
    try:
        _check_build(docker_client, built, registry, token, lines, tmp_path)
    finally:  # its sources name this run's registry port: never reused, so not kept
        docker_client.api.remove_image(built.tag, force=True)


def _check_build(docker_client, built, registry: _Registry, token: str, lines: list[str], tmp_path: Path) -> None:
    # The scope's registry served the package (not the lockfile's host), every request with the token.
    assert ("/@acme/greet/-/greet-1.0.0.tgz", True) in registry.seen
    assert all(ok for _, ok in registry.seen), registry.seen
    log = Path(str(built.log)).read_text()
    assert f"from npm.acme.invalid; installing them from the registry configured for @acme {registry.url}" in log
    assert "credentials for //127.0.0.1:" in log
    assert "built in" in log and set(built.phases) == {"install", "build", "commit"}
    # `vite build` ran without npm (npm would print `> mailbox-mock@1.0.0 build` first).
    assert "> vite build" in log and "> mailbox-mock@1.0.0 build" not in log

    # The package is in the app, the token nowhere: log, progress, image config and history, files.
    api = docker_client.api
    out = run_container(docker_client, built.tag, ["sh", "-c", "cat /hub/apps/acme/dist/assets/*.js"],
                                       remove=True, network_mode="none", labels=labels_for("build", task="test-npmrc"))
    assert GREETING.encode() in out
    assert token not in log and not any(token in ln for ln in lines)
    assert token not in json.dumps(api.inspect_image(built.tag)) and token not in json.dumps(api.history(built.tag))
    assert any(p.startswith("/hub/apps/acme/dist/") for p in _files_holding(docker_client, built.tag, GREETING, tmp_path))
    found = _files_holding(docker_client, built.tag, token, tmp_path)
    assert not found, f"token found in the image: {found}"
    assert not list(Path("/tmp").glob("shinken-npmrc-*/npmrc")) or all(
        token not in p.read_text() for p in Path("/tmp").glob("shinken-npmrc-*/npmrc"))
    # The lockfile copy in the image names the scope's registry for the scoped package.
    lock = json.loads(run_container(docker_client, built.tag, ["cat", "/hub/apps/acme/package-lock.json"],
                                                   remove=True, network_mode="none",
                                                   labels=labels_for("build", task="test-npmrc")))
    assert lock["packages"]["node_modules/@acme/greet"]["resolved"] == f"{registry.url}@acme/greet/-/greet-1.0.0.tgz"


def _files_holding(client, ref: str, needle: str, tmp_path: Path) -> list[str]:
    """Files of the image's filesystem (every layer as the container sees it) holding `needle`
    (grep in a container of the image; the needle comes in a mounted file, not the command line)."""
    probe = Path(tempfile.mkdtemp(dir=tmp_path, prefix="probe-"))
    (probe / "needle").write_text(needle + "\n")
    out = run_container(client, ref, ["sh", "-c", "grep -rlsF -f /probe/needle / --exclude-dir=proc --exclude-dir=sys "
                                      "--exclude-dir=dev --exclude-dir=probe; echo exit=$?"],
                                remove=True, network_mode="none", volumes={str(probe): {"bind": "/probe", "mode": "ro"}},
                                labels=labels_for("build", task="test-npmrc"))
    lines = out.decode().split()
    assert lines[-1] in ("exit=0", "exit=1"), lines[-5:]  # 1: no match; anything else: grep failed
    return lines[:-1]
