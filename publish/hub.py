"""Put a dataset's files on the hub in one commit, through the real huggingface_hub client.

The revision's head is read once at the start; the remote tree at that head is compared
with the local files by the hub's own hashes (LFS sha256, git blob sha1), and when nothing
differs no commit is made. Otherwise one `create_commit` carries every added, changed and
removed file with `parent_commit` set to the head read at the start, so a concurrent commit
makes the hub refuse ours (HTTP 412) instead of mixing two versions. Commits are atomic on
the hub: a refused commit leaves the repo exactly as the other writer left it.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from types import TracebackType
from typing import TYPE_CHECKING, Any, Literal

from shinken.download.hub import REPO_TYPE, HubErrors, hub_endpoint, hub_token
from shinken.errors import EnvironmentProblem, ShinkenError, WorkFailed
from shinken.publish.card import REQUIRED_TAGS
from shinken.publish.files import LocalFile, is_managed

if TYPE_CHECKING:
    from huggingface_hub import HfApi


@dataclass(slots=True)
class FileChange:
    path: str
    size: int
    sha256: str | None
    change: str  # added | updated | unchanged | deleted


@dataclass
class PushResult:
    status: str  # committed | pull_request | unchanged
    commit: str
    parent: str | None
    url: str | None
    pr_url: str | None
    private: bool | None
    created: bool
    changes: list[FileChange] = field(default_factory=list)
    notes: list[str] = field(default_factory=list)


class PublishErrors(HubErrors):
    """Download's error mapping plus what only writing can hit: a moved branch, a token
    without write access, a card the hub refuses, an upload that failed."""

    def __init__(self, api: HfApi, repo_id: str, revision: str, endpoint: str) -> None:
        super().__init__(repo_id, revision, endpoint)
        self.api = api
        self.parent: str | None = None

    def __exit__(self, typ: type[BaseException] | None, exc: BaseException | None,
                 tb: TracebackType | None) -> Literal[False]:
        if exc is None or isinstance(exc, ShinkenError):
            return False
        from huggingface_hub.errors import HfHubHTTPError, RepositoryNotFoundError

        where = f"{self.repo_id}@{self.revision} on {self.endpoint}"
        if isinstance(exc, HfHubHTTPError) and not isinstance(exc, RepositoryNotFoundError):
            status = exc.response.status_code if exc.response is not None else 0
            if status in (409, 412) and self.parent is not None:
                now = self._head()
                raise WorkFailed(
                    f"{where}: the branch moved while publishing (head was {self.parent[:12]} at the start, now "
                    f"{now}): someone else committed; nothing was committed; run `shinken publish` again to "
                    "publish against the new head") from None
            if status in (401, 403):
                raise ShinkenError(f"{where}: the hub refused the token (HTTP {status}); set HF_TOKEN to a token "
                                   "with write access to this repo (or its organisation)") from None
        if isinstance(exc, ValueError) and "README.md" in str(exc):
            raise ShinkenError(f"{where}: the hub refused the dataset card: {' '.join(str(exc).split())}") from None
        if isinstance(exc, ValueError) and "LFS batch API" in str(exc):
            raise EnvironmentProblem(f"{where}: the hub refused an upload ({' '.join(str(exc).split())}); "
                                     "nothing was committed; run `shinken publish` again") from None
        if isinstance(exc, RuntimeError) and "uploading" in str(exc):
            cause = exc.__cause__
            raise EnvironmentProblem(f"{where}: {exc} ({type(cause).__name__}: {cause}); nothing was committed; "
                                     "run `shinken publish` again") from None
        return super().__exit__(typ, exc, tb)

    def _head(self) -> str:
        try:
            return str(self.api.dataset_info(self.repo_id, revision=self.revision).sha)[:12]
        except Exception:
            return "unknown"


def _diff(files: list[LocalFile], remote: dict[str, Any]) -> list[FileChange]:
    changes: list[FileChange] = []
    for f in files:
        r = remote.get(f.path)
        if r is None:
            changes.append(FileChange(f.path, f.size, f.sha256, "added"))
            continue
        same = r.lfs.sha256 == f.sha256 if r.lfs is not None else r.blob_id == f.git_sha1
        changes.append(FileChange(f.path, f.size, f.sha256, "unchanged" if same else "updated"))
    local = {f.path for f in files}
    for path, r in sorted(remote.items()):
        if path not in local and is_managed(path):
            changes.append(FileChange(path, int(r.size), r.lfs.sha256 if r.lfs is not None else None, "deleted"))
    return changes


def is_shinken_card(card_data: Any) -> bool:
    """A card `shinken publish` wrote: its YAML carries every one of shinken's tags."""
    tags = card_data.get("tags") if card_data is not None else None
    return isinstance(tags, list) and all(t in tags for t in REQUIRED_TAGS)


