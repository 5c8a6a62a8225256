"""The hub from a checkout with faulty apps (tests/hub_standins.py): a lockfile naming an
unreachable registry still builds from the configured one, a failing app is left out while
the others build, and `shinken hub check` catches each State API fault, on a real hub."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from shinken.images.build import _read_ca
from shinken.mockweb.apps import discover_apps, select_apps
from shinken.mockweb.build import build_app, ensure_node_image
from shinken.mockweb.manifest import read_manifest
from shinken.sandbox.docker_client import run_container
from shinken.sandbox.ownership import labels_for
from shinken.schemas import validation_error
from tests.cli_runner import CliResult, run_cli
from tests.hub_standins import EXPECTED, UNREACHABLE, make_checkout

pytestmark = [pytest.mark.docker, pytest.mark.slow]

REPO = Path(__file__).resolve().parent.parent
APPS = ("mailbox", "mirrorlock", "broken", "stale", "firstlost", "leaky")


def _shinken(*args: str, timeout: float = 1200) -> CliResult:
    return run_cli(*args, timeout=timeout)  # in process, empty stdin (tests/cli_runner.py)


@pytest.fixture(scope="module")
def checkout(tmp_path_factory) -> Path:
    return make_checkout(tmp_path_factory.mktemp("hub-standins"), APPS)


def test_a_lockfile_naming_an_unreachable_host_builds_from_the_configured_registry(checkout: Path, docker_client,
                                                                                    tmp_path: Path) -> None:
    """An empty npm cache, so every tarball must come over the network: from the configured
    registry, since the lockfile's host does not resolve."""
    (app,) = select_apps(discover_apps(checkout), ["mirrorlock"])
    lock = json.loads((app.folder / "package-lock.json").read_text())
    assert all(UNREACHABLE in e["resolved"] for k, e in lock["packages"].items() if k)
    node_tag, node_id, _ = ensure_node_image(docker_client)
    built = build_app(docker_client, app, node_tag, node_id, _read_ca(None), nocache=True, npm_cache=tmp_path / "npm")
    assert not built.cached and built.log is not None
    log = Path(built.log).read_text()
    assert f"from {UNREACHABLE}; installing them from the configured registry https://registry.npmjs.org/" in log
    assert "ENOTFOUND" not in log and "built in" in log  # vite's own last line of a build
    assert any((tmp_path / "npm").rglob("*")), "npm fetched nothing: the build did not exercise the registry"
    # The checkout's lockfile itself is untouched (the rewrite lives in the build's copy).
    assert json.loads((app.folder / "package-lock.json").read_text()) == lock


def test_the_hub_node_image_runs_node_20_19_or_newer(docker_client) -> None:
    """Vite 7 and 8 (locked by about ten of the public hub's apps) refuse Node < 20.19."""
    node_tag, _, _ = ensure_node_image(docker_client)
    out = run_container(docker_client, node_tag, ["node", "-p", "process.versions.node"], remove=True,
                                       network_mode="none", labels=labels_for("build", task="test-node")).decode().strip()
    major, minor = (int(x) for x in out.split(".")[:2])
    assert (major, minor) >= (20, 19), out


@pytest.fixture(scope="module")
def standin_hub(checkout: Path) -> dict:
    """`shinken hub build` (no --apps) of the stand-in checkout: every app but `broken` builds."""
    r = _shinken("hub", "build", "--source", str(checkout), "--json")
    assert r.returncode == 0, r.stderr[-3000:]
    doc = json.loads(r.stdout)
    return {"doc": doc, "stderr": r.stderr, "checkout": checkout}


def test_hub_build_goes_on_past_a_failing_app_and_names_it(standin_hub: dict, docker_client) -> None:
    doc = standin_hub["doc"]
    assert validation_error("hub_build", doc) is None
    assert sorted(a["name"] for a in doc["apps"]) == sorted(set(APPS) - {"broken"})
    (failed,) = doc["failed"]
    assert failed["name"] == "broken" and failed["log"] and Path(failed["log"]).is_file()
    assert "error" in failed["error"].lower() and "\n" not in failed["error"]
    manifest = read_manifest(docker_client, doc["tag"])
    assert [a.name for a in manifest.apps] == sorted(set(APPS) - {"broken"})
    assert [x["name"] for x in manifest.left_out] == ["broken"]
    assert [a.port for a in manifest.apps] == list(range(8000, 8000 + len(manifest.apps)))
    # The table (one row per app, the failing one with its first error line and log), and
    # --strict: the same build is a failure (failures are not cached: `broken` builds again).
    r = _shinken("hub", "build", "--source", str(standin_hub["checkout"]), "--apps", "broken,mailbox", "--strict")
    assert r.returncode == 1 and "--strict: 1 app(s) did not build (broken)" in r.stderr, r.stderr[-2000:]
    assert "Traceback" not in r.stderr
    row = next(ln for ln in r.stdout.splitlines() if "broken" in ln)
    assert "FAILED" in row and "error during build" in row
    assert any("mailbox" in ln and "cached" in ln for ln in r.stdout.splitlines())


