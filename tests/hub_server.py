"""A loopback stand-in for the Hugging Face hub, enough for the real huggingface_hub client.

Serves dataset repos from memory on 127.0.0.1 (stdlib http.server in a thread) and answers
what `huggingface_hub` 2.x requests (read from its source), reading and writing:

Reading
- GET  /api/datasets/{repo}[/revision/{rev}]      -> repo info with `sha`, `private` (and
       `cardData`, the README.md's YAML block, when the repo has a dataset card: see `dataset_card`)
- GET  /api/datasets/{repo}/tree/{rev}[/{path}]   -> listing (list_repo_files, list_repo_tree)
- POST /api/datasets/{repo}/paths-info/{rev}      -> size, oid, lfs {oid=sha256, size}
- HEAD /datasets/{repo}/resolve/{rev}/{path}      -> X-Repo-Commit, ETag, X-Linked-Etag,
       X-Linked-Size; LFS files redirect (302) to a "CDN" on 127.0.0.2, like the hub
- GET  the same / the CDN url, with Range support (206 + Content-Range) for resume.

Writing (HfApi.create_repo / create_branch / create_commit, the LFS "basic" transfer)
- POST /api/repos/create                          -> 200 {url}; 409 when it exists. A new repo
       gets an initial commit holding `.gitattributes`, as on the hub
- POST /api/datasets/{repo}/branch/{branch}        -> a branch from the default branch's head
- POST /api/validate-yaml                         -> 400 {errors} for a card whose YAML is unreadable
- POST /api/datasets/{repo}/preupload/{rev}       -> uploadMode lfs|regular per file (the suffix
       rules of the hub's default .gitattributes, >= 10 MiB, or NUL bytes in the sample) and the
       oid the file has at that revision
- POST /datasets/{repo}.git/info/lfs/objects/batch -> upload + verify actions; objects the store
       already holds get none. Upload is a PUT to the CDN host (sha256 checked), verify a POST
- POST /api/datasets/{repo}/commit/{rev}[?create_pr=1] -> the NDJSON commit (header, file,
       lfsFile, deletedFile, deletedFolder), applied all or nothing. `parentCommit` must be the
       branch head (else 412, "A commit has happened since", as the hub answers); with create_pr
       the commit lands on a new `refs/pr/N` made from the parent and the branch does not move.
Xet is not spoken: tests run the client with HF_HUB_DISABLE_XET=1 so it uses LFS (the client
picks Xet by itself whenever hf_xet is installed, whatever the server).

404s carry the hub's X-Error-Code (RepoNotFound, RevisionNotFound, EntryNotFound) so the
client raises its usual typed errors. Every request is recorded for assertions.
Knobs for tests: `corrupt` (serve wrong bytes under the right metadata), `drop_after`
(close the connection after N body bytes, once), `slow` (drip-feed a file; `stall_after` holds it
mid-way until `release`), `token`
(require this bearer token), `read_only_tokens` (tokens refused on writes), `before_commit`
(called with the repo when a commit request arrives, before the parent check: a concurrent writer).
"""

from __future__ import annotations

import base64
import hashlib
import json
import re
import threading
from dataclasses import dataclass, field
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from typing import Callable
from urllib.parse import parse_qs, unquote, urlparse

LFS_SUFFIXES = (".tar.zst", ".parquet", ".zst", ".bin")
LFS_MIN_SIZE = 10 * 1024 * 1024  # the hub stores files from 10 MiB on as LFS
GITATTRIBUTES = b"".join(f"*{s} filter=lfs diff=lfs merge=lfs -text\n".encode() for s in LFS_SUFFIXES)
PARENT_MOVED = "A commit has happened since. Please refresh and try again."


def dataset_card(metadata: dict, body: str = "") -> bytes:
    """A README.md the way the hub stores a dataset card: a YAML block, then Markdown."""
    import yaml

    return ("---\n" + yaml.safe_dump(metadata, sort_keys=False) + "---\n" + body).encode()


def card_data(readme: bytes | None) -> dict | None:
    """What the hub puts in a repo info's `cardData`: the card's parsed YAML block."""
    import yaml

    if not readme:
        return None
    m = re.match(rb"^\s*---\r?\n(.*?)\r?\n---[ \t]*(\r?\n|$)", readme, re.S)
    if not m:
        return None
    try:
        data = yaml.safe_load(m[1])
    except yaml.YAMLError:
        return None
    return data if isinstance(data, dict) else None


