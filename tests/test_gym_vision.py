"""Screenshot workspaces in the real NeMo Gym 0.7.0, in one runner container and one `gym env
start`: `make-workspace --observation screenshot --no-exec` with `--actions pixel` and with
`--actions pyautogui` (JPEG), each served by the workspace's vision agent, its own resources
server and Gym's openai_model, their two rollouts in one `gym eval run` at once, both driven by one
stub vision-language policy
(tests/vision_policy.py) that checks every turn's screenshot arrived as a valid image in a user
message and clicks the entry's pixel taken from the fork's accessibility tree; zenity-entry
reaches reward 1.0 and the shell answers "no such tool".

Gym's gates (`gym env validate / test / publish`) run per action profile in the same container,
and the server's own pytest (`gym env test --resources-server`) once. `gym env test` needs a
full_reward verifier case recorded with the profile's tools (the demo's recorded solution uses
computer_exec, which --no-exec drops), so test and publish run on screenshot workspaces that keep
the shell (pixel with WebP scaled to 1280x800, pyautogui with PNG scaled to 1280x800), made from
the receipt's hello-file and zenity-entry lines only (the spreadsheet's zero-reward case adds a
LibreOffice fork per verifier run and nothing profile-specific); the --no-exec ones pass
`gym env validate`.

The four workspaces are made separately (`--name` each) from the suite's demo probe receipt
(gym_harness.gym_workspace: hello-file, zenity-entry and the spreadsheet on the cua image, the
recorded hello-file solution replayed; its goldens are shared) and their environments and servers
copied into one folder, which Gym serves as one workspace, with its own shared venv cache (the
vision agent replaces simple_agent, and there are four resources servers). What needs no
services overlaps the stack's start: `gym env start` comes up in the background while the four
validates run at once and then the gates (the two profiles' `gym env test` at once, then their
`publish` and the server's pytest at once) run in a thread; the two rollouts run in one
`gym eval run` at once. It runs in CI (scripts/test.sh); the phases' seconds are printed."""

from __future__ import annotations

import concurrent.futures
import json
import shutil
import socket
import subprocess
import sys
import time
from pathlib import Path
from typing import Any, Iterator

import pytest

sys.path.insert(0, str(Path(__file__).resolve().parent))
import gym_harness as gh  # noqa: E402
import scripted_policy as sp  # noqa: E402
import vision_policy as vp  # noqa: E402

# A cold start builds the vision stack's venvs (shared afterwards): longer than the default 900 s.
pytestmark = [pytest.mark.docker, pytest.mark.slow, pytest.mark.timeout(2700)]

NAME = gh.NAME
GATE_TASKS = ("hello-file", "zenity-entry")  # hello-file has the recorded full_reward solution
# The --no-exec workspaces Gym serves (rollouts), by action profile: (name, make-workspace args, image size).
ROLLOUT = {
    "pixel": (NAME, ["--actions", "pixel", "--no-exec"], (1920, 1080)),
    "pyautogui": (f"{NAME}_pyautogui", ["--actions", "pyautogui", "--no-exec", "--screenshot-format", "jpeg",
                                       "--screenshot-quality", "70"], (1920, 1080)),
}
# The workspaces that keep the shell, for `gym env test / publish` (see the module doc).
GATES = {
    "pixel": (f"{NAME}_gates_pixel", ["--actions", "pixel", "--screenshot-format", "webp", "--screenshot-size",
                                      "1280x800"]),
    "pyautogui": (f"{NAME}_gates_pyautogui", ["--actions", "pyautogui", "--screenshot-size", "1280x800"]),
}
SERVERS = [n for n, *_ in ROLLOUT.values()] + [n for n, _ in GATES.values()]
PHASES: dict[str, float] = {}  # seconds per phase, printed at the end
VENV_DIRS = (*(f"resources_servers/{n}" for n in SERVERS), *gh.VISION_VENV_DIRS[1:])


def _ok(r: subprocess.CompletedProcess) -> str:
    assert r.returncode == 0, (r.stdout + r.stderr)[-6000:]
    return r.stdout


