"""What `shinken publish` reads: the probe receipt, the triage report, the profile and the
task root, checked against their schemas and against each other before anything is written."""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path
from typing import Any


from shinken.bundles.loader import load_root
from shinken.bundles.model import Bundle
from shinken.download.source import SourceInfo, read_source
from shinken.errors import ShinkenError
from shinken.profiles.documents import read_document
from shinken.schemas import read_json, validation_error


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
class Profile:
    path: Path
    doc: dict[str, Any]
    band: list[str]
    control: list[str] | None

    def edges(self) -> dict[str, Any]:
        """The band edges and counts, for the card and provenance.json."""
        s = self.doc["settings"]
        return {"min_pass": s["min_pass"], "max_pass": s["max_pass"], "pass_threshold": s["pass_threshold"],
                "min_rollouts": s["min_rollouts"], "seed": s["seed"], "counts": dict(self.doc["counts"]),
                "control_size": self.doc["control_size"], "rollouts": self.doc["totals"]["rollouts"]}


@dataclass
class Inputs:
    receipt: Receipt
    triage: Triage | None
    task_root: Path
    bundles: dict[str, Bundle]  # every bundle of the task root, by id
    source: SourceInfo | None
    profile: Profile | None = None

    def kept_bundles(self) -> list[Bundle]:
        return [self.bundles[i] for i in self.receipt.kept]


def read_receipt(path: Path) -> Receipt:
    doc = read_document(path, "probe_receipt")
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
    doc = read_document(path, "triage")
    return Triage(path, doc, {t["id"]: t for t in doc["tasks"]})


def _id_list(path: Path, what: str) -> list[str]:
    return list(read_json(path, f"profile's {what}", "run `shinken profile` again", "task_ids"))


def read_profile(path: Path) -> Profile:
    """A profile (`shinken profile --out DIR`): DIR or its profile.json, with the band and
    control id files beside it."""
    from shinken.profiles.run import PROFILE_FILE

    if path.is_dir():
        path = path / PROFILE_FILE
    doc = read_document(path, "profile")
    band = _id_list(path.parent / doc["band_file"], "band")
    control = _id_list(path.parent / doc["control_file"], "control sample") if doc["control_file"] else None
    return Profile(path, doc, band, control)


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


def read_inputs(receipt_path: Path, *, triage_path: Path | None, task_root: Path | None,
                profile_path: Path | None = None) -> Inputs:
    """Read and cross-check the inputs. Strict where a claim depends on it: every kept task
    must be in the task root with exactly the content that was probed."""
    receipt = read_receipt(receipt_path)
    triage = read_triage(triage_path) if triage_path is not None else None
    profile = read_profile(profile_path) if profile_path is not None else None
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
    return Inputs(receipt=receipt, triage=triage, task_root=root, bundles=bundles, source=read_source(root),
                  profile=profile)
