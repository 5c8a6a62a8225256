"""Golden images: a task's post-setup state, built once per (bundle hash, base image) and
committed, then found again by its labels. Forks start from them."""

from __future__ import annotations

import hashlib
import json
import re
import time
from typing import TYPE_CHECKING, Any

import docker.errors

from shinken.bundles.model import Bundle
from shinken.sandbox import start_state
from shinken.sandbox.api import Golden, InfraError, SessionError, SetupError, UnsettledDesktop, tail
from shinken.sandbox.container import (DELETE_RETRIES, DESKTOP_UP_TIMEOUT_S, Container, UserIds, infra,
                                      remove_container, remove_with_retries)
from shinken.sandbox.desktop import DesktopRecord
from shinken.sandbox.ownership import LABEL_BASE_IMAGE, LABEL_BUNDLE_HASH, LABEL_KIND, labels_for
from shinken.sandbox.policy import split_setup, task_needs

if TYPE_CHECKING:
    from shinken.sandbox.docker_provider import DockerProvider

GOLDEN_FORMAT = "4"  # bump when the build procedure changes: old goldens stop matching
LABEL_GOLDEN_FORMAT = "shinken.golden_format"
LABEL_GOLDEN_META = "shinken.golden_meta"
LABEL_GOLDEN = "shinken.golden"  # on forks: the golden image id they came from


def _tag_component(task_id: str) -> str:
    s = re.sub(r"[^a-z0-9._-]+", "-", task_id.lower()).strip("-._") or "task"
    return s[:100]


def find_golden(api: Any, bundle: Bundle, base_id: str) -> Golden | None:
    """The golden of `bundle` on base image `base_id`: the image its golden tag names, when that
    image's labels say so too. Only this engine's own build (its commit) and a copy checked against
    its pusher's record (fleet/golden_copy.py) put that tag on an image, so an image that merely
    carries the labels (loaded, pulled under another name, dated in the future) is never served:
    anyone can write labels and a creation date."""
    filters = {"label": [f"{LABEL_KIND}=golden", f"{LABEL_BUNDLE_HASH}={bundle.bundle_hash}",
                         f"{LABEL_BASE_IMAGE}={base_id}", f"{LABEL_GOLDEN_FORMAT}={GOLDEN_FORMAT}"]}
    try:
        found = api.images(name=golden_tag(bundle, base_id), filters=filters)
    except docker.errors.APIError as exc:
        raise infra("listing golden images", exc) from None
    usable = [(img, meta) for img in found if (meta := _meta(img)) is not None and _settled(meta)]
    if not usable:
        return None
    img, meta = usable[0]  # a tag names one image
    g = golden_from(bundle, img["Id"], base_id, meta)
    g.tag = next((t for t in img.get("RepoTags") or [] if t.startswith("shinken-golden/")), g.tag)
    g.reused = True
    if g.touched is None and isinstance(img.get("Created"), int):
        # Built before its files were recorded: the setup ran in the build_seconds before the commit.
        g.setup_started = float(img["Created"]) - g.build_seconds - 2.0
    return g


def _meta(img: dict[str, Any]) -> dict[str, Any] | None:
    try:
        meta = json.loads((img.get("Labels") or {}).get(LABEL_GOLDEN_META, "{}"))
    except json.JSONDecodeError:
        return None
    return meta if isinstance(meta, dict) else None


def _settled(meta: dict[str, Any]) -> bool:
    """Whether a stored golden's record settled. Goldens whose record did not (committed before
    such records stopped being committed) are passed over: their start state may be a transient
    one (Thunderbird's `Home` on its way to the folder), which a fork could match."""
    desktop = meta.get("desktop")
    return not isinstance(desktop, dict) or desktop.get("settled", True) is not False


def golden_from(bundle: Bundle, image_id: str, base_id: str, meta: dict[str, Any]) -> Golden:
    needs = task_needs(bundle)
    _, replay = split_setup(bundle.setup)
    g = Golden(
        image_id=image_id,
        tag=golden_tag(bundle, base_id),
        task_id=bundle.id,
        bundle_hash=bundle.bundle_hash,
        base_image_id=base_id,
        needs_desktop=needs.desktop,
        post_fork=[*replay, *bundle.post_fork],
        lost_processes=list(meta.get("lost_processes", [])),
        network=needs.network,
        build_seconds=float(meta.get("build_seconds", 0.0)),
        reused=False,
        state_fidelity="filesystem",
        bundle_post_fork=list(bundle.post_fork),
    )
    g.user_uid, g.user_gid = int(meta.get("uid", 1000)), int(meta.get("gid", 1000))
    if meta.get("desktop") is not None:
        g.desktop = DesktopRecord.from_json(meta["desktop"])
    g.web_sid = (meta.get("web") or {}).get("sid") or None
    g.hostname = meta.get("hostname") or None
    touched = meta.get("touched")
    g.touched = [p for p in touched if isinstance(p, str)] if isinstance(touched, list) else None
    return g


