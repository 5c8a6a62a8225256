"""Sandbox images on the real Docker engine: content-hash caching, the capability manifest, and the
desktop (Xvfb + openbox + AT-SPI) coming up in a container with a zenity dialog visible to a11y."""

from __future__ import annotations

import json
import time
from pathlib import Path

import pytest

from tests.cli_runner import run_cli

from shinken.errors import ShinkenError
from shinken.images import build as images_build
from shinken.images.build import LABEL_HASH, apt_mirror, build_image, content_hash, ensure_image
from shinken.images.capabilities import cache_path, get_manifest
from shinken.sandbox.docker_client import run_container
from shinken.sandbox.ownership import LABEL_BASE_IMAGE, LABEL_OWNER, Owner, labels_for
from shinken.schemas import check_with_jsonschema
from tests.container_exec import run_sandbox
from tests.container_exec import sh as _exec

pytestmark = [pytest.mark.docker]

REPO = Path(__file__).resolve().parent.parent


def test_second_build_is_a_cache_hit(docker_client, linux_image):
    first = build_image("linux", client=docker_client)
    second = build_image("linux", client=docker_client)
    assert second.cached and second.image_id == first.image_id  # a cache hit: nothing built, the same image
    assert ensure_image("linux", client=docker_client) == first.image_id
    image = docker_client.images.get(first.image_id)
    assert image.labels[LABEL_HASH] == first.content_hash
    assert f"shinken/sandbox-linux:{first.content_hash}" in image.tags
    assert "shinken/sandbox-linux:latest" in image.tags


def test_content_hash_follows_parent_and_files():
    assert content_hash("linux", "sha256:" + "a" * 64) != content_hash("linux", "sha256:" + "b" * 64)
    assert content_hash("linux", "sha256:x") == content_hash("linux", "sha256:x")
    arcs = [arc for arc, _ in images_build._image_files("linux")]
    # the guest scripts are part of the linux image's identity
    assert {"guest/shinken-desktop-up", "guest/shinken-a11y-dump", "guest/shinken-capabilities"} <= set(arcs)
    assert "Dockerfile" in arcs
    # every file the cua recipe COPYs is part of its identity, the guest scripts too
    cua = {arc for arc, _ in images_build._image_files("cua")}
    assert {"bin/google-chrome", "bin/xcf2png", "requirements.txt", "check_requirements.py", "chromium.d/shinken",
            "stubs/python3-pythran.control", "desktop/mimeapps.list", "guest/shinken-desktop-up"} <= cua


def test_unknown_image_name_is_a_usage_error(docker_client):
    with pytest.raises(ShinkenError, match="unknown image"):
        build_image("windows", client=docker_client)


def test_apt_mirror_reads_deb822_then_sources_list(tmp_path):
    d = tmp_path / "sources.list.d"
    d.mkdir()
    (d / "debian.sources").write_text(
        "Types: deb\nURIs: http://mirror.example/debian-security\nSuites: bookworm-security\nComponents: main\n\n"
        "Types: deb\n# comment\nURIs: http://mirror.example/debian\nSuites: bookworm bookworm-updates\n"
        "Components: main\n"
    )
    assert apt_mirror(d, tmp_path / "none") == "http://mirror.example/debian"
    (d / "debian.sources").unlink()
    lst = tmp_path / "sources.list"
    lst.write_text("# x\ndeb [arch=amd64] http://other.example/debian bookworm main\n")
    assert apt_mirror(d, lst) == "http://other.example/debian"
    assert apt_mirror(tmp_path / "missing", tmp_path / "missing.list") == images_build.DEFAULT_MIRROR


