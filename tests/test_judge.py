"""The LLM judge: shinken's reward_judge module, the relay that lets a `network none`
sandbox reach a judge on the host, and probe's --judge-url, against a loopback
OpenAI-compatible server that answers deterministically (tests/judge_server.py). The
rewards run inside real containers."""

from __future__ import annotations

import http.client
import json
import os
import socket
import subprocess
import sys
import uuid
from pathlib import Path

import pytest

from shinken.bundles.loader import load_bundle
from shinken.errors import ShinkenError
from shinken.judge.config import GUEST_MODULE, JudgeConfig
from shinken.judge.relay import JudgeRelay
from shinken.sandbox import judge_placement
from shinken.needs.reward import JUDGE_ERROR_MARK
from tests.cli_runner import run_cli
from tests.judge_server import JudgeServer

REPO = Path(__file__).resolve().parent.parent
HOST_KEY = "host-secret-key"


@pytest.fixture()
def runtime(tmp_path: Path, monkeypatch) -> Path:
    rt = tmp_path / "rt"
    monkeypatch.setenv("SHINKEN_RUNTIME_DIR", str(rt))  # the relay's folder is registered here
    monkeypatch.setenv("SHINKEN_JUDGE_API_KEY", HOST_KEY)
    return rt


def unix_post(sock_path: Path, path: str, body: dict | None, token: str | None, method: str = "POST"):
    class Conn(http.client.HTTPConnection):
        def connect(self) -> None:
            self.sock = socket.socket(socket.AF_UNIX)
            self.sock.connect(str(sock_path))

    c = Conn("localhost", timeout=30)
    data = json.dumps(body).encode() if body is not None else None
    headers = {"Content-Type": "application/json", **({"Authorization": f"Bearer {token}"} if token else {})}
    c.request(method, path, body=data, headers=headers)
    r = c.getresponse()
    out = r.status, json.loads(r.read() or b"{}")
    c.close()
    return out


CHAT = {"model": "whatever-the-reward-asked", "messages": [
    {"role": "system", "content": "judge"}, {"role": "user", "content": "TASK: t\n\nSTATE TO EVALUATE:\nDONE"}]}


def test_relay_forwards_only_granted_chat_completions(runtime: Path) -> None:
    with JudgeServer(api_key=HOST_KEY) as srv:
        relay = JudgeRelay(JudgeConfig(srv.url, "judge-model")).start()
        try:
            sock = relay.socket_path
            assert oct(sock.stat().st_mode & 0o777) == "0o666"
            assert unix_post(sock, "/v1/chat/completions", CHAT, None)[0] == 403
            assert unix_post(sock, "/v1/chat/completions", CHAT, "made-up")[0] == 403
            token = relay.grant()
            status, doc = unix_post(sock, "/v1/chat/completions", CHAT, token)
            assert status == 200 and json.loads(doc["choices"][0]["message"]["content"])["score"] == 1.0
            seen = srv.requests[-1]
            # The configured model and the host's key reached the endpoint; the token did not.
            assert seen["body"]["model"] == "judge-model"
            assert seen["headers"]["Authorization"] == f"Bearer {HOST_KEY}" and token not in json.dumps(seen)
            assert unix_post(sock, "/v1/embeddings", CHAT, token)[0] == 404
            assert unix_post(sock, "/v1/models", None, token, method="GET")[0] == 404
            assert unix_post(sock, "/v1/chat/completions", {"no": "messages"}, token)[0] == 400
            assert relay.revoke(token) == 1  # one call made with it
            assert unix_post(sock, "/v1/chat/completions", CHAT, token)[0] == 403
            assert len(srv.requests) == 1  # nothing refused went upstream
            # The relay's folder is registered for `shinken gc` while it lives.
            assert list((runtime / "tempdirs").glob("*.json"))
        finally:
            relay.close()
    assert not list((runtime / "tempdirs").glob("*.json")) and not sock.exists()


def test_relay_reports_an_unreachable_endpoint(runtime: Path) -> None:
    s = socket.socket()
    s.bind(("127.0.0.1", 0))
    port = s.getsockname()[1]
    s.close()  # nothing listens there now
    relay = JudgeRelay(JudgeConfig(f"http://127.0.0.1:{port}/v1", "m")).start()
    try:
        status, doc = unix_post(relay.socket_path, "/v1/chat/completions", CHAT, relay.grant())
        assert status == 502 and "unreachable" in doc["error"]["message"]
        assert relay.stats.upstream_errors == 1
    finally:
        relay.close()