def refuse_foreign(remote: dict[str, Any], card_data: Any, where: str) -> None:
    """A repo that holds files publish replaces or deletes (data/, artifacts/, the card,
    provenance.json) under a card that is not a shinken dataset's is someone else's dataset:
    publishing would delete its data. Refused unless the caller was told to overwrite it."""
    theirs = sorted(p for p in remote if is_managed(p))
    if theirs and not is_shinken_card(card_data):
        shown = ", ".join(theirs[:3]) + (f" and {len(theirs) - 3} more" if len(theirs) > 3 else "")
        raise ShinkenError(f"{where}: not a shinken dataset (its card lacks the tags {', '.join(REQUIRED_TAGS)}), and "
                           f"publishing would replace or delete its {shown}; nothing was changed; publish to "
                           "another --repo-id, or pass --overwrite-foreign-repo to replace them")


def push(files: list[LocalFile], *, repo_id: str, revision: str = "main", private: bool | None = None,
         create_pr: bool = False, message: str, description: str = "",
         overwrite_foreign: bool = False) -> PushResult:
    """Publish `files` to the dataset repo `repo_id` at branch `revision` (see the module doc);
    a repo that is not a shinken dataset is refused unless `overwrite_foreign`."""
    from huggingface_hub import CommitOperationAdd, CommitOperationDelete, HfApi
    from huggingface_hub.errors import RepositoryNotFoundError, RevisionNotFoundError
    from huggingface_hub.hf_api import RepoFile

    endpoint = hub_endpoint()
    token = hub_token()
    if not token:
        raise ShinkenError("publishing needs a Hugging Face token with write access: set HF_TOKEN (or run "
                           "`hf auth login`); --local-dir DIR writes the files for review without the hub")
    api = HfApi(endpoint=endpoint, token=token)
    notes: list[str] = []
    created = False
    guard = PublishErrors(api, repo_id, revision, endpoint)
    with guard:
        try:
            info = api.dataset_info(repo_id, revision=revision)
        except RepositoryNotFoundError:
            api.create_repo(repo_id, repo_type=REPO_TYPE, private=True if private is None else private, exist_ok=True)
            created = True
            notes.append(f"created the dataset repo ({'public' if private is False else 'private'})")
            info = None
        except RevisionNotFoundError:
            info = None
        if info is None:
            try:
                info = api.dataset_info(repo_id, revision=revision)
            except RepositoryNotFoundError:
                raise ShinkenError(f"{repo_id} on {endpoint}: the repo exists but this token cannot read it; "
                                   "use a token of the repo's owner") from None
            except RevisionNotFoundError:
                if create_pr:
                    raise ShinkenError(f"{repo_id}: branch {revision!r} does not exist; a pull request needs an "
                                       "existing --revision to target") from None
                api.create_branch(repo_id, branch=revision, repo_type=REPO_TYPE)
                notes.append(f"created branch {revision!r} from the default branch")
                info = api.dataset_info(repo_id, revision=revision)
        parent = str(info.sha)
        guard.parent = parent
        if private is not None and info.private is not None and bool(info.private) != private and not created:
            notes.append(f"the repo is {'private' if info.private else 'public'}; --{'private' if private else 'public'} "
                         "only applies when publish creates the repo (change it in the repo's settings)")
        remote = {f.path: f for f in api.list_repo_tree(repo_id, recursive=True, revision=parent, repo_type=REPO_TYPE)
                  if isinstance(f, RepoFile)}
        if not overwrite_foreign:
            refuse_foreign(remote, info.card_data, f"{repo_id}@{revision} on {endpoint}")
        elif not is_shinken_card(info.card_data) and any(is_managed(p) for p in remote):
            notes.append("the repo was not a shinken dataset: its data/, artifacts/, card and provenance.json "
                         "were replaced (--overwrite-foreign-repo)")
        changes = _diff(files, remote)
        todo = [c for c in changes if c.change != "unchanged"]
        if not todo:
            return PushResult("unchanged", parent, None, None, None, info.private, created, changes,
                              notes + ["the hub already holds exactly these files: nothing was committed"])
        local = {f.path: f for f in files}
        ops: list[Any] = [CommitOperationAdd(path_in_repo=c.path, path_or_fileobj=str(local[c.path].local))
                          for c in todo if c.change != "deleted"]
        ops += [CommitOperationDelete(path_in_repo=c.path) for c in todo if c.change == "deleted"]
        commit = api.create_commit(
            repo_id, ops, commit_message=message, commit_description=description, repo_type=REPO_TYPE,
            revision=revision, create_pr=create_pr, parent_commit=parent,
        )
    return PushResult("pull_request" if create_pr else "committed", commit.oid, parent, commit.commit_url,
                      commit.pr_url, info.private, created, changes, notes)