def git_blob_id(data: bytes) -> str:
    return hashlib.sha1(b"blob %d\0" % len(data) + data).hexdigest()


@dataclass
class Request:
    method: str
    path: str
    headers: dict[str, str]
    host: str


@dataclass
class Commit:
    sha: str
    parent: str | None
    files: dict[str, bytes]
    message: str
    ref: str  # the branch or PR ref it was made on


@dataclass
class FakeRepo:
    repo_id: str
    files: dict[str, bytes]  # the tree at the head of main
    commit: str = "3c021d06e2b01bbb6ad28cfddec41d856e4a78c5"  # the head of main
    branches: tuple[str, ...] = ("main",)  # names that resolve to main's head
    private: bool = False
    refs: dict[str, str] = field(default_factory=dict)  # other branches and refs/pr/N -> commit sha
    history: dict[str, dict[str, bytes]] = field(default_factory=dict)  # earlier commits' trees
    commits: list[Commit] = field(default_factory=list)  # made through the API, in order
    lfs_paths: set[str] = field(default_factory=set)  # committed as lfsFile beyond the suffix rule

    def is_lfs(self, path: str) -> bool:
        return path.endswith(LFS_SUFFIXES) or path in self.lfs_paths

    def blob_id(self, path: str, files: dict[str, bytes] | None = None) -> str:
        return git_blob_id((self.files if files is None else files)[path])

    def sha256(self, path: str, files: dict[str, bytes] | None = None) -> str:
        return hashlib.sha256((self.files if files is None else files)[path]).hexdigest()

    def entry(self, path: str, files: dict[str, bytes] | None = None) -> dict:
        files = self.files if files is None else files
        data = files[path]
        e = {"type": "file", "oid": git_blob_id(data), "size": len(data), "path": path}
        if self.is_lfs(path):
            e["lfs"] = {"oid": hashlib.sha256(data).hexdigest(), "size": len(data), "pointerSize": 134}
        return e

    def oid(self, path: str, files: dict[str, bytes]) -> str:
        """What preupload answers for an existing file: sha256 for LFS, git blob id else."""
        return self.sha256(path, files) if self.is_lfs(path) else self.blob_id(path, files)

    def tree(self, rev: str) -> tuple[str, dict[str, bytes]] | None:
        """(commit sha, files) that `rev` (branch, refs/pr/N or a commit sha) names."""
        rev = unquote(unquote(rev))
        if rev in self.branches or rev == self.commit:
            return self.commit, self.files
        sha = self.refs.get(rev, rev)
        if sha == self.commit:
            return self.commit, self.files
        if sha in self.history:
            return sha, self.history[sha]
        return None

    def is_branch(self, rev: str) -> bool:
        rev = unquote(unquote(rev))
        return rev in self.branches or (rev in self.refs and not rev.startswith("refs/"))

    def advance(self, ref: str, files: dict[str, bytes], message: str, parent: str) -> Commit:
        """Record a new commit with `files` on `ref` (a branch or a new PR ref)."""
        seed = json.dumps([parent, ref, message, len(self.commits),
                           sorted((p, git_blob_id(d)) for p, d in files.items())]).encode()
        sha = hashlib.sha1(seed).hexdigest()
        self.history[self.commit] = self.files
        self.history[sha] = files
        if ref in self.branches:
            self.commit, self.files = sha, files
        else:
            self.refs[ref] = sha
        c = Commit(sha, parent, files, message, ref)
        self.commits.append(c)
        return c

    def head(self, ref: str) -> str:
        ref = unquote(unquote(ref))
        return self.commit if ref in self.branches else self.refs[ref]

    def prs(self) -> list[str]:
        return sorted((r for r in self.refs if r.startswith("refs/pr/")), key=lambda r: int(r.rsplit("/", 1)[1]))


