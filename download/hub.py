"""Fetch the CUA-Gym export from the Hugging Face hub, verify it, and unpack it.

The real `huggingface_hub` client does the talking (HfApi for the revision and the
paths-info listing, `get_hf_file_metadata` for the HEAD, `http_get` for the transfer), so
HF_ENDPOINT, HF_TOKEN and HF_HOME mean what they mean everywhere else. Two things are
ours because the client does not do them across runs:
- resume: a partial download is kept as `<local-dir>/.shinken/partial/<sha256>.part`
  and continued with an HTTP Range request next time (keyed by the expected hash, so a
  new revision never appends to old bytes);
- verification: every file is checked against the hub's own checksum (LFS sha256 from
  paths-info, cross-checked with the X-Linked-Etag of the HEAD; git blob sha1 for small
  files) before it is moved into place, and an archive is extracted only once verified.
A file already present and verified (size + mtime stamp, else re-hashed) is skipped; a
DEST already extracted from the same archive hashes is skipped.
"""

from __future__ import annotations

import errno
import fnmatch
import hashlib
import os
from dataclasses import asdict, dataclass, field
from pathlib import Path
from types import TracebackType
from typing import TYPE_CHECKING, Any, Literal
from urllib.parse import urlparse

import orjson

from shinken.download.archive import (
    DEFAULT_MAX_MEMBERS,
    DEFAULT_MAX_TOTAL_BYTES,
    extract_archives,
)
from shinken.download.source import ArchiveRecord, SourceInfo, card_metadata, write_source
from shinken.errors import EnvironmentProblem, ShinkenError, WorkFailed
from shinken.runtime import utc_now
from shinken.schemas import check_own, dumps, validation_error, write_json

if TYPE_CHECKING:
    from huggingface_hub import HfApi

DEFAULT_REPO = "xlangai/CUA-Gym"
REPO_TYPE = "dataset"
# README.md is the dataset card: its YAML metadata (license, tags) goes into the source record.
WANTED_PATTERNS = ("artifacts/*", "url_variables.json", "data/tasks.parquet", "README.md")
CARD_FILE = "README.md"
STATE_DIR = ".shinken"
EXTRACT_MARKER = ".shinken-extract.json"  # hidden: discover() skips it


@dataclass(slots=True)
class RemoteFile:
    path: str
    size: int
    blob_id: str  # git blob sha1
    sha256: str | None  # LFS files only

    @property
    def expected(self) -> str:
        return self.sha256 or self.blob_id


@dataclass(slots=True)
class FileResult:
    path: str
    size: int
    sha256: str | None
    status: str  # downloaded | resumed | verified (already present)
    resumed_from: int = 0


@dataclass(slots=True)
class DownloadResult:
    repo_id: str
    revision: str
    commit: str
    endpoint: str
    local_dir: str
    dest: str | None
    files: list[FileResult] = field(default_factory=list)
    extracted: str = "none"  # extracted | skipped (already done) | none (no archive)
    members: int = 0
    tasks: int = 0
    source: str | None = None  # the task root's .shinken-source.json

    def to_json(self) -> dict[str, Any]:
        doc = asdict(self)
        check_own("download_result", doc, "the download result")
        return doc


def default_local_dir(repo_id: str = DEFAULT_REPO) -> Path:
    from huggingface_hub import constants

    return Path(constants.HF_HOME) / "shinken" / f"datasets--{repo_id.replace('/', '--')}"


def hub_endpoint() -> str:
    # Read at call time (huggingface_hub.constants reads HF_ENDPOINT once, at import).
    from huggingface_hub import constants

    return (os.environ.get("HF_ENDPOINT") or constants.ENDPOINT).rstrip("/")


def hub_token() -> str | None:
    from huggingface_hub import get_token

    return os.environ.get("HF_TOKEN") or get_token()


def _wanted(path: str) -> bool:
    return any(fnmatch.fnmatchcase(path, p) for p in WANTED_PATTERNS)


def _git_blob_sha1(path: Path) -> str:
    h = hashlib.sha1()
    h.update(b"blob %d\0" % path.stat().st_size)
    with open(path, "rb") as fh:
        for block in iter(lambda: fh.read(1 << 20), b""):
            h.update(block)
    return h.hexdigest()


