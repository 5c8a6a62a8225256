"""mockweb without Docker: app naming, checkout discovery and hashing, placeholder maps and
materialization, sid bookkeeping, the guest State API commands against a loopback mock."""

from __future__ import annotations

import json
import shutil
import threading
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path
from urllib.parse import parse_qs, urlparse

import pytest

from shinken.bundles.loader import load_bundle
from shinken.errors import ShinkenError
from shinken.mockweb import apps as A
from shinken.mockweb.hub import _sid_of, new_sid, owner_key
from shinken.mockweb.manifest import HubApp, HubManifest
from shinken.mockweb.materialize import (
    MARKER,
    UrlMap,
    add_mock_urls,
    hub_url_map,
    marker_of,
    materialize,
    needs_materializing,
)
from shinken.mockweb.state_api import StateApiError, StateClient, record, restore
from shinken.sandbox.ownership import Owner
from shinken.sandbox.policy import task_needs
from shinken.schemas import validation_error

REPO = Path(__file__).resolve().parent.parent
HUB_SRC = REPO / "tests" / "data" / "hub"
WEB_TASKS = REPO / "tests" / "data" / "web_tasks"


def test_app_names() -> None:
    assert A.app_key("google_docs") == "GOOGLE_DOCS"
    assert A.app_key("Canvas-LMS") == "CANVAS_LMS"
    assert A.app_key("12306") == "12306"
    assert A.app_alias("google_docs") == "cua-gym-google-docs"  # the hosted name without its domain
    assert A.app_alias("Canvas-LMS") == "cua-gym-canvas-lms"
    assert A.url_placeholder("epic-health") == "__CUA_GYM_EPIC_HEALTH_URL__"
    assert A.host_placeholder("hubspot_marketing") == "__CUA_GYM_HUBSPOT_MARKETING_HOST__"
    keys = [m.group(1) for m in A.PLACEHOLDER_RE.finditer(b"'__CUA_GYM_HUBSPOT_MARKETING_URL__/x' __CUA_GYM_GMAIL_HOST__")]
    assert keys == [b"HUBSPOT_MARKETING", b"GMAIL"]


def _checkout(tmp_path: Path) -> Path:
    root = tmp_path / "hub"
    shutil.copytree(HUB_SRC, root)
    (root / "websites" / "notes_mock").mkdir()  # no package.json / vite config: not an app
    (root / "websites" / "README.md").write_text("x")
    return root


def test_discover_and_select(tmp_path: Path) -> None:
    root = _checkout(tmp_path)
    apps = A.discover_apps(root)
    assert [a.name for a in apps] == ["mailbox"] and apps[0].has_lockfile
    assert A.discover_apps(root / "websites") == apps  # the websites/ folder itself works too
    assert A.select_apps(apps, ["Mailbox_mock"]) == apps
    with pytest.raises(ShinkenError, match="gmail not in the checkout"):
        A.select_apps(apps, ["gmail"])
    with pytest.raises(ShinkenError, match="no <name>_mock folders"):
        A.discover_apps(tmp_path)
    with pytest.raises(ShinkenError, match="not a folder"):
        A.discover_apps(tmp_path / "nope")


def test_source_hash_ignores_build_output_and_state(tmp_path: Path) -> None:
    app = A.discover_apps(_checkout(tmp_path))[0]
    h = A.source_hash(app)
    for junk in ("node_modules/vite/index.js", "dist/index.html", ".mock-states/s.json", ".mock-files/s/a.txt"):
        p = app.folder / junk
        p.parent.mkdir(parents=True, exist_ok=True)
        p.write_text("x")
    assert A.source_hash(app) == h
    (app.folder / "src" / "defaults.js").write_text("export const DEFAULT_STATE = {};\n")
    assert A.source_hash(app) != h


def _manifest(*names: str) -> HubManifest:
    return HubManifest("sha256:" + "ab" * 32, "sha256:node", tuple(
        HubApp(n, A.app_key(n), A.app_alias(n), 8000 + i, f"/hub/apps/{n}", "0123456789ab", "sha256:app")
        for i, n in enumerate(names)))