def test_manifest_validates_and_lists_reward_libraries(docker_client, linux_image):
    manifest = get_manifest(linux_image, client=docker_client, refresh=True)
    assert check_with_jsonschema("capabilities", manifest) == []
    assert manifest["image"]["id"] == docker_client.images.get(linux_image).id
    mods = set(manifest["python_modules"])
    for mod in ("openpyxl", "docx", "pptx", "fitz", "pypdf", "PyPDF2", "pikepdf", "pdfminer", "odf", "PIL",
                "numpy", "pandas", "requests", "lxml", "pyautogui", "gi", "json"):
        assert mod in mods, mod
    exes = set(manifest["executables"])
    for exe in ("python3", "zenity", "xdotool", "Xvfb", "xterm", "openbox", "shinken-desktop-up",
                "shinken-a11y-dump", "shinken-capabilities"):
        assert exe in exes, exe
    assert manifest["python"]["version"].startswith("3.11.")
    assert "python3-openpyxl" in manifest["dpkg_packages"]
    assert {"zenity", "xterm"} <= set(manifest["desktop_apps"])
    assert "libreoffice_calc" not in manifest["desktop_apps"]
    assert manifest["display"] is True and manifest["accessibility"] is True
    # second call: from the per-image-id cache, no container (the engine's events say none was created)
    # (events are asked for by whole seconds: those from before the call, such as the refresh just
    # above, are told apart by their timeNano, the engine running on this machine's clock; and only
    # this process's containers count, not those other tests make from the same image)
    def created_by(call) -> tuple:
        t0 = time.time_ns()
        result = call()
        events = docker_client.events(since=t0 // 10**9 - 1, until=int(time.time()) + 1, decode=True, filters={
            "type": "container", "event": "create",
            "label": [f"{LABEL_BASE_IMAGE}={manifest['image']['id']}", f"{LABEL_OWNER}={Owner.current().label()}"]})
        return result, [e for e in events if e["timeNano"] >= t0]

    again, created = created_by(lambda: get_manifest(linux_image, client=docker_client))
    assert created == [], created
    _, created = created_by(lambda: get_manifest(linux_image, client=docker_client, refresh=True))
    assert len(created) == 1, created  # the same watch sees the one container a refresh runs
    assert again["generated_at"] == manifest["generated_at"]
    assert cache_path(manifest["image"]["id"]).is_file()


def test_inspect_cli_prints_manifest_json(linux_image):
    proc = run_cli("image", "inspect", linux_image, "--json", timeout=180, cwd=REPO)
    assert proc.returncode == 0, proc.stderr
    doc = json.loads(proc.stdout)
    assert doc["image"]["ref"] == linux_image and "xdotool" in doc["executables"]


def test_inspect_missing_image_is_environment_problem():
    proc = run_cli("image", "inspect", "shinken/no-such-image:nope", subprocess_=True, timeout=60)
    assert proc.returncode == 3
    assert "not found" in proc.stderr and "Traceback" not in proc.stderr


@pytest.fixture()
def desktop_container(docker_client, linux_image):
    container = run_container(
        docker_client, linux_image, detach=True, init=True, network_mode="none", labels=labels_for("build", task="test-images"),
        cap_drop=["ALL"], security_opt=["no-new-privileges"], pids_limit=512, mem_limit="2g",
    )
    try:
        yield container
    finally:
        container.remove(force=True)


