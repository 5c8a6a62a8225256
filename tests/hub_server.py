"""A loopback stand-in for the Hugging Face hub, enough for the real huggingface_hub client.

Serves one dataset repo from memory on 127.0.0.1 (stdlib http.server in a thread) and
answers what `huggingface_hub` 2.x requests (read from its source):
- GET  /api/datasets/{repo}/revision/{rev}        -> repo info with `sha` (and `cardData`, the
       README.md's YAML block, when the repo has a dataset card: see `dataset_card`)
- GET  /api/datasets/{repo}/tree/{rev}[/{path}]   -> listing (list_repo_files)
- POST /api/datasets/{repo}/paths-info/{rev}      -> size, oid, lfs {oid=sha256, size}
- HEAD /datasets/{repo}/resolve/{rev}/{path}      -> X-Repo-Commit, ETag, X-Linked-Etag,
       X-Linked-Size; LFS files redirect (302) to a "CDN" on 127.0.0.2, like the hub
- GET  the same / the CDN url, with Range support (206 + Content-Range) for resume.
404s carry the hub's X-Error-Code (RepoNotFound, RevisionNotFound, EntryNotFound) so the
client raises its usual typed errors. Every request is recorded for assertions.
Knobs for tests: `corrupt` (serve wrong bytes under the right metadata), `drop_after`
(close the connection after N body bytes, once), `slow` (drip-feed a file), `token`
(require this bearer token).
"""

from __future__ import annotations

import hashlib
import json
import re
import threading
from dataclasses import dataclass, field
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from urllib.parse import parse_qs, unquote, urlparse

LFS_SUFFIXES = (".tar.zst", ".parquet", ".zst", ".bin")


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


@dataclass
class Request:
    method: str
    path: str
    headers: dict[str, str]
    host: str


@dataclass
class FakeRepo:
    repo_id: str
    files: dict[str, bytes]
    commit: str = "3c021d06e2b01bbb6ad28cfddec41d856e4a78c5"
    branches: tuple[str, ...] = ("main",)

    def is_lfs(self, path: str) -> bool:
        return path.endswith(LFS_SUFFIXES)

    def blob_id(self, path: str) -> str:
        data = self.files[path]
        return hashlib.sha1(b"blob %d\0" % len(data) + data).hexdigest()

    def sha256(self, path: str) -> str:
        return hashlib.sha256(self.files[path]).hexdigest()

    def entry(self, path: str) -> dict:
        data = self.files[path]
        e = {"type": "file", "oid": self.blob_id(path), "size": len(data), "path": path}
        if self.is_lfs(path):
            e["lfs"] = {"oid": self.sha256(path), "size": len(data), "pointerSize": 134}
        return e


@dataclass
class HubServer:
    repo: FakeRepo
    token: str | None = None
    corrupt: set[str] = field(default_factory=set)
    drop_after: dict[str, int] = field(default_factory=dict)
    slow: dict[str, float] = field(default_factory=dict)  # path -> seconds per 64 KiB sent
    requests: list[Request] = field(default_factory=list)

    def __post_init__(self) -> None:
        self._lock = threading.Lock()
        self._servers: list[ThreadingHTTPServer] = []

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


