"""`shinken publish` end to end: a real triage and probe of demo bundles on Docker, then the
REAL huggingface_hub client against the loopback hub (tests/hub_server.py), through the
installed `shinken` command: first publish, unchanged re-publish, changed publish, a
concurrent commit, a pull request, token errors, --local-dir, and a download of the published
repo that triages and probes like the original."""

from __future__ import annotations

import json
import os
import shutil
import sys
from pathlib import Path

import pytest

from tests.cli_runner import CliResult, run_cli
import yaml

from shinken.errors import EXIT_FAILED, EXIT_USAGE
from shinken.schemas import check_with_jsonschema

REPO = Path(__file__).resolve().parent.parent
if str(REPO) not in sys.path:
    sys.path.insert(0, str(REPO))
from tests.hub_server import GITATTRIBUTES, FakeRepo, HubServer, dataset_card  # noqa: E402

KEPT = ["hello-file", "hello-notes"]
DROPPED = {"zero-signal": "zero_signal", "broken-reward": "defective"}
TOKEN = "hf_publish_test"


def _run(args: list[str], env: dict[str, str] | None = None, timeout: int = 600) -> CliResult:
    # With an environment of its own (a hub endpoint, a token), a process of its own: huggingface_hub
    # reads HF_ENDPOINT and the token once, at import. Without one, in process (the same environment).
    return run_cli(*args, env=env, timeout=timeout)


@pytest.fixture(scope="module")
def demo_run(tmp_path_factory, linux_image: str) -> dict[str, Path]:
    """Four file-only demo bundles (two kept, two dropped for different reasons), triaged and
    probed for real on the linux image: the receipt every test publishes."""
    tmp = tmp_path_factory.mktemp("pubrun")
    root = tmp / "tasks"
    root.mkdir()
    for name in ("hello-file", "zero-signal", "broken-reward"):
        shutil.copytree(REPO / "demo" / name, root / name)
    # A second kept task with its own instruction, so the split has both sides.
    shutil.copytree(REPO / "demo" / "hello-file", root / "hello-notes")
    cfg = json.loads((root / "hello-notes" / "config.json").read_text())
    cfg.update(id="hello-notes", instruction="Write exactly the text hello shinken into /home/user/hello.txt")
    (root / "hello-notes" / "config.json").write_text(json.dumps(cfg, indent=2))
    (root / "hello-notes" / "initial_setup.sh").chmod(0o755)  # an exec bit must survive the round trip
    triage, receipt = tmp / "triage.json", tmp / "receipt.json"
    p = _run(["triage", str(root), "--image", linux_image, "--report", str(triage)])
    assert p.returncode == 0, p.stderr
    p = _run(["probe", str(root), "--image", linux_image, "--triage", str(triage), "--receipt", str(receipt),
              "--run-dir", str(tmp / "run"), "--state-fidelity", "filesystem"])
    assert p.returncode == 0, p.stderr
    doc = json.loads(receipt.read_text())
    assert sorted(doc["kept"]) == KEPT and {d["id"]: d["reason"] for d in doc["dropped"]} == DROPPED
    return {"root": root, "triage": triage, "receipt": receipt, "tmp": tmp}


@pytest.fixture()
def hub():
    server = HubServer().start()
    yield server
    server.stop()


def _env(hub: HubServer, tmp_path: Path, token: str | None = TOKEN) -> dict[str, str]:
    env = {k: v for k, v in os.environ.items() if not k.startswith("HF_")}
    # The loopback hub speaks LFS, not Xet; the client picks Xet by itself when hf_xet is installed.
    env.update(HF_ENDPOINT=hub.endpoint, HF_HOME=str(tmp_path / "hfhome"), HF_HUB_DISABLE_XET="1",
               HF_HUB_DISABLE_TELEMETRY="1")
    if token:
        env["HF_TOKEN"] = token
    return env


def _publish(demo_run: dict[str, Path], env: dict[str, str], *extra: str, repo_id: str = "team/cua-clean",
             triage: bool = True, as_json: bool = True) -> CliResult:
    args = ["publish", "--repo-id", repo_id, "--receipt", str(demo_run["receipt"]),
            "--task-root", str(demo_run["root"]), "--license", "apache-2.0", *extra]
    if as_json:
        args.append("--json")
    if triage:
        args += ["--triage", str(demo_run["triage"])]
    return _run(args, env)


