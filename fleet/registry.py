"""Task images between Docker engines through an OCI registry (`shinken image push/pull`).

An image's id is the digest of its config, which a registry keeps; the manifest's own digest is
the content address the engine checks on a pull by digest. A push returns that digest, and the
pusher records it with the image id (fleet/provenance.py); a pull asks for the recorded digest
and keeps the image under its name only when its id is the recorded one (else it is untagged).

The registry: `HOST:PORT` is reached over HTTPS (the CA in /etc/docker/certs.d/HOST:PORT/ca.crt,
where the Docker engine looks for it too, or the system's), a loopback one over plain HTTP (as
the engine does); `http://HOST:PORT` says plain HTTP by name. Credentials are the Docker ones of
this machine (`docker login HOST:PORT`), used by the engine and by shinken's own requests."""

from __future__ import annotations

import base64
import ipaddress
import json
import ssl
import time
import urllib.error
import urllib.request
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from shinken.errors import EnvironmentProblem, ShinkenError
from shinken.fleet.provenance import Ledger, Pin, image_key

MANIFEST_TYPES = ("application/vnd.docker.distribution.manifest.v2+json, "
                  "application/vnd.oci.image.manifest.v1+json")
CERTS_D = Path("/etc/docker/certs.d")  # the engine's per-registry CA folder (`HOST:PORT/ca.crt`)


@dataclass(frozen=True)
class Moved:
    ref: str  # the local name (e.g. shinken/sandbox-cua:latest)
    remote: str  # REGISTRY/repo:tag
    image_id: str
    seconds: float
    digest: str = ""  # the manifest digest pushed or pulled


def check_registry(registry: str) -> str:
    """`registry` as [http://|https://]HOST:PORT, normalised; ShinkenError when it is not one."""
    raw = registry.strip().rstrip("/")
    scheme, sep, rest = raw.partition("://")
    if not sep:
        scheme, rest = "", raw
    elif scheme.lower() not in ("http", "https"):
        raise ShinkenError(f"--registry {registry!r}: give HOST:PORT (https), or http://HOST:PORT for plain HTTP")
    host, _, port = rest.rpartition(":")
    if not host or not port.isdigit() or "/" in rest:
        raise ShinkenError(f"--registry {registry!r}: give HOST:PORT of the registry, e.g. 10.0.0.1:5000")
    return f"{scheme.lower()}://{rest}" if scheme else rest


def host_port(registry: str) -> str:
    """HOST:PORT of the registry: the prefix of its images' names."""
    return check_registry(registry).partition("://")[2] or check_registry(registry)


def _loopback(host: str) -> bool:
    if host == "localhost":
        return True
    try:
        return ipaddress.ip_address(host.strip("[]")).is_loopback
    except ValueError:
        return False


def base_url(registry: str) -> str:
    reg = check_registry(registry)
    if "://" in reg:
        return reg
    return f"{'http' if _loopback(reg.rpartition(':')[0]) else 'https'}://{reg}"


def _tls(registry: str) -> ssl.SSLContext:
    ctx = ssl.create_default_context()
    ca = CERTS_D / host_port(registry) / "ca.crt"
    if ca.is_file():
        ctx.load_verify_locations(cafile=str(ca))
    return ctx


def _credentials(registry: str) -> dict[str, str]:
    """The Authorization header of this machine's `docker login` for the registry, or {}."""
    from docker import auth

    found = auth.resolve_authconfig(auth.load_config(), host_port(registry)) or {}
    user, password = found.get("username") or found.get("Username"), found.get("password") or found.get("Password")
    if not user or password is None:
        return {}
    return {"Authorization": "Basic " + base64.b64encode(f"{user}:{password}".encode()).decode()}