def _make(tmp: Path, receipt: Path, name: str, args: list[str]) -> Path:
    ws = tmp / f"ws-{name}"
    r = gh.shinken("make-workspace", "--dest", str(ws), "--task-root", str(gh.DEMO), "--ids", str(receipt),
                   "--rollouts", str(gh.SOLUTIONS), "--image", gh.sandbox_image(), "--license", "Apache-2.0",
                   "--author", "shinken tests", "--name", name, "--observation", "screenshot", *args, "--json")
    assert r.returncode == 0, r.stderr
    return ws


def _subset(receipt: Path, ids: tuple[str, ...], dest: Path) -> Path:
    """The probe receipt restricted to `ids` (its kept list and lines), as a user would pass a
    shorter receipt."""
    doc = json.loads(receipt.read_text())
    doc["kept"] = [t for t in doc["kept"] if t in ids]
    doc["tasks"] = [t for t in doc["tasks"] if t["task_id"] in ids]
    assert sorted(doc["kept"]) == sorted(ids), doc["kept"]
    dest.write_text(json.dumps(doc))
    return dest


def _combined(tmp: Path, receipt: Path) -> Path:
    """The four workspaces in one folder: the first as made, the others' environments and
    servers copied in (the vision agent is the same file in each)."""
    gates_receipt = _subset(receipt, GATE_TASKS, tmp / "gates-receipt.json")
    made = {n: _make(tmp, receipt, n, a) for n, a, _ in ROLLOUT.values()}
    made.update({n: _make(tmp, gates_receipt, n, a) for n, a in GATES.values()})
    ws = made[NAME]
    agent = "responses_api_agents/shinken_vision_agent/app.py"
    for name, other in made.items():
        if other == ws:
            continue
        assert (other / agent).read_bytes() == (ws / agent).read_bytes()
        for part in ("environments", "resources_servers"):
            shutil.copytree(other / part / name, ws / part / name)
    return ws


def _server_dir(pid: int, c: gh.GymContainer) -> str:
    """The server dir a Gym server process runs in (Gym puts it first on its PYTHONPATH); the runner
    shares the host's pid namespace (read through the runner when this user may not read it)."""
    try:
        raw = Path(f"/proc/{pid}/environ").read_bytes()
    except OSError:
        raw = subprocess.run(["docker", "exec", c.name, "cat", f"/proc/{pid}/environ"], capture_output=True).stdout
    path = next((kv[len(b"PYTHONPATH="):] for kv in raw.split(b"\0") if kv.startswith(b"PYTHONPATH=")), b"")
    return path.split(b":")[0].decode(errors="replace").rstrip("/")


def server_forks(c: gh.GymContainer, server: str, task: str | None = None) -> list[str]:
    """Running or not, the forks made by resources server `server`'s process(es) in runner `c`."""
    pids = c.pids()
    host = socket.gethostname()
    flt = ["--filter", "label=shinken.kind=fork"] + (["--filter", f"label=shinken.task={task}"] if task else [])
    r = subprocess.run(["docker", "ps", "-a", *flt, "--format", '{{.ID}} {{.Label "shinken.owner"}}'],
                       capture_output=True, text=True)
    out = []
    for line in r.stdout.splitlines():
        cid, _, owner = line.partition(" ")
        parts = owner.rsplit("/", 2)
        if len(parts) == 3 and parts[0] == host and parts[1].isdigit() and int(parts[1]) in pids \
                and _server_dir(int(parts[1]), c).endswith(f"/resources_servers/{server}"):
            out.append(cid)
    return out


class Forks:
    """The zenity fork of the rollout in progress on resources server `server`, made by that
    server's process in the runner container (the two profiles' rollouts run at once, and Gym's
    gates make forks in the same runner meanwhile)."""

    def __init__(self, server: str) -> None:
        self.server = server
        self.container: gh.GymContainer | None = None

    def __call__(self) -> str:
        assert self.container is not None
        rows = []
        for cid in server_forks(self.container, self.server, "zenity-entry"):
            r = subprocess.run(["docker", "inspect", "-f", "{{.State.Running}} {{.Created}}", cid],
                               capture_output=True, text=True)
            running, created = (r.stdout.split() + ["", ""])[:2]
            if running == "true":
                rows.append((created, cid))
        assert rows, f"no zenity fork of {self.server}'s rollout"
        return max(rows)[1]  # one rollout per server; an ended one may still be going away