def _sha256(path: Path) -> str:
    with open(path, "rb", buffering=0) as fh:
        return hashlib.file_digest(fh, "sha256").hexdigest()


def _digest(path: Path, rf: RemoteFile) -> str:
    return _sha256(path) if rf.sha256 else _git_blob_sha1(path)


class HubErrors:
    """Turn client exceptions into one-line ShinkenErrors with the right exit code."""

    def __init__(self, repo_id: str, revision: str, endpoint: str) -> None:
        self.repo_id, self.revision, self.endpoint = repo_id, revision, endpoint

    def __enter__(self) -> "HubErrors":
        return self

    def __exit__(self, typ: type[BaseException] | None, exc: BaseException | None,
                 tb: TracebackType | None) -> Literal[False]:
        if exc is None or isinstance(exc, ShinkenError):
            return False
        import httpx2
        from huggingface_hub.errors import (
            GatedRepoError,
            HfHubHTTPError,
            RemoteEntryNotFoundError,
            RepositoryNotFoundError,
            RevisionNotFoundError,
        )

        where = f"{self.repo_id}@{self.revision} on {self.endpoint}"
        if isinstance(exc, GatedRepoError):
            raise ShinkenError(f"{where}: the dataset is gated; accept its terms on the hub and set HF_TOKEN") from None
        if isinstance(exc, RepositoryNotFoundError):
            raise ShinkenError(
                f"{where}: no such dataset repo (or it is private); check --repo-id, HF_ENDPOINT and HF_TOKEN"
            ) from None
        if isinstance(exc, RevisionNotFoundError):
            raise ShinkenError(f"{where}: revision not found; check --revision") from None
        if isinstance(exc, RemoteEntryNotFoundError):
            raise ShinkenError(f"{where}: a listed file is missing on the hub ({exc}); try again later") from None
        if isinstance(exc, HfHubHTTPError):
            status = exc.response.status_code if exc.response is not None else 0
            if status in (401, 403):
                raise ShinkenError(f"{where}: access denied (HTTP {status}); set HF_TOKEN to a token that can read it") from None
            raise EnvironmentProblem(f"{where}: the hub answered HTTP {status}; try again later") from None
        if isinstance(exc, (httpx2.TransportError, ConnectionError, TimeoutError)):
            raise EnvironmentProblem(
                f"{where}: cannot reach the hub ({type(exc).__name__}: {exc}); check the network or HF_ENDPOINT"
            ) from None
        if isinstance(exc, OSError):
            if exc.errno in (errno.EACCES, errno.EPERM, errno.EROFS, errno.ENOTDIR, errno.EISDIR):
                raise ShinkenError(f"{exc.filename or where}: {exc.strerror}; pass a writable --local-dir") from None
            if exc.errno is None:  # the client's "Consistency check failed" (short transfer)
                raise EnvironmentProblem(
                    f"{where}: the transfer ended early ({str(exc).splitlines()[0]}); run again to resume"
                ) from None
            raise EnvironmentProblem(f"{where}: {exc.strerror or exc} ({exc.filename or 'local disk'})") from None
        return False


def _list_remote(api: HfApi, repo_id: str, commit: str) -> list[RemoteFile]:
    names = [p for p in api.list_repo_files(repo_id, repo_type=REPO_TYPE, revision=commit) if _wanted(p)]
    if not names:
        return []
    from huggingface_hub.hf_api import RepoFile

    infos = api.get_paths_info(repo_id, names, repo_type=REPO_TYPE, revision=commit)
    out = []
    for i in infos:
        if not isinstance(i, RepoFile):
            continue  # a folder
        out.append(RemoteFile(path=i.path, size=int(i.size), blob_id=i.blob_id,
                              sha256=i.lfs.sha256 if i.lfs is not None else None))
    return sorted(out, key=lambda r: r.path)


