"""The capability manifest of an image: what task bundles can rely on inside it.

Produced by running the guest script `shinken-capabilities` in a throwaway, network-less container
(images without it but with python3 get the same script piped in) and cached per image id, since an
image id names immutable content."""

from __future__ import annotations

from pathlib import Path
from typing import TYPE_CHECKING, Any, cast

import orjson

from shinken.errors import EnvironmentProblem, ShinkenError
from shinken.images.layout import EXTRA_KIND, GUEST_DIR, LABEL_FRAGMENT_NAME, LABEL_FRAGMENT_SHA, LABEL_IMAGE, LABEL_PARENT
from shinken.runtime import cache_root, utc_now
from shinken.sandbox.docker_client import connect, resolve_image, run_container
from shinken.sandbox.ownership import LABEL_BASE_IMAGE, labels_for
from shinken.schemas import validation_error, write_json

if TYPE_CHECKING:
    from docker import DockerClient

SCHEMA = "shinken.capabilities/1"
RUN_TIMEOUT_S = 120


def cache_path(image_id: str) -> Path:
    return cache_root() / "capabilities" / f"{image_id.replace('sha256:', '')}.json"


def get_manifest(image_ref: str, client: DockerClient | None = None, *, refresh: bool = False) -> dict[str, Any]:
    """The validated manifest of `image_ref` (tag or id). Raises EnvironmentProblem when the
    image is missing or the probe container fails."""
    client = client if client is not None else connect()
    image_id = resolve_image(client, image_ref)
    path = cache_path(image_id)
    if not refresh and path.is_file():
        try:
            cached = orjson.loads(path.read_bytes())
            if validation_error("capabilities", cached) is None and cached["image"]["id"] == image_id:
                cached["image"]["ref"] = image_ref
                return cast(dict[str, Any], cached)
        except (orjson.JSONDecodeError, KeyError, TypeError):
            pass  # a damaged cache entry is simply regenerated
    probe = _probe(client, image_id, image_ref)
    manifest = {
        "schema": SCHEMA,
        "image": {"ref": image_ref, "id": image_id},
        **{k: v for k, v in probe.items() if k != "schema"},
    }
    labels = client.images.get(image_id).labels or {}
    if labels.get(LABEL_IMAGE) == EXTRA_KIND and labels.get(LABEL_PARENT):
        manifest["extra"] = _extra_section(client, labels, manifest)
    manifest["generated_at"] = utc_now()
    problem = validation_error("capabilities", manifest)
    if problem:
        raise ShinkenError(f"{image_ref}: capability manifest is invalid ({problem}); the image's "
                           "shinken-capabilities script does not match this shinken version")
    write_json(path, manifest, "capabilities")  # atomic, a temp file per process
    return manifest


def _extra_section(client: DockerClient, labels: dict[str, str], manifest: dict[str, Any]) -> dict[str, Any]:
    """What a `--extra` fragment added: this manifest minus its base image's (from the labels)."""
    base_id = labels[LABEL_PARENT]
    base = get_manifest(base_id, client)
    base_pkgs = base["dpkg_packages"]
    return {
        "fragment": {"name": labels.get(LABEL_FRAGMENT_NAME) or "extra", "sha256": labels.get(LABEL_FRAGMENT_SHA, "")},
        "base": base_id,
        "added": {
            **{k: sorted(set(manifest[k]) - set(base[k])) for k in ("python_modules", "executables", "desktop_apps")},
            "dpkg_packages": {p: v for p, v in manifest["dpkg_packages"].items() if base_pkgs.get(p) != v},
        },
    }


def _probe(client: DockerClient, image_id: str, image_ref: str) -> dict[str, Any]:
    import docker.errors

    script = (GUEST_DIR / "shinken-capabilities").read_text()
    # Prefer the image's own script (it matches the image); fall back to ours for foreign images.
    cmd = ["sh", "-c",
           'if command -v shinken-capabilities >/dev/null 2>&1; then exec shinken-capabilities; '
           'elif command -v python3 >/dev/null 2>&1; then exec python3 -c "$0"; '
           'else echo "no python3 in this image" >&2; exit 97; fi', script]
    container = None
    try:
        container = run_container(
            client, image_id, cmd, create_only=True, network_mode="none",
            labels=labels_for("build", extra={LABEL_BASE_IMAGE: image_id}),
            cap_drop=["ALL"], security_opt=["no-new-privileges"], pids_limit=256, mem_limit="512m",
            entrypoint=[], detach=True,
        )
        container.start()
        status = container.wait(timeout=RUN_TIMEOUT_S)
        stdout = container.logs(stdout=True, stderr=False)
        stderr = container.logs(stdout=False, stderr=True)
    except docker.errors.APIError as exc:
        raise EnvironmentProblem(f"capability probe of {image_ref} failed: {exc}") from exc
    except Exception as exc:  # noqa: BLE001 - e.g. requests ReadTimeout from wait()
        raise EnvironmentProblem(f"capability probe of {image_ref} did not finish: {exc}") from exc
    finally:
        if container is not None:
            try:
                container.remove(force=True)
            except docker.errors.APIError:
                pass
    code = status.get("StatusCode")
    if code != 0:
        raise EnvironmentProblem(
            f"capability probe of {image_ref} exited {code}: {stderr.decode(errors='replace')[-500:]}"
        )
    try:
        return cast(dict[str, Any], orjson.loads(stdout))
    except orjson.JSONDecodeError as exc:
        raise EnvironmentProblem(f"capability probe of {image_ref} printed no JSON ({exc})") from exc