def _ok(p: CliResult) -> dict:
    assert p.returncode == 0, p.stderr
    assert "Traceback" not in p.stderr
    doc = json.loads(p.stdout)
    assert check_with_jsonschema("publish_result", doc) == []
    return doc


def _fails(p: CliResult, code: int, *needles: str) -> str:
    assert p.returncode == code, (p.returncode, p.stderr)
    assert "Traceback" not in p.stderr and p.stdout == ""
    line = p.stderr.strip().splitlines()[-1]
    assert line.startswith("shinken: error: ")
    for n in needles:
        assert n in line, line
    return line


def _jsonl(data: bytes) -> list[dict]:
    return [json.loads(ln) for ln in data.splitlines() if ln.strip()]


@pytest.mark.docker
def test_local_dir_is_exactly_what_is_uploaded(demo_run, hub: HubServer, tmp_path: Path) -> None:
    env = _env(hub, tmp_path)
    local = _ok(_publish(demo_run, env, "--local-dir", str(tmp_path / "review")))
    assert local["status"] == "written" and not hub.requests  # --local-dir never talks to the hub
    review = tmp_path / "review"
    files = {str(p.relative_to(review)): p.read_bytes() for p in review.rglob("*") if p.is_file()}
    assert sorted(files) == ["README.md", "artifacts/tasks.tar.zst", "data/dropped.jsonl", "data/train.jsonl",
                             "data/validation.jsonl", "provenance.json"]

    doc = _ok(_publish(demo_run, env))
    assert doc["status"] == "committed" and doc["created"] and doc["private"] is True
    repo = hub.repos["team/cua-clean"]
    assert repo.private  # private by default
    assert {p: d for p, d in repo.files.items() if p != ".gitattributes"} == files
    assert [c.message for c in repo.commits][0] == "initial commit" and len(repo.commits) == 2
    assert repo.commits[1].parent == doc["parent"] == repo.commits[0].sha
    # The archive went up through the LFS batch API (basic transfer) to the CDN host, then verify.
    assert hub.seen("POST", "/info/lfs/objects/batch") and hub.seen("POST", "/info/lfs/objects/verify")
    puts = [r for r in hub.requests if r.method == "PUT"]
    assert [r.host for r in puts] == ["127.0.0.2"] and "artifacts/tasks.tar.zst" in repo.lfs_paths
    assert not hub.seen(contains="xet")
    commit_posts = hub.seen("POST", "/commit/main")
    assert len(commit_posts) == 1 and commit_posts[0].headers["content-type"] == "application/x-ndjson"

    # The card: YAML the hub reads, and the provenance table.
    card = files["README.md"].decode()
    meta = yaml.safe_load(card.split("---\n")[1])
    assert meta["license"] == "apache-2.0" and meta["task_categories"] == ["reinforcement-learning"]
    assert {"rl-environment", "nemo-gym", "computer-use"} <= set(meta["tags"])
    default, dropped = meta["configs"]
    assert [f["split"] for f in default["data_files"]] == ["train", "validation"]
    assert dropped == {"config_name": "dropped", "data_files": [{"split": "dropped", "path": "data/dropped.jsonl"}]}
    prov = json.loads(files["provenance.json"])
    assert check_with_jsonschema("provenance", prov) == []
    receipt = json.loads(demo_run["receipt"].read_text())
    assert prov["image"]["id"] == receipt["image"]["id"] and prov["image"]["content_hash"]
    assert prov["image"]["content_hash"] in card and receipt["image"]["id"] in card
    hashes = {t["config_hash"] for t in receipt["tasks"]}
    assert prov["probe"]["config_hashes"] == sorted(hashes) and all(h in card for h in hashes)
    assert prov["counts"]["verdict"] == {"runnable": 3, "blocked": 0, "defective": 1}
    assert prov["counts"]["reason"] == {"defective": 1, "zero_signal": 1}
    assert prov["counts"]["tier"] == {"none": 1, "snapshot": 3}  # the defective task never got a tier
    assert prov["bundles"]["sha256"] in card and prov["source"] is None
    assert "| `zero_signal` | 1 |" in card and "| `reward_no_marker` | 1 |" in card

    # Rows: the split and the very rows make-workspace writes for the same receipt.
    from shinken.workspace.writer import WorkspaceOptions, make_workspace

    ws = make_workspace(WorkspaceOptions(dest=tmp_path / "ws", task_root=demo_run["root"],
                                         ids_file=demo_run["receipt"], license="apache-2.0", name="cua_demo"))
    named = tmp_path / "named"
    _ok(_publish(demo_run, env, "--name", "cua_demo", "--local-dir", str(named)))
    data = ws.dest / "resources_servers" / "cua_demo" / "data"
    for split in ("train", "validation"):
        assert (named / "data" / f"{split}.jsonl").read_bytes() == (data / f"{split}.jsonl").read_bytes()
        assert [r["task_id"] for r in _jsonl(files[f"data/{split}.jsonl"])] == getattr(ws, split)
        default_rows = _jsonl(files[f"data/{split}.jsonl"])
        assert {r["agent_ref"]["name"] for r in default_rows} == {"shinken_cua_simple_agent"}
        assert [r | {"agent_ref": None} for r in default_rows] == \
               [r | {"agent_ref": None} for r in _jsonl((named / "data" / f"{split}.jsonl").read_bytes())]
    rows = _jsonl(files["data/dropped.jsonl"])
    assert all(check_with_jsonschema("dropped_row", r) == [] for r in rows)
    by_id = {r["task_id"]: r for r in rows}
    assert by_id["broken-reward"]["stage"] == "triage" and by_id["broken-reward"]["codes"] == ["reward_no_marker"]
    assert by_id["zero-signal"]["stage"] == "probe" and by_id["zero-signal"]["rewards"] == [1.0, 1.0]