GUEST_CALLS = """
import json, os, sys
sys.path.insert(0, sys.argv[1])
import reward_judge as j
print(json.dumps([
    j.call_llm_judge("Mark it", "It says DONE", json.dumps({"status": "DONE"})),
    j.call_llm_judge("Mark it", "It says DONE", json.dumps({"status": "open"})),
    j.call_vision_judge("Crop it", sys.argv[2], sys.argv[3]),
    j.call_vision_judge("Crop it", sys.argv[2], "/nonexistent.png"),
]))
"""


def test_guest_module_speaks_openai_chat_completions(tmp_path: Path) -> None:
    """Our own module (not bundle code) over plain HTTP: the functions upstream rewards call,
    their arguments and float results; a failing endpoint prints the error mark."""
    a, b = tmp_path / "a.png", tmp_path / "b.png"
    a.write_bytes(b"\x89PNG\r\n\x1a\nAAAA")
    b.write_bytes(b"\x89PNG\r\n\x1a\nBBBB")
    with JudgeServer(api_key="k") as srv:
        env = {**os.environ, "OPENAI_BASE_URL": srv.url, "OPENAI_API_KEY": "k", "SHINKEN_JUDGE_MODEL": "m1"}
        r = subprocess.run([sys.executable, "-c", GUEST_CALLS, str(GUEST_MODULE.parent), str(a), str(b)],
                           capture_output=True, text=True, env=env, timeout=60)
        assert r.returncode == 0, r.stderr
        assert json.loads(r.stdout.strip().splitlines()[-1]) == [1.0, 0.0, 0.5, 0.0]
        assert "LLM_JUDGE: score=1.0" in r.stdout and JUDGE_ERROR_MARK not in r.stdout
        assert {q["body"]["model"] for q in srv.requests} == {"m1"} and len(srv.requests) == 3
        assert srv.requests[2]["body"]["messages"][1]["content"][1]["image_url"]["url"].startswith("data:image/png;base64,")
        # A failing endpoint: one call is enough (each retry waits its backoff), tried 1 + 3 times.
        env["SHINKEN_JUDGE_MODEL"] = "broken"
        r = subprocess.run([sys.executable, "-c", GUEST_BROKEN_CALL, str(GUEST_MODULE.parent)],
                           capture_output=True, text=True, env=env, timeout=120)
        assert r.returncode == 0 and JUDGE_ERROR_MARK in r.stdout and "HTTP 500" in r.stdout, r.stdout
        assert json.loads(r.stdout.strip().splitlines()[-1]) == 0.0
        assert [q["body"]["model"] for q in srv.requests[3:]] == ["broken"] * 4
    assert JUDGE_ERROR_MARK == judge_placement_mark()


GUEST_BROKEN_CALL = """
import json, sys
sys.path.insert(0, sys.argv[1])
import reward_judge as j
print(json.dumps(j.call_llm_judge("Mark it", "It says DONE", json.dumps({"status": "DONE"}))))
"""


def judge_placement_mark() -> str:
    src = GUEST_MODULE.read_text()
    return src.split('ERROR_MARK = "', 1)[1].split('"', 1)[0]


def test_judge_options_are_checked() -> None:
    assert JudgeConfig.create(None, None) is None
    with pytest.raises(ShinkenError, match="needs --judge-model"):
        JudgeConfig.create("http://127.0.0.1:1/v1", None)
    with pytest.raises(ShinkenError, match="needs --judge-url"):
        JudgeConfig.create(None, "m")
    with pytest.raises(ShinkenError, match="not an http"):
        JudgeConfig.create("ftp://x", "m")
    # The CLI's one-line errors for these: tests/test_cli.py USAGE_ERRORS.


# --- inside real containers ------------------------------------------------------------------

PLAIN_REWARD = """from reward_judge import call_llm_judge
state = open('/home/user/state.txt').read()
print('REWARD:', call_llm_judge('Mark the ticket done', 'The state says DONE', state))
"""
TMP_PATH_REWARD = """import sys
sys.path.insert(0, '/tmp')
try:
    from reward_judge import call_llm_judge, call_vision_judge
except ImportError as exc:
    print('judge unavailable:', exc)
    raise
text = call_llm_judge('Mark it', 'The state says DONE', open('/home/user/state.txt').read())
img = call_vision_judge('Recolour it', '/home/user/before.png', '/home/user/after.png')
print(f'REWARD: {0.5 * text + img:.2f}')
"""
SETUP = [{"type": "execute", "parameters": {"command": (
    "echo pending > /home/user/state.txt && printf 'PNGa' > /home/user/before.png && printf 'PNGb' > /home/user/after.png")}}]


def _bundle(root: Path, name: str, reward: str) -> Path:
    d = root / name
    d.mkdir(parents=True)
    (d / "config.json").write_text(json.dumps({
        "id": name, "instruction": "Mark the ticket done.", "app_type": "os", "shinken_state_fidelity": "filesystem",
        "config": SETUP, "evaluator": {"type": "python", "url": "./reward.py"}}))
    (d / "reward.py").write_text(reward)
    return d