@dataclass
class HubServer:
    repo: FakeRepo | None = None  # the first repo (the one the download tests use)
    token: str | None = None
    corrupt: set[str] = field(default_factory=set)
    drop_after: dict[str, int] = field(default_factory=dict)
    slow: dict[str, float] = field(default_factory=dict)  # path -> seconds per 64 KiB sent
    # path -> body bytes after which a drip-fed transfer waits for `release` (once): a test
    # interrupts the client there, however busy the machine
    stall_after: dict[str, int] = field(default_factory=dict)
    release: threading.Event = field(default_factory=threading.Event)
    stalled: threading.Event = field(default_factory=threading.Event)  # set when a transfer starts waiting
    requests: list[Request] = field(default_factory=list)
    read_only_tokens: set[str] = field(default_factory=set)
    before_commit: Callable[[FakeRepo], None] | None = None
    repos: dict[str, FakeRepo] = field(default_factory=dict)
    lfs_objects: dict[str, bytes] = field(default_factory=dict)  # the LFS store: sha256 -> bytes

    def __post_init__(self) -> None:
        self._lock = threading.Lock()
        self._servers: list[ThreadingHTTPServer] = []
        if self.repo is not None:
            self.repos[self.repo.repo_id] = self.repo

    # -- lifecycle -------------------------------------------------------------
    def start(self) -> "HubServer":
        handler = _make_handler(self)
        hub = ThreadingHTTPServer(("127.0.0.1", 0), handler)
        cdn = ThreadingHTTPServer(("127.0.0.2", 0), handler)  # a different host, like a CDN
        for s in (hub, cdn):
            s.daemon_threads = True
            threading.Thread(target=s.serve_forever, daemon=True).start()
            self._servers.append(s)
        self.endpoint = f"http://127.0.0.1:{hub.server_address[1]}"
        self.cdn = f"http://127.0.0.2:{cdn.server_address[1]}"
        return self

    def stop(self) -> None:
        for s in self._servers:
            s.shutdown()
            s.server_close()

    def __enter__(self) -> "HubServer":
        return self.start()

    def __exit__(self, *exc) -> None:
        self.stop()

    def record(self, req: Request) -> None:
        with self._lock:
            self.requests.append(req)

    def seen(self, method: str | None = None, contains: str = "") -> list[Request]:
        with self._lock:
            return [r for r in self.requests if (method is None or r.method == method) and contains in r.path]

    def object(self, sha: str) -> bytes | None:
        """An LFS object by sha256: uploaded ones, then the files of every repo's trees."""
        if sha in self.lfs_objects:
            return self.lfs_objects[sha]
        for repo in self.repos.values():
            for files in (repo.files, *repo.history.values()):
                for p, data in files.items():
                    if repo.is_lfs(p) and hashlib.sha256(data).hexdigest() == sha:
                        return data
        return None