@pytest.mark.docker
def test_unchanged_republish_is_a_no_op_and_a_change_is_one_commit(demo_run, hub: HubServer, tmp_path: Path) -> None:
    env = _env(hub, tmp_path)
    first = _ok(_publish(demo_run, env, "--public"))
    repo = hub.repos["team/cua-clean"]
    assert not repo.private and first["private"] is False
    n_commits, head = len(repo.commits), repo.commit

    again = _ok(_publish(demo_run, env))
    assert again["status"] == "unchanged" and again["commit"] == head
    assert {f["change"] for f in again["files"]} == {"unchanged"}
    assert len(repo.commits) == n_commits and len(hub.seen("POST", "/commit/")) == 1
    p = _publish(demo_run, env, as_json=False)
    assert p.returncode == 0 and "unchanged, no commit" in p.stdout  # the table says so too

    # A split from an earlier publish that this one no longer writes is removed; files shinken
    # does not manage stay. Both changes and the new split go in ONE commit against the head.
    repo.advance("main", {**repo.files, "data/band.jsonl": b'{"x": 1}\n', "NOTES.md": b"mine\n"}, "by hand",
                 repo.commit)
    head = repo.commit
    changed = _ok(_publish(demo_run, env, "--seed", "7", "--val-fraction", "0.5", "-m", "reseed"))
    assert changed["status"] == "committed" and changed["parent"] == head
    assert repo.commits[-1].parent == head and repo.commits[-1].message == "reseed"
    assert len(repo.commits) == n_commits + 2
    changes = {f["path"]: f["change"] for f in changed["files"]}
    assert changes["data/band.jsonl"] == "deleted" and changes["artifacts/tasks.tar.zst"] == "unchanged"
    assert changes["provenance.json"] == "updated"
    assert "data/band.jsonl" not in repo.files and repo.files["NOTES.md"] == b"mine\n"
    assert json.loads(repo.files["provenance.json"])["split"]["seed"] == 7


@pytest.mark.docker
def test_concurrent_commit_fails_clearly_and_writes_nothing(demo_run, hub: HubServer, tmp_path: Path) -> None:
    env = _env(hub, tmp_path)
    _ok(_publish(demo_run, env))
    repo = hub.repos["team/cua-clean"]
    theirs = {**repo.files, "README.md": b"# someone else's card\n"}

    def other_writer(r: FakeRepo) -> None:
        r.advance("main", theirs, "a concurrent edit", r.commit)

    hub.before_commit = other_writer
    read_at_start = repo.commit
    p = _publish(demo_run, env, "--seed", "3")
    line = _fails(p, EXIT_FAILED, "moved while publishing", read_at_start[:12], "nothing was committed")
    assert repo.commits[-1].message == "a concurrent edit"
    assert repo.commit[:12] in line  # names the new head
    assert repo.files == theirs  # ours did not land, not even partly