def test_desktop_comes_up_and_zenity_entry_is_accessible(desktop_container):
    c = desktop_container
    rc, out = _exec(c, "shinken-desktop-up")
    assert rc == 0, out  # up within the script's own deadline (SHINKEN_DESKTOP_TIMEOUT)
    # No file of the session's settings: every exec gets them in its environment (a file in /tmp
    # would be the policy's to write), and the bus is where those settings say.
    rc, out = _exec(c, "test ! -e /tmp/shinken-session.env && test -S /tmp/runtime-1000/bus && "
                       "dbus-send --session --print-reply --dest=org.freedesktop.DBus /org/freedesktop/DBus "
                       "org.freedesktop.DBus.GetId")
    assert rc == 0, out
    rc, out = _exec(c, "xdpyinfo | grep dimensions")
    assert rc == 0 and "1920x1080" in out, out
    # idempotent: the second call takes the fast path, so the session's processes are the same ones
    session = "pgrep -x Xvfb; pgrep -x openbox; pgrep -x dbus-daemon"
    rc, before = _exec(c, session)
    rc, out = _exec(c, "shinken-desktop-up")
    assert rc == 0, out
    rc, after = _exec(c, session)
    assert before.split() == after.split() and len(after.split()) >= 3, (before, after)
    rc, out = _exec(c, "pgrep -c -x Xvfb")
    assert out.strip() == "1", out

    rc, out = _exec(c, "(setsid zenity --entry --text 'Your name' >/dev/null 2>&1 &)")
    assert rc == 0, out
    deadline = time.monotonic() + 30
    entry = None
    while time.monotonic() < deadline and entry is None:
        rc, out = _exec(c, "shinken-a11y-dump --app zenity")
        if rc == 0:
            dump = json.loads(out)
            assert dump["ok"] is True
            entry = next((n for n in dump["nodes"] if n["role"] in ("text", "entry")
                          and "editable" in n["states"]), None)
        if entry is None:
            time.sleep(0.3)
    assert entry is not None, out
    assert entry["app"] == "zenity"
    x, y, w, h = entry["bbox"]
    assert w > 0 and h > 0 and 0 <= x < 1920 and 0 <= y < 1080
    assert entry["parent"] and entry["path"].startswith(entry["parent"] + "/")

    # out of time before the first element (a busy machine): the applications and their windows are
    # listed all the same, nothing below them, and the dump says it was cut
    rc, out = _exec(c, "shinken-a11y-dump --max-seconds 0")
    assert rc == 0, out
    cut = json.loads(out)
    app = next(n for n in cut["nodes"] if n["role"] == "application" and n["name"] == "zenity")
    assert [n for n in cut["nodes"] if n["parent"] == app["path"] and n["role"] in ("dialog", "frame")], cut["nodes"]
    assert cut["truncated"] is True and all(n["path"].count("/") <= 1 for n in cut["nodes"]), cut["nodes"]

    # typing into the focused entry shows up in the a11y value: input and a11y see the same widget
    rc, out = _exec(c, "xdotool type --delay 5 'ada'")
    assert rc == 0, out
    deadline = time.monotonic() + 10
    value = None
    while time.monotonic() < deadline and value != "ada":
        rc, out = _exec(c, "shinken-a11y-dump --app zenity")
        nodes = {n["path"]: n for n in json.loads(out)["nodes"]}
        value = nodes.get(entry["path"], {}).get("value")
    assert value == "ada"


def test_desktop_up_as_root_runs_the_session_as_user(docker_client, linux_image):
    # root exec is how setup steps run; the session must still belong to `user`
    container = run_container(
        docker_client, linux_image, detach=True, init=True, network_mode="none", labels=labels_for("build", task="test-images"),
        cap_drop=["ALL"], cap_add=["SETUID", "SETGID", "AUDIT_WRITE"], security_opt=["no-new-privileges"],
        pids_limit=512, mem_limit="2g",
    )
    try:
        rc, out = _exec(container, "shinken-desktop-up", user="root")
        assert rc == 0, out
        rc, out = _exec(container, "ps -o user= -C Xvfb")
        assert out.strip() == "user", out
    finally:
        container.remove(force=True)


@pytest.mark.slow
def test_cua_libreoffice_calc_is_accessible_and_saves_without_dialog(docker_client, cua_image):
    box = run_sandbox(docker_client, cua_image, "test-images")
    try:
        rc, out = _exec(box, "cd /home/user && python3 -c \"import openpyxl; wb = openpyxl.Workbook(); "
                             "wb.active['A1'] = 41; wb.save('t.xlsx')\" && stat -c %Y t.xlsx "
                             "&& (setsid soffice --calc t.xlsx >/tmp/lo.log 2>&1 &)")
        assert rc == 0, out
        cell = None
        deadline = time.monotonic() + 120
        while time.monotonic() < deadline and cell is None:
            rc, out = _exec(box, "shinken-a11y-dump --showing-only --app soffice")
            if rc == 0:
                cell = next((n for n in json.loads(out)["nodes"] if n["role"] == "table cell" and n["name"] == "A1"),
                            None)
            if cell is None:
                time.sleep(1)
        assert cell is not None, out[-2000:]
        assert str(cell["value"]).strip() == "41" and cell["bbox"][2] > 0
        # Ctrl+S on an .xlsx: the profile turns off "Keep current format?", so the save just happens
        rc, out = _exec(box, "xdotool type --delay 20 '7' && xdotool key Return "
                             "&& sleep 0.5 && xdotool key ctrl+s")
        assert rc == 0, out
        value = None
        deadline = time.monotonic() + 60
        while time.monotonic() < deadline and value != 7:
            rc, out = _exec(box, "cd /home/user && python3 -c \"import openpyxl; "
                                 "print(openpyxl.load_workbook('t.xlsx').active['A1'].value)\"")
            value = int(out.strip()) if rc == 0 and out.strip().isdigit() else None
            if value != 7:
                time.sleep(1)
        assert value == 7, out
    finally:
        box.remove(force=True)