def _write_task(folder: Path, setup: str, reward: str, app_type: str = "gmail_mock") -> Path:
    folder.mkdir(parents=True)
    (folder / "task.json").write_text(json.dumps({
        "id": folder.name, "instruction": "Open __CUA_GYM_GMAIL_URL__ and star it.", "app_type": app_type,
        "config": [{"type": "download", "parameters": {"files": [{"url": "./initial_setup.py", "path": "/home/user/s.py"}]}},
                   {"type": "execute", "parameters": {"command": "python3 /home/user/s.py"}}],
        "evaluator": {"type": "python", "url": "./reward.py"}}))
    (folder / "initial_setup.py").write_text(setup)
    (folder / "reward.py").write_text(reward)
    return folder


def test_materialize_placeholders_hosted_and_app_type(tmp_path: Path) -> None:
    task = _write_task(tmp_path / "t1",
                       "U = '__CUA_GYM_GMAIL_URL__'\nH = '__CUA_GYM_GMAIL_HOST__'\nS = 'https://cua-gym-slack.xlang.ai/x'\n",
                       "print('REWARD: 0')\nU = '__CUA_GYM_GMAIL_URL__/go'\n")
    b = load_bundle(task)
    assert needs_materializing(b)
    urls = hub_url_map(_manifest("gmail", "slack"))
    m = materialize(b, urls, tmp_path / "cache")
    assert m.missing == [] and sorted(m.apps) == ["gmail", "slack"]
    setup = (m.bundle.path / "initial_setup.py").read_text()
    assert "U = 'http://cua-gym-gmail'\nH = 'cua-gym-gmail'\nS = 'http://cua-gym-slack/x'" in setup
    assert (m.bundle.path / "reward.py").read_text().endswith("U = 'http://cua-gym-gmail/go'\n")
    assert "http://cua-gym-gmail and star it" in m.bundle.instruction
    assert "__CUA_GYM_" not in (m.bundle.path / "task.json").read_text()
    marker = marker_of(m.bundle)
    assert validation_error("mockweb_bundle", marker) is None
    assert marker["source_bundle_hash"] == b.bundle_hash and marker["apps"]["gmail"]["version"] == "0123456789ab"
    assert m.bundle.ok and m.bundle.id == "t1" and m.bundle.bundle_hash != b.bundle_hash
    # The same inputs give the same copy (its hash keys the golden); another app version another one.
    assert materialize(b, urls, tmp_path / "cache").bundle.bundle_hash == m.bundle.bundle_hash
    other = _manifest("gmail", "slack")
    other = HubManifest(other.image_id, other.node_image, tuple(
        HubApp(a.name, a.key, a.alias, a.port, a.dir, "ffffffffffff", a.image) for a in other.apps))
    assert materialize(b, hub_url_map(other), tmp_path / "cache").bundle.bundle_hash != m.bundle.bundle_hash
    # The sandbox sees a web task: network (the run network) and a desktop (the setup's browser).
    needs = task_needs(m.bundle)
    assert needs.network and needs.desktop


def test_materialize_reports_what_the_run_cannot_serve(tmp_path: Path) -> None:
    task = _write_task(tmp_path / "t2", "U = '__CUA_GYM_JIRA_URL__'\n", "print('REWARD: 0')\n", app_type="jira_mock,gmail_mock")
    m = materialize(load_bundle(task), hub_url_map(_manifest("gmail")), tmp_path / "cache")
    assert m.missing == ["__CUA_GYM_JIRA_URL__", "jira_mock"]
    plain = _write_task(tmp_path / "t3", "print(1)\n", "print('REWARD: 0')\n", app_type="os")
    (plain / "task.json").write_text((plain / "task.json").read_text().replace("__CUA_GYM_GMAIL_URL__", "it"))
    b = load_bundle(plain)
    assert not needs_materializing(b)
    assert materialize(b, hub_url_map(_manifest("gmail")), tmp_path / "cache").bundle is b