@pytest.mark.docker
def test_create_pr_leaves_the_branch_alone(demo_run, hub: HubServer, tmp_path: Path) -> None:
    env = _env(hub, tmp_path)
    _ok(_publish(demo_run, env))
    repo = hub.repos["team/cua-clean"]
    head, main_files = repo.commit, dict(repo.files)
    pr = _ok(_publish(demo_run, env, "--seed", "5", "--create-pr"))
    assert pr["status"] == "pull_request" and pr["pr_url"].endswith("/datasets/team/cua-clean/discussions/1")
    assert repo.commit == head and repo.files == main_files
    assert repo.prs() == ["refs/pr/1"] and repo.commits[-1].parent == head
    assert hub.seen("POST", "/commit/main?create_pr=1")
    pr_files = repo.history[repo.refs["refs/pr/1"]]
    assert json.loads(pr_files["provenance.json"])["split"]["seed"] == 5
    # Unchanged content opens no pull request either.
    assert _ok(_publish(demo_run, env, "--create-pr"))["status"] == "unchanged" and repo.prs() == ["refs/pr/1"]
    # A branch that does not exist yet is made from the default branch, then committed to.
    branch = _ok(_publish(demo_run, env, "--seed", "9", "--revision", "v2"))
    assert branch["status"] == "committed" and any("created branch 'v2'" in n for n in branch["notes"])
    assert branch["parent"] == head and repo.commit == head and repo.files == main_files
    assert json.loads(repo.history[repo.refs["v2"]]["provenance.json"])["split"]["seed"] == 9


@pytest.mark.docker
def test_token_problems_are_one_line_errors(demo_run, hub: HubServer, tmp_path: Path) -> None:
    _fails(_publish(demo_run, _env(hub, tmp_path, token=None)), EXIT_USAGE, "HF_TOKEN", "--local-dir")
    assert not hub.requests  # refused before any request
    hub.token = TOKEN
    _fails(_publish(demo_run, _env(hub, tmp_path, token="hf_wrong")), EXIT_USAGE, "HF_TOKEN")
    hub.read_only_tokens.add(TOKEN)
    _fails(_publish(demo_run, _env(hub, tmp_path)), EXIT_USAGE, "HTTP 403", "write access")
    assert "team/cua-clean" not in hub.repos


@pytest.mark.docker
def test_bad_inputs_are_one_line_errors(demo_run, hub: HubServer, tmp_path: Path) -> None:
    env = _env(hub, tmp_path)
    base = ["publish", "--receipt", str(demo_run["receipt"]), "--task-root", str(demo_run["root"])]
    _fails(_run(base + ["--repo-id", "no-slash", "--local-dir", str(tmp_path / "x")], env), EXIT_USAGE, "ORG/NAME")
    # No source record and no --license: the license is unknown and is not invented.
    _fails(_run(base + ["--repo-id", "a/b", "--local-dir", str(tmp_path / "x")], env), EXIT_USAGE, "--license")
    _fails(_run(base + ["--repo-id", "a/b", "--receipt", str(demo_run["triage"]), "--license", "mit",
                        "--local-dir", str(tmp_path / "x")], env), EXIT_USAGE, "not a probe receipt")
    # A kept bundle edited after the probe: its result no longer applies.
    root = tmp_path / "edited"
    shutil.copytree(demo_run["root"], root)
    (root / "hello-file" / "reward.py").write_text("print('REWARD: 1.0')\n")
    _fails(_run(["publish", "--repo-id", "a/b", "--receipt", str(demo_run["receipt"]), "--task-root", str(root),
                 "--license", "mit", "--local-dir", str(tmp_path / "x")], env),
           EXIT_USAGE, "changed since it was probed")
    # A bundle the probe never saw is in no split, and the card says so.
    extra = tmp_path / "extra"
    shutil.copytree(demo_run["root"], extra)
    shutil.copytree(REPO / "demo" / "zenity-entry", extra / "zenity-entry")
    _ok(_run(["publish", "--repo-id", "a/b", "--receipt", str(demo_run["receipt"]), "--task-root", str(extra),
              "--license", "mit", "--local-dir", str(tmp_path / "x3"), "--json"], env))
    assert json.loads((tmp_path / "x3" / "provenance.json").read_text())["counts"]["not_in_receipt"] == 1
    assert "1 more bundle(s) in the task root were not probed" in (tmp_path / "x3" / "README.md").read_text()
    # --local-dir never replaces a folder that is not an earlier publish.
    other = tmp_path / "other"
    other.mkdir()
    (other / "keep.txt").write_text("x")
    _fails(_run(base + ["--repo-id", "a/b", "--license", "mit", "--local-dir", str(other)], env),
           EXIT_USAGE, "provenance.json")
    assert (other / "keep.txt").read_text() == "x" and not hub.requests