def _make_handler(hub: HubServer):
    repo = hub.repo
    api_re = re.compile(r"^/api/datasets/(?P<repo>[^/]+/[^/]+)/(?P<kind>revision|tree|paths-info)/(?P<rest>.*)$")
    resolve_re = re.compile(r"^/datasets/(?P<repo>[^/]+/[^/]+)/resolve/(?P<rev>[^/]+)/(?P<path>.+)$")

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

        def _error(self, status: int, code: str, message: str, head: bool = False) -> None:
            body = json.dumps({"error": message}).encode()
            self._send(status, body, {"Content-Type": "application/json", "X-Error-Code": code,
                                      "X-Error-Message": message}, head=head)

        def _auth_ok(self, head: bool = False) -> bool:
            if hub.token is None or self.server is hub._servers[1]:
                return True  # the CDN url is pre-signed on the real hub
            if self.headers.get("Authorization") == f"Bearer {hub.token}":
                return True
            self._error(401, "RepoNotFound", "Invalid credentials", head=head)
            return False

        def _rev_ok(self, rev: str, head: bool = False) -> bool:
            rev = unquote(rev)
            if rev in repo.branches or rev == repo.commit:
                return True
            self._error(404, "RevisionNotFound", f"Invalid rev id: {rev}", head=head)
            return False

        def _record(self) -> None:
            hub.record(Request(self.command, self.path, {k.lower(): v for k, v in self.headers.items()}, self.server.server_address[0]))

        # -- verbs ---------------------------------------------------------------
        def do_GET(self) -> None:
            self._record()
            self._dispatch(head=False)

        def do_HEAD(self) -> None:
            self._record()
            self._dispatch(head=True)

        def do_POST(self) -> None:
            self._record()
            length = int(self.headers.get("Content-Length") or 0)
            body = self.rfile.read(length).decode()
            url = urlparse(self.path)
            m = api_re.match(url.path)
            if not m or m["kind"] != "paths-info":
                return self._error(404, "EntryNotFound", "no such route")
            if not self._auth_ok():
                return
            if m["repo"] != repo.repo_id:
                return self._error(404, "RepoNotFound", "Repository not found")
            if not self._rev_ok(m["rest"]):
                return
            form = parse_qs(body)
            paths = form.get("paths", [])
            self._json(200, [repo.entry(p) for p in paths if p in repo.files])

        def _dispatch(self, head: bool) -> None:
            url = urlparse(self.path)
            path = url.path
            if path.startswith("/cdn/"):
                sha = path[len("/cdn/"):]
                for p in repo.files:
                    if repo.is_lfs(p) and repo.sha256(p) == sha:
                        return self._serve_file(p, head, cdn=True)
                return self._send(404, b"no such object", head=head)
            m = api_re.match(path)
            if m:
                if head or not self._auth_ok():
                    return
                if m["repo"] != repo.repo_id:
                    return self._error(404, "RepoNotFound", "Repository not found")
                rev, _, sub = m["rest"].partition("/")
                if not self._rev_ok(rev):
                    return
                if m["kind"] == "revision":
                    info = {
                        "id": repo.repo_id, "sha": repo.commit, "private": False,
                        "siblings": [{"rfilename": p} for p in sorted(repo.files)],
                    }
                    meta = card_data(repo.files.get("README.md"))
                    if meta is not None:
                        info["cardData"] = meta
                    return self._json(200, info, default=str)
                if m["kind"] == "tree":
                    prefix = unquote(sub).strip("/")
                    q = parse_qs(url.query)
                    recursive = q.get("recursive", ["False"])[0].lower() == "true"
                    out, folders = [], set()
                    for p in sorted(repo.files):
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
                        out.append(repo.entry(p))
                    out += [{"type": "directory", "oid": "0" * 40, "path": f} for f in sorted(folders)]
                    return self._json(200, out)
                return self._error(405, "MethodNotAllowed", "use POST")
            m = resolve_re.match(path)
            if m:
                if not self._auth_ok(head):
                    return
                if m["repo"] != repo.repo_id:
                    return self._error(404, "RepoNotFound", "Repository not found", head=head)
                if not self._rev_ok(m["rev"], head):
                    return
                p = unquote(m["path"])
                if p not in repo.files:
                    return self._error(404, "EntryNotFound", f"{p} does not exist", head=head)
                if repo.is_lfs(p):
                    data = repo.files[p]
                    return self._send(302, b"", {
                        "Location": f"{hub.cdn}/cdn/{repo.sha256(p)}",
                        "X-Repo-Commit": repo.commit,
                        "ETag": f'"{repo.blob_id(p)}"',
                        "X-Linked-Etag": f'"{repo.sha256(p)}"',
                        "X-Linked-Size": str(len(data)),
                    }, head=head)
                return self._serve_file(p, head)
            self._error(404, "RepoNotFound", "no such route", head=head)

        def _serve_file(self, p: str, head: bool, cdn: bool = False) -> None:
            data = repo.files[p]
            if p in hub.corrupt:
                data = bytes([data[0] ^ 0xFF]) + data[1:] if data else b"x"
            headers = {"Accept-Ranges": "bytes", "Content-Type": "application/octet-stream"}
            if not cdn:
                headers.update({"X-Repo-Commit": repo.commit, "ETag": f'"{repo.blob_id(p)}"'})
            start, status = 0, 200
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
            cut = hub.drop_after.pop(p, None) if not head else None
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
            delay = hub.slow.get(p)
            if delay:
                # Drip-feed so a test can interrupt the client mid-transfer.
                import time

                self.send_response(status)
                for k, v in headers.items():
                    self.send_header(k, v)
                self.send_header("Content-Length", str(len(data)))
                self.end_headers()
                try:
                    for i in range(0, len(data), 65536):
                        self.wfile.write(data[i : i + 65536])
                        self.wfile.flush()
                        time.sleep(delay)
                except (BrokenPipeError, ConnectionResetError):
                    self.close_connection = True
                return
            self._send(status, data, headers)

    return Handler