def _validate_all(c: gh.GymContainer) -> dict[str, dict[str, Any]]:
    """`gym env validate NAME --json` of every workspace, run at once (each is a CLI start)."""
    jobs = " ".join(f"(gym env validate {n} --json > results/validate-{n}.json 2> results/validate-{n}.err; "
                    f"echo $? > results/validate-{n}.rc) &" for n in SERVERS)
    _ok(c.exec(f"mkdir -p results && {jobs} wait", timeout=1800))
    out = {}
    for n in SERVERS:
        rc = c.exec(f"cat results/validate-{n}.rc").stdout.strip()
        stdout = c.exec(f"cat results/validate-{n}.json").stdout
        assert rc == "0", f"gym env validate {n} exited {rc}:\n{stdout[-3000:]}" + \
            c.exec(f"tail -c 3000 results/validate-{n}.err").stdout
        out[n] = json.loads(stdout)
    return out


def _gates(c: gh.GymContainer) -> dict[str, Any]:
    """Gym's gates of the two workspaces that keep the shell, the profiles side by side:
    `gym env test` of both at once, then `gym env publish` of both and the pyautogui server's own
    pytest at once (verifier runs keep the goldens they find, so runs at once share them)."""
    t0 = time.monotonic()
    out: dict[str, Any] = {}
    with concurrent.futures.ThreadPoolExecutor(3) as pool:
        tests = {a: pool.submit(c.exec, f"gym env test {n} --json", 1800) for a, (n, _) in GATES.items()}
        out["test"] = {a: f.result() for a, f in tests.items()}
        pubs = {a: pool.submit(c.exec, f"gym env publish {n} --json", 1800) for a, (n, _) in GATES.items()}
        own = pool.submit(c.exec, f"gym env test --resources-server {GATES['pyautogui'][0]}", 1800)
        out["publish"] = {a: f.result() for a, f in pubs.items()}
        out["own_pytest"] = own.result()
    out["s"] = time.monotonic() - t0
    return out


@pytest.fixture(scope="module")
def vision_gym(tmp_path_factory, gym_workspace: gh.GymWorkspace) -> Iterator[dict[str, Any]]:
    """One runner with the combined workspace (made from the suite's demo probe receipt: the cua
    image, its goldens shared). `gym env start` of the two --no-exec environments (one stub policy
    for both) comes up in the background while `gym env validate` of all four and the gates of the
    two with the shell run in the same runner (none of them starts services)."""
    t0 = time.monotonic()
    tmp = tmp_path_factory.mktemp("vision-gym")
    ws = _combined(tmp, gym_workspace.receipt)
    PHASES["make-workspace x4"] = time.monotonic() - t0
    forks = {p: Forks(name) for p, (name, _, _) in ROLLOUT.items()}
    stubs = {p: vp.VisionPolicy(fork_of=forks[p], actions=p, size=size) for p, (_, _, size) in ROLLOUT.items()}
    policy = sp.PolicyServer(decide=vp.ByProfile(stubs)).start()
    gh.point_at_policy(ws, policy.base_url)
    with gh.gym_session(ws, tmp / "venvs", policy, venv_dirs=VENV_DIRS) as session, \
            concurrent.futures.ThreadPoolExecutor(1) as background:
        c = session.container
        for f in forks.values():
            f.container = c
        envs = " ".join(f"--environment {n}" for n, *_ in ROLLOUT.values())
        ready = session.start_in_background(f"gym env start {envs} --config {gh.MODEL_CONFIG}")
        t1 = time.monotonic()
        validated = _validate_all(c)
        PHASES[f"gym env validate x{len(SERVERS)} at once"] = time.monotonic() - t1
        gates = background.submit(_gates, c)
        _, ready_s = ready(1800)
        PHASES["gym env start (2 environments), beside the gates"] = ready_s
        print(f"\nvision Gym session: workspaces, validate x{len(SERVERS)} and start in "
              f"{time.monotonic() - t0:.0f}s (servers ready in {ready_s:.0f}s)")
        try:
            yield {"ws": ws, "session": session, "container": c, "policy": policy, "stubs": stubs,
                   "validated": validated, "gates": gates}
        finally:
            PHASES["whole module"] = time.monotonic() - t0
            print("\nvision Gym module, seconds per phase: " + ", ".join(f"{k} {v:.0f}" for k, v in PHASES.items()))


