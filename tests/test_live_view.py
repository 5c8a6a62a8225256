"""`shinken watch`: a live fork's desktop (demo/zenity-entry's dialog, on shinken/sandbox-linux)
shown in headless Chromium through x11vnc in the fork, websockify and noVNC; read-only (what is
typed into the view never reaches the fork), on loopback only, and over when the fork is; a fork
without a desktop named in one line."""

from __future__ import annotations

import json
import socket
import subprocess
import sys
import time
from pathlib import Path
from urllib.parse import urlparse

import pytest

sys.path.insert(0, str(Path(__file__).resolve().parent))
import browser as br  # noqa: E402
from cli_runner import SHINKEN  # noqa: E402

REPO = Path(__file__).resolve().parent.parent

# The noVNC page's canvas: its size, how many pixels are lit (the desktop is black, the dialog is not)
# and the connection status noVNC shows.
CANVAS = """(() => { const c = document.querySelector('#noVNC_container canvas');
  const status = (document.getElementById('noVNC_status') || {}).textContent || '';
  if (!c || !c.width) return {width: 0, lit: 0, status};
  const d = c.getContext('2d', {willReadFrequently: true}).getImageData(0, 0, c.width, c.height).data;
  let lit = 0;
  for (let i = 0; i < d.length; i += 4) if (d[i] + d[i + 1] + d[i + 2] > 60) lit++;
  return {width: c.width, height: c.height, lit, status}; })()"""


def _host_address() -> str:
    """An address of this machine that is not loopback (the Docker bridge's, else the host name's)."""
    with socket.socket(socket.AF_INET, socket.SOCK_DGRAM) as s:
        s.connect(("172.17.0.2", 9))  # no packet is sent: only the route is looked up
        return str(s.getsockname()[0])


def _refused(host: str, port: int) -> bool:
    try:
        with socket.create_connection((host, port), timeout=3):
            return False
    except OSError:
        return True


@pytest.mark.docker
def test_watch_shows_a_live_forks_desktop_read_only_until_the_fork_ends(linux_image: str, tmp_path: Path,
                                                                       shinken_cli) -> None:
    from shinken.bundles.loader import load_bundle
    from shinken.sandbox.docker_client import connect, resolve_image
    from shinken.sandbox.docker_provider import DockerProvider

    binary = br.chromium_path()
    assert binary, "chromium is not installed; run scripts/setup.sh"
    provider = DockerProvider(run_id="test-watch")
    watch = None
    try:
        image_id = resolve_image(connect(), linux_image)
        plain = provider.fork(provider.ensure_golden(load_bundle(REPO / "demo" / "hello-file"), image_id))
        r = shinken_cli("watch", plain.id)  # a task without a desktop: nothing to watch, said in one line
        assert r.returncode == 2 and "runs without a display" in r.stderr and "Traceback" not in r.stderr, r.stderr
        plain.close()
        golden = provider.ensure_golden(load_bundle(REPO / "demo" / "zenity-entry"), image_id)
        fork = provider.fork(golden)  # its post-fork step opens the dialog
        watch = subprocess.Popen([str(SHINKEN), "watch", fork.id[:12], "--json"], stdout=subprocess.PIPE,
                                 stderr=subprocess.PIPE, text=True)
        assert watch.stdout is not None
        first = watch.stdout.readline()
        assert first, watch.stderr.read() if watch.stderr else ""
        ready = json.loads(first)
        assert ready["computer"]["id"] == fork.id and ready["computer"]["task"] == "zenity-entry"
        url = urlparse(ready["url"])
        assert url.hostname == "127.0.0.1" and "view_only=1" in url.query
        assert _refused(_host_address(), url.port)  # bound to loopback only

        with br.Browser(binary) as b:
            # The page told to pass input on (view_only=0): the server itself must drop it.
            s, _ = br.navigate(b, ready["url"].replace("view_only=1", "view_only=0"), 1280, 800)
            deadline = time.monotonic() + 90
            seen = b.evaluate(s, CANVAS)
            while not (seen["lit"] > 2000 and seen["status"].startswith("Connected")) and time.monotonic() < deadline:
                time.sleep(0.5)
                seen = b.evaluate(s, CANVAS)
            assert (seen["width"], seen["height"]) == (1920, 1080), seen  # the fork's whole display
            assert 2000 < seen["lit"] < 1920 * 1080 // 10, seen  # the dialog on the dark desktop
            png, _, _ = br.screenshot(b, s, 1280)
            (tmp_path / "view.png").write_bytes(png)
            # Clicked, typed into the dialog's field and confirmed with Enter: a view-only server passes
            # none of it on (without x11vnc's -viewonly, zenity writes answer.txt).
            b.call("Input.dispatchMouseEvent", {"type": "mouseMoved", "x": 640, "y": 405}, s)
            b.call("Input.dispatchMouseEvent", {"type": "mousePressed", "x": 640, "y": 405, "button": "left",
                                                "clickCount": 1}, s)
            b.call("Input.dispatchMouseEvent", {"type": "mouseReleased", "x": 640, "y": 405, "button": "left",
                                                "clickCount": 1}, s)
            for ch in "Ada":
                code = f"Key{ch.upper()}"
                b.call("Input.dispatchKeyEvent", {"type": "keyDown", "key": ch, "code": code, "text": ch,
                                                  "windowsVirtualKeyCode": ord(ch.upper())}, s)
                b.call("Input.dispatchKeyEvent", {"type": "keyUp", "key": ch, "code": code,
                                                  "windowsVirtualKeyCode": ord(ch.upper())}, s)
            b.call("Input.dispatchKeyEvent", {"type": "keyDown", "key": "Enter", "code": "Enter", "text": "\r",
                                              "windowsVirtualKeyCode": 13}, s)
            b.call("Input.dispatchKeyEvent", {"type": "keyUp", "key": "Enter", "code": "Enter",
                                              "windowsVirtualKeyCode": 13}, s)
        time.sleep(3)  # (a view that passed input on: zenity has written the answer by now)
        answered = fork.exec(["bash", "-c", "test -e /home/user/answer.txt && echo yes || echo no"])
        assert answered.output.strip() == "no"
        assert watch.poll() is None  # the view lasts as long as the fork

        fork.close()  # the rollout is over
        assert watch.wait(timeout=60) == 0, watch.stderr.read() if watch.stderr else ""
        assert "the fork ended" in (watch.stderr.read() if watch.stderr else "")
        assert _refused("127.0.0.1", url.port)  # websockify (and x11vnc before it) ended with it
    finally:
        if watch is not None and watch.poll() is None:
            watch.terminate()
            watch.wait(timeout=30)
        provider.close()


@pytest.mark.docker
def test_watch_lists_computers_and_names_a_missing_one_in_one_line(shinken_cli) -> None:
    r = shinken_cli("watch", "--json")
    assert r.returncode == 0, r.stderr
    assert isinstance(json.loads(r.stdout)["computers"], list)
    r = shinken_cli("watch", "no-such-task-or-fork")
    assert r.returncode == 2 and "no running shinken computer is 'no-such-task-or-fork'" in r.stderr
    assert "Traceback" not in r.stderr