@pytest.fixture(scope="module")
def linux(docker_client) -> str:
    from shinken.images.build import ensure_image

    return ensure_image("linux", client=docker_client)


@pytest.mark.docker
def test_rewards_reach_the_judge_from_a_network_none_sandbox(docker_client, linux: str, tmp_path: Path,
                                                             runtime: Path) -> None:
    from shinken.judge.relay import close_shared
    from shinken.sandbox.docker_provider import DockerProvider

    root = tmp_path / "tasks"
    # Stable content: the goldens are found again by later runs (and removed at the end if built here).
    plain = load_bundle(_bundle(root, "judge-plain", PLAIN_REWARD))
    tmpp = load_bundle(_bundle(root, "judge-tmp", TMP_PATH_REWARD))
    run = "test-judge-" + uuid.uuid4().hex[:8]
    built = []
    providers = []

    def provider(judge: JudgeConfig | None) -> DockerProvider:
        providers.append(DockerProvider(docker_client, run_id=run, judge=judge))
        return providers[-1]

    def golden(p: DockerProvider, b):
        g = p.ensure_golden(b, linux)
        if not g.reused:
            built.append(g)
        return g

    with JudgeServer(api_key=HOST_KEY) as srv:
        try:
            p = provider(JudgeConfig(srv.url, "judge-model"))
            g, g2 = golden(p, plain), golden(p, tmpp)
            with p.fork(g) as f:
                assert f.exec("ls /sys/class/net").output.split() == ["lo"]  # network none
                rr = f.run_reward(plain)
                assert (rr.reward, rr.error) == (0.0, None), rr.output_tail
                assert "LLM_JUDGE: score=0.0" in rr.output_tail
                # What the run left: root-owned module and env file, no host key, a token now revoked.
                env_file = f.exec("stat -c '%U %a' /tmp/reward_env /tmp/reward_judge.py; cat /tmp/reward_env").output
                assert env_file.splitlines()[:2] == ["root 644", "root 644"] and HOST_KEY not in env_file
                token = next(ln.split("=", 1)[1] for ln in env_file.splitlines() if ln.startswith("OPENAI_API_KEY="))
                # The agent (user `user`) can reach the socket but is refused outside a reward run.
                probe = (f"import http.client, socket, json\nclass C(http.client.HTTPConnection):\n"
                         f"    def connect(self):\n        self.sock = socket.socket(socket.AF_UNIX)\n"
                         f"        self.sock.connect('{judge_placement.MOUNT}/judge.sock')\n"
                         f"c = C('localhost'); c.request('POST', '/v1/chat/completions', body=json.dumps({CHAT!r}),"
                         f" headers={{'Authorization': 'Bearer {token}', 'Content-Type': 'application/json'}})\n"
                         f"print(c.getresponse().status)\n")
                assert f.exec(["python3", "-c", probe]).output.strip() == "403"
                assert f.exec(["touch", f"{judge_placement.MOUNT}/x"]).exit_code != 0  # read-only mount
                # The agent finishes the task: the judge sees DONE and scores it.
                f.exec("echo DONE > /home/user/state.txt")
                rr = f.run_reward(plain)
                assert (rr.reward, rr.error) == (1.0, None), rr.output_tail
            assert [q["body"]["model"] for q in srv.requests] == ["judge-model", "judge-model"]
            assert all(q["headers"]["Authorization"] == f"Bearer {HOST_KEY}" for q in srv.requests)
            with p.fork(g2) as f:
                # A module the agent planted in /tmp (and its bytecode) is replaced, not imported.
                planted = f.exec("printf 'def call_llm_judge(*a, **k):\\n    return 1.0\\n"
                                 "def call_vision_judge(*a, **k):\\n    return 1.0\\n' > /tmp/reward_judge.py"
                                 " && python3 -c 'import py_compile; print(py_compile.compile(\"/tmp/reward_judge.py\"))'")
                assert "reward_judge" in planted.output, planted.output
                rr = f.run_reward(tmpp)
                # text: pending -> 0.0; the images differ -> the deterministic judge says 0.5.
                assert (rr.reward, rr.error) == (0.5, None), rr.output_tail
            # A judge that fails is a judge_error, never a score.
            p = provider(JudgeConfig(srv.url, "broken"))
            with p.fork(golden(p, plain)) as f:
                rr = f.run_reward(plain)
                assert (rr.reward, rr.error) == (None, "judge_error"), rr.output_tail
            # Without a judge the module and the socket are absent: the reward cannot run.
            p = provider(None)
            with p.fork(golden(p, plain)) as f:
                assert f.exec(["ls", judge_placement.MOUNT]).exit_code != 0
                rr = f.run_reward(plain)
                assert rr.error == "crash" and "reward_judge" in rr.output_tail, rr.output_tail
        finally:
            for x in providers:
                x.close()
            for g in built:
                providers[0].delete_golden(g)
            close_shared()
    assert not docker_client.containers.list(all=True, filters={"label": f"shinken.run={run}"})
    assert not list((runtime / "tempdirs").glob("*.json"))


