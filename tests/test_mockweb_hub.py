"""Web tasks on a real hub: the stand-in mock app (tests/data/hub, built with npm and served by
`vite preview` with its state middleware, like every CUA-Gym-Hub mock) in a hub container, the
run network, golden + parallel forks with their own sids, the network allowlist, probe end to
end, and gc of sids a killed process left."""

from __future__ import annotations

import json
import os
import signal
import socket
import subprocess
import sys
import textwrap
import threading
import time
import uuid
from concurrent.futures import ThreadPoolExecutor
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path

import pytest

from tests.cli_runner import CliResult, run_cli

from shinken.bundles.loader import load_bundle
from shinken.mockweb import hub as hubs
from shinken.mockweb.manifest import read_manifest
from shinken.mockweb.materialize import hub_url_map
from shinken.mockweb.session import RECORD_PATH, SID_FILE, WebSession
from shinken.mockweb.state_api import StateClient
from shinken.sandbox.docker_provider import DockerProvider
from shinken.sandbox.docker_client import create_container
from shinken.sandbox.ownership import labels_for
from shinken.schemas import validation_error

pytestmark = [pytest.mark.docker]

REPO = Path(__file__).resolve().parent.parent
WEB = REPO / "tests" / "data" / "web_tasks"
STAR = "8b2f7c1e-4a3d-5e6f-9a0b-1c2d3e4f5a6b"  # release-shaped: placeholder, sid file, opens google-chrome


def _free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def _shinken(*args: str, timeout: float = 600) -> CliResult:
    return run_cli(*args, subprocess_=True, timeout=timeout)


def _py(fork, code: str) -> str:
    res = fork.exec(["python3", "-c", textwrap.dedent(code)], timeout=60)
    assert res.ok, res.output
    return res.output.strip()


def _go(fork) -> dict:
    return json.loads(_py(fork, """
        import json, urllib.request
        sid = open('/tmp/task_web_sid').read().strip()
        print(urllib.request.urlopen('http://cua-gym-mailbox/go?sid=' + sid, timeout=30).read().decode())
    """).splitlines()[-1])


def _mutate(fork, code: str) -> None:
    """Change the fork's current state like the app does (`set_current`), `code` edits `st`."""
    _py(fork, f"""
        import json, urllib.request
        sid = open('/tmp/task_web_sid').read().strip()
        base = 'http://cua-gym-mailbox'
        st = json.loads(urllib.request.urlopen(base + '/go?sid=' + sid, timeout=30).read())['current_state']
        {code}
        req = urllib.request.Request(base + '/post?sid=' + sid, method='POST', headers={{'Content-Type': 'application/json'}},
                                     data=json.dumps({{'action': 'set_current', 'state': st}}).encode())
        assert urllib.request.urlopen(req, timeout=30).status == 200
    """)


# ---------------------------------------------------------------- the hub by hand + the contract


