"""Find and remove what dead shinken processes left behind in the sandbox's own rooms:
containers (forks, pools, build and server containers), golden images and registered
temporary folders, one kind of resource at a time.

The whole pass (these plus the mock web's run networks and hub sids) is shinken.reclaim,
above this module and shinken.mockweb: `shinken gc` and any long-lived process (sandbox
server, engine) that cleans up after its dead sessions call its `find_reclaimable` then
`reclaim`.

Safety rules, in order of importance:
- only resources carrying shinken labels (`shinken.managed=1` plus a known `shinken.kind`)
  are ever considered; labels a container merely inherited from its image do not count;
- a resource whose owner is alive (same host, same pid AND same start time; or a valid
  lease for owners on other hosts) is left alone, unless the caller asked for `all_` or
  for resources older than `older_than`;
- golden images are considered only with `include_goldens`, and never while a live owner
  or a container that is not being reclaimed in the same pass holds them (unless `all_`);
  images are removed without force, so Docker itself refuses an image still in use.
"""

from __future__ import annotations

import os
import re
import shutil
from dataclasses import asdict, dataclass, field
from pathlib import Path
from typing import Any, Mapping

import docker.errors

from shinken.runtime import (
    Liveness,
    owner_liveness,
    read_owner_marker,
    temp_dir_entries,
)
from shinken.sandbox.ownership import (
    CONTAINER_KINDS,
    IMAGE_KINDS,
    LABEL_CREATED,
    LABEL_CREATOR,
    LABEL_EXPIRES,
    LABEL_KIND,
    LABEL_MANAGED,
    LABEL_OWNER,
    LABEL_TASK,
)

TEMP_KIND = "tempdir"
_LABEL_PREFIX = "shinken."


# ---------------------------------------------------------------- data


@dataclass
class Reclaimable:
    resource: str  # "container" | "image" | "tempdir" | "network" | "sid"
    kind: str  # shinken.kind label (fork, pool, golden, ...) or "tempdir"
    id: str  # full container/image id, or the folder path
    task: str | None
    owner: str | None  # owner label "<host>/<pid>/<start>"
    reason: str  # why it may be reclaimed, in words
    bytes: int | None  # what reclaiming frees (writable layer, unique image layers, folder size)
    name: str | None = None  # container name, image tag, registry entry path
    # tempdir only: the registry entry to drop; entry_only means the folder is not ours any more
    entry: str | None = field(default=None, repr=False)
    entry_only: bool = field(default=False, repr=False)

    def to_json(self) -> dict[str, Any]:
        doc = asdict(self)
        doc.pop("entry")
        doc.pop("entry_only")
        return doc


@dataclass
class Failure:
    id: str
    error: str
    kind: str | None = None
    resource: str | None = None

    def to_json(self) -> dict[str, Any]:
        return asdict(self)


# ---------------------------------------------------------------- owner liveness


def labelled_owner_liveness(labels: Mapping[str, str]) -> Liveness:
    """Whether the process named by a resource's owner label is still alive."""
    return owner_liveness(labels.get(LABEL_OWNER))


# ---------------------------------------------------------------- durations


_DURATION_UNITS = {"": 1, "s": 1, "m": 60, "h": 3600, "d": 86400, "w": 604800}
_DURATION_PART = re.compile(r"(\d+(?:\.\d+)?)([smhdw]?)")


def parse_duration(text: str) -> float:
    """'90', '90s', '30m', '2h', '1d', '1h30m' -> seconds. ValueError on anything else."""
    s = text.strip().lower()
    pos, total = 0, 0.0
    for m in _DURATION_PART.finditer(s):
        if m.start() != pos:
            break
        total += float(m.group(1)) * _DURATION_UNITS[m.group(2)]
        pos = m.end()
    if not s or pos != len(s):
        raise ValueError(f"not a duration: {text!r} (examples: 90s, 30m, 2h, 1d, 1h30m)")
    return total


def format_duration(seconds: float) -> str:
    seconds = max(0, int(seconds))
    for unit, size in (("d", 86400), ("h", 3600), ("m", 60)):
        if seconds >= size:
            return f"{seconds // size}{unit}{_rest(seconds % size, unit)}"
    return f"{seconds}s"


def _rest(rem: int, unit: str) -> str:
    smaller = {"d": ("h", 3600), "h": ("m", 60), "m": ("s", 1)}[unit]
    n = rem // smaller[1]
    return f"{n}{smaller[0]}" if n else ""


# ---------------------------------------------------------------- decisions


def _created(labels: Mapping[str, str], fallback: float | None) -> float | None:
    try:
        return float(labels[LABEL_CREATED])
    except (KeyError, ValueError):
        return fallback


def _expires(labels: Mapping[str, str]) -> float | None:
    try:
        return float(labels[LABEL_EXPIRES])
    except (KeyError, ValueError):
        return None