def test_gym_env_validate_every_profile(vision_gym: dict[str, Any]) -> None:
    for name, report in vision_gym["validated"].items():
        rows = {d["name"]: d["rows"] for d in report["datasets"]}
        tasks = len(GATE_TASKS) if name in dict(GATES.values()) else len(gh.DEMO_TASKS)
        assert rows["train"] + rows["validation"] == tasks and rows["example"] == 5, (name, rows)
        assert report["declared_profile"] == "custom-gym-verifier", name


@pytest.fixture(scope="module")
def vision_rollouts(vision_gym: dict[str, Any]) -> dict[str, Any]:
    """One `gym eval run` of zenity-entry on both --no-exec workspaces at once (concurrency 2):
    each row names its workspace's vision agent (agent_ref), which Gym routes it to."""
    t0 = time.monotonic()
    ws: Path = vision_gym["ws"]
    c: gh.GymContainer = vision_gym["container"]
    inputs = []
    for actions, (name, _, _) in ROLLOUT.items():
        data = ws / "resources_servers" / name / "data"
        rows = [json.loads(x) for f in ("train.jsonl", "validation.jsonl") for x in (data / f).read_text().splitlines()]
        zenity = [r for r in rows if r["task_id"] == "zenity-entry"]
        assert zenity and zenity[0]["agent_ref"]["name"] == f"{name}_vision_agent"
        inputs.append(zenity[0])
    (ws / "results").mkdir(exist_ok=True)
    (ws / "results" / "vision.jsonl").write_text("".join(json.dumps(r) + "\n" for r in inputs))
    r = c.exec("gym eval run --no-serve --input results/vision.jsonl --output results/vision_rollouts.jsonl "
               f"--limit {len(inputs)} --concurrency {len(inputs)}", timeout=1800)
    _ok(r)
    rollouts = [json.loads(x) for x in (ws / "results" / "vision_rollouts.jsonl").read_text().splitlines()]
    assert not vision_gym["policy"].errors, vision_gym["policy"].errors
    assert len(rollouts) == len(inputs), [x.get("failure_reason") for x in rollouts]
    by = {}
    for x in rollouts:  # which workspace's rollout: the row's profile (verify answers the row), else its tools
        called = {o.get("name") for o in x["response"]["output"] if o.get("type") == "function_call"}
        actions = (x.get("shinken_profile") or {}).get("actions")
        by[actions or ("pyautogui" if "computer_pyautogui" in called else "pixel")] = x
    assert sorted(by) == sorted(ROLLOUT), sorted(by)
    PHASES["gym eval run, both rollouts at once"] = time.monotonic() - t0
    return by