class _Stamps:
    """Remember verified files by (size, mtime_ns, expected hash) so a re-run does not
    re-hash hundreds of MB; anything that changed is hashed again."""

    def __init__(self, local_dir: Path) -> None:
        self.path = local_dir / STATE_DIR / "verified.json"
        try:
            self.data: dict[str, Any] = orjson.loads(self.path.read_bytes())
        except (OSError, orjson.JSONDecodeError):
            self.data = {}
        if validation_error("download_state", self.data):
            self.data = {}  # damaged state only costs a re-hash

    def ok(self, rf: RemoteFile, local: Path) -> bool:
        try:
            st = local.stat()
        except OSError:
            return False
        if st.st_size != rf.size:
            return False
        rec = self.data.get(rf.path)
        if rec == {"expected": rf.expected, "size": st.st_size, "mtime_ns": st.st_mtime_ns}:
            return True
        if _digest(local, rf) == rf.expected:
            self.record(rf, local)
            return True
        return False

    def record(self, rf: RemoteFile, local: Path) -> None:
        st = local.stat()
        self.data[rf.path] = {"expected": rf.expected, "size": st.st_size, "mtime_ns": st.st_mtime_ns}
        write_json(self.path, self.data, "download_state")


def _fetch(rf: RemoteFile, *, repo_id: str, commit: str, endpoint: str, token: str | None,
           local_dir: Path) -> FileResult:
    from huggingface_hub import get_hf_file_metadata, hf_hub_url
    from huggingface_hub.file_download import http_get
    from huggingface_hub.utils import build_hf_headers

    url = hf_hub_url(repo_id, rf.path, repo_type=REPO_TYPE, revision=commit, endpoint=endpoint)
    meta = get_hf_file_metadata(url, token=token, endpoint=endpoint)
    if rf.sha256 and meta.etag and meta.etag != rf.sha256:
        raise WorkFailed(
            f"{rf.path}: the hub gives two checksums (paths-info {rf.sha256}, X-Linked-Etag {meta.etag}); "
            "nothing was downloaded; try again later")
    if meta.size is not None and meta.size != rf.size:
        raise WorkFailed(f"{rf.path}: the hub gives two sizes ({rf.size} and {meta.size}); try again later")
    headers = build_hf_headers(token=token)
    location = meta.location or url
    if urlparse(location).netloc != urlparse(url).netloc:
        headers.pop("authorization", None)  # never send the token to a CDN

    partial_dir = local_dir / STATE_DIR / "partial"
    partial_dir.mkdir(parents=True, exist_ok=True)
    part = partial_dir / f"{rf.expected}.part"
    resume = part.stat().st_size if part.exists() else 0
    if resume > rf.size or not rf.sha256:
        resume = 0  # small git files are re-fetched whole
        part.unlink(missing_ok=True)
    with open(part, "ab") as fh:
        http_get(location, fh, resume_size=resume, headers=headers, expected_size=rf.size,
                 displayed_filename=rf.path)
    got = _digest(part, rf)
    if got != rf.expected:
        part.unlink(missing_ok=True)  # never resume onto bytes we know are wrong
        raise WorkFailed(
            f"{rf.path}: checksum mismatch (downloaded {got}, the hub says {rf.expected}); "
            "the download was discarded and nothing was extracted; run `shinken download` again")
    final = local_dir / rf.path
    final.parent.mkdir(parents=True, exist_ok=True)
    os.replace(part, final)
    return FileResult(rf.path, rf.size, rf.sha256, "resumed" if resume else "downloaded", resume)


def _marker(commit: str, archives: list[tuple[str, str]]) -> dict[str, Any]:
    return {"schema": "shinken.extract/1", "commit": commit, "archives": dict(archives)}


def _already_extracted(dest: Path, archives: list[tuple[str, str]]) -> bool:
    try:
        doc = orjson.loads((dest / EXTRACT_MARKER).read_bytes())
    except (OSError, orjson.JSONDecodeError):
        return False
    if validation_error("extract_marker", doc):
        return False
    return bool(doc.get("archives") == dict(archives))