def decide(liveness: Liveness, created: float | None, *, older_than: float | None, all_: bool,
           now: float, expires: float | None = None) -> str | None:
    """The reason a resource may be reclaimed, or None when it must be kept. `expires`: the
    resource's own deadline (a NeMo Gym sandbox's ttl_s), past which it goes whoever owns it."""
    if all_:
        return f"--all (liveness ignored; {liveness.why})"
    if liveness.state == "dead":
        return liveness.why
    if expires is not None and now > expires:
        return f"past its ttl_s (expired {format_duration(now - expires)} ago; {liveness.why})"
    if older_than is not None and created is not None and now - created > older_than:
        return f"older than {format_duration(older_than)} (created {format_duration(now - created)} ago; {liveness.why})"
    return None


def _shinken_labels(labels: Mapping[str, str] | None) -> dict[str, str]:
    return {k: v for k, v in (labels or {}).items() if k.startswith(_LABEL_PREFIX)}


def _matches(labels: Mapping[str, str], label_filter: Mapping[str, str] | None) -> bool:
    return all(labels.get(k) == v for k, v in (label_filter or {}).items())


def _docker_filters(label_filter: Mapping[str, str] | None) -> dict[str, list[str]]:
    return {"label": [f"{LABEL_MANAGED}=1", *(f"{k}={v}" for k, v in (label_filter or {}).items())]}


# ---------------------------------------------------------------- discovery


def find_containers(client: Any, *, older_than: float | None, all_: bool,
                    label_filter: Mapping[str, str] | None, now: float) -> list[Reclaimable]:
    api = client.api
    image_labels: dict[str, dict[str, str]] = {}
    found: list[Reclaimable] = []
    for c in api.containers(all=True, size=True, filters=_docker_filters(label_filter)):
        labels = c.get("Labels") or {}
        if labels.get(LABEL_KIND) not in CONTAINER_KINDS or not _matches(labels, label_filter):
            continue
        # A container started from a labelled image carries the image's labels; if it added
        # no shinken labels of its own, shinken did not create it (e.g. `docker run <golden>`).
        image_id = c.get("ImageID") or ""
        if image_id not in image_labels:
            image_labels[image_id] = _image_labels(api, image_id)
        if _shinken_labels(labels) == image_labels[image_id]:
            continue
        # A live owner's lease on a golden is kept whatever its age, as a live holder keeps the golden.
        older = None if labels.get(LABEL_KIND) == "lease" else older_than
        reason = decide(_liveness(labels, c.get("State")), _created(labels, c.get("Created")),
                        older_than=older, all_=all_, now=now, expires=_expires(labels))
        if reason is None:
            continue
        names = c.get("Names") or []
        found.append(Reclaimable(
            resource="container", kind=labels[LABEL_KIND], id=c["Id"], task=labels.get(LABEL_TASK),
            owner=labels.get(LABEL_OWNER), reason=reason,
            bytes=c.get("SizeRw", 0),  # size=True was asked: Docker omits a zero SizeRw
            name=names[0].lstrip("/") if names else None,
        ))
    return found


def _liveness(labels: Mapping[str, str], state: str | None) -> Liveness:
    """The owner's liveness; for a container meant to outlive its maker (a detached hub: no owner)
    that never started, its creator's: a kill or a failed start between create and start left it."""
    if LABEL_OWNER not in labels and labels.get(LABEL_CREATOR) and state == "created":
        found = owner_liveness(labels[LABEL_CREATOR])
        return Liveness(found.state, f"never started; its creator: {found.why}")
    return labelled_owner_liveness(labels)


def _image_labels(api: Any, image_id: str) -> dict[str, str]:
    if not image_id:
        return {}
    try:
        return _shinken_labels((api.inspect_image(image_id).get("Config") or {}).get("Labels"))
    except Exception:  # image gone meanwhile: nothing was inherited that we can see
        return {}


def find_goldens(client: Any, reclaimed_containers: set[str], *, older_than: float | None, all_: bool,
                 label_filter: Mapping[str, str] | None, now: float) -> list[Reclaimable]:
    api = client.api
    images = [i for i in api.images(filters=_docker_filters(label_filter))
              if (i.get("Labels") or {}).get(LABEL_KIND) in IMAGE_KINDS and _matches(i.get("Labels") or {}, label_filter)]
    if not images:
        return []
    unique = _unique_image_bytes(api)
    found: list[Reclaimable] = []
    for img in images:
        labels = img.get("Labels") or {}
        # An image built FROM a golden inherits its labels; only the golden itself is ours.
        parent = img.get("ParentId") or ""
        if parent and _image_labels(api, parent) == _shinken_labels(labels):
            continue
        liveness = labelled_owner_liveness(labels)
        if not all_:
            if liveness.state == "alive":
                continue  # a live owner holds it, whatever its age
            holders = [h["Id"] for h in api.containers(all=True, filters={"ancestor": img["Id"]})
                       if h["Id"] not in reclaimed_containers]
            if holders:
                continue  # a container we are not removing still uses it
        reason = decide(liveness, _created(labels, img.get("Created")), older_than=older_than, all_=all_, now=now)
        if reason is None:
            continue
        tags = [t for t in (img.get("RepoTags") or []) if t != "<none>:<none>"]
        found.append(Reclaimable(
            resource="image", kind=labels[LABEL_KIND], id=img["Id"], task=labels.get(LABEL_TASK),
            owner=labels.get(LABEL_OWNER), reason=reason, bytes=unique.get(img["Id"], img.get("Size")),
            name=tags[0] if tags else None,
        ))
    return found