def test_hub_up_status_down_and_the_state_api_contract(hub_image: str, docker_client) -> None:
    port = _free_port()
    r = _shinken("hub", "up", hub_image, "--publish", str(port), "--json")
    assert r.returncode == 0, r.stderr
    doc = json.loads(r.stdout)
    assert validation_error("hub_status", doc) is None
    (h,) = doc["hubs"]
    try:
        assert h["detached"] and h["owner"] is None and h["published"] == port
        assert [a["alias"] for a in h["apps"]] == ["cua-gym-mailbox"]
        url = h["apps"][0]["url"]
        assert url == f"http://127.0.0.1:{port}"
        c = StateClient(url)
        state = {"messages": [{"id": "m1", "subject": "a", "folder": "inbox", "starred": False}], "n": 1}
        assert c.set("t-1", state)["success"] is True
        go = c.go("t-1")
        assert go["initial_state"] == state and go["current_state"] == state and go["state_diff"] == {}
        changed = {"messages": [{**state["messages"][0], "starred": True}], "n": 1, "extra": 5}
        c.set_current("t-1", changed)
        go = c.go("t-1")
        assert go["initial_state"] == state and go["current_state"] == changed
        assert go["state_diff"] == {"messages": {"modified": changed["messages"]}, "extra": {"added": 5}}
        assert c.state("t-1") == {"stored_state": changed, "has_custom_state": True, "sid": "t-1"}
        c.post("t-1", "set", {"n": 2, "more": {"x": 1}}, merge=True)  # merge into current, initial kept
        assert c.go("t-1")["current_state"]["n"] == 2 and c.go("t-1")["initial_state"] == state
        c.reset("t-1")
        assert c.state("t-1")["has_custom_state"] is False
        assert c.go("t-1")["current_state"]["messages"][0]["subject"] == "Welcome"  # the app's default again
        c.set("a/b.c", {"k": 1})  # sids keep only [A-Za-z0-9_-]
        assert c.go("abc")["current_state"] == {"k": 1}
        assert c.go("t-2")["current_state"]["messages"][0]["subject"] == "Welcome"  # other sids untouched
        up = c.upload("t-1", "note 1.txt", b"hello hub", "text/plain")["files"][0]
        assert up["original_name"] == "note 1.txt" and up["size"] == 9 and up["url"].startswith("/files/t-1/")
        assert c.file(up["url"]) == (200, b"hello hub")
        assert c.file("/files/t-2/" + up["stored_name"])[0] == 404
        # The supervisor routes by host name; a host no app answers to is told which exist.
        with pytest.raises(Exception):
            StateClient(f"http://127.0.0.1:{port + 1}", timeout=3).go("x")
        code, out = hubs.hub_exec(docker_client, h["id"], ["bash", "-c",
                                  "exec 3<>/dev/tcp/127.0.0.1/80; printf 'GET /go HTTP/1.0\\r\\nHost: nope\\r\\n\\r\\n' >&3; cat <&3"])
        assert code == 0 and "404" in out and "cua-gym-mailbox" in out
        st = json.loads(_shinken("hub", "status", "--json").stdout)
        mine = next(x for x in st["hubs"] if x["id"] == h["id"])
        assert mine["sids"] >= 2 and mine["apps"][0]["running"] is True
    finally:
        r = _shinken("hub", "down", h["name"], "--json")
    assert r.returncode == 0 and json.loads(r.stdout)["stopped"] == [h["name"]], r.stderr
    assert not [x for x in hubs.find_hubs(docker_client, running_only=False) if x.id == h["id"]]


# ---------------------------------------------------------------- golden, forks, isolation


@pytest.fixture(scope="module")
def web_run(hub_image: str, cua_image: str, docker_client):
    """A run: own hub (not shared), its network, a provider wired to it, the star task's golden."""
    manifest = read_manifest(docker_client, hub_image)
    run_id = f"test-web-{uuid.uuid4().hex[:8]}"
    web = WebSession(docker_client, hub_url_map(manifest), manifest, run_id=run_id, reuse_hub=False)
    provider = DockerProvider(run_id=run_id, web=web)
    try:
        m = web.materialize(load_bundle(WEB / STAR))
        assert m.missing == [] and list(m.apps) == ["mailbox"]
        golden = provider.ensure_golden(m.bundle, cua_image)
        yield {"web": web, "provider": provider, "golden": golden, "bundle": m.bundle, "run_id": run_id,
               "client": docker_client, "image": cua_image}
    finally:
        provider.close()
        web.close()


