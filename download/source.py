"""The source record of a task root: `.shinken-source.json`, written by `shinken download`.

It keeps what the hub itself answered when the task root was made (repo, the commit sha the
download was pinned to, each archive's sha256 and size, the dataset card's YAML metadata and
its license), so later steps (the workspace config, `shinken publish`) can say exactly which
release their data came from without asking the hub again. Hidden (leading dot), so bundle
discovery skips it. A task root without one (a hand-made folder, `--archive`) has no known
source: `read_source` returns None.
"""

from __future__ import annotations

import os
from dataclasses import asdict, dataclass, field
from pathlib import Path
from typing import Any

import orjson

from shinken.errors import ShinkenError
from shinken.schemas import validation_error, write_json

SOURCE_FILE = ".shinken-source.json"
SCHEMA_ID = "shinken.source/1"


@dataclass(frozen=True, slots=True)
class ArchiveRecord:
    path: str  # path in the repo, e.g. artifacts/cua_gym_tasks_v1.tar.zst
    sha256: str
    size: int


@dataclass(frozen=True, slots=True)
class SourceInfo:
    repo_id: str
    repo_type: str
    revision: str  # commit sha
    archives: tuple[ArchiveRecord, ...]
    license: str | None
    card: dict[str, Any] = field(default_factory=dict)
    downloaded_at: str = ""
    endpoint: str | None = None
    card_problem: str | None = None

    def to_json(self) -> dict[str, Any]:
        doc: dict[str, Any] = {"schema": SCHEMA_ID, **asdict(self)}
        doc["archives"] = [asdict(a) for a in self.archives]
        if doc["endpoint"] is None:
            del doc["endpoint"]
        return doc

    def same_source(self, other: "SourceInfo | None") -> bool:
        """Equal in everything but the time of the download."""
        return other is not None and self.to_json() | {"downloaded_at": ""} == other.to_json() | {"downloaded_at": ""}

    @classmethod
    def from_json(cls, doc: dict[str, Any]) -> "SourceInfo":
        return cls(
            repo_id=doc["repo_id"], repo_type=doc["repo_type"], revision=doc["revision"],
            archives=tuple(ArchiveRecord(a["path"], a["sha256"], int(a["size"])) for a in doc["archives"]),
            license=doc["license"], card=dict(doc["card"]), downloaded_at=doc["downloaded_at"],
            endpoint=doc.get("endpoint"), card_problem=doc.get("card_problem"),
        )


def _jsonable(value: Any) -> Any:
    # YAML can hold dates and other non-JSON scalars; keep them as text rather than fail.
    return orjson.loads(orjson.dumps(value, default=str, option=orjson.OPT_NON_STR_KEYS))


def card_metadata(readme: Path | None) -> tuple[dict[str, Any], str | None, str | None]:
    """(YAML metadata, license, problem) of a dataset card file. Liberal: a card without a
    YAML block is {} with no problem; unreadable YAML is {} with the problem named."""
    if readme is None or not readme.is_file():
        return {}, None, None
    import yaml  # PyYAML: a dependency of huggingface_hub, whose card reader uses it
    from huggingface_hub.repocard import metadata_load

    try:
        meta = metadata_load(readme) or {}
    except yaml.YAMLError as exc:
        return {}, None, f"README.md metadata is not valid YAML ({str(exc).splitlines()[0]})"
    except (ValueError, UnicodeDecodeError) as exc:
        return {}, None, f"README.md metadata is not a YAML mapping ({exc})"
    meta = _jsonable(meta)
    lic = meta.get("license")
    if isinstance(lic, list):
        lic = ", ".join(str(x) for x in lic) or None
    elif lic is not None:
        lic = str(lic)
    return meta, lic, None


def write_source(task_root: Path, info: SourceInfo) -> Path:
    """Write the record atomically; an unchanged source (other than its time) keeps the old file."""
    if info.same_source(read_source(task_root, strict=False)):
        return task_root / SOURCE_FILE
    path = task_root / SOURCE_FILE
    write_json(path, info.to_json(), "source")
    return path


def read_source(task_root: str | os.PathLike[str], *, strict: bool = True) -> SourceInfo | None:
    """The source record of `task_root`, or None when it has none. A damaged record is a
    ShinkenError naming the file (strict) or None (strict=False)."""
    path = Path(task_root) / SOURCE_FILE
    try:
        data = path.read_bytes()
    except FileNotFoundError:
        return None
    except OSError as exc:
        if not strict:
            return None
        raise ShinkenError(f"{path}: cannot read the source record ({exc.strerror})") from None
    try:
        doc = orjson.loads(data)
    except orjson.JSONDecodeError as exc:
        if not strict:
            return None
        raise ShinkenError(f"{path}: the source record is not valid JSON ({exc}); "
                           "run `shinken download` again to rewrite it, or delete it") from None
    err = validation_error("source", doc)
    if err:
        if not strict:
            return None
        raise ShinkenError(f"{path}: the source record does not match schemas/source.schema.json ({err}); "
                           "run `shinken download` again to rewrite it, or delete it")
    return SourceInfo.from_json(doc)