TOUCHED_ROOTS = ("/home/", "/root/", "/tmp/", "/opt/", "/srv/", "/mnt/", "/media/")
MAX_TOUCHED = 400  # the golden's label carries them; the vandal probe needs the task's files, not all


def setup_files(api: Any, container_id: str) -> list[str]:
    """Paths the setup created or changed (the container's diff against its base image) where task
    files live: home folders, /tmp, /opt, /srv, /mnt, /media; hidden ones (caches, app profiles, the
    desktop session's sockets) and shinken's own files left out. What the vandal probe damages."""
    try:
        changes = api.diff(container_id) or []
    except docker.errors.APIError as exc:
        raise infra("listing the files the setup changed", exc) from None
    out = []
    for c in changes:
        path = c.get("Path") if isinstance(c, dict) else None
        if (not isinstance(path, str) or c.get("Kind") not in (0, 1) or not path.startswith(TOUCHED_ROOTS)
                or "/." in path or "shinken" in path):
            continue
        out.append(path)
    return sorted(out)[:MAX_TOUCHED]


def golden_tag(bundle: Bundle, base_id: str) -> str:
    h = hashlib.sha256(f"{bundle.bundle_hash}\0{base_id}".encode()).hexdigest()[:12]
    return f"shinken-golden/{_tag_component(bundle.id)}:{h}"


def set_up(box: Container, bundle: Bundle, *, deadline: float,
           record_timeout: float = start_state.RECORD_TIMEOUT_S) -> tuple[int, int, str | None, DesktopRecord]:
    """Run the bundle's whole config on a fresh container (launch/open steps included; the
    desktop up first: setups drive the GUI, and its processes join the baseline) and record what
    it left running and showing. Returns the numeric ids of `user`, the container's host name
    (as the setup saw it) and the record."""
    # One exec: the desktop's boot waited for, the processes alive before the setup, the user's ids.
    wait = DESKTOP_UP_TIMEOUT_S if task_needs(bundle).desktop else None
    doc = start_state.baseline(box, wait_desktop=wait)
    uid, gid = int(doc["uid"]), int(doc["gid"])
    box.ids = UserIds(uid, gid)
    box.run_steps(bundle.setup, bundle, where="config", deadline=deadline)
    return uid, gid, doc.get("hostname") or None, start_state.record(box, timeout=record_timeout)


def build_golden(provider: DockerProvider, bundle: Bundle, base_id: str, setup_timeout: float, *,
                 keep: bool = False, record_timeout: float = start_state.RECORD_TIMEOUT_S) -> tuple[Golden, Container | None]:
    """Run the bundle's setup in a fresh container on `base_id`, record what it left running
    (golden.desktop: forks bring it back, or a tier says why they cannot) and commit the result,
    labelled so find_golden finds it again (bundle hash + base image id + format).

    With `keep`, the build container is not removed but returned, still running as the setup
    left it (the build session's files are moved aside for the commit and put back after it):
    the one computer that shows the start state without being made to. The caller removes it."""
    t0 = time.monotonic()
    needs = task_needs(bundle)
    extra = {LABEL_BUNDLE_HASH: bundle.bundle_hash, LABEL_BASE_IMAGE: base_id}
    labels = labels_for("build", task=bundle.id, run=provider.run_id, owner=provider.owner, extra=extra)
    # A kept container scores a reward later, so it gets what a fork's rewards get (the judge relay).
    box = provider.start(base_id, labels, network=needs.network, desktop=needs.desktop, judge=keep)
    handed_over = False
    try:
        uid, gid, hostname, rec = set_up(box, bundle, deadline=t0 + setup_timeout, record_timeout=record_timeout)
        if not rec.settled:
            # Its start state is not known: never committed (a fork could match a transient
            # desktop). The build container goes too; the caller may build once more.
            raise UnsettledDesktop(bundle.id, [rec], (record_timeout,))
        touched = setup_files(provider.api, box.id)
        web_state = provider.web.record(box, bundle) if provider.web is not None and needs.network else None
        # Drop (or, when kept, move aside) the build container's X lock/socket and session files.
        # Without a desktop nothing of them is needed after the commit.
        hide = keep and needs.desktop
        snap = box.snapshot(clean="hide" if hide else "delete")
        build_seconds = time.monotonic() - t0
        meta = {"uid": uid, "gid": gid, "hostname": hostname, "lost_processes": rec.lost, "build_seconds": round(build_seconds, 3),
                "needs_desktop": needs.desktop, "network": needs.network, "web": web_state,
                "replay": [s.to_json() for s in split_setup(bundle.setup)[1] + bundle.post_fork],
                "desktop": rec.to_json(), "touched": touched}
        glabels = labels_for("golden", task=bundle.id, run=provider.run_id, owner=provider.owner,
                             extra={**extra, LABEL_GOLDEN_FORMAT: GOLDEN_FORMAT,
                                    LABEL_GOLDEN_META: json.dumps(meta, separators=(",", ":"))})
        golden = golden_from(bundle, "", base_id, meta)
        repo, tag = golden.tag.split(":")
        try:
            res = provider.api.commit(box.id, repository=repo, tag=tag, conf={"Labels": glabels})
        except docker.errors.APIError as exc:
            raise infra(f"committing the golden of {bundle.id}", exc) from None
        golden.image_id = res["Id"]
        golden.build_seconds = time.monotonic() - t0
        if not keep:
            return golden, None
        if hide and snap.get("moved"):
            box.unhide(snap["moved"])
        handed_over = True
        return golden, box
    finally:
        if not handed_over:
            remove_container(provider.api, box.id)