def test_parallel_forks_get_their_own_copy_of_the_golden_hub_state(web_run) -> None:
    p, g, bundle, web = web_run["provider"], web_run["golden"], web_run["bundle"], web_run["web"]
    client = web_run["client"]
    assert g.network and g.needs_desktop
    with ThreadPoolExecutor(2) as pool:
        forks = list(pool.map(lambda _: p.fork(g), range(2)))
    try:
        a, b = forks
        assert a.web_sid != b.web_sid and a.web_sid.startswith("shk-")
        assert [_py(f, "print(open('/tmp/task_web_sid').read())") for f in forks] == [a.web_sid, b.web_sid]
        record = json.loads(a.download(RECORD_PATH))
        assert validation_error("hub_state", record) is None
        golden_current = record["apps"]["mailbox"]["current_state"]
        # The setup's own sid was recorded, then removed from the hub; no fork uses it.
        stored = {s.sid for s in hubs.list_sids(client, web.hub.id)}
        assert record["sid"] not in stored and {a.web_sid, b.web_sid} <= stored
        for f in forks:
            go = _go(f)
            assert go["initial_state"] == record["apps"]["mailbox"]["initial_state"]
            assert go["current_state"] == golden_current
        _mutate(a, "[m.update(starred=True) for m in st['messages'] if m['id'] == 'm1']")
        _mutate(b, "[m.update(folder='archive') for m in st['messages'] if m['id'] == 'm2']")
        ga, gb = _go(a), _go(b)
        by_id = lambda go: {m["id"]: m for m in go["current_state"]["messages"]}  # noqa: E731
        assert by_id(ga)["m1"]["starred"] is True and by_id(ga)["m2"]["folder"] == "inbox"
        assert by_id(gb)["m1"]["starred"] is False and by_id(gb)["m2"]["folder"] == "archive"
        assert "messages" in ga["state_diff"] and "messages" in gb["state_diff"]
        assert [f.run_reward(bundle).reward for f in forks] == [1.0, 0.0]
        # A fork made after both mutated still starts from the golden, not from either of them.
        with p.fork(g) as c:
            assert _go(c)["current_state"] == golden_current
            assert c.run_reward(bundle).reward == 0.0
            third = c.web_sid
    finally:
        for f in forks:
            f.close()
    left = {s.sid for s in hubs.list_sids(client, web.hub.id)}
    assert not {a.web_sid, b.web_sid, third} & left  # each fork's sid went with the fork


# The pages the fork's browser shows, as DevTools lists them (remote debugging on 9222).
PAGES = """
import json, urllib.request
print(json.dumps([{"url": t["url"], "title": t["title"]} for t in
                  json.load(urllib.request.urlopen("http://127.0.0.1:9222/json", timeout=5)) if t["type"] == "page"]))
"""


def test_the_browser_shows_the_forks_own_state_and_the_tools_drive_it(web_run) -> None:
    from shinken.computer.tools import new_context, run_tool

    p, g, bundle = web_run["provider"], web_run["golden"], web_run["bundle"]
    assert g.needs_relaunch and g.web_sid and any(g.web_sid in " ".join(r.argv) for r in g.desktop.roots)
    with p.fork(g) as f:
        # The setup's browser came back with the fork (relaunch tier), on the fork's own sid: the
        # golden's sid is gone from the hub, a page on it would show the app's default mailbox.
        assert f.web_sid and f.web_sid != g.web_sid
        pages = json.loads(_py(f, PAGES).splitlines()[-1])
        assert pages == [{"url": f"http://cua-gym-mailbox/?sid={f.web_sid}", "title": "Mailbox (3 in inbox)"}], pages
        ctx = new_context(f)
        button = None
        for _ in range(60):  # the accessibility tree fills in as the page loads
            tree = run_tool(ctx, "computer_observe", {"mode": "tree"})
            button = next((ln.split("]")[0].lstrip(" [") for ln in tree.splitlines()
                           if "button" in ln and '"Star Quarterly report"' in ln), None)
            if button:
                break
            time.sleep(0.5)
        assert button, tree
        out = run_tool(ctx, "computer_click", {"element": button, "x": None, "y": None})
        assert not out.startswith("error"), out
        for _ in range(100):  # the page saves with set_current
            m1 = next(m for m in _go(f)["current_state"]["messages"] if m["id"] == "m1")
            if m1["starred"]:
                break
            time.sleep(0.1)
        assert m1["starred"] is True
        assert f.run_reward(bundle).reward == 1.0


