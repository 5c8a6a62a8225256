"""What `shinken publish` reads: the probe receipt, the triage report, the profile and the
task root, checked against their schemas and against each other before anything is written."""

from __future__ import annotations

from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import orjson

from shinken.bundles.loader import load_root
from shinken.bundles.model import Bundle
from shinken.download.source import SourceInfo, read_source
from shinken.errors import ShinkenError
from shinken.schemas import validation_error


@dataclass
class Receipt:
    path: Path
    doc: dict[str, Any]
    lines: dict[str, dict[str, Any]]  # task id -> its receipt line

    @property
    def kept(self) -> list[str]:
        return list(self.doc["kept"])

    @property
    def dropped(self) -> list[dict[str, Any]]:
        return list(self.doc["dropped"])

    @property
    def image(self) -> dict[str, str]:
        return dict(self.doc["image"])

    @property
    def summary(self) -> dict[str, Any]:
        return dict(self.doc["summary"])


@dataclass
class Triage:
    path: Path
    doc: dict[str, Any]
    tasks: dict[str, dict[str, Any]]  # task id -> its triage entry


@dataclass
class Inputs:
    receipt: Receipt
    triage: Triage | None
    task_root: Path
    bundles: dict[str, Bundle]  # every bundle of the task root, by id
    source: SourceInfo | None
    profile: Any = None  # filled by the profile reader when --profile is given
    notes: list[str] = field(default_factory=list)

    def kept_bundles(self) -> list[Bundle]:
        return [self.bundles[i] for i in self.receipt.kept]


def _load_json(path: Path, what: str, hint: str) -> Any:
    try:
        data = path.read_bytes()
    except OSError as exc:
        raise ShinkenError(f"{path}: cannot read the {what} ({exc.strerror}); {hint}") from None
    try:
        return orjson.loads(data)
    except orjson.JSONDecodeError as exc:
        raise ShinkenError(f"{path}: the {what} is not valid JSON ({exc}); {hint}") from None


def _read_doc(path: Path, what: str, schema_id: str, schema: str, hint: str) -> dict[str, Any]:
    """A shinken report: JSON, the right `schema` id, valid against its schema file."""
    doc = _load_json(path, what, hint)
    if not isinstance(doc, dict) or doc.get("schema") != schema_id:
        raise ShinkenError(f"{path}: not a {what} (no schema {schema_id}); {hint}")
    err = validation_error(schema, doc)
    if err:
        raise ShinkenError(f"{path}: the {what} does not match schemas/{schema}.schema.json ({err})")
    return doc


def read_receipt(path: Path) -> Receipt:
    doc = _read_doc(path, "probe receipt", "shinken.probe/1", "probe_receipt",
                    "pass the file `shinken probe --receipt` wrote")
    lines: dict[str, dict[str, Any]] = {}
    for line in doc["tasks"]:
        err = validation_error("receipt_line", line)
        if err:
            raise ShinkenError(f"{path}: receipt line of {line.get('task_id')!r} does not match "
                               f"schemas/receipt_line.schema.json ({err})")
        lines[line["task_id"]] = line
    decided = set(doc["kept"]) | {d["id"] for d in doc["dropped"]}
    missing = sorted(decided - set(lines))
    if missing:
        raise ShinkenError(f"{path}: {len(missing)} task(s) are kept or dropped without a receipt line "
                           f"(e.g. {missing[0]}); the receipt is incomplete, run `shinken probe` again")
    if not doc["kept"]:
        raise ShinkenError(f"{path}: the receipt keeps no task; there is nothing to publish")
    return Receipt(path, doc, lines)


def read_triage(path: Path) -> Triage:
    doc = _read_doc(path, "triage report", "shinken.triage/1", "triage",
                    "pass the file `shinken triage --report` wrote")
    return Triage(path, doc, {t["id"]: t for t in doc["tasks"]})


def _task_root(receipt: Receipt, task_root: Path | None) -> Path:
    if task_root is None:
        recorded = receipt.doc.get("task_root")
        if not recorded or not Path(recorded).is_dir():
            raise ShinkenError(f"{receipt.path}: the task root the probe ran on ({recorded or 'not recorded'}) "
                               "is not a folder here; pass --task-root")
        task_root = Path(recorded)
    if not task_root.is_dir():
        raise ShinkenError(f"{task_root}: the task root is not a folder; pass --task-root (the folder probe ran on)")
    return task_root.resolve()


def read_inputs(receipt_path: Path, *, triage_path: Path | None, task_root: Path | None) -> Inputs:
    """Read and cross-check the inputs. Strict where a claim depends on it: every kept task
    must be in the task root with exactly the content that was probed."""
    receipt = read_receipt(receipt_path)
    triage = read_triage(triage_path) if triage_path is not None else None
    root = _task_root(receipt, task_root)
    bundles: dict[str, Bundle] = {}
    for b in load_root(root):
        bundles.setdefault(b.id, b)
    absent = [i for i in receipt.kept if i not in bundles]
    if absent:
        raise ShinkenError(f"{root}: {len(absent)} kept task(s) are not in the task root (e.g. {absent[0]}); "
                           "pass the --task-root the probe ran on")
    for tid in receipt.kept:
        probed = receipt.lines[tid]["bundle_hash"]
        if bundles[tid].bundle_hash != probed:
            raise ShinkenError(f"{bundles[tid].path}: the bundle changed since it was probed (hash "
                               f"{bundles[tid].bundle_hash[:12]}, probed {probed[:12]}); probe it again before publishing")
        if not bundles[tid].ok:
            raise ShinkenError(f"{bundles[tid].path}: kept by the probe but defective now; run triage and probe again")
    if triage is not None:
        for tid in receipt.kept:
            entry = triage.tasks.get(tid)
            if entry is not None and entry.get("bundle_hash") not in (None, bundles[tid].bundle_hash):
                raise ShinkenError(f"{triage.path}: triaged a different version of {tid} than the one probed; "
                                   "run triage again on this task root")
    return Inputs(receipt=receipt, triage=triage, task_root=root, bundles=bundles, source=read_source(root))