def extract_verified(archives: list[tuple[Path, str]], dest: Path, commit: str, *, progress: bool,
                     max_total_bytes: int, max_members: int) -> tuple[str, int]:
    """Extract verified archives into DEST unless it already holds exactly them.
    Returns (status, members)."""
    keyed = [(p.name, sha) for p, sha in archives]
    if _already_extracted(dest, keyed):
        return "skipped", 0
    replace = dest.is_dir() and (dest / EXTRACT_MARKER).exists()  # ours, from another revision
    doc = _marker(commit, keyed)
    check_own("extract_marker", doc, "the extraction marker")
    marker = dumps(doc)
    stats = extract_archives(
        [p for p, _ in archives], dest, max_total_bytes=max_total_bytes, max_members=max_members,
        progress=progress, replace=replace, extra_files={EXTRACT_MARKER: marker},
    )
    return "extracted", stats.members


def download(
    repo_id: str = DEFAULT_REPO,
    *,
    revision: str | None = None,
    local_dir: str | os.PathLike[str] | None = None,
    dest: str | os.PathLike[str] | None = None,
    progress: bool = True,
    max_total_bytes: int = DEFAULT_MAX_TOTAL_BYTES,
    max_members: int = DEFAULT_MAX_MEMBERS,
) -> DownloadResult:
    """Download `artifacts/*`, `url_variables.json` and `data/tasks.parquet` of the
    dataset repo into `local_dir`, verify them, and extract the archives into `dest`."""
    from huggingface_hub import HfApi
    from huggingface_hub.utils import disable_progress_bars, enable_progress_bars

    endpoint = hub_endpoint()
    token = hub_token()
    local = Path(local_dir) if local_dir else default_local_dir(repo_id)
    dest_path = Path(dest) if dest else local / "tasks"
    rev = revision or "main"
    (disable_progress_bars if not progress else enable_progress_bars)()
    api = HfApi(endpoint=endpoint, token=token)
    with HubErrors(repo_id, rev, endpoint):
        info = api.dataset_info(repo_id, revision=rev)
        commit = info.sha or rev
        remote = _list_remote(api, repo_id, commit)
        if not any(r.path.startswith("artifacts/") for r in remote):
            raise ShinkenError(f"{repo_id}@{rev}: the repo has no artifacts/ files; is this the CUA-Gym export?")
        result = DownloadResult(repo_id, rev, commit, endpoint, str(local), str(dest_path))
        local.mkdir(parents=True, exist_ok=True)
        stamps = _Stamps(local)
        for rf in remote:
            target = local / rf.path
            if stamps.ok(rf, target):
                result.files.append(FileResult(rf.path, rf.size, rf.sha256, "verified"))
                continue
            target.unlink(missing_ok=True)  # stale or corrupt: fetched again below
            fr = _fetch(rf, repo_id=repo_id, commit=commit, endpoint=endpoint, token=token, local_dir=local)
            stamps.record(rf, target)
            result.files.append(fr)

    archive_files = [r for r in remote if _is_archive(r.path)]
    archives = [(local / r.path, r.expected) for r in archive_files]
    if archives:
        result.extracted, result.members = extract_verified(
            archives, dest_path, commit, progress=progress,
            max_total_bytes=max_total_bytes, max_members=max_members)
        result.tasks = sum(1 for e in os.scandir(dest_path) if e.is_dir() and not e.name.startswith("."))
        has_card = any(r.path == CARD_FILE for r in remote)
        result.source = str(write_source(dest_path, _source_info(
            repo_id, commit, endpoint, archive_files, local, local / CARD_FILE if has_card else None)))
    else:
        result.dest = None
    return result


def _is_archive(path: str) -> bool:
    return path.startswith("artifacts/") and path.endswith((".tar.zst", ".tzst"))


def _source_info(repo_id: str, commit: str, endpoint: str, archives: list[RemoteFile], local: Path,
                 card: Path | None) -> SourceInfo:
    """The source record from what the hub answered: the pinned commit, each verified
    archive's sha256 (the LFS oid; hashed here for a small non-LFS archive) and size, and the
    card's YAML metadata read from the README.md fetched at that commit."""
    meta, lic, problem = card_metadata(card)
    return SourceInfo(
        repo_id=repo_id, repo_type=REPO_TYPE, revision=commit,
        archives=tuple(ArchiveRecord(r.path, r.sha256 or _sha256(local / r.path), r.size) for r in archives),
        license=lic, card=meta, downloaded_at=utc_now(), endpoint=endpoint, card_problem=problem,
    )
