"""Start-state tiers: the pure vocabulary and comparison, then the release-shaped desktop demos
on the real CUA image (LibreOffice, evince, GIMP): a default probe keeps each at the tier that
reproduces what its setup left, the engine seeds each at that tier and its first observation
shows the document, leftovers of killed apps never turn into dialogs, and a tampered golden is
caught and masked.

The Docker part uses a private copy of the desktop demos with a salted reward.py, so its
goldens have their own bundle hash and are removed at the end."""

from __future__ import annotations

import dataclasses
import json
import sys
import uuid
from pathlib import Path

import pytest

from shinken.sandbox.api import StartStateError
from shinken.sandbox.desktop import DesktopRecord, Observed, Root, Window, differences
from shinken.sandbox.docker_client import run_container
from shinken.sandbox.ownership import labels_for
from shinken.schemas import check_with_jsonschema, load_schema
from shinken.tiers import TIER_VALUES, Tier, parse_tier, probe_tiers, serving_tier

REPO = Path(__file__).resolve().parent.parent
if str(REPO) not in sys.path:
    sys.path.insert(0, str(REPO))
from tests.cli_runner import run_cli  # noqa: E402
from tests.desktop_demos import CALC, DESKTOP_DEMOS, WRITER_DIALOG, salted_copy  # noqa: E402

CALC_WINDOW = Window("soffice", "frame", "expenses.xlsx - LibreOffice Calc")


# --- the vocabulary and the comparison (no Docker) -------------------------------------------

def test_tier_values_are_the_schemas_enums() -> None:
    line = load_schema("receipt_line")["properties"]["tier"]["anyOf"][1]["enum"]
    row = [t for t in load_schema("gym_row")["properties"]["shinken_tier"]["enum"] if t is not None]
    by_tier = load_schema("probe_receipt")["properties"]["summary"]["properties"]["by_tier"]["propertyNames"]["enum"]
    assert list(TIER_VALUES) == line == row == by_tier
    assert parse_tier("relaunch") is Tier.RELAUNCH and parse_tier(None) is None and parse_tier("memory") is None
    assert [t.checked for t in Tier] == [False, True, True, False]


def test_which_tiers_are_tried_and_served() -> None:
    assert probe_tiers(needs_relaunch=False, accept_filesystem=False) == [Tier.SNAPSHOT]
    assert probe_tiers(needs_relaunch=True, accept_filesystem=False) == [Tier.RELAUNCH, Tier.REPROVISION]
    assert probe_tiers(needs_relaunch=True, accept_filesystem=True) == [Tier.FILESYSTEM]
    # the server never serves a golden that needs its processes back as a plain snapshot
    assert serving_tier("snapshot", needs_relaunch=True, accept_filesystem=False) is Tier.RELAUNCH
    assert serving_tier(None, needs_relaunch=True, accept_filesystem=False) is Tier.RELAUNCH
    assert serving_tier("reprovision", needs_relaunch=True, accept_filesystem=False) is Tier.REPROVISION
    assert serving_tier("relaunch", needs_relaunch=False, accept_filesystem=False) is Tier.SNAPSHOT
    assert serving_tier("relaunch", needs_relaunch=True, accept_filesystem=True) is Tier.FILESYSTEM


def test_differences_name_what_differs() -> None:
    rec = DesktopRecord(roots=(Root(("oosplash", "--calc", "x.xlsx"), "/home/user", 1000, {}),),
                        windows=(CALC_WINDOW, Window("soffice", "dialog", "Format Cells")), active="Format Cells")
    assert differences(rec, Observed(rec.windows, "Format Cells")) == []
    alert = Window("soffice", "alert", "Question")
    assert differences(rec, Observed((CALC_WINDOW, alert), None)) == [
        "missing dialog 'Format Cells' (soffice dialog)", "unexpected dialog 'Question' (soffice alert)"]
    assert differences(rec, Observed(rec.windows, CALC_WINDOW.title)) == [
        "focus on 'expenses.xlsx - LibreOffice Calc', the golden had 'Format Cells'"]
    assert differences(rec, Observed(rec.windows, "Format Cells", dead=("oosplash --calc x.xlsx",))) == [
        "`oosplash --calc x.xlsx` exited after relaunch"]
    assert rec.lost == ["oosplash --calc x.xlsx"] and rec.needs_relaunch