def test_a_reprovisioned_web_computer_has_its_setups_sid_until_it_closes(web_run) -> None:
    """The re-provision tier runs the setup again: its own sid (not a fork's) holds the state,
    the desktop is checked against the golden's, and the sid goes when the computer does."""
    p, g, bundle, web = web_run["provider"], web_run["golden"], web_run["bundle"], web_run["web"]
    with p.provision(bundle, g) as f:
        sid = f.web_sid
        assert sid and sid != g.web_sid and _py(f, "print(open('/tmp/task_web_sid').read())") == sid
        assert sid in {s.sid for s in hubs.list_sids(web_run["client"], web.hub.id)}
        assert [m["starred"] for m in _go(f)["current_state"]["messages"]] == [False, False, True]
    assert sid not in {s.sid for s in hubs.list_sids(web_run["client"], web.hub.id)}


# What a policy in a web fork does to write its own target state, bypassing the app: the State API's
# whole-state writes on its rollout's sid, in every spelling a mock would read as that sid and path.
FORGE = """
import json, sys, urllib.error, urllib.request
sid = open('/tmp/task_web_sid').read().strip()
base = 'http://cua-gym-mailbox'
st = json.loads(urllib.request.urlopen(base + '/go?sid=' + sid, timeout=30).read())['current_state']
for m in st['messages']:
    m['starred'] = True
def post(path, body, headers=None):
    req = urllib.request.Request(base + path, method='POST', data=json.dumps(body).encode(),
                                 headers={'Content-Type': 'application/json', **(headers or {})})
    try:
        return urllib.request.urlopen(req, timeout=30).status
    except urllib.error.HTTPError as e:
        return e.code
tries = {
    'set': post('/post?sid=' + sid, {'action': 'set', 'state': st}),
    'no-action': post('/post?sid=' + sid, {'state': st}),
    'reset': post('/post?sid=' + sid, {'action': 'reset'}),
    'repeated-sid': post('/post?sid=x&sid=' + sid, {'action': 'set', 'state': st}),
    'mangled-sid': post('/post?sid=' + sid.replace('-', '-!', 1), {'action': 'set', 'state': st}),
    'upper-path': post('/POST/?sid=' + sid, {'action': 'set', 'state': st}),
    'forged-key': post('/post?sid=' + sid, {'action': 'set', 'state': st}, {'X-Shinken-State-Key': '0' * 64}),
    # the attacker's own sid, solved, then named in the file the reward reads
    'own-sid': post('/post?sid=attacker1', {'action': 'set', 'state': st}),
}
# past the front door: the apps' own servers (vite preview on 20000 + the app's index) answer a
# whole-state write without any key; every internal port answers the fork nothing
import socket
opened = []
for port in range(20000, 20016):
    try:
        with socket.create_connection(('cua-gym-mailbox', port), timeout=3) as s:
            s.sendall(('GET /go?sid=%s HTTP/1.0' % sid).encode() + bytes([13, 10, 13, 10]))
            if s.recv(64):
                opened.append(port)
    except OSError:
        pass
    base = 'http://cua-gym-mailbox:%d' % port
    try:
        code = post('/post?sid=' + sid, {'action': 'set', 'state': st})
    except OSError:
        continue
    tries['internal-%d' % port] = code
tries['internal-answered'] = opened
open('/tmp/task_web_sid', 'w').write('attacker1')
print(json.dumps(tries))
"""


