"""The npm the hub's node image runs: npm 10 from the configured registry, pinned by version
and integrity, instead of Debian's npm 9 (split into ~900 packages under /usr/share/nodejs,
it takes seconds to start on a contended CPU; npm 10's tarball bundles its dependencies).

The tarball is fetched once on the host from the npm registry the builds use (with the build's
CA bundle and the registry's credentials), checked against the pinned sha512 and kept in
~/.cache/shinken/npm-cli/; the node image's recipe copies it in (`node.Dockerfile`). Debian's
npm stays in the image as /usr/bin/npm (what `build_app(legacy_npm=True)` runs, to compare).
"""

from __future__ import annotations

import base64
import hashlib
import ssl
import urllib.error
import urllib.request

from shinken.errors import EnvironmentProblem
from shinken.mockweb.registry import NpmConfig, nerf_dart
from shinken.runtime import cache_root

NPM_VERSION = "10.9.2"
NPM_INTEGRITY = "sha512-iriPEPIkoMYUy3F6f3wwSZAU93E0Eg6cHwIR6jzzOXWSy+SD/rOODEs74cVONHKSx2obXtuUoyidVEhISrisgQ=="
TARBALL_NAME = f"npm-{NPM_VERSION}.tgz"
FETCH_TIMEOUT_S = 300.0


def integrity_of(data: bytes) -> str:
    return "sha512-" + base64.b64encode(hashlib.sha512(data).digest()).decode()


def _auth_header(npm: NpmConfig) -> str | None:
    dart = nerf_dart(npm.registry)
    token = npm.auth.get(f"{dart}:_authToken")
    if token:
        return f"Bearer {token}"
    basic = npm.auth.get(f"{dart}:_auth")
    if basic:
        return f"Basic {basic}"
    user, pw = npm.auth.get(f"{dart}:username"), npm.auth.get(f"{dart}:_password")
    if user and pw:
        raw = base64.b64decode(pw).decode("utf-8", "replace")
        return "Basic " + base64.b64encode(f"{user}:{raw}".encode()).decode()
    return None


def npm_tarball(npm: NpmConfig, ca_pem: bytes) -> bytes:
    """npm's pinned tarball: from the cache folder, else fetched from `npm.registry` (what
    `npm pack npm@<version>` would fetch) and kept there. Bytes that do not match the pinned
    integrity are refused (EnvironmentProblem), never used."""
    folder = cache_root() / "npm-cli"
    path = folder / TARBALL_NAME
    if path.is_file():
        data = path.read_bytes()
        if integrity_of(data) == NPM_INTEGRITY:
            return data
        path.unlink()
    url = f"{npm.registry.rstrip('/')}/npm/-/{TARBALL_NAME}"
    ctx = ssl.create_default_context()
    if ca_pem.strip():
        ctx.load_verify_locations(cadata=ca_pem.decode("utf-8", "replace"))
    req = urllib.request.Request(url, headers={"Accept": "application/octet-stream"})
    auth = _auth_header(npm)
    if auth:
        req.add_header("Authorization", auth)
    try:
        with urllib.request.urlopen(req, timeout=FETCH_TIMEOUT_S, context=ctx) as resp:
            data = bytes(resp.read())
    except (urllib.error.URLError, OSError, ssl.SSLError) as exc:
        raise EnvironmentProblem(f"cannot fetch npm {NPM_VERSION} for the hub's node image from {url}: {exc} "
                                 "(check the npm registry setting, --registry, and --ca-bundle)") from None
    got = integrity_of(data)
    if got != NPM_INTEGRITY:
        raise EnvironmentProblem(f"{url} served npm {NPM_VERSION} with integrity {got[:30]}..., not the pinned "
                                 f"{NPM_INTEGRITY[:30]}...; refusing it (check what the registry serves)")
    folder.mkdir(parents=True, exist_ok=True)
    tmp = path.with_suffix(".part")
    tmp.write_bytes(data)
    tmp.replace(path)
    return data