def test_record_round_trips_through_its_schema() -> None:
    rec = DesktopRecord(roots=(Root(("evince", "/home/user/a.pdf"), "/home/user", 1000, {"DISPLAY": ":0"}, ("x",)),),
                        windows=(Window("evince", "frame", "a.pdf"),), active="a.pdf", processes=("evince /home/user/a.pdf",))
    doc = rec.to_json()
    assert check_with_jsonschema("desktop_record", doc) == []
    assert DesktopRecord.from_json(json.loads(json.dumps(doc))) == rec
    assert rec.signature_hash() == DesktopRecord.from_json(doc).signature_hash()
    with pytest.raises(ValueError, match="desktop_record"):
        DesktopRecord.from_json({"roots": [{"argv": []}], "windows": [], "active": None})


def test_process_memory_fails_closed(tmp_path: Path, shinken_cli) -> None:
    r = shinken_cli("probe", REPO / "demo", "--state-fidelity", "process_memory")
    assert r.returncode == 2 and "CRIU" in r.stderr and "Traceback" not in r.stderr


# --- the desktop demos on real Docker -------------------------------------------------------


@pytest.fixture(scope="module")
def cua(cua_image) -> str:
    return cua_image  # conftest: built for the current sources, cached by content hash


DEMO_ORACLES = REPO / "tests" / "data" / "demo_oracles"  # a solution per desktop demo task


@pytest.fixture(scope="module")
def desktop_root(tmp_path_factory) -> Path:
    return salted_copy(tmp_path_factory.mktemp("desktop-tasks"), DESKTOP_DEMOS, REPO)


@pytest.fixture(scope="module")
def probed(cua, desktop_root, tmp_path_factory, docker_client):
    """`shinken probe` with default flags (no --state-fidelity, K=2) over the desktop demos."""
    out = tmp_path_factory.mktemp("probe")
    receipt = out / "receipt.json"
    r = run_cli("probe", desktop_root, "--image", cua, "--receipt", receipt, "--run-dir", out / "run", "--repeats", "2",
                "--concurrency", "2", "--probes", "noop,oracle", "--oracle", DEMO_ORACLES)
    assert r.returncode == 0, r.stderr[-3000:]
    doc = json.loads(receipt.read_text())
    yield doc
    from shinken.sandbox.docker_provider import DockerProvider

    p = DockerProvider(docker_client)
    for tag in {t["golden"] for t in doc["tasks"] if t.get("golden")}:
        try:
            p.delete_golden(docker_client.images.get(tag).id)
        except Exception:  # noqa: BLE001 - already gone (the tampering test may have removed it)
            pass


@pytest.mark.docker
def test_default_probe_keeps_every_desktop_demo_at_its_tier(probed) -> None:
    assert check_with_jsonschema("probe_receipt", probed) == []
    by_id = {t["task_id"]: t for t in probed["tasks"]}
    assert {tid: (t["outcome"], t["tier"]) for tid, t in by_id.items()} == {
        tid: ("kept", tier) for tid, (_, tier) in DESKTOP_DEMOS.items()}, [
        (tid, t["reason"], t["detail"]) for tid, t in by_id.items() if t["outcome"] != "kept"]
    for tid, line in by_id.items():
        assert check_with_jsonschema("receipt_line", line) == [], tid
        assert line["rewards"] == [0.0, 0.0], tid  # the rewards check the document: 0 on the untouched state
        assert line["lost_processes"], tid  # each setup left its app running
        # K=2: one no-op on the golden's own build computer, one on a fork made at the tier and checked
        assert line["start_state"]["computers"] == ["golden", line["tier"]], line["start_state"]
        assert line["start_state"]["checked"] == 1 and line["start_state"]["signature"]
        assert line["start_state"]["settled"] is True, line["start_state"]  # never kept otherwise
        assert any(DESKTOP_DEMOS[tid][0] in w for w in line["start_state"]["windows"]), line["start_state"]
    # Each one solved (tests/data/demo_oracles) still scores 1.0 under the verifier (docs/integrity.md):
    # the reward runs as another uid than the policy's, after the policy's processes stopped, the app kept.
    assert {tid: (t["oracle"] or {}).get("outcome") for tid, t in by_id.items()} == {
        tid: "oracle_passes" for tid in DESKTOP_DEMOS}, [(tid, t["oracle"]) for tid, t in by_id.items()]
    dialog = by_id[WRITER_DIALOG]
    assert dialog["start_state"]["passed_over"] and "missing dialog 'Find and Replace'" in dialog["detail"]
    assert probed["summary"]["by_tier"] == {"relaunch": 5, "reprovision": 1}