def _make_handler(hub: HubServer):
    api_re = re.compile(
        r"^/api/datasets/(?P<repo>[^/]+/[^/]+)/(?P<kind>revision|tree|paths-info|preupload|commit|branch)/(?P<rest>.*)$")
    resolve_re = re.compile(r"^/datasets/(?P<repo>[^/]+/[^/]+)/resolve/(?P<rev>[^/]+)/(?P<path>.+)$")
    lfs_re = re.compile(r"^/datasets/(?P<repo>[^/]+/[^/]+)\.git/info/lfs/objects/(?P<kind>batch|verify)$")

    class Handler(BaseHTTPRequestHandler):
        protocol_version = "HTTP/1.1"

        def log_message(self, *args) -> None:  # quiet
            pass

        # -- helpers -----------------------------------------------------------
        def _send(self, status: int, body: bytes = b"", headers: dict | None = None, head: bool = False) -> None:
            self.send_response(status)
            for k, v in (headers or {}).items():
                self.send_header(k, v)
            self.send_header("Content-Length", str(len(body)))
            self.end_headers()
            if not head and body:
                self.wfile.write(body)

        def _json(self, status: int, obj, headers: dict | None = None, default=None) -> None:
            self._send(status, json.dumps(obj, default=default).encode(),
                       {"Content-Type": "application/json", **(headers or {})})

        def _error(self, status: int, code: str | None, message: str, head: bool = False) -> None:
            body = json.dumps({"error": message}).encode()
            headers = {"Content-Type": "application/json", "X-Error-Message": message}
            if code:
                headers["X-Error-Code"] = code
            self._send(status, body, headers, head=head)

        def _bearer(self) -> str | None:
            auth = self.headers.get("Authorization") or ""
            return auth[7:] if auth.startswith("Bearer ") else None

        def _auth_ok(self, head: bool = False, repo: FakeRepo | None = None) -> bool:
            if self.server is hub._servers[1]:
                return True  # the CDN url is pre-signed on the real hub
            if hub.token is None and not (repo is not None and repo.private):
                return True
            tok = self._bearer()
            if tok is not None and (tok == hub.token or (hub.token is None and repo is not None)):
                return True
            self._error(401, "RepoNotFound", "Invalid credentials", head=head)
            return False

        def _write_ok(self) -> bool:
            """Writes always need a token (any one when the server has none configured)."""
            tok = self._bearer()
            if tok is None or (hub.token is not None and tok != hub.token):
                self._error(401, None, "Invalid credentials in Authorization header")
                return False
            if tok in hub.read_only_tokens:
                self._error(403, None, "You don't have the rights to write to this repository")
                return False
            return True

        def _repo(self, repo_id: str, head: bool = False) -> FakeRepo | None:
            repo = hub.repos.get(repo_id)
            if repo is None:
                self._error(404, "RepoNotFound", "Repository not found", head=head)
            return repo

        def _tree(self, repo: FakeRepo, rev: str, head: bool = False) -> tuple[str, dict[str, bytes]] | None:
            t = repo.tree(rev)
            if t is None:
                self._error(404, "RevisionNotFound", f"Invalid rev id: {unquote(rev)}", head=head)
            return t

        def _record(self) -> None:
            hub.record(Request(self.command, self.path, {k.lower(): v for k, v in self.headers.items()}, self.server.server_address[0]))

        def _body(self) -> bytes:
            if "chunked" in (self.headers.get("Transfer-Encoding") or "").lower():
                parts = []
                while True:
                    size = int(self.rfile.readline().split(b";")[0].strip() or b"0", 16)
                    if size == 0:
                        while self.rfile.readline() not in (b"\r\n", b"\n", b""):
                            pass
                        return b"".join(parts)
                    parts.append(self.rfile.read(size))
                    self.rfile.readline()
            return self.rfile.read(int(self.headers.get("Content-Length") or 0))

        # -- verbs ---------------------------------------------------------------
        def do_GET(self) -> None:
            self._record()
            self._dispatch(head=False)

        def do_HEAD(self) -> None:
            self._record()
            self._dispatch(head=True)

        def do_PUT(self) -> None:
            self._record()
            body = self._body()
            path = urlparse(self.path).path
            if self.server is not hub._servers[1] or not path.startswith("/lfs-upload/"):
                return self._error(404, None, "no such route")
            oid = path[len("/lfs-upload/"):]
            if hashlib.sha256(body).hexdigest() != oid:
                return self._error(400, None, "uploaded bytes do not match the object id")
            hub.lfs_objects[oid] = body
            self._send(200)

        def do_POST(self) -> None:
            self._record()
            body = self._body()
            url = urlparse(self.path)
            if url.path == "/api/repos/create":
                return self._create_repo(body)
            if url.path == "/api/validate-yaml":
                return self._validate_yaml(body)
            m = lfs_re.match(url.path)
            if m:
                return self._lfs(m["repo"], m["kind"], body)
            m = api_re.match(url.path)
            if not m or m["kind"] in ("revision", "tree"):
                return self._error(404, "EntryNotFound", "no such route")
            repo = self._repo(m["repo"])
            if repo is None or not self._auth_ok(repo=repo):
                return
            if m["kind"] == "paths-info":
                t = self._tree(repo, m["rest"])
                if t is None:
                    return
                paths = parse_qs(body.decode()).get("paths", [])
                return self._json(200, [repo.entry(p, t[1]) for p in paths if p in t[1]])
            if not self._write_ok():
                return
            q = parse_qs(url.query)
            if m["kind"] == "preupload":
                return self._preupload(repo, m["rest"], body)
            if m["kind"] == "branch":
                return self._branch(repo, unquote(m["rest"]), body)
            return self._commit(repo, m["rest"], body, create_pr=q.get("create_pr", ["0"])[0] == "1")

        # -- writing -------------------------------------------------------------
        def _create_repo(self, body: bytes) -> None:
            if not self._write_ok():
                return
            doc = json.loads(body or b"{}")
            if doc.get("type") != "dataset":
                return self._error(400, None, "this test hub only holds dataset repos")
            if not doc.get("organization"):
                return self._error(400, None, "name the organization (ORG/NAME)")
            repo_id = f"{doc['organization']}/{doc['name']}"
            url = f"{hub.endpoint}/datasets/{repo_id}"
            if repo_id in hub.repos:
                return self._json(409, {"error": "You already created this dataset repo", "url": url})
            repo = FakeRepo(repo_id, {}, commit="0" * 40, private=doc.get("visibility") == "private")
            repo.advance("main", {".gitattributes": GITATTRIBUTES}, "initial commit", "0" * 40)
            repo.history.pop("0" * 40, None)
            hub.repos[repo_id] = repo
            self._json(200, {"url": url, "name": repo_id, "id": repo_id})

        def _validate_yaml(self, body: bytes) -> None:
            import yaml

            doc = json.loads(body or b"{}")
            content = (doc.get("content") or "").encode()
            m = re.match(rb"^\s*---\r?\n(.*?)\r?\n---[ \t]*(\r?\n|$)", content, re.S)
            if not m:
                return self._json(200, {"errors": [], "warnings": [{"message": "empty or missing yaml metadata"}]})
            try:
                meta = yaml.safe_load(m[1])
            except yaml.YAMLError as exc:
                return self._json(400, {"errors": [{"message": f"invalid YAML: {exc}"}]})
            errors = []
            if not isinstance(meta, dict):
                errors.append("metadata must be a mapping")
            else:
                for key in ("tags", "task_categories", "size_categories"):
                    v = meta.get(key)
                    if v is not None and not (isinstance(v, list) and all(isinstance(x, str) for x in v)):
                        errors.append(f'"{key}" must be a list of strings')
                if meta.get("license") is not None and not isinstance(meta["license"], (str, list)):
                    errors.append('"license" must be a string')
                for c in meta.get("configs") or []:
                    if not isinstance(c, dict) or not isinstance(c.get("config_name"), str):
                        errors.append('"configs" entries need a config_name')
            if errors:
                return self._json(400, {"errors": [{"message": e} for e in errors]})
            self._json(200, {"errors": [], "warnings": []})

        def _preupload(self, repo: FakeRepo, rev: str, body: bytes) -> None:
            t = self._tree(repo, rev)
            if t is None:
                return
            out = []
            for f in json.loads(body)["files"]:
                sample = base64.b64decode(f["sample"])
                lfs = f["path"].endswith(LFS_SUFFIXES) or f["size"] >= LFS_MIN_SIZE or b"\0" in sample
                e = {"path": f["path"], "uploadMode": "lfs" if lfs else "regular", "shouldIgnore": False}
                if f["path"] in t[1]:
                    e["oid"] = repo.oid(f["path"], t[1])
                out.append(e)
            self._json(200, {"files": out, "commitOid": t[0]})

        def _lfs(self, repo_id: str, kind: str, body: bytes) -> None:
            repo = self._repo(repo_id)
            if repo is None or not self._write_ok():
                return
            doc = json.loads(body)
            if kind == "verify":
                data = hub.lfs_objects.get(doc.get("oid", ""))
                if data is None or len(data) != doc.get("size"):
                    return self._error(404, None, "object not uploaded")
                return self._json(200, {"success": True})
            if doc.get("operation") != "upload" or "basic" not in doc.get("transfers", ["basic"]):
                return self._error(422, None, "only the basic upload transfer is served")
            objects = []
            for o in doc["objects"]:
                entry = {"oid": o["oid"], "size": o["size"], "authenticated": True}
                if hub.object(o["oid"]) is None:
                    entry["actions"] = {
                        "upload": {"href": f"{hub.cdn}/lfs-upload/{o['oid']}", "header": {}},
                        "verify": {"href": f"{hub.endpoint}/datasets/{repo_id}.git/info/lfs/objects/verify",
                                   "header": {}},
                    }
                objects.append(entry)
            self._send(200, json.dumps({"transfer": "basic", "objects": objects}).encode(),
                       {"Content-Type": "application/vnd.git-lfs+json"})

        def _branch(self, repo: FakeRepo, branch: str, body: bytes) -> None:
            if repo.tree(branch) is not None:
                return self._error(409, None, f"Reference already exists: refs/heads/{branch}")
            start = json.loads(body or b"{}").get("startingPoint") or "main"
            t = self._tree(repo, start)
            if t is None:
                return
            repo.refs[branch] = t[0]
            self._json(200, {})

        def _commit(self, repo: FakeRepo, rev: str, body: bytes, *, create_pr: bool) -> None:
            if hub.before_commit is not None:
                hook, hub.before_commit = hub.before_commit, None
                hook(repo)
            lines = [json.loads(ln) for ln in body.splitlines() if ln.strip()]
            if not lines or lines[0].get("key") != "header":
                return self._error(400, None, "the commit payload must start with a header line")
            header = lines[0]["value"]
            if not repo.is_branch(rev):
                return self._error(404, "RevisionNotFound", f"Invalid rev id: {unquote(rev)} is not a branch")
            head = repo.head(rev)
            parent = header.get("parentCommit")
            if parent is not None and not create_pr and parent != head:
                return self._error(412, None, PARENT_MOVED)
            base_sha = parent if (create_pr and parent) else head
            base = repo.tree(base_sha)
            if base is None:
                return self._error(404, "RevisionNotFound", f"Invalid rev id: {base_sha}")
            files = dict(base[1])
            lfs_paths = set()
            for op in lines[1:]:
                key, v = op.get("key"), op.get("value") or {}
                path = v.get("path", "")
                if key == "file":
                    files[path] = base64.b64decode(v["content"])
                elif key == "lfsFile":
                    data = hub.object(v["oid"])
                    if data is None or ("size" in v and len(data) != v["size"]):
                        return self._error(422, None, f"LFS object {v['oid']} of {path} was never uploaded")
                    files[path] = data
                    lfs_paths.add(path)
                elif key == "deletedFile":
                    if path not in files:
                        return self._error(404, "EntryNotFound", f"A file with this name doesn't exist: {path}")
                    del files[path]
                elif key == "deletedFolder":
                    gone = [p for p in files if p.startswith(path.rstrip("/") + "/")]
                    if not gone:
                        return self._error(404, "EntryNotFound", f"A folder with this name doesn't exist: {path}")
                    for p in gone:
                        del files[p]
                else:
                    return self._error(400, None, f"unknown commit operation {key!r}")
            repo.lfs_paths |= lfs_paths
            ref = f"refs/pr/{len(repo.prs()) + 1}" if create_pr else unquote(unquote(rev))
            c = repo.advance(ref, files, header.get("summary", ""), base_sha)
            pr_url = f"{hub.endpoint}/datasets/{repo.repo_id}/discussions/{ref.rsplit('/', 1)[1]}" if create_pr else None
            self._json(200, {"success": True, "commitOid": c.sha, "pullRequestUrl": pr_url,
                             "commitUrl": f"{hub.endpoint}/datasets/{repo.repo_id}/commit/{c.sha}"})

        # -- reading -------------------------------------------------------------
        def _dispatch(self, head: bool) -> None:
            url = urlparse(self.path)
            path = url.path
            if path.startswith("/cdn/"):
                data = hub.object(path[len("/cdn/"):])
                if data is None:
                    return self._send(404, b"no such object", head=head)
                return self._serve(data, None, None, head)
            bare = re.match(r"^/api/datasets/([^/]+/[^/]+)$", path)
            if bare:  # repo info without a revision: the default branch
                path = f"{path}/revision/main"
            m = api_re.match(path)
            if m:
                if head:
                    return
                repo = self._repo(m["repo"])
                if repo is None or not self._auth_ok(repo=repo):
                    return
                rev, _, sub = m["rest"].partition("/")
                t = self._tree(repo, rev)
                if t is None:
                    return
                sha, files = t
                if m["kind"] == "revision":
                    info = {
                        "id": repo.repo_id, "sha": sha, "private": repo.private,
                        "siblings": [{"rfilename": p} for p in sorted(files)],
                    }
                    meta = card_data(files.get("README.md"))
                    if meta is not None:
                        info["cardData"] = meta
                    return self._json(200, info, default=str)
                if m["kind"] == "tree":
                    prefix = unquote(sub).strip("/")
                    q = parse_qs(url.query)
                    recursive = q.get("recursive", ["False"])[0].lower() == "true"
                    out, folders = [], set()
                    for p in sorted(files):
                        if prefix and not p.startswith(prefix + "/"):
                            continue
                        rel = p[len(prefix) + 1:] if prefix else p
                        if "/" in rel and not recursive:
                            folders.add((prefix + "/" if prefix else "") + rel.split("/", 1)[0])
                            continue
                        if recursive:
                            parts = p.split("/")[:-1]
                            for i in range(1, len(parts) + 1):
                                folders.add("/".join(parts[:i]))
                        out.append(repo.entry(p, files))
                    out += [{"type": "directory", "oid": "0" * 40, "path": f} for f in sorted(folders)]
                    return self._json(200, out)
                return self._error(405, "MethodNotAllowed", "use POST")
            m = resolve_re.match(path)
            if m:
                repo = self._repo(m["repo"], head)
                if repo is None or not self._auth_ok(head, repo=repo):
                    return
                t = self._tree(repo, m["rev"], head)
                if t is None:
                    return
                sha, files = t
                p = unquote(m["path"])
                if p not in files:
                    return self._error(404, "EntryNotFound", f"{p} does not exist", head=head)
                data = files[p]
                if repo.is_lfs(p):
                    return self._send(302, b"", {
                        "Location": f"{hub.cdn}/cdn/{hashlib.sha256(data).hexdigest()}",
                        "X-Repo-Commit": sha,
                        "ETag": f'"{git_blob_id(data)}"',
                        "X-Linked-Etag": f'"{hashlib.sha256(data).hexdigest()}"',
                        "X-Linked-Size": str(len(data)),
                    }, head=head)
                return self._serve(data, p, sha, head)
            self._error(404, "RepoNotFound", "no such route", head=head)

        def _serve(self, data: bytes, p: str | None, commit: str | None, head: bool) -> None:
            """Send a file (p None: from the CDN) with Range support and the test knobs."""
            key = p
            if key is None:  # knobs name repo paths; find the path of these CDN bytes
                key = next((q for r in hub.repos.values() for q, d in r.files.items() if d is data), None)
            if key in hub.corrupt:
                data = bytes([data[0] ^ 0xFF]) + data[1:] if data else b"x"
            headers = {"Accept-Ranges": "bytes", "Content-Type": "application/octet-stream"}
            if commit is not None:
                headers.update({"X-Repo-Commit": commit, "ETag": f'"{git_blob_id(data)}"'})
            status = 200
            rng = self.headers.get("Range")
            if rng:
                m = re.fullmatch(r"bytes=(\d+)-(\d*)", rng.strip())
                if not m:
                    return self._send(416, b"", head=head)
                start = int(m[1])
                end = int(m[2]) if m[2] else len(data) - 1
                if start >= len(data):
                    return self._send(416, b"", {"Content-Range": f"bytes */{len(data)}"}, head=head)
                headers["Content-Range"] = f"bytes {start}-{end}/{len(data)}"
                data, status = data[start:end + 1], 206
            if head:
                return self._send(status, data, headers, head=True)
            cut = hub.drop_after.pop(key, None) if key is not None else None
            if cut is not None and cut < len(data):
                # Promise the full length, send part, then hang up: a dropped transfer.
                self.send_response(status)
                for k, v in headers.items():
                    self.send_header(k, v)
                self.send_header("Content-Length", str(len(data)))
                self.end_headers()
                self.wfile.write(data[:cut])
                self.wfile.flush()
                self.close_connection = True
                import socket

                self.connection.shutdown(socket.SHUT_RDWR)
                return
            delay = hub.slow.get(key) if key is not None else None
            if delay:
                # Drip-feed so a test can interrupt the client mid-transfer.
                import time

                self.send_response(status)
                for k, v in headers.items():
                    self.send_header(k, v)
                self.send_header("Content-Length", str(len(data)))
                self.end_headers()
                stall = hub.stall_after.pop(key, None) if key is not None else None
                try:
                    for i in range(0, len(data), 65536):
                        if stall is not None and i >= stall:
                            hub.stalled.set()
                            hub.release.wait(120)
                            stall = None
                        self.wfile.write(data[i : i + 65536])
                        self.wfile.flush()
                        time.sleep(delay)
                except (BrokenPipeError, ConnectionResetError):
                    self.close_connection = True
                return
            self._send(status, data, headers)

    return Handler