def test_mock_urls_flat_url_variables_and_hub_bindings(tmp_path: Path) -> None:
    urls = add_mock_urls(UrlMap(), {"__CUA_GYM_GMAIL_URL__": "http://10.0.0.5:8006/",
                                    "__CUA_GYM_SLACK_HOST__": "10.0.0.5:8007"}, "m.json")
    assert urls.mock_urls()["__CUA_GYM_GMAIL_HOST__"] == "10.0.0.5:8006"
    assert urls.target_for_placeholder("SLACK").url == "http://10.0.0.5:8007"
    variables = {"variables": {
        "__CUA_GYM_GMAIL_URL__": {"env": "CUA_GYM_GMAIL_URL", "kind": "url", "default": "https://cua-gym-gmail.xlang.ai"},
        "__CUA_GYM_OUTLOOK_URL__": {"env": "CUA_GYM_OUTLOOK_URL", "kind": "url", "default": "https://cua-gym-outlook-web.xlang.ai"}}}
    assert validation_error("mock_urls", variables) is None
    # The env var is the address; a hosted default alone is no address (it is not ours to rely on).
    external = add_mock_urls(UrlMap(), variables, "url_variables.json", env={"CUA_GYM_GMAIL_URL": "http://m:1"})
    assert external.target_for_placeholder("GMAIL").url == "http://m:1"
    assert external.target_for_placeholder("OUTLOOK") is None
    # With a hub the hosted default names the app: OUTLOOK -> the hub's outlook_web.
    hub = add_mock_urls(hub_url_map(_manifest("gmail", "outlook_web")), variables, "url_variables.json",
                        bind_only=True, env={})
    assert hub.target_for_placeholder("OUTLOOK").alias == "cua-gym-outlook-web"
    with pytest.raises(ShinkenError, match="forks reach only the hub"):
        add_mock_urls(hub_url_map(_manifest("gmail")), {"__CUA_GYM_JIRA_URL__": "http://10.0.0.5:1"}, "m.json",
                      bind_only=True)
    with pytest.raises(ShinkenError, match="not a URL"):
        add_mock_urls(UrlMap(), {"__CUA_GYM_GMAIL_URL__": "gmail"}, "m.json")


def test_sids_name_their_owner_and_run() -> None:
    me = Owner.current()
    a, b = new_sid(me, "run-a"), new_sid(me, "run-a")
    assert a != b and len(a) == len(b) and a.startswith(f"shk-{owner_key(me, 'run-a')}-")
    assert owner_key(me, "run-a") != owner_key(me, "run-b")
    for name, sid in ((f"{a}.json", a), (f"{a}.initial.json", a), (a, a), ("3f2a-uuid.json", "3f2a-uuid"),
                      ("abc_initial.json", "abc"), (".mock-state.json", None), ("_default", None)):
        assert _sid_of(name) == sid, name


# ---------------------------------------------------------------- guest commands, loopback mock


class _Mock(BaseHTTPRequestHandler):
    """A loopback State API (enough of the contract for record/restore)."""

    states: dict[str, dict] = {}
    broken = False  # set_current ignored: a mock that breaks the contract

    def log_message(self, *a: object) -> None:
        pass

    def _send(self, code: int, doc: object) -> None:
        data = json.dumps(doc).encode()
        self.send_response(code)
        self.send_header("Content-Type", "application/json")
        self.send_header("Content-Length", str(len(data)))
        self.end_headers()
        self.wfile.write(data)

    def do_GET(self) -> None:
        u = urlparse(self.path)
        sid = parse_qs(u.query).get("sid", [""])[0]
        st = self.states.get(sid)
        if u.path == "/state":
            return self._send(200, {"stored_state": st and st["current"], "has_custom_state": st is not None, "sid": sid})
        if u.path == "/go":
            st = st or {"initial": {"d": 1}, "current": {"d": 1}}
            return self._send(200, {"initial_state": st["initial"], "current_state": st["current"], "state_diff": {}})
        self._send(404, {})

    def do_POST(self) -> None:
        u = urlparse(self.path)
        sid = parse_qs(u.query).get("sid", [""])[0]
        body = json.loads(self.rfile.read(int(self.headers["Content-Length"])))
        if body["action"] == "reset":  # the sid's state dropped: it reads as the app's default again
            self.states.pop(sid, None)
            return self._send(200, {"success": True})
        st = self.states.setdefault(sid, {"initial": None, "current": None})
        if body["action"] == "set":
            st["current"] = body["state"]
            st["initial"] = st["initial"] or body["state"]
        elif body["action"] == "set_current" and not self.broken:
            st["current"] = body["state"]
        self._send(200, {"success": True})