def _unique_image_bytes(api: Any) -> dict[str, int]:
    """Bytes only this image holds (its size minus layers shared with other images)."""
    try:
        df = api.df()
    except Exception:
        return {}
    out: dict[str, int] = {}
    for i in df.get("Images") or []:
        shared = i.get("SharedSize", -1)
        out[i["Id"]] = i["Size"] - shared if shared is not None and shared >= 0 else i["Size"]
    return out


# ---------------------------------------------------------------- removal


def explain(exc: Exception) -> str:
    explanation = getattr(exc, "explanation", None)  # docker.errors.APIError carries the daemon's words
    text = str(explanation or exc).strip() or type(exc).__name__
    return text if isinstance(explanation, str) else f"{type(exc).__name__}: {text}"


def require_client(client: Any) -> Any:
    if client is None:
        raise RuntimeError("no Docker client")
    return client


def remove_container(client: Any, item: Reclaimable) -> bool:
    """Whether it was already gone."""
    api = require_client(client).api
    try:
        # force: the container of a dead owner may still be running `sleep infinity`
        api.remove_container(item.id, force=True, v=True)
    except docker.errors.NotFound:
        return True
    except docker.errors.APIError as exc:
        if "already in progress" not in str(exc):  # someone else is removing it right now
            raise
        return True
    return False


def remove_image(client: Any, item: Reclaimable) -> bool:
    """Whether it was already gone."""
    api = require_client(client).api
    try:
        info = api.inspect_image(item.id)
    except docker.errors.ImageNotFound:
        return True
    users = [c["Id"][:12] for c in api.containers(all=True, filters={"ancestor": item.id})]
    if users:
        raise RuntimeError(f"image is in use by container(s) {', '.join(users)}, which gc may not remove")
    tags = [t for t in (info.get("RepoTags") or []) if t != "<none>:<none>"]
    # Never force: Docker must refuse an image a container or a child image still needs.
    # Several tags: removing by id would need force, so untag one by one (the last one deletes).
    for tag in tags or [item.id]:
        try:
            api.remove_image(tag, force=False, noprune=False)
        except docker.errors.ImageNotFound:
            pass  # untagged or removed meanwhile: the check below tells
    try:
        api.inspect_image(item.id)
    except Exception:
        return False
    raise RuntimeError("image still present after removing its tags (a child image may depend on it)")


# ---------------------------------------------------------------- temporary folders


def _folder_bytes(folder: Path) -> int:
    total = 0
    for dirpath, dirnames, filenames in os.walk(folder):
        for name in filenames + dirnames:
            try:
                total += os.lstat(os.path.join(dirpath, name)).st_size
            except OSError:
                pass
    return total


def find_temp_dirs(root: Path, *, older_than: float | None, all_: bool,
                   label_filter: Mapping[str, str] | None, now: float) -> list[Reclaimable]:
    found: list[Reclaimable] = []
    for e in temp_dir_entries(root):
        if not _matches(e.labels, label_filter):
            continue
        reason = decide(owner_liveness(e.owner), e.created, older_than=older_than, all_=all_, now=now)
        if reason is None:
            continue
        # The folder is removed only if it still carries this owner's marker: a path that
        # was deleted and re-created by someone else is not ours.
        ours = e.folder.is_dir() and not e.folder.is_symlink() and read_owner_marker(e.folder) == e.owner
        if not ours:
            reason = "folder gone or re-created by someone else; only the registry entry is dropped"
        found.append(Reclaimable(
            resource="tempdir", kind=TEMP_KIND, id=str(e.folder), task=e.labels.get(LABEL_TASK),
            owner=e.owner, reason=reason, bytes=_folder_bytes(e.folder) if ours else 0,
            name=str(e.entry), entry=str(e.entry), entry_only=not ours,
        ))
    return found


def remove_temp_dir(item: Reclaimable) -> None:
    folder = Path(item.id)
    if not item.entry_only:
        if read_owner_marker(folder) != item.owner or folder.is_symlink():
            raise RuntimeError("owner marker changed since the scan; folder left alone")
        shutil.rmtree(folder)
    if item.entry:
        Path(item.entry).unlink(missing_ok=True)
