"""The one door to the Docker engine: connect (one error text), resolve an image ref to
its id, wait for a restarted engine, and create containers. Images, gc, probes and the provider
all come in here.

Every container shinken, its tests and its benchmarks create is created here (create_container,
run_container, docker_run_argv), and only with labels that name its owner (require_owner):
`shinken gc` reclaims a container by its owner label once that process is gone, and a
container created without one (it carries only what it inherited from its image) is nobody's
it can claim. tests/test_container_door.py fails on a container created anywhere else."""

from __future__ import annotations

import threading
import time
from collections.abc import Mapping, Sequence
from typing import Any

import docker
import docker.errors

from shinken.runtime import Owner
from shinken.sandbox.api import EngineUnreachable, ImageMissing, InfraError, UnownedContainer
from shinken.sandbox.ownership import (CONTAINER_KINDS, LABEL_CREATED, LABEL_CREATOR, LABEL_KIND, LABEL_MANAGED,
                                       LABEL_OWNER)

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


def patient_api(client: docker.DockerClient, read_timeout_s: float) -> Any:
    """The client's low-level API with a read timeout of at least read_timeout_s, sharing the
    client's connection pool: for engine calls that may legitimately run for minutes (a large
    commit on a starved machine) without changing the timeout of everything else. A shallow
    copy of its fields: copy.copy would go through requests.Session's pickling state, which
    drops the SDK's own fields."""
    api = object.__new__(type(client.api))
    api.__dict__.update(client.api.__dict__)
    api.timeout = max(float(client.api.timeout or 0), read_timeout_s)
    return api


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


# ---------------------------------------------------------------- creating containers


def _owner_problem(name: str, value: str | None) -> str | None:
    if not value:
        return f"no {name} label"
    parsed = Owner.parse(value)
    if parsed is None or not parsed.host or parsed.pid <= 0 or not parsed.start:
        return f"{name}={value!r} is not <host>/<pid>/<start>"
    return None


def require_owner(labels: Mapping[str, str] | None, what: str) -> dict[str, str]:
    """`labels` (a copy) when they make the container one `shinken gc` can tell the owner of:
    shinken.managed=1, a container kind, the creation time and shinken.owner (a detached hub,
    which outlives its maker, names its shinken.creator instead). UnownedContainer otherwise,
    naming what is missing; `what` says what was being created."""
    got = {str(k): str(v) for k, v in (labels or {}).items()}
    problems = []
    if got.get(LABEL_MANAGED) != "1":
        problems.append(f"{LABEL_MANAGED} is not 1")
    kind = got.get(LABEL_KIND)
    if kind not in CONTAINER_KINDS:
        problems.append(f"{LABEL_KIND}={kind!r} is not one of {', '.join(CONTAINER_KINDS)}")
    if not got.get(LABEL_CREATED, "").isdigit():
        problems.append(f"no {LABEL_CREATED} label (unix seconds)")
    if kind == "hub" and LABEL_OWNER not in got:
        why = _owner_problem(LABEL_CREATOR, got.get(LABEL_CREATOR))  # a detached hub: its creator
    else:
        why = _owner_problem(LABEL_OWNER, got.get(LABEL_OWNER))
    if why:
        problems.append(why)
    if problems:
        raise UnownedContainer(f"refusing to create a container ({what}) that `shinken gc` could not claim: "
                               f"{'; '.join(problems)}; make its labels with shinken.sandbox.ownership.labels_for()")
    return got


def create_container(api: Any, image: str, *, labels: Mapping[str, str], **options: Any) -> str:
    """Create (not start) a container of `image` with the low-level API (`options` are
    APIClient.create_container's); its id. The labels are checked first (require_owner), so
    nothing reaches the engine without its owner; engine errors are the caller's to wrap."""
    owned = require_owner(labels, f"image {image}")
    cid: str = api.create_container(image, labels=owned, **options)["Id"]
    return cid


def run_container(client: docker.DockerClient, image: str, command: str | Sequence[str] | None = None, *,
                  labels: Mapping[str, str], create_only: bool = False, **options: Any) -> Any:
    """docker-py's containers.run (or containers.create with `create_only`) with checked labels:
    what one-shot containers (capability probes, tests, benchmarks) use."""
    owned = require_owner(labels, f"image {image}")
    if create_only:
        return client.containers.create(image, command, labels=owned, **options)
    return client.containers.run(image, command, labels=owned, **options)


def docker_run_argv(labels: Mapping[str, str], *, docker_cli: Sequence[str] = ("docker",),
                    verb: str = "run") -> list[str]:
    """The head of a `docker run` (or `docker create`) command line carrying checked labels;
    append the options, the image and the command."""
    if verb not in ("run", "create"):
        raise ValueError(f"verb {verb!r}: run or create")
    owned = require_owner(labels, f"docker {verb}")
    return [*docker_cli, verb, *(a for k, v in owned.items() for a in ("--label", f"{k}={v}"))]