def test_hub_check_catches_each_state_api_fault(standin_hub: dict, docker_client) -> None:
    tag = standin_hub["doc"]["tag"]
    r = _shinken("hub", "check", tag, "--json")
    assert r.returncode == 0, r.stderr[-3000:]
    doc = json.loads(r.stdout)
    assert validation_error("hub_check", doc) is None
    found = {a["app"]: {k: set(v["fields"]) for k, v in a["checks"]["results"].items() if not v["ok"]} for a in doc["apps"]}
    assert found == EXPECTED, json.dumps(doc, indent=1)[:4000]
    utf8 = next(a for a in doc["apps"] if a["app"] == "mailbox")["checks"]["results"]["utf8_large"]
    assert utf8["ok"] and int(utf8["detail"].split()[0]) > 1_000_000
    # The results are in the image's manifest now, under the same tag.
    manifest = read_manifest(docker_client, tag)
    assert manifest.image_id == doc["image"]
    by_name = {a.name: a for a in manifest.apps}
    assert by_name["stale"].checks is not None and by_name["stale"].checks["ok"] is False
    assert by_name["mailbox"].checks is not None and by_name["mailbox"].checks["ok"] is True
    # The table, and --apps: one app checked again, the others keep their results.
    r = _shinken("hub", "check", tag, "--apps", "leaky")
    assert r.returncode == 0, r.stderr[-2000:]
    row = next(ln for ln in r.stdout.splitlines() if ln.strip().startswith("leaky") or " leaky " in ln)
    assert "FAIL" in row
    after = {a.name: a.checks for a in read_manifest(docker_client, tag).apps}
    assert after["stale"] == by_name["stale"].checks and after["leaky"]["at"] >= by_name["leaky"].checks["at"]


def _web_task(root: Path, src: str, app: str) -> str:
    """A copy of a stand-in web task whose files name the mock `app` instead of the mailbox."""
    import shutil

    dest = root / f"{Path(src).name[:8]}-{app}"
    shutil.copytree(REPO / "tests" / "data" / "web_tasks" / src, dest)
    for f in dest.iterdir():
        f.write_text(f.read_text().replace("__CUA_GYM_MAILBOX_", f"__CUA_GYM_{app.upper()}_")
                     .replace("mailbox_mock", f"{app}_mock"))
    task = json.loads((dest / "task.json").read_text())
    (dest / "task.json").write_text(json.dumps({**task, "id": dest.name}))
    return dest.name


def test_triage_blocks_tasks_whose_reward_reads_a_field_their_app_fails(standin_hub: dict, tmp_path: Path) -> None:
    """After `hub check`, `triage --hub`: a reward reading state_diff on `stale` is blocked
    (mock_state_api_defect naming app, check and field); one reading only current_state on
    `stale` is not; one reading current_state on `leaky` is; the mailbox's tasks are not."""
    tag = standin_hub["doc"]["tag"]
    if not any(a.get("checks") for a in json.loads(_shinken("hub", "inspect", tag, "--json").stdout)["apps"]):
        assert _shinken("hub", "check", tag).returncode == 0
    star, zero = "8b2f7c1e-4a3d-5e6f-9a0b-1c2d3e4f5a6b", "mailbox-zero-signal"  # reads all three / current_state
    root = tmp_path / "tasks"
    root.mkdir()
    ids = {(s, a): _web_task(root, s, a) for s in (star, zero) for a in ("mailbox", "stale", "leaky")}
    r = _shinken("triage", str(root), "--hub", tag, "--manifest", str(REPO / "tests" / "data" / "triage_manifest.json"),
                 "--json", "--no-cache")
    assert r.returncode == 0, r.stderr[-2000:]
    report = json.loads(r.stdout)
    assert validation_error("triage", report) is None
    by_id = {t["id"]: t for t in report["tasks"]}
    defects = {k: sorted(x["subject"] for x in by_id[v]["reasons"] if x["code"] == "mock_state_api_defect")
               for k, v in ids.items()}
    assert defects == {
        (star, "mailbox"): [], (zero, "mailbox"): [],
        (star, "stale"): ["stale:fresh_diff_empty:state_diff", "stale:reset:state_diff"],
        (zero, "stale"): [],
        (star, "leaky"): sorted(["leaky:reset:current_state", "leaky:reset:state_diff", "leaky:utf8_large:current_state",
                                 "leaky:utf8_large:initial_state"]),
        (zero, "leaky"): ["leaky:reset:current_state", "leaky:utf8_large:current_state"],
    }
    assert all(by_id[ids[k]]["verdict"] == "blocked" for k, v in defects.items() if v)
    hub = report["summary"]["hub_checks"]
    assert hub["by_check"]["fresh_diff_empty"] == {"apps": ["stale"], "tasks": 1}
    assert hub["by_check"]["utf8_large"] == {"apps": ["leaky"], "tasks": 2}
    assert hub["by_check"]["dual_stack"]["apps"] == ["leaky"] and hub["by_check"]["dual_stack"]["tasks"] == 0
    text = _shinken("triage", str(root), "--hub", tag, "--manifest", str(REPO / "tests" / "data" / "triage_manifest.json"),
                    "--no-cache").stdout
    assert "hub State API checks" in text and "fresh_diff_empty" in text