def _request(registry: str, path: str, *, accept: str | None = None, method: str = "GET",
             timeout: float = 10) -> tuple[Any, dict[str, str]]:
    """(JSON body, headers) of one registry API request; one-line errors for the usual causes."""
    reg = host_port(registry)
    url = base_url(registry) + path
    headers = {**_credentials(registry), **({"Accept": accept} if accept else {})}
    req = urllib.request.Request(url, headers=headers, method=method)
    try:
        with urllib.request.urlopen(req, timeout=timeout, context=_tls(registry)) as resp:  # noqa: S310 - a registry the user named
            body = resp.read()
            return (json.loads(body) if body and method != "HEAD" else {}), dict(resp.headers)
    except urllib.error.HTTPError as exc:
        if exc.code == 401:
            raise ShinkenError(f"registry {reg} wants credentials shinken does not have or it refused: "
                               f"`docker login {reg}` on this machine (docs/fleet.md)") from None
        raise
    except ssl.SSLError as exc:
        raise EnvironmentProblem(f"registry {reg}: TLS failed ({exc.reason or exc}); put the registry's CA in "
                                 f"{CERTS_D / reg / 'ca.crt'} (the engine reads it there too) or name it "
                                 f"http://{reg} for plain HTTP") from None
    except urllib.error.URLError as exc:
        if isinstance(exc.reason, ssl.SSLError):
            raise EnvironmentProblem(f"registry {reg}: TLS failed ({exc.reason}); put the registry's CA in "
                                     f"{CERTS_D / reg / 'ca.crt'} or name it http://{reg} for plain HTTP") from None
        raise


def split_ref(ref: str) -> tuple[str, str]:
    """(repository, tag) of a local image name; the tag defaults to latest."""
    if "@" in ref or ref.startswith("sha256:"):
        raise ShinkenError(f"{ref!r}: name the image by repository:tag, not by digest or id")
    last = ref.rsplit("/", 1)[-1]
    if ":" in last:
        repo, tag = ref.rsplit(":", 1)
    else:
        repo, tag = ref, "latest"
    return repo, tag


def remote_name(registry: str, ref: str) -> str:
    repo, tag = split_ref(ref)
    return f"{host_port(registry)}/{repo}:{tag}"


def ping(registry: str) -> None:
    """EnvironmentProblem (exit 3) unless the registry answers its API root (ShinkenError when
    it wants credentials this machine lacks)."""
    reg = host_port(registry)
    try:
        _request(registry, "/v2/")
    except (urllib.error.URLError, OSError, ValueError) as exc:
        raise EnvironmentProblem(f"registry {reg} does not answer ({exc}); start it on the head "
                                 "(`docker-registry serve CONFIG`, docs/fleet.md) or fix --registry") from None


def manifest_image_id(registry: str, ref: str) -> str | None:
    """The image id (config digest) the registry holds for `ref` (a tag or a digest), or None
    when it has none."""
    reg = host_port(registry)
    if "@" in ref:
        repo, _, tag = ref.partition("@")
    else:
        repo, tag = split_ref(ref)
    try:
        doc, _ = _request(registry, f"/v2/{repo}/manifests/{tag}", accept=MANIFEST_TYPES)
    except urllib.error.HTTPError as exc:
        if exc.code == 404:
            return None
        raise EnvironmentProblem(f"registry {reg}: {repo}:{tag}: HTTP {exc.code}") from None
    except (urllib.error.URLError, OSError, ValueError) as exc:
        raise EnvironmentProblem(f"registry {reg} does not answer ({exc}); check --registry") from None
    digest = (doc.get("config") or {}).get("digest")
    return str(digest) if digest else None


def _stream(lines: Any, what: str) -> str:
    """Drain an engine push/pull stream; the manifest digest it reported ('' when none)."""
    import docker.errors

    digest = ""
    try:
        for item in lines:
            if isinstance(item, dict) and item.get("error"):
                raise EnvironmentProblem(f"{what}: {item['error']}")
            aux = item.get("aux") if isinstance(item, dict) else None
            if isinstance(aux, dict) and str(aux.get("Digest", "")).startswith("sha256:"):
                digest = str(aux["Digest"])
    except docker.errors.APIError as exc:  # the engine could not reach the registry, refused it, ...
        raise EnvironmentProblem(f"{what}: {exc.explanation or exc}; check that this host's Docker engine "
                                 "reaches the registry (TLS and `docker login`, docs/fleet.md)") from None
    return digest


def _lazy(start: Any) -> Any:
    """The stream `start()` opens, opened inside the caller's error handling."""
    yield from start()


