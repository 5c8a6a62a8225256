"""`shinken publish` end to end: read and cross-check the inputs, write the dataset's files
into one folder, then either leave them there (`--local-dir`) or put them on the hub in one
commit."""

from __future__ import annotations

import re
import shutil
from dataclasses import asdict, dataclass, field
from pathlib import Path
from typing import Any, Callable

from shinken.errors import ShinkenError
from shinken.publish.contents import SplitOptions, build_contents
from shinken.publish.files import LocalFile, write_files, write_local_dir
from shinken.publish.inputs import read_inputs
from shinken.schemas import check_own
from shinken.workspace.rows import SERVER_NAME

REPO_ID = re.compile(r"^[A-Za-z0-9][\w.-]{0,95}/[A-Za-z0-9][\w.-]{0,95}$")


@dataclass
class PublishOptions:
    repo_id: str
    receipt: Path
    triage: Path | None = None
    profile: Path | None = None
    task_root: Path | None = None
    revision: str = "main"
    private: bool | None = None  # None: private when publish creates the repo
    create_pr: bool = False
    local_dir: Path | None = None
    message: str | None = None
    license: str | None = None
    overwrite_foreign: bool = False  # publish over a repo that is not a shinken dataset (deletes its data)
    name: str = SERVER_NAME  # make-workspace's --name
    split: SplitOptions = field(default_factory=SplitOptions)


@dataclass
class PublishResult:
    repo_id: str
    revision: str
    status: str  # committed | pull_request | unchanged | written
    commit: str | None
    parent: str | None
    url: str | None
    pr_url: str | None
    private: bool | None
    created: bool
    local_dir: str | None
    splits: dict[str, int]
    files: list[dict[str, Any]]
    notes: list[str]

    def to_json(self) -> dict[str, Any]:
        doc = asdict(self)
        check_own("publish_result", doc, "the publish result")
        return doc


def _check_options(opts: PublishOptions) -> None:
    if not REPO_ID.match(opts.repo_id) or ".." in opts.repo_id or opts.repo_id.endswith((".git", ".")):
        raise ShinkenError(f"--repo-id {opts.repo_id!r}: expected ORG/NAME (letters, digits, - _ .)")
    if not 0.0 <= opts.split.val_fraction < 1.0:
        raise ShinkenError(f"--val-fraction {opts.split.val_fraction}: must be at least 0 and below 1")
    if opts.create_pr and opts.local_dir is not None:
        raise ShinkenError("--create-pr and --local-dir exclude each other: --local-dir never talks to the hub")


def _message(opts: PublishOptions, splits: dict[str, int], source: dict[str, Any] | None) -> str:
    if opts.message:
        return opts.message
    counts = ", ".join(f"{n} {s}" for s, n in splits.items())
    origin = f" from {source['repo_id']}@{source['revision'][:12]}" if source else ""
    return f"shinken publish: {counts}{origin}"


def publish(opts: PublishOptions, say: Callable[[str], None] = lambda _: None) -> PublishResult:
    """`say` gets one line per stage (progress, for stderr); bad input fails before the first."""
    _check_options(opts)
    inputs = read_inputs(opts.receipt, triage_path=opts.triage, task_root=opts.task_root, profile_path=opts.profile)
    contents = build_contents(inputs, repo_id=opts.repo_id, split=opts.split, license=opts.license, name=opts.name)
    splits = dict(contents.provenance["counts"]["splits"])
    say(f"{len(contents.kept)} kept and {len(contents.dropped)} dropped task(s) from {opts.receipt}; "
        f"packing the kept bundles")

    def listing(files: list[LocalFile], changes: dict[str, str] | None = None) -> list[dict[str, Any]]:
        return [{"path": f.path, "size": f.size, "sha256": f.sha256,
                 "change": (changes or {}).get(f.path, "written")} for f in files]

    if opts.local_dir is not None:
        files = write_local_dir(contents, opts.local_dir)
        return PublishResult(opts.repo_id, opts.revision, "written", None, None, None, None, opts.private, False,
                             str(opts.local_dir.expanduser().absolute()), splits, listing(files), [])

    from shinken.publish.hub import push
    from shinken.runtime import make_temp_dir, unregister_temp_dir

    stage = make_temp_dir("publish-")  # registered: a killed publish leaves it to `shinken gc`
    try:
        folder = stage / "files"  # the registry's owner marker stays outside what is uploaded
        folder.mkdir()
        files = write_files(contents, folder)
        say(f"comparing with {opts.repo_id}@{opts.revision} on the hub")
        res = push(files, repo_id=opts.repo_id, revision=opts.revision, private=opts.private,
                   create_pr=opts.create_pr, message=_message(opts, splits, contents.provenance["source"]),
                   description="Published by `shinken publish`; provenance.json and the card's tables say "
                               "what is in it and why.", overwrite_foreign=opts.overwrite_foreign)
    finally:
        shutil.rmtree(stage, ignore_errors=True)
        unregister_temp_dir(stage)
    changes = {c.path: c.change for c in res.changes}
    listed = listing(files, changes)
    listed += [{"path": c.path, "size": c.size, "sha256": c.sha256, "change": "deleted"}
               for c in res.changes if c.change == "deleted"]
    return PublishResult(opts.repo_id, opts.revision, res.status, res.commit, res.parent, res.url, res.pr_url,
                         res.private, res.created, None, splits, listed, res.notes)