def test_a_policy_cannot_write_its_rollouts_hub_state_past_the_app(web_run) -> None:
    p, g, bundle = web_run["provider"], web_run["golden"], web_run["bundle"]
    with p.fork(g) as f:
        before = _go(f)
        tries = json.loads(_py(f, FORGE).splitlines()[-1])
        assert tries.pop("internal-answered") == [], tries  # no app's own port answers the fork
        assert {k: v for k, v in tries.items() if k != "own-sid"} == {k: 403 for k in tries if k != "own-sid"}, tries
        assert tries["own-sid"] == 200  # a sid of its own is the policy's to play with; the reward never reads it
        _py(f, f"open('/tmp/task_web_sid', 'w').write({f.web_sid!r})")
        assert _go(f) == before  # nothing reached the rollout's state
        _py(f, "open('/tmp/task_web_sid', 'w').write('attacker1')")
        res = f.run_reward(bundle)  # the reward reads the rollout's own sid, whatever the file said
        assert res.reward == 0.0, res
        # what shinken itself does with the rollout's key still works: the vandal probe's reset
        assert f.reset_web_state() == ["mailbox"]
    with p.provision(bundle, g) as f:  # a re-provisioned computer's setup sid is sealed too
        tries = json.loads(_py(f, FORGE).splitlines()[-1])
        assert tries["set"] == 403 and tries["reset"] == 403, tries


def test_a_hub_image_built_before_the_state_guards_is_refused_for_runs(hub_image: str, docker_client) -> None:
    # A hub whose supervisor lists no guards (an image of shinken before the rollout keys and the
    # loopback-only apps) would let a fork write the state its reward reads: a run refuses it.
    import io
    import tarfile

    from shinken.errors import EnvironmentProblem

    dockerfile = (f"FROM {hub_image}\nUSER root\n"
                  "RUN sed -i \"s/guards: \\['rollout_key', 'apps_loopback_only'\\],//\" /hub/supervisor.mjs"
                  " && ! grep -q apps_loopback_only /hub/supervisor.mjs\nUSER hub\n").encode()
    buf = io.BytesIO()
    with tarfile.open(fileobj=buf, mode="w") as tar:
        info = tarfile.TarInfo("Dockerfile")
        info.size = len(dockerfile)
        tar.addfile(info, io.BytesIO(dockerfile))
    old_tag = f"shinken-test/hub-unguarded:{uuid.uuid4().hex[:8]}"
    docker_client.images.build(fileobj=io.BytesIO(buf.getvalue()), custom_context=True, tag=old_tag, rm=True)
    try:
        manifest = read_manifest(docker_client, old_tag)
        with pytest.raises(EnvironmentProblem, match="shinken hub build") as info:
            WebSession(docker_client, hub_url_map(manifest), manifest, run_id=f"test-unguarded-{uuid.uuid4().hex[:6]}",
                       reuse_hub=False)
        assert "rollout_key, apps_loopback_only missing" in str(info.value)
        # nothing of the refused run is left running
        assert [h for h in hubs.find_hubs(docker_client, manifest.image_id)] == []
    finally:
        docker_client.images.remove(old_tag, force=True)


class _Hello(BaseHTTPRequestHandler):
    def do_GET(self) -> None:
        self.send_response(200)
        self.end_headers()
        self.wfile.write(b"host service")

    def log_message(self, *a: object) -> None:
        pass


def test_a_web_fork_reaches_the_hub_and_nothing_else(web_run, demo_root: Path) -> None:
    p, g, client, web = web_run["provider"], web_run["golden"], web_run["client"], web_run["web"]
    api = client.api
    host_srv = ThreadingHTTPServer(("0.0.0.0", 0), _Hello)  # a host service on every address
    threading.Thread(target=host_srv.serve_forever, daemon=True).start()
    port = host_srv.server_address[1]
    other = create_container(api, web_run["image"], command=["python3", "-m", "http.server", "8080"],
                             labels=labels_for("build", run=web_run["run_id"], task="test-other-bridge"),
                             host_config=api.create_host_config(network_mode="bridge"))
    try:
        api.start(other)
        bridge = api.inspect_container(other)["NetworkSettings"]["Networks"]["bridge"]
        other_ip, bridge_gw = bridge["IPAddress"], bridge["Gateway"]  # docker0's host address
        run_gw = api.inspect_network(web.network)["IPAM"]["Config"][0]["Gateway"]
        deadline = time.monotonic() + 60
        while True:  # the other container serves (seen from the host)
            try:
                socket.create_connection((other_ip, 8080), timeout=5).close()
                break
            except OSError:
                assert time.monotonic() < deadline, "the other container never served"
                time.sleep(0.2)
        with p.fork(g) as f:
            assert api.inspect_container(f.id)["HostConfig"]["NetworkMode"] == web.network
            out = _py(f, f"""
                import urllib.request
                for u in ['http://cua-gym-mailbox/__shinken/health', 'http://{run_gw}:{port}/', 'http://{bridge_gw}:{port}/',
                          'http://{other_ip}:8080/', 'http://1.1.1.1/']:
                    try:
                        urllib.request.urlopen(u, timeout=4)
                        print(u, 'REACHED')
                    except Exception as e:
                        print(u, 'blocked', type(e).__name__)
            """)
        lines = out.splitlines()
        assert lines[0].endswith("REACHED"), out
        assert all(" blocked " in ln for ln in lines[1:]), out
        # A task that is not a web task stays on network none.
        plain = load_bundle(demo_root / "hello-file")
        with p.fork(p.ensure_golden(plain, web_run["image"])) as f:
            assert api.inspect_container(f.id)["HostConfig"]["NetworkMode"] == "none"
            assert f.web_sid is None
    finally:
        host_srv.shutdown()
        api.remove_container(other, force=True)