@pytest.mark.docker
def test_published_repo_round_trips_through_download(demo_run, hub: HubServer, tmp_path: Path,
                                                     linux_image: str) -> None:
    env = _env(hub, tmp_path)
    pub = _ok(_publish(demo_run, env))
    dl = _run(["download", "--repo-id", "team/cua-clean", "--local-dir", str(tmp_path / "dl"), "--json"], env)
    assert dl.returncode == 0, dl.stderr
    got = json.loads(dl.stdout)
    assert got["commit"] == pub["commit"] and got["tasks"] == len(KEPT)
    root = Path(got["dest"])
    # Byte-identical bundles (exec bit kept): the same bundle hashes, so the same receipts keys.
    for tid in KEPT:
        for f in (demo_run["root"] / tid).iterdir():
            assert (root / tid / f.name).read_bytes() == f.read_bytes()
    assert os.stat(root / "hello-notes" / "initial_setup.sh").st_mode & 0o111
    triage2 = tmp_path / "triage2.json"
    assert _run(["triage", str(root), "--image", linux_image, "--report", str(triage2)], env).returncode == 0
    before = {t["id"]: t for t in json.loads(demo_run["triage"].read_text())["tasks"]}
    after = {t["id"]: t for t in json.loads(triage2.read_text())["tasks"]}
    assert sorted(after) == KEPT
    for tid in KEPT:
        assert {k: after[tid][k] for k in ("verdict", "reasons", "bundle_hash", "class")} == \
               {k: before[tid][k] for k in ("verdict", "reasons", "bundle_hash", "class")}
    receipt2 = tmp_path / "receipt2.json"
    p = _run(["probe", str(root), "--image", linux_image, "--receipt", str(receipt2), "--run-dir",
              str(tmp_path / "run2"), "--state-fidelity", "filesystem"], env)
    assert p.returncode == 0, p.stderr
    first = {t["task_id"]: t for t in json.loads(demo_run["receipt"].read_text())["tasks"]}
    second = {t["task_id"]: t for t in json.loads(receipt2.read_text())["tasks"]}
    for tid in KEPT:
        assert {k: second[tid][k] for k in ("outcome", "reason", "rewards", "bundle_hash", "config_hash")} == \
               {k: first[tid][k] for k in ("outcome", "reason", "rewards", "bundle_hash", "config_hash")}

    # Publishing the downloaded task root carries the source: its revision and the license of its card.
    doc = _ok(_run(["publish", "--repo-id", "team/cua-again", "--receipt", str(receipt2), "--task-root", str(root),
                    "--local-dir", str(tmp_path / "again"), "--json"], env))
    prov = json.loads((tmp_path / "again" / "provenance.json").read_text())
    assert prov["source"]["repo_id"] == "team/cua-clean" and prov["source"]["revision"] == pub["commit"]
    assert prov["license"] == "apache-2.0" and prov["license_from"] == "source"
    archive = next(f for f in pub["files"] if f["path"] == "artifacts/tasks.tar.zst")
    assert prov["source"]["archives"] == [{"path": "artifacts/tasks.tar.zst", "sha256": archive["sha256"],
                                          "size": archive["size"]}]
    card = (tmp_path / "again" / "README.md").read_text()
    assert pub["commit"] in card and "from the source dataset's card" in card
    assert doc["status"] == "written"


def test_new_repo_starts_with_gitattributes(hub: HubServer, tmp_path: Path) -> None:
    """The loopback hub creates repos the way the hub does (an initial commit)."""
    from huggingface_hub import HfApi

    api = HfApi(endpoint=hub.endpoint, token=TOKEN)
    api.create_repo("team/empty", repo_type="dataset", private=True)
    info = api.dataset_info("team/empty", token=TOKEN)
    assert info.private and [s.rfilename for s in info.siblings] == [".gitattributes"]
    assert hub.repos["team/empty"].files[".gitattributes"] == GITATTRIBUTES