@pytest.mark.parametrize("actions", list(ROLLOUT))
def test_vision_rollout_in_gym(vision_gym: dict[str, Any], vision_rollouts: dict[str, Any], actions: str) -> None:
    c: gh.GymContainer = vision_gym["container"]
    stub: vp.VisionPolicy = vision_gym["stubs"][actions]
    x = vision_rollouts[actions]
    texts = [str(o.get("output"))[:300] for o in x["response"]["output"] if o.get("type") == "function_call_output"]
    assert x["reward"] == 1.0 and x["mask_sample"] is False, (x.get("failure_reason"), x.get("reward_output_tail"), texts)
    assert len(stub.no_such_tool) == 1 and "no such tool" in stub.no_such_tool[0], stub.no_such_tool
    assert stub.clicked and stub.turns >= 4
    # Every turn carried at least the seed's screen, and no screenshot was dropped from the history.
    assert all(n >= 1 for n in stub.images_per_turn) and stub.images_per_turn == sorted(stub.images_per_turn)
    # The recorded rollout holds the screenshots as user messages, the tool texts without base64.
    output = x["response"]["output"]
    images = [o for o in output if o.get("type") == "message" and o.get("role") == "user"
              and any(p.get("type") == "input_image" for p in o.get("content") or [])]
    names = {o.get("call_id"): o.get("name") for o in output if o.get("type") == "function_call"}
    acted = [o for o in output if o.get("type") == "function_call_output" and names.get(o.get("call_id")) in
             vp.GUI_TOOLS and not str(o.get("output", "")).startswith(vp.NO_SCREEN)]
    assert len(images) == 1 + len(acted)  # the seed's screen, then one after every GUI action
    assert all("base64" not in str(o.get("output", "")) for o in output if o.get("type") == "function_call_output")
    assert _settled(c, ROLLOUT[actions][0])  # the rollout's fork is gone (the gates may have some meanwhile)
    print(f"\n{actions}: {stub.turns} turns, {len(stub.checked)} distinct screenshots checked; "
          "the recorded output, images cut:")
    for o in output:
        print("  " + json.dumps(_cut(o))[:300])


def _cut(item: dict[str, Any]) -> dict[str, Any]:
    """A rollout item with its image data URLs cut short (for the log)."""
    keep = {k: v for k, v in item.items() if k in ("type", "role", "name", "arguments", "output", "content")}
    if isinstance(keep.get("content"), list):
        keep["content"] = [{**p, "image_url": str(p.get("image_url"))[:40] + "…"} if p.get("type") == "input_image"
                           else p for p in keep["content"]]
    return keep


def _settled(c: gh.GymContainer, server: str | None = None, timeout: float = 30) -> bool:
    """An ended rollout's fork is removed in the background: wait until no fork of `server` (of
    any process of the runner when None) is left."""
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        if (gh.forks_of(c) if server is None else server_forks(c, server)) == []:
            return True
        time.sleep(1)
    return False


@pytest.mark.parametrize("actions", list(GATES))
def test_gym_gates_of_a_screenshot_workspace(vision_gym: dict[str, Any], actions: str) -> None:
    """test (zero-reward cases and the recorded solution on real forks, through the profile's
    engine), publish (validate and the verifier cases again, then the catalog); the server's own
    pytest for the pyautogui one (its code is the same for every profile; its tests read the
    profile from the config); validate ran for every workspace (test_gym_env_validate_every_profile)."""
    name = GATES[actions][0]
    c: gh.GymContainer = vision_gym["container"]
    gates = vision_gym["gates"].result(timeout=2400)
    PHASES["gates of both (test, publish, own pytest), beside the start"] = gates["s"]
    cases = json.loads(_ok(gates["test"][actions]).strip().splitlines()[-1])
    kinds = sorted(k["kind"] for k in cases["cases"])
    assert kinds.count("zero_reward") == len(GATE_TASKS) and kinds.count("full_reward") == 1, kinds
    for k in cases["cases"]:  # hello-file's recorded solution through computer_exec; untouched starts at 0
        if k["kind"] in ("full_reward", "zero_reward"):
            assert k["observed_rewards"] == [1.0 if k["kind"] == "full_reward" else 0.0], k
    if actions == "pyautogui":  # the solution ends with the program DONE (no computer_done in this profile)
        lines = (vision_gym["ws"] / "resources_servers" / name / "tests" / "verifier_cases.jsonl").read_text()
        (full,) = [k for k in map(json.loads, lines.splitlines()) if k["kind"] == "full_reward"]
        calls = [(o["name"], o["arguments"]) for o in full["request"]["response"]["output"]]
        assert [n for n, _ in calls] == ["computer_exec", "computer_pyautogui"] and "DONE" in calls[-1][1], calls
        out = _ok(gates["own_pytest"])
        assert " passed" in out and " failed" not in out
    pub = json.loads(_ok(gates["publish"][actions]).strip().splitlines()[-1])
    assert pub["name"] == name and pub["verifier_cases"] == len(cases["cases"])
    assert _settled(c)