@pytest.fixture()
def mock_url():
    _Mock.states, _Mock.broken = {}, False
    srv = ThreadingHTTPServer(("127.0.0.1", 0), _Mock)
    threading.Thread(target=srv.serve_forever, daemon=True).start()
    yield f"http://127.0.0.1:{srv.server_address[1]}"
    srv.shutdown()


def test_record_and_restore_round_trip(mock_url: str, tmp_path: Path) -> None:
    c = StateClient(mock_url)
    c.set("golden", {"emails": [1]})
    c.set_current("golden", {"emails": [1, 2]})
    sid_file = tmp_path / "task_web_sid"
    sid_file.write_text("golden\n")
    rec = record({"gmail": mock_url, "slack": mock_url + "/"}, str(sid_file))
    assert validation_error("hub_state", rec) is None
    assert rec["sid"] == "golden" and sorted(rec["apps"]) == ["gmail", "slack"]
    assert rec["apps"]["gmail"]["current_state"] == {"emails": [1, 2]}
    out = restore(rec, "fork1")
    assert out["apps"] == ["gmail", "slack"]
    assert c.go("fork1")["initial_state"] == {"emails": [1]} and c.go("fork1")["current_state"] == {"emails": [1, 2]}
    assert record({"gmail": mock_url}, str(tmp_path / "missing"))["sid"] is None  # the setup wrote no sid
    _Mock.broken = True
    with pytest.raises(StateApiError, match="different state"):
        restore(rec, "fork2")
    with pytest.raises(StateApiError) as exc:
        StateClient("http://127.0.0.1:9", timeout=2).go("x")
    assert exc.value.kind == "unreachable"


def test_a_name_lookup_that_fails_for_now_is_asked_again(mock_url: str, monkeypatch) -> None:
    """Docker's embedded DNS of a container just started can fail a lookup for now (EAI_AGAIN,
    seen in a suite run at load: `cua-gym-mailbox: Temporary failure in name resolution`, the
    rollout masked). The guest's client asks again for a while; a name that does not exist fails
    at once. Real HTTP to the loopback mock; only the lookups of the test's host name are scripted."""
    import socket
    import time

    from shinken.mockweb import state_api

    port = int(mock_url.rsplit(":", 1)[1])
    real = socket.getaddrinfo
    failures = {"again": 2}

    def lookup(host, *args, **kwargs):
        if host == "hub-soon.test":
            if failures["again"] > 0:
                failures["again"] -= 1
                raise socket.gaierror(socket.EAI_AGAIN, "Temporary failure in name resolution")
            return real("127.0.0.1", *args, **kwargs)
        if host == "hub-never.test":
            raise socket.gaierror(socket.EAI_AGAIN, "Temporary failure in name resolution")
        if host == "hub-none.test":
            raise socket.gaierror(socket.EAI_NONAME, "Name or service not known")
        return real(host, *args, **kwargs)

    monkeypatch.setattr(socket, "getaddrinfo", lookup)
    c = StateClient(f"http://hub-soon.test:{port}")
    c.set("dns", {"n": 1})  # a POST: sent once the name resolved
    assert failures["again"] == 0 and _Mock.states["dns"]["current"] == {"n": 1}
    t0 = time.monotonic()
    with pytest.raises(StateApiError) as exc:
        StateClient(f"http://hub-none.test:{port}").go("x")
    assert exc.value.kind == "unreachable" and time.monotonic() - t0 < 1.0
    monkeypatch.setattr(state_api, "DNS_PATIENCE_S", 1.0)
    t0 = time.monotonic()
    with pytest.raises(StateApiError, match="Temporary failure") as exc:
        StateClient(f"http://hub-never.test:{port}").go("x")
    assert exc.value.kind == "unreachable" and 0.5 <= time.monotonic() - t0 < 3.0