# ---------------------------------------------------------------- probe end to end


def test_probe_keeps_the_web_task_and_drops_the_zero_signal_one(hub_image: str, cua_image: str,
                                                                 docker_client, tmp_path: Path) -> None:
    ids = tmp_path / "ids.txt"
    ids.write_text(f"{STAR}\nmailbox-zero-signal\n")
    run_dir = tmp_path / f"run-{uuid.uuid4().hex[:8]}"
    receipt = tmp_path / "receipt.json"
    r = _shinken("probe", str(WEB), "--ids", str(ids), "--hub", hub_image, "--image", cua_image,
                 "--state-fidelity", "filesystem", "--run-dir", str(run_dir), "--receipt", str(receipt), "--json")
    assert r.returncode == 0, r.stderr
    doc = json.loads(receipt.read_text())
    lines = {json.loads(x)["task_id"]: json.loads(x) for x in (run_dir / "receipts.jsonl").read_text().splitlines()}
    assert lines[STAR]["outcome"] == "kept", lines[STAR]["detail"]
    assert lines[STAR]["rewards"] == [0.0, 0.0]  # the untouched state, on two forks
    assert lines["mailbox-zero-signal"]["reason"] == "zero_signal"
    assert doc["kept"] == [STAR]
    # The run's hub, network and forks are gone with the run.
    label = f"shinken.run={run_dir.name}"
    assert not docker_client.api.containers(all=True, filters={"label": label})
    assert not docker_client.api.networks(filters={"label": label})
    # Without a hub the web tasks are blocked, with the reason.
    r = _shinken("probe", str(WEB), "--ids", str(ids), "--image", cua_image, "--run-dir", str(tmp_path / "r2"), "--json")
    assert r.returncode == 0, r.stderr
    blocked = [json.loads(x) for x in (tmp_path / "r2" / "receipts.jsonl").read_text().splitlines()]
    assert {x["reason"] for x in blocked} == {"blocked"} and all("needs_mock_web" in x["detail"] for x in blocked)


_WEB_SETUP = """import json
import urllib.request
import uuid

BASE_URL = '__CUA_GYM_MAILBOX_URL__'
sid = uuid.uuid4().hex
with open('/tmp/task_web_sid', 'w') as f:
    f.write(sid)
state = {"messages": [{"id": "m3", "subject": "Invoice 42", "folder": "inbox", "starred": False}]}
req = urllib.request.Request(BASE_URL + '/post?sid=' + sid, method='POST', headers={'Content-Type': 'application/json'},
                             data=json.dumps({'action': 'set', 'state': state}).encode())
assert urllib.request.urlopen(req, timeout=60).status == 200
"""
_WEB_REWARD = """import json
import urllib.request

with open("/tmp/task_web_sid") as f:
    sid = f.read().strip()
with urllib.request.urlopen("__CUA_GYM_MAILBOX_URL__/go?sid=" + sid, timeout=30) as resp:
    messages = json.loads(resp.read())["current_state"].get("messages", [])
invoice = [m for m in messages if m.get("subject") == "Invoice 42"]
ok = {CHECK}
print(f"REWARD: {1.0 if ok else 0.0}")
"""


