"""The one door to the Docker engine: connect (one error text), resolve an image ref to
its id, wait for a restarted engine. Images, gc, probes and the provider all come in here."""

from __future__ import annotations

import threading
import time

import docker
import docker.errors

from shinken.sandbox.api import EngineUnreachable, ImageMissing, InfraError

ENGINE_HINT = "start dockerd (scripts/ensure-docker.sh) or set DOCKER_HOST"


def connect(timeout: float | None = None) -> docker.DockerClient:
    """A client of the engine DOCKER_HOST names (DOCKER_TLS_* honoured) that answered a
    ping; EngineUnreachable (an EnvironmentProblem, exit 3) otherwise."""
    try:
        client = docker.from_env(timeout=timeout) if timeout is not None else docker.from_env()
        client.ping()
    except Exception as exc:  # noqa: BLE001 - any failure here means "no engine"
        raise EngineUnreachable(f"Docker engine not reachable ({type(exc).__name__}: {exc}); {ENGINE_HINT}") from None
    return client


def find_image(client: docker.DockerClient, ref: str) -> str | None:
    """The id `ref` (a tag or an id) names now, or None when there is no such image."""
    try:
        image_id: str = client.api.inspect_image(ref)["Id"]
    except docker.errors.ImageNotFound:
        return None
    except docker.errors.APIError as exc:
        raise InfraError(f"inspecting image {ref}: {type(exc).__name__}: {exc}") from None
    return image_id


def resolve_image(client: docker.DockerClient, ref: str) -> str:
    """Like find_image, but a missing image is ImageMissing (exit 3; retried by probes)."""
    image_id = find_image(client, ref)
    if image_id is None:
        raise ImageMissing(f"image {ref} not found; build it with `shinken image build`")
    return image_id


def wait_for_engine(deadline_s: float, stop: threading.Event | None = None) -> bool:
    """Block until the engine answers a ping or `deadline_s` passed (or `stop` is set)."""
    end = time.monotonic() + deadline_s
    while time.monotonic() < end:
        if stop is not None and stop.is_set():
            return False
        try:
            connect(timeout=5).close()
            return True
        except EngineUnreachable:
            time.sleep(0.5)
    return False