def test_the_reset_guest_command_resets_the_sid_in_every_recorded_app(mock_url: str, tmp_path: Path, capsys) -> None:
    """What the vandal probe runs in a web task's fork: the State API's `reset` for the fork's sid in
    each app the golden recorded state in; the other sids keep theirs."""
    from shinken.mockweb.state_api import main

    c = StateClient(mock_url)
    for sid in ("fork1", "fork2"):
        c.set(sid, {"emails": [1]})
    rec = tmp_path / "hub-state.json"
    rec.write_text(json.dumps({"schema": "shinken.hub_state/1", "sid": "golden", "apps": {
        "gmail": {"url": mock_url, "initial_state": {"emails": [1]}, "current_state": {"emails": [1]}}}}))
    assert main(["reset", "--record", str(rec), "--sid", "fork1"]) == 0
    out = json.loads(capsys.readouterr().out.strip().splitlines()[-1])
    assert out["sid"] == "fork1" and out["apps"] == ["gmail"]
    assert c.state("fork1")["has_custom_state"] is False and c.go("fork1")["current_state"] == {"d": 1}
    assert c.go("fork2")["current_state"] == {"emails": [1]}
    rec.write_text(json.dumps({"schema": "shinken.hub_state/1", "sid": "golden", "apps": {
        "gmail": {"url": "http://127.0.0.1:9", "initial_state": {}, "current_state": {}}}}))
    assert main(["reset", "--record", str(rec), "--sid", "fork1"]) == 3  # unreachable: one JSON line, no traceback
    assert json.loads(capsys.readouterr().out.strip())["kind"] == "unreachable"


def test_a_relaunch_record_names_the_forks_sid() -> None:
    """The golden's record of the setup's browser is relaunched on the fork's own sid (argv and
    environment); the signature the fork is checked against does not change."""
    from shinken.sandbox.desktop import DesktopRecord

    rec = DesktopRecord.from_json({
        "roots": [{"argv": ["/usr/lib/chromium/chromium", "--remote-debugging-port=9222",
                            "http://cua-gym-mailbox/?sid=abc-1"], "cwd": "/home/user", "uid": 1000,
                   "env": {"TASK_URL": "http://cua-gym-mailbox/?sid=abc-1", "HOME": "/home/user"}},
                  {"argv": ["xterm"], "cwd": None, "uid": 1000, "env": None}],
        "windows": [{"app": "Chromium", "role": "frame", "title": "Mailbox (3 in inbox) - Chromium"}],
        "active": "Mailbox (3 in inbox) - Chromium"})
    new = rec.renamed("abc-1", "shk-x-2")
    assert new.roots[0].argv[-1] == "http://cua-gym-mailbox/?sid=shk-x-2"
    assert new.roots[0].env == {"TASK_URL": "http://cua-gym-mailbox/?sid=shk-x-2", "HOME": "/home/user"}
    assert new.roots[1] == rec.roots[1] and new.signature() == rec.signature()
    assert "abc-1" not in new.restore_arg() and "abc-1" in rec.restore_arg()
    assert rec.renamed("", "x") is rec and rec.renamed("abc-1", "abc-1") is rec


def test_a_script_npm_would_only_run_is_run_without_npm(tmp_path: Path) -> None:
    from shinken.mockweb.build import direct_script

    (tmp_path / "package.json").write_text(json.dumps({"scripts": {
        "build": "tsc && vite build", "preview": "vite preview", "prepreview": "echo hook", "dev": ""}}))
    assert direct_script(tmp_path, "build") == "tsc && vite build"
    assert direct_script(tmp_path, "preview") is None  # a pre-hook: npm run keeps it
    assert direct_script(tmp_path, "dev") is None and direct_script(tmp_path, "start") is None
    (tmp_path / "package.json").write_text("{not json")
    assert direct_script(tmp_path, "build") is None