def test_manifest_of_an_image_without_guest_scripts_uses_the_piped_script(docker_client, linux_image):
    core = docker_client.images.get(linux_image).labels[images_build.LABEL_PARENT]
    manifest = get_manifest(core, client=docker_client, refresh=True)
    assert check_with_jsonschema("capabilities", manifest) == []
    assert "shinken-desktop-up" not in manifest["executables"]
    assert "openpyxl" in manifest["python_modules"]


def test_manifest_of_an_image_without_python_is_an_environment_problem(docker_client, linux_image):
    from shinken.errors import EnvironmentProblem

    core = docker_client.images.get(docker_client.images.get(linux_image).labels[images_build.LABEL_PARENT])
    base_id = core.labels[images_build.LABEL_PARENT]
    with pytest.raises(EnvironmentProblem, match="no python3"):
        get_manifest(base_id, client=docker_client, refresh=True)


def test_pyautogui_drives_the_desktop(desktop_container):
    # rewards press Ctrl+S through pyautogui; it must import and act on the session's display
    rc, out = _exec(desktop_container, "shinken-desktop-up")
    assert rc == 0, out
    rc, out = _exec(desktop_container, "python3 -c \"import pyautogui, Xlib; "
                    "pyautogui.moveTo(100, 120); pyautogui.hotkey('ctrl', 's'); "
                    "print(tuple(pyautogui.size()), tuple(pyautogui.position()), pyautogui.screenshot().size, "
                    "Xlib.__file__.startswith('/usr/lib/python3/'))\"")
    assert rc == 0, out
    assert out.strip().splitlines()[-1] == "(1920, 1080) (100, 120) (1920, 1080) True"


def test_base_is_tagged_by_its_recipe_hash(docker_client, linux_image):
    base_id = images_build.ensure_base(docker_client)
    tag = f"{images_build.REPO['base']}:{images_build.base_hash(apt_mirror())}"
    assert docker_client.images.get(tag).id == base_id
    core = docker_client.images.get(docker_client.images.get(linux_image).labels[images_build.LABEL_PARENT])
    assert core.labels[images_build.LABEL_PARENT] == base_id  # the chain really starts at this base


def test_build_cli_json_reports_cache_hit(linux_image):
    proc = run_cli("image", "build", "linux", "--json", subprocess_=True, timeout=300)
    assert proc.returncode == 0, proc.stderr
    (row,) = json.loads(proc.stdout)
    assert row["cached"] is True and row["tag"] == linux_image and row["id"].startswith("sha256:")


def test_desktop_up_in_a_fork_of_a_committed_desktop(docker_client, desktop_container):
    # goldens are committed with the desktop's files in /tmp but no processes: a fork must start afresh
    rc, out = _exec(desktop_container, "shinken-desktop-up")
    assert rc == 0, out
    image = desktop_container.commit(conf={"Labels": labels_for("build", task="test-images")})
    try:
        fork = run_container(
            docker_client, image.id, ["sleep", "infinity"], detach=True, init=True, network_mode="none",
            labels=labels_for("fork", task="test-images"), cap_drop=["ALL"], security_opt=["no-new-privileges"],
        )
        try:
            rc, out = _exec(fork, "test -s /tmp/shinken-desktop/pids && shinken-desktop-up && "
                                  "xdpyinfo >/dev/null && pgrep -c -x Xvfb")
            assert rc == 0 and out.strip().endswith("1"), out
        finally:
            fork.remove(force=True)
    finally:
        docker_client.images.remove(image.id, force=True)