def push(client: Any, ref: str, registry: str, ledger: Ledger | None = None) -> Moved:
    """Tag `ref` as REGISTRY/repo:tag and push it; the id pushed is checked against the
    registry's, and with a `ledger` the digest and id are recorded for the fleet's pulls."""
    from shinken.sandbox.docker_client import resolve_image

    started = time.perf_counter()
    ping(registry)  # TLS, credentials: one line naming the fix before the engine's own error
    image_id = resolve_image(client, ref)
    remote = remote_name(registry, ref)
    repo, tag = remote.rsplit(":", 1)
    client.api.tag(image_id, repo, tag)
    digest = _stream(_lazy(lambda: client.api.push(repo, tag=tag, stream=True, decode=True)), f"pushing {remote}")
    held = manifest_image_id(registry, ref)
    if held != image_id or not digest:
        raise EnvironmentProblem(f"pushed {ref} ({image_id[:19]}) but {remote} holds {held}; push again")
    if ledger is not None:
        ledger.record(Pin.made(image_key(*split_ref(ref)), digest, image_id))
    return Moved(ref, remote, image_id, time.perf_counter() - started, digest)


def pull_pinned(api: Any, remote_repo: str, digest: str, image_id: str, what: str) -> str:
    """Pull `remote_repo@digest` and return the image id, which must be `image_id`; on any
    mismatch what was pulled is untagged and EnvironmentProblem raised."""
    import docker.errors

    pinned = f"{remote_repo}@{digest}"
    _stream(_lazy(lambda: api.pull(remote_repo, tag=digest, stream=True, decode=True)), f"pulling {pinned}")
    try:
        got = str(api.inspect_image(pinned)["Id"])
    except docker.errors.ImageNotFound:
        raise EnvironmentProblem(f"pulling {pinned}: the engine does not show it after the pull") from None
    if got != image_id:
        untag(api, pinned)
        raise EnvironmentProblem(f"{what}: {pinned} is {got[:19]}, its pusher recorded {image_id[:19]}; untagged")
    return got


def untag(api: Any, ref: str) -> None:
    """Remove the name `ref` (the image goes when nothing else names it and no container uses it)."""
    import docker.errors

    try:
        api.remove_image(ref)
    except docker.errors.APIError:
        pass  # gone already, or in use under another name: the name is what must go, and it did or was not there


def pull(client: Any, ref: str, registry: str, pin: Pin) -> Moved:
    """Pull the image `pin` records (by digest) and tag it locally as `ref`; its id must be the
    recorded one (else it is untagged)."""
    from shinken.sandbox.docker_client import find_image

    started = time.perf_counter()
    ping(registry)
    remote = remote_name(registry, ref)
    remote_repo = remote.rsplit(":", 1)[0]
    local_repo, local_tag = split_ref(ref)
    if find_image(client, ref) != pin.image_id:
        pull_pinned(client.api, remote_repo, pin.digest, pin.image_id, f"pulling {ref}")
        client.api.tag(pin.image_id, local_repo, local_tag)
        untag(client.api, f"{remote_repo}@{pin.digest}")  # the local name is the one kept
    got = find_image(client, ref)
    if got != pin.image_id:
        raise EnvironmentProblem(f"pulled {remote_repo}@{pin.digest} but {ref} is {got}, not {pin.image_id}")
    return Moved(ref, remote, pin.image_id, time.perf_counter() - started, pin.digest)


def pin_for(ref: str, *, ledger: Ledger | None, digest: str | None, registry: str) -> Pin:
    """The pin a pull of `ref` trusts: the fleet's record, or a digest the operator gives (its
    image id read from the registry's manifest, which the engine checks on the pull)."""
    if digest is not None:
        if not digest.startswith("sha256:") or len(digest) != 71:
            raise ShinkenError(f"--digest {digest!r}: give the sha256:... digest `shinken image push` printed")
        repo, _ = split_ref(ref)
        image_id = manifest_image_id(registry, f"{repo}@{digest}")
        if image_id is None:
            raise ShinkenError(f"registry {host_port(registry)} has no {repo}@{digest}")
        return Pin.made(image_key(*split_ref(ref)), digest, image_id, "--digest")
    found = ledger.lookup(image_key(*split_ref(ref))) if ledger is not None else None
    if found is None:
        raise ShinkenError(f"the fleet has no record of {ref}'s digest: push it with `shinken image push {ref} "
                           f"--registry {check_registry(registry)} --address HEAD:6379` from the machine that built it")
    return found