@pytest.fixture(scope="module")
def engine(probed, desktop_root, cua):
    from shinken.computer.contract import EngineConfig
    from shinken.computer.engine import ComputerEngine

    eng = ComputerEngine(EngineConfig(desktop_root, cua, idle_ttl_s=900), keep_goldens_on_close=True)
    yield eng
    eng.close()


def _observe_until(engine, session: str, gen: str, text: str, tries: int = 3) -> str:
    tree = ""
    for _ in range(tries):  # the first observation must show it; later ones only guard the report
        tree = engine.tool(session, gen, "computer_observe", {"mode": "tree"})
        if text in tree:
            break
    return tree


@pytest.mark.docker
@pytest.mark.parametrize("task_id", sorted(DESKTOP_DEMOS))
def test_first_observation_shows_what_the_setup_left(engine, probed, task_id) -> None:
    title, tier = DESKTOP_DEMOS[task_id]
    line = next(t for t in probed["tasks"] if t["task_id"] == task_id)
    gen = engine.seed(f"s-{task_id[:8]}", task_id, tier=line["tier"])
    try:
        first = engine.tool(f"s-{task_id[:8]}", gen, "computer_observe", {"mode": "tree"})
        assert title in first, f"first observation of {task_id} lacks {title!r}:\n{first[:3000]}"
        if task_id == WRITER_DIALOG:
            assert "letter.docx" not in first and "notes.docx - LibreOffice Writer" in first
        res = engine.verify(f"s-{task_id[:8]}", gen)
        assert (res.reward, res.mask_sample) == (line["rewards"][0], False), res
    finally:
        engine.end(f"s-{task_id[:8]}")


@pytest.mark.docker
def test_warm_pool_hands_out_relaunched_and_checked_forks(probed, desktop_root, cua) -> None:
    from shinken.computer.contract import EngineConfig
    from shinken.computer.engine import ComputerEngine

    with ComputerEngine(EngineConfig(desktop_root, cua, pool_size=1), keep_goldens_on_close=True) as eng:
        gen = eng.seed("pooled", CALC, tier="relaunch")
        entry = eng._goldens[CALC]
        assert entry.pool_tier is Tier.RELAUNCH
        # handed out once Calc was idle with the golden's windows, not at their first showing
        assert eng._sessions["pooled"].fork.start_timings["settle_s"] >= 1.0
        tree = eng.tool("pooled", gen, "computer_observe", {"mode": "tree"})
        assert CALC_WINDOW.title in tree
        eng.end("pooled")


@pytest.mark.docker
def test_golden_own_computer_is_the_start_state(cua, tmp_path, docker_client) -> None:
    """A golden built with keep_computer hands out its build container once: still running as the
    setup left it (the recorded windows, the session files put back after the commit), while
    the committed image has none of the build session's files (a fork boots its own desktop)."""
    from shinken.bundles.loader import load_bundle
    from shinken.sandbox.docker_provider import DockerProvider

    bundle = load_bundle(salted_copy(tmp_path, [CALC], REPO) / CALC)
    with DockerProvider(docker_client, run_id="test-own-" + uuid.uuid4().hex[:8]) as p:
        golden = p.ensure_golden(bundle, cua, keep_computer=True)
        try:
            assert not golden.reused and golden.desktop.windows == (CALC_WINDOW,)
            own = p.take_golden_computer(golden)
            assert own is not None and p.take_golden_computer(golden) is None  # handed out once
            with own:
                res = own.exec(["shinken-desktop-state", "windows", "--expect", json.dumps(golden.desktop.signature()),
                                "--timeout", "10"], timeout=40)
                assert res.ok, res.output  # the same windows and focus, without a relaunch
                files = own.exec(["bash", "-c", "ls /tmp/.X11-unix/X0 /tmp/runtime-1000/bus; ls -d /tmp/.shinken-hidden"])
                assert "/tmp/.X11-unix/X0" in files.output and "/tmp/runtime-1000/bus" in files.output
                assert "cannot access '/tmp/.shinken-hidden'" in files.output  # put back, folder removed
                assert own.run_reward(bundle).reward == 0.0
            # The image holds them moved aside (X lock and socket, session env, boot status, ...).
            image_files = run_container(docker_client, golden.image_id, ["bash", "-c",
                                                       "ls -A /tmp/.shinken-hidden | wc -l; "
                                                       "test -e /tmp/runtime-1000/bus && echo session || echo none"],
                                                       remove=True, network_mode="none",
                                                       labels=labels_for("build", task="test-hidden")).decode().split()
            assert int(image_files[0]) >= 4 and image_files[1] == "none", image_files
            with p.fork(golden) as fork:  # a fork boots its own desktop: the hidden files are gone first
                assert fork.tier is Tier.RELAUNCH
                assert not fork.exec(["test", "-e", "/tmp/.shinken-hidden"]).ok
            again = p.ensure_golden(bundle, cua, keep_computer=True)
            assert again.reused and p.take_golden_computer(again) is None  # nothing kept for a found golden
        finally:
            p.delete_golden(golden)