def _web_task(root: Path, task_id: str, instruction: str, check: str) -> None:
    d = root / task_id
    d.mkdir(parents=True)
    (d / "task.json").write_text(json.dumps({
        "id": task_id, "instruction": instruction, "app_type": "mailbox_mock", "shinken_state_fidelity": "filesystem",
        "config": [{"type": "download", "parameters": {"files": [{"url": "./initial_setup.py",
                                                                  "path": "/home/user/initial_setup.py"}]}},
                   {"type": "execute", "parameters": {"command": "python3 /home/user/initial_setup.py"}}],
        "evaluator": {"type": "python", "url": "./reward.py"}}))
    (d / "initial_setup.py").write_text(_WEB_SETUP)
    (d / "reward.py").write_text(_WEB_REWARD.replace("{CHECK}", check))


def test_vandal_resets_a_web_tasks_hub_state(hub_image: str, cua_image: str, docker_client, tmp_path: Path) -> None:
    """--probes noop,vandal on web tasks: each vandal computer's own hub sid is reset (the State API's
    `reset`) besides the setup's files being damaged; the sid file, shinken's plumbing, is left alone.
    A reward that only checks that a message is gone passes on the reset state in both variants:
    dropped, the app named. (One task: each of its computers starts a desktop.)"""
    root = tmp_path / "tasks"
    _web_task(root, "web-vandal-absent", "In the mailbox, delete the message titled 'Invoice 42'.", "not invoice")
    receipt = tmp_path / "receipt.json"
    r = _shinken("probe", str(root), "--hub", hub_image, "--image", cua_image, "--state-fidelity", "filesystem",
                 "--repeats", "1", "--concurrency", "1", "--probes", "noop,vandal", "--run-dir",
                 str(tmp_path / f"run-{uuid.uuid4().hex[:8]}"), "--receipt", str(receipt))
    assert r.returncode == 0, r.stderr[-3000:]
    doc = json.loads(receipt.read_text())
    lines = {t["task_id"]: t for t in doc["tasks"]}
    absent = lines["web-vandal-absent"]
    assert absent["rewards"] == [0.0], absent["detail"]  # the untouched state still has the message
    assert absent["reason"] == "reward_passes_vandalism", absent["detail"]
    assert absent["vandal"]["rewards"] == {"remove": 1.0, "garbage": 1.0}
    assert len(absent["vandal"]["web"]) == 1 and "mailbox" in absent["vandal"]["web"][0], absent["vandal"]
    assert f"the hub state of {absent['vandal']['web'][0]} reset" in absent["detail"]
    assert "/tmp/task_web_sid" not in absent["vandal"]["files"]  # the pointer kept, the state reset
    assert absent["vandal"]["files"] == ["/home/user/initial_setup.py"]
    assert validation_error("receipt_line", absent) is None


# ---------------------------------------------------------------- gc of leaked sids


_LEAKER = """
import json, sys, time
from shinken.bundles.loader import load_bundle
from shinken.mockweb.manifest import read_manifest
from shinken.mockweb.materialize import hub_url_map
from shinken.mockweb.session import WebSession
from shinken.sandbox.docker_provider import DockerProvider
from shinken.sandbox.docker_client import connect
client = connect()
manifest = read_manifest(client, sys.argv[1])
web = WebSession(client, hub_url_map(manifest), manifest, run_id=sys.argv[3])
p = DockerProvider(run_id=sys.argv[3], web=web)
g = p.ensure_golden(web.materialize(load_bundle(sys.argv[2])).bundle, sys.argv[4])
f = p.fork(g)
print(json.dumps({"sid": f.web_sid, "fork": f.id, "network": web.network, "hub": web.hub.id}), flush=True)
time.sleep(600)
"""


