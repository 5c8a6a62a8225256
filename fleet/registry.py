"""Task images between Docker engines through an OCI registry (`shinken image push/pull`).

An image's id is the digest of its config, which a registry keeps: the id a host pulls is the
id that was pushed, so the registry is where a joining host's image is checked against the
fleet's (`manifest_image_id`)."""

from __future__ import annotations

import json
import time
import urllib.error
import urllib.request
from dataclasses import dataclass
from typing import Any

from shinken.errors import EnvironmentProblem, ShinkenError

MANIFEST_TYPES = ("application/vnd.docker.distribution.manifest.v2+json, "
                  "application/vnd.oci.image.manifest.v1+json")


@dataclass(frozen=True)
class Moved:
    ref: str  # the local name (e.g. shinken/sandbox-cua:latest)
    remote: str  # REGISTRY/repo:tag
    image_id: str
    seconds: float


def check_registry(registry: str) -> str:
    """`registry` as host:port, normalised; ShinkenError when it is not one."""
    reg = registry.strip().removeprefix("http://").removeprefix("https://").rstrip("/")
    host, _, port = reg.rpartition(":")
    if not host or not port.isdigit() or "/" in reg:
        raise ShinkenError(f"--registry {registry!r}: give HOST:PORT of the registry, e.g. 127.0.0.1:5000")
    return reg


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
    return f"{check_registry(registry)}/{repo}:{tag}"


def _get(url: str, accept: str | None = None, timeout: float = 10) -> Any:
    req = urllib.request.Request(url, headers={"Accept": accept} if accept else {})
    with urllib.request.urlopen(req, timeout=timeout) as resp:  # noqa: S310 - a registry the user named
        return json.loads(resp.read() or b"{}")


def ping(registry: str) -> None:
    """EnvironmentProblem (exit 3) unless the registry answers its API root."""
    reg = check_registry(registry)
    try:
        _get(f"http://{reg}/v2/")
    except (urllib.error.URLError, OSError, ValueError) as exc:
        raise EnvironmentProblem(f"registry {reg} does not answer ({exc}); start it on the head "
                                 "(`docker-registry serve CONFIG`, docs/fleet.md) or fix --registry") from None


def manifest_image_id(registry: str, ref: str) -> str | None:
    """The image id (config digest) the registry holds for `ref`, or None when it has none."""
    reg = check_registry(registry)
    repo, tag = split_ref(ref)
    try:
        doc = _get(f"http://{reg}/v2/{repo}/manifests/{tag}", accept=MANIFEST_TYPES)
    except urllib.error.HTTPError as exc:
        if exc.code == 404:
            return None
        raise EnvironmentProblem(f"registry {reg}: {repo}:{tag}: HTTP {exc.code}") from None
    except (urllib.error.URLError, OSError, ValueError) as exc:
        raise EnvironmentProblem(f"registry {reg} does not answer ({exc}); check --registry") from None
    digest = (doc.get("config") or {}).get("digest")
    return str(digest) if digest else None


def _stream(lines: Any, what: str) -> None:
    import docker.errors

    try:
        for item in lines:
            if isinstance(item, dict) and item.get("error"):
                raise EnvironmentProblem(f"{what}: {item['error']}")
    except docker.errors.APIError as exc:  # the engine could not reach the registry, refused it, ...
        raise EnvironmentProblem(f"{what}: {exc.explanation or exc}; check that this host's Docker engine "
                                 "reaches the registry (insecure-registries for plain HTTP, docs/fleet.md)") from None


def _lazy(start: Any) -> Any:
    """The stream `start()` opens, opened inside the caller's error handling."""
    yield from start()


def push(client: Any, ref: str, registry: str) -> Moved:
    """Tag `ref` as REGISTRY/repo:tag and push it; the id pushed is checked against the registry's."""
    from shinken.sandbox.docker_client import resolve_image

    started = time.perf_counter()
    image_id = resolve_image(client, ref)
    remote = remote_name(registry, ref)
    repo, tag = remote.rsplit(":", 1)
    client.api.tag(image_id, repo, tag)
    _stream(_lazy(lambda: client.api.push(repo, tag=tag, stream=True, decode=True)), f"pushing {remote}")
    held = manifest_image_id(registry, ref)
    if held != image_id:
        raise EnvironmentProblem(f"pushed {ref} ({image_id[:19]}) but {remote} holds {held}; push again")
    return Moved(ref, remote, image_id, time.perf_counter() - started)


def pull(client: Any, ref: str, registry: str) -> Moved:
    """Pull REGISTRY/repo:tag and tag it locally as `ref`; its id must be the registry's."""
    from shinken.sandbox.docker_client import find_image

    started = time.perf_counter()
    want = manifest_image_id(registry, ref)
    remote = remote_name(registry, ref)
    if want is None:
        raise ShinkenError(f"{remote}: the registry has no such image; push it from the head first "
                           f"(`shinken image push {ref} --registry {check_registry(registry)}`)")
    repo, tag = remote.rsplit(":", 1)
    if find_image(client, ref) != want:
        _stream(_lazy(lambda: client.api.pull(repo, tag=tag, stream=True, decode=True)), f"pulling {remote}")
        local_repo, local_tag = split_ref(ref)
        client.api.tag(remote, local_repo, local_tag)
    got = find_image(client, ref)
    if got != want:
        raise EnvironmentProblem(f"pulled {remote} but {ref} is {got}, not the registry's {want}")
    return Moved(ref, remote, want, time.perf_counter() - started)