def test_a_repo_that_is_not_a_shinken_dataset_is_refused(hub: HubServer, tmp_path: Path) -> None:
    """No Docker: the recorded demo receipt published over the real HTTP client into someone
    else's dataset repo (a card without shinken's tags, data/ and artifacts/ files of its own).
    On f382b83 this committed and deleted their data/* and artifacts/*; now it is refused, one
    line, nothing sent but reads, unless --overwrite-foreign-repo says to replace them."""
    theirs = {".gitattributes": GITATTRIBUTES,
              "README.md": dataset_card({"license": "mit", "tags": ["text-classification"]}, "# Their dataset\n"),
              "data/train-00000-of-00001.parquet": b"PAR1 their rows", "artifacts/vocab.txt": b"their vocabulary\n",
              "NOTES.md": b"theirs\n"}
    hub.repos["them/reviews"] = FakeRepo("them/reviews", dict(theirs))
    env = _env(hub, tmp_path)
    args = ["publish", "--repo-id", "them/reviews", "--receipt", str(REPO / "tests" / "data" / "demo_receipt.json"),
            "--task-root", str(REPO / "demo"), "--license", "apache-2.0", "--json"]
    _fails(_run(args, env), EXIT_USAGE, "them/reviews@main", "not a shinken dataset",
           "data/train-00000-of-00001.parquet", "--overwrite-foreign-repo")
    repo = hub.repos["them/reviews"]
    assert repo.files == theirs and repo.commits == [] and not hub.seen("POST")
    doc = _ok(_run([*args, "--overwrite-foreign-repo"], env))
    assert doc["status"] == "committed" and any("--overwrite-foreign-repo" in n for n in doc["notes"])
    deleted = {f["path"] for f in doc["files"] if f["change"] == "deleted"}
    assert deleted == {"data/train-00000-of-00001.parquet", "artifacts/vocab.txt"}
    assert repo.files["NOTES.md"] == b"theirs\n" and "artifacts/vocab.txt" not in repo.files
    # Now it is a shinken dataset: publishing again needs no option (and changes nothing).
    assert _ok(_run(args, env))["status"] == "unchanged"


def test_profile_adds_band_and_control_splits(tmp_path: Path) -> None:
    """No Docker: a recorded probe receipt of demo/ and a real `shinken profile` of rollouts a
    real NeMo Gym run wrote (tests/data), restricted to the tasks that receipt kept."""
    receipt = REPO / "tests" / "data" / "demo_receipt.json"
    kept = set(json.loads(receipt.read_text())["kept"])
    rollouts = tmp_path / "rollouts.jsonl"
    with rollouts.open("w") as out:
        for run in ("run1", "run2"):
            for line in (REPO / "tests" / "data" / "gym_rollouts" / run / "rollouts.jsonl").read_text().splitlines():
                if json.loads(line)["task_id"] in kept:
                    out.write(line + "\n")
    prof = tmp_path / "profile"
    p = _run(["profile", str(rollouts), "--task-root", str(REPO / "demo"), "--receipt", str(receipt), "--out", str(prof)])
    assert p.returncode == 0, p.stderr
    band, control = (json.loads((prof / f).read_text()) for f in ("band.json", "control.json"))
    assert band and control
    doc = _ok(_run(["publish", "--repo-id", "team/banded", "--receipt", str(receipt), "--task-root", str(REPO / "demo"),
                    "--profile", str(prof), "--license", "apache-2.0", "--local-dir", str(tmp_path / "out"), "--json"]))
    assert doc["splits"]["band"] == len(band) and doc["splits"]["control"] == len(control)
    out = tmp_path / "out"
    assert [r["task_id"] for r in _jsonl((out / "data" / "band.jsonl").read_bytes())] == band
    assert [r["task_id"] for r in _jsonl((out / "data" / "control.jsonl").read_bytes())] == control
    card = (out / "README.md").read_text()
    meta = yaml.safe_load(card.split("---\n")[1])
    assert [f["split"] for f in meta["configs"][0]["data_files"]] == ["train", "validation", "band", "control"]
    settings = json.loads((prof / "profile.json").read_text())["settings"]
    edges = json.loads((out / "provenance.json").read_text())["profile"]
    assert (edges["min_pass"], edges["max_pass"]) == (settings["min_pass"], settings["max_pass"])
    assert f"{settings['min_pass']} < pass rate < {settings['max_pass']}" in card
    # The summary is `shinken report --md` of the same documents, headings under the card's.
    md = _run(["report", "--receipt", str(receipt), "--profile", str(prof), "--md", "-"])
    assert md.returncode == 0, md.stderr
    assert "## shinken report" in card and "### Profile" in card and "Pass-rate histogram" in card
    table_lines = [line for line in md.stdout.splitlines() if line.startswith("|")]
    assert table_lines and all(line in card for line in table_lines)
    # A profile of tasks the receipt did not keep is refused: they are not training data.
    (prof / "band.json").write_text(json.dumps(sorted(band + ["zero-signal"])))
    _fails(_run(["publish", "--repo-id", "team/banded", "--receipt", str(receipt), "--task-root", str(REPO / "demo"),
                 "--profile", str(prof), "--license", "mit", "--local-dir", str(tmp_path / "out2")]),
           EXIT_USAGE, "did not keep")