@pytest.mark.docker
def test_probe_with_and_without_a_judge(docker_client, linux: str, tmp_path: Path) -> None:
    root = tmp_path / "tasks"
    name = "judge-probe"  # stable content: its golden is reused by later runs
    _bundle(root, name, PLAIN_REWARD)
    # A process of its own (the shared runner's subprocess): the judge relay lives as long as the
    # process that started it, and this test checks its folder goes with that process.
    env = {**os.environ, "SHINKEN_JUDGE_API_KEY": HOST_KEY, "SHINKEN_RUNTIME_DIR": str(tmp_path / "rt"),
           "SHINKEN_CACHE_DIR": str(tmp_path / "cache")}
    base = ["probe", str(root), "--image", linux, "--json"]
    r = run_cli(*base, "--run-dir", str(tmp_path / "r1"), env=env)
    assert r.returncode == 0, r.stderr[-2000:]
    t = json.loads(r.stdout)["tasks"][0]
    assert t["reason"] == "blocked" and "needs_judge" in t["detail"], t
    with JudgeServer(api_key=HOST_KEY) as srv:
        r = run_cli(*base, "--run-dir", str(tmp_path / "r2"), "--judge-url", srv.url, "--judge-model", "jm", env=env)
        assert r.returncode == 0, r.stderr[-2000:]
        doc = json.loads(r.stdout)
        assert doc["kept"] == [name] and doc["tasks"][0]["rewards"] == [0.0, 0.0], doc["tasks"][0]
        assert doc["summary"]["judge"] == f"jm at {srv.url}"
        assert len(srv.requests) == 2 and {q["body"]["model"] for q in srv.requests} == {"jm"}
    # The relay's folder went with the process.
    assert not list((tmp_path / "rt" / "tempdirs").glob("*.json"))


@pytest.mark.docker
def test_workspace_engine_scores_with_the_judge_from_its_config(docker_client, linux: str, tmp_path: Path,
                                                                runtime: Path, monkeypatch) -> None:
    """The resources server's engine (ComputerEngine.from_env, which the server's config keys
    shinken_judge_url/shinken_judge_model feed): a rollout that completes the task scores 1.0
    through the judge; a judge that fails masks the sample instead of scoring it."""
    from shinken.computer.engine import ComputerEngine
    from shinken.judge.relay import close_shared

    root = tmp_path / "tasks"
    _bundle(root, "judge-plain", PLAIN_REWARD)  # the golden of the sandbox test above, when it ran
    with JudgeServer(api_key=HOST_KEY) as srv:
        monkeypatch.setenv("CUA_GYM_TASKS", str(root))
        monkeypatch.setenv("SHINKEN_IMAGE", linux)
        monkeypatch.setenv("SHINKEN_STATE_FIDELITY", "filesystem")
        monkeypatch.setenv("SHINKEN_JUDGE_URL", srv.url)
        monkeypatch.setenv("SHINKEN_JUDGE_MODEL", "server-model")
        eng = ComputerEngine.from_env(keep_goldens_on_close=True)
        try:
            assert eng.provider.judge == JudgeConfig(srv.url, "server-model")
            gen = eng.seed("s1", "judge-plain")
            eng.tool("s1", gen, "computer_exec", {"command": "echo DONE > /home/user/state.txt"})
            res = eng.verify("s1", gen)
            assert (res.reward, res.mask_sample) == (1.0, False), res
            assert srv.requests[-1]["body"]["model"] == "server-model"
        finally:
            eng.close()
        monkeypatch.setenv("SHINKEN_JUDGE_MODEL", "broken")
        eng = ComputerEngine.from_env(keep_goldens_on_close=True)
        try:
            gen = eng.seed("s2", "judge-plain")
            res = eng.verify("s2", gen)
            assert res.mask_sample and res.failure_kind == "judge_failed" and res.code == "reward_judge_error", res
        finally:
            eng.close()
            close_shared()
    monkeypatch.delenv("SHINKEN_JUDGE_URL")
    with pytest.raises(ShinkenError, match="SHINKEN_JUDGE_MODEL .shinken_judge_model. needs SHINKEN_JUDGE_URL"):
        ComputerEngine.from_env()