@pytest.mark.docker
def test_leftovers_of_killed_apps_never_become_dialogs(probed, desktop_root, cua, docker_client) -> None:
    from shinken.bundles.loader import load_bundle
    from shinken.sandbox import start_state
    from shinken.sandbox.docker_provider import DockerProvider

    golden_tag = next(t["golden"] for t in probed["tasks"] if t["task_id"] == CALC)
    # The golden holds what the killed Calc left: its profile lock and its crash-recovery entry.
    listing = run_container(docker_client, golden_tag, ["bash", "-c",
                                           "ls /home/user/.config/libreoffice/4/.lock && grep -c RecoveryList "
                                           "/home/user/.config/libreoffice/4/user/registrymodifications.xcu"],
                                           remove=True, network_mode="none",
                                           labels=labels_for("build", task="test-leftovers")).decode()
    assert ".lock" in listing
    with DockerProvider(docker_client, run_id="test-start-" + uuid.uuid4().hex[:8]) as p:
        golden = p.ensure_golden(load_bundle(desktop_root / CALC), cua)
        assert golden.reused and golden.desktop.windows == (CALC_WINDOW,)
        with p.fork(golden) as fork:  # the default: cleaned, relaunched, checked
            assert fork.tier is Tier.RELAUNCH and fork.start_timings["wait_s"] > 0
            # read again after the handover: the golden's windows, no dialog
            res = fork.exec(["shinken-desktop-state", "windows", "--expect",
                             json.dumps(golden.desktop.signature()), "--timeout", "30"], timeout=60)
            assert res.ok and json.loads(res.output.strip().splitlines()[-1])["windows"] == [CALC_WINDOW.to_json()]
        # Control: the same relaunch without the cleaning meets what the killed Calc left. A fork
        # has the golden's host name, so LibreOffice takes the profile lock for its own stale one
        # (no "locked by another host" question) and opens the crash-recovery entry instead.
        with p.fork(golden, tier=Tier.FILESYSTEM, replay=False) as fork:
            with pytest.raises(StartStateError) as info:
                start_state.restore(fork, golden.desktop, timeout=60, clean_first=False)
            assert "unexpected dialog 'LibreOffice 7.4 Document Recovery' (soffice dialog)" in str(info.value)