def test_oracle_and_vandal_outcomes_reach_rows_dropped_split_and_card(tmp_path: Path) -> None:
    """No Docker: the recorded demo receipt with oracle and vandal outcomes added the way the probe
    writes them; the rows carry shinken_oracle / shinken_vandal, the provenance counts them and the
    card has the reward-checks table."""
    doc = json.loads((REPO / "tests" / "data" / "demo_receipt.json").read_text())
    kept = [t for t in doc["tasks"] if t["outcome"] == "kept"]
    first = kept[0]
    first["oracle"] = {"source": "bundle", "path": "/x/golden_patch.py", "sha256": "0" * 64, "outcome": "oracle_passes",
                       "reward": 1.0, "reward_error": None, "exit_code": 0, "script_tail": "", "reward_tail": "", "s": 1.0}
    first["vandal"] = {"outcome": "vandal_passes_remove", "files": ["/home/user/a"], "rewards": {"remove": 1.0,
                       "garbage": 0.0}, "errors": {}, "s": 1.0}
    receipt = tmp_path / "receipt.json"
    receipt.write_text(json.dumps(doc))
    out = tmp_path / "out"
    p = _run(["publish", "--repo-id", "team/checked", "--receipt", str(receipt), "--task-root", str(REPO / "demo"),
              "--license", "apache-2.0", "--local-dir", str(out), "--json"])
    assert p.returncode == 0, p.stderr
    rows = {r["task_id"]: r for split in ("train", "validation") for r in _jsonl((out / "data" / f"{split}.jsonl").read_bytes())}
    assert (rows[first["task_id"]]["shinken_oracle"], rows[first["task_id"]]["shinken_vandal"]) == \
        ("oracle_passes", "vandal_passes_remove")
    assert all(r["shinken_oracle"] is None for tid, r in rows.items() if tid != first["task_id"])
    counts = json.loads((out / "provenance.json").read_text())["counts"]
    assert counts["oracle"] == {"not_run": len(doc["tasks"]) - 1, "oracle_passes": 1}
    card = (out / "README.md").read_text()
    assert "Reward checks" in card and "| oracle | `oracle_passes` | 1 |" in card
    assert "| vandal | `vandal_passes_remove` | 1 |" in card
    assert all(d["oracle"] is None for d in _jsonl((out / "data" / "dropped.jsonl").read_bytes()))


@pytest.mark.docker
def test_card_does_not_depend_on_docker_answering(demo_run, hub: HubServer, tmp_path: Path) -> None:
    """An unchanged re-publish compares the card's bytes, so the image content hash must not
    come and go with the engine: without Docker it is read from the hash tag the probe ran."""
    env = _env(hub, tmp_path)
    cards = []
    for name, extra in (("with", {}), ("without", {"DOCKER_HOST": "tcp://127.0.0.1:1"})):
        _ok(_publish(demo_run, {**env, **extra}, "--local-dir", str(tmp_path / name)))
        cards.append((tmp_path / name / "README.md").read_bytes())
    assert cards[0] == cards[1]
    assert json.loads((tmp_path / "without" / "provenance.json").read_text())["image"]["content_hash"]