# ---------------------------------------------------------------- the shared cache
#
# A golden is a cache every shinken process on the engine shares (found by its labels). A process
# serving from one holds a lease: a container created from the golden image and never started,
# labelled with its owner (kind "lease"). Docker itself then refuses to delete the image without
# force, so a process done with a golden deletes it only when no container of anyone holds it, and
# without force: a lease taken meanwhile wins the race. `shinken gc` reclaims the leases of dead
# owners like their forks, and then (--include-goldens) the goldens nobody holds.


def hold(api: Any, golden: Golden, labels: dict[str, str]) -> str:
    """A lease on `golden` (its container id); ImageMissing when the golden is gone already.
    `labels`: the lease's (labels_for("lease", ...) with its owner)."""
    from shinken.sandbox.api import ImageMissing
    from shinken.sandbox.docker_client import create_container

    try:
        return create_container(api, golden.image_id, labels={**labels, LABEL_GOLDEN: golden.image_id},
                                command=["true"], network_disabled=True,
                                host_config=api.create_host_config(network_mode="none"))
    except docker.errors.ImageNotFound:
        raise ImageMissing(f"golden {golden.tag} ({golden.image_id[:19]}) is gone") from None
    except docker.errors.APIError as exc:
        raise infra(f"taking a lease on golden {golden.tag}", exc) from None


def holders(api: Any, image_id: str) -> list[str]:
    """Ids of every container made from the image (forks, pools, leases; any owner, any state)."""
    try:
        return [c["Id"] for c in api.containers(all=True, filters={"ancestor": image_id})]
    except docker.errors.APIError as exc:
        raise infra(f"listing the holders of golden {image_id[:19]}", exc) from None


def exists(api: Any, image_id: str) -> bool:
    try:
        api.inspect_image(image_id)
        return True
    except docker.errors.ImageNotFound:
        return False
    except docker.errors.APIError as exc:
        raise infra(f"inspecting golden {image_id[:19]}", exc) from None


def remove_golden_image(api: Any, image_id: str) -> bool:
    """Remove a golden image nobody holds (explicit; goldens are never removed implicitly); refuse
    an image that is not a shinken golden. True when it is gone; False when a container (a fork or
    another process's lease) holds it, and so it stays. Never forced: Docker refuses an image a
    container still uses, which settles a race with a lease taken meanwhile."""
    try:
        info = api.inspect_image(image_id)
    except docker.errors.ImageNotFound:
        return True
    except docker.errors.APIError as exc:
        raise infra(f"inspecting golden {image_id}", exc) from None
    if (info.get("Config") or {}).get("Labels", {}).get(LABEL_KIND) != "golden":
        raise SessionError(f"{image_id} is not a shinken golden image; refusing to delete it")
    if holders(api, image_id):
        return False
    # By each tag (an image with several is refused by id without force), the last one deletes it.
    for ref in [t for t in info.get("RepoTags") or [] if t != "<none>:<none>"] or [image_id]:
        try:
            api.remove_image(ref, force=False, noprune=False)
            continue
        except docker.errors.ImageNotFound:
            continue
        except docker.errors.APIError as exc:
            if getattr(exc, "status_code", None) == 409:  # a container holds it now (a lease won the race)
                return False
        last = remove_with_retries(lambda: api.remove_image(ref, force=False, noprune=False), backoff_s=0.25)
        if last is None:
            continue
        if getattr(last, "status_code", None) == 409:
            return False
        raise InfraError(f"could not delete golden {image_id} after {DELETE_RETRIES} attempts: {last}; it keeps "
                         "its labels, so `shinken gc --include-goldens` finds it later")
    return True