@pytest.mark.docker
def test_tampered_golden_is_caught_and_masked(probed, desktop_root, cua, docker_client) -> None:
    """A golden whose files no longer match its record (the document is gone): the relaunch
    cannot show the recorded window, so the seed is masked as a start-state failure."""
    from shinken.computer.contract import EngineConfig
    from shinken.computer.engine import ComputerEngine

    golden_tag = next(t["golden"] for t in probed["tasks"] if t["task_id"] == CALC)
    original = docker_client.images.get(golden_tag)
    c = run_container(docker_client, original.id, ["rm", "-f", "/home/user/expenses.xlsx"], detach=True,
                                     network_mode="none", labels=labels_for("build", task="test-tamper"))
    c.wait(timeout=60)
    repo, tag = golden_tag.split(":")
    # Tampered where the golden is kept: under its own tag (the golden served is the one its tag
    # names, never a lookalike by labels or date: docs/security.md).
    tampered = c.commit(repository=repo, tag=tag, conf={"Labels": original.labels})
    c.remove()
    try:
        with ComputerEngine(EngineConfig(desktop_root, cua), keep_goldens_on_close=True) as eng:
            gen = eng.seed("tampered", CALC, tier="relaunch")
            assert eng._goldens[CALC].golden.image_id == tampered.id  # the tagged golden is taken
            assert eng.tool("tampered", gen, "computer_observe", {}).startswith("error:")
            res = eng.verify("tampered", gen)
            assert res.mask_sample and res.failure_kind == "provider_unavailable" and res.code == "start_state"
            assert res.failure_stage == "seed"
            assert "missing window 'expenses.xlsx - LibreOffice Calc'" in res.failure_reason
            eng.end("tampered")
    finally:
        original.tag(repo, tag)  # the golden's tag back on the golden
        docker_client.images.remove(tampered.id, force=True)


@pytest.mark.docker
def test_guest_desktop_wait_reports_what_failed(cua, docker_client) -> None:
    """baseline/restore --wait-desktop (one exec for the desktop wait and the work): a desktop boot
    that failed is the SetupError a separate wait would raise, with the boot log; one that never
    finishes, or whose own waits ran out (exit 3), is a retryable InfraError; an image without `user`
    is named as such."""
    from shinken.sandbox import start_state
    from shinken.sandbox.api import InfraError, SetupError
    from shinken.sandbox.container import Container, UserIds, remove_container, start_container
    from shinken.sandbox.docker_provider import DockerProvider

    p = DockerProvider(docker_client, run_id="test-wait-" + uuid.uuid4().hex[:8])
    cid = start_container(p.api, p.resolve_image(cua), labels_for("fork", run=p.run_id),
                          p._host_config(False), desktop=False)  # no desktop boots in it
    box = Container(p.api, cid, UserIds(1000, 1000), False)
    try:
        # a boot that never finishes is the machine's load: retryable, not held against the task
        with pytest.raises(InfraError) as never:
            start_state.baseline(box, wait_desktop=1)
        assert not isinstance(never.value, SetupError) and "did not come up within 1s" in str(never.value)
        # so is one of shinken-desktop-up's own waits running out (its exit 3)
        box.exec(["bash", "-c", "echo 'openbox did not come up within 40s' > /tmp/.shinken-desktop-boot.log; "
                  "echo 3 > /tmp/.shinken-desktop-boot.rc"], user="root")
        with pytest.raises(InfraError) as late:
            start_state.baseline(box, wait_desktop=5)
        assert "exit 3" in str(late.value)
        with pytest.raises(InfraError):
            box.wait_desktop_boot()
        box.exec(["bash", "-c", "echo 'Xvfb: no screens' > /tmp/.shinken-desktop-boot.log; "
                  "echo 1 > /tmp/.shinken-desktop-boot.rc"], user="root")
        rec = DesktopRecord(roots=(Root(("evince", "/tmp/x.pdf"), "/home/user", 1000, {}),),
                            windows=(Window("evince", "frame", "x.pdf"),), active="x.pdf")
        for call in (lambda: start_state.baseline(box, wait_desktop=5),
                     lambda: start_state.restore(box, rec, timeout=5, wait_desktop=5)):
            with pytest.raises(SetupError) as failed:
                call()
            assert failed.value.where == "desktop" and "exit 1" in str(failed.value)
            assert "no screens" in failed.value.output_tail
        doc = start_state.baseline(box)  # without the wait: the user's ids, as `id` would say
        assert (doc["uid"], doc["gid"]) == (1000, 1000)
    finally:
        remove_container(p.api, cid)
    bare = run_container(docker_client, "shinken/base-bookworm:latest", ["sleep", "infinity"], detach=True,
                                        network_mode="none", labels=labels_for("build", task="test-no-user"))
    try:
        with pytest.raises(SetupError, match="no user `user`"):
            start_state.baseline(Container(p.api, bare.id, UserIds(1000, 1000), False))
    finally:
        bare.remove(force=True)