def test_gc_reclaims_what_a_killed_run_left_in_a_shared_hub(web_run, hub_image: str, cua_image: str,
                                                              docker_client) -> None:
    client = docker_client
    manifest = read_manifest(client, hub_image)
    shared = hubs.start_hub(client, manifest, detached=True)  # outlives the killed run, like `hub up`
    leak_run = f"test-leak-{uuid.uuid4().hex[:8]}"
    proc = subprocess.Popen([sys.executable, "-c", _LEAKER, hub_image, str(WEB / STAR), leak_run, cua_image],
                            stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
    try:
        line = proc.stdout.readline()
        assert line, proc.stderr.read()
        leaked = json.loads(line)
        assert leaked["hub"] == shared.id  # the run joined the running hub instead of starting one
        os.kill(proc.pid, signal.SIGKILL)
        proc.wait(30)
        # A live run's sid in the same hub is never reclaimed.
        mine = WebSession(client, hub_url_map(manifest), manifest, run_id=web_run["run_id"] + "-live")
        p = DockerProvider(run_id=mine.run_id, web=mine)
        live = p.fork(web_run["golden"])
        try:
            r = _shinken("gc", "--json", "--label", f"shinken.run={mine.run_id}")
            assert r.returncode == 0 and json.loads(r.stdout)["reclaimable"] == [], r.stdout
            r = _shinken("gc", "--json", "--label", f"shinken.run={leak_run}")
            assert r.returncode == 0, r.stderr
            found = {(i["resource"], i["id"]) for i in json.loads(r.stdout)["reclaimable"]}
            assert ("sid", f"{shared.id}/{leaked['sid']}") in found
            # The fork container is the killed run's too (a running workspace server's own gc may
            # have removed it already: it reclaims dead owners' forks machine-wide).
            assert ("container", leaked["fork"]) in found or not client.api.containers(
                all=True, filters={"id": leaked["fork"]})
            assert any(res == "network" for res, _ in found)
            assert leaked["sid"] in {s.sid for s in hubs.list_sids(client, shared.id)}
            r = _shinken("gc", "--force", "--json", "--label", f"shinken.run={leak_run}")
            assert r.returncode == 0, r.stderr
            assert json.loads(r.stdout)["failed"] == []
            left = {s.sid for s in hubs.list_sids(client, shared.id)}
            assert leaked["sid"] not in left and live.web_sid in left
            assert not client.api.networks(filters={"label": f"shinken.run={leak_run}"})
            assert not client.api.containers(all=True, filters={"label": f"shinken.run={leak_run}"})
        finally:
            live.close()
            p.close()
            mine.close()
    finally:
        if proc.poll() is None:
            proc.kill()
        hubs.stop_hub(client, shared.id)
        for n in client.api.networks(filters={"label": f"shinken.run={leak_run}"}):
            client.api.remove_network(n["Id"])


# Last in the module: it kills the run's hub (the fixture's teardown removes what is left).
def test_a_hub_killed_before_verify_is_the_machines_failure_never_a_score(web_run) -> None:
    """The chaos row `hub_killed` below the Gym layer: the task solved in a fork, then the hub
    holding the fork's state killed; the reward cannot read what the policy did, so run_reward
    raises HubLost (the server masks it as provider_unavailable / hub_lost), never a 0.0."""
    from shinken.sandbox.api import HubLost

    p, g, bundle, web, client = web_run["provider"], web_run["golden"], web_run["bundle"], web_run["web"], web_run["client"]
    with p.fork(g) as f:
        _mutate(f, "[m.update(starred=True) for m in st['messages'] if m['id'] == 'm1']")  # solved
        assert web.lost() is None
        client.api.kill(web.hub.id)
        assert "not running" in (web.lost() or "")
        with pytest.raises(HubLost, match="hub holding this rollout's state"):
            f.run_reward(bundle)
