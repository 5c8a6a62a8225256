"""Headless Chromium (Debian's `chromium`) driven over the DevTools protocol on a pipe
(`--remote-debugging-pipe`: JSON messages ended by NUL on fds 3 and 4), stdlib only.

`open_page(path)` loads a file, and returns the console errors, exceptions and failed loads
it saw, every `[data-k]` element's text, and a full-page PNG screenshot; `image_stats` asks
the same browser to decode a PNG into a canvas and count its pixels."""

from __future__ import annotations

import base64
import json
import os
import queue
import shutil
import subprocess
import tempfile
import threading
import time
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

CANDIDATES = ("/usr/lib/chromium/chromium", "chromium", "chromium-browser", "google-chrome")


def chromium_path() -> str | None:
    for c in CANDIDATES:
        p = c if os.path.isabs(c) and os.access(c, os.X_OK) else shutil.which(c)
        if p:
            return p
    return None


class Browser:
    def __init__(self, binary: str, width: int = 1100, height: int = 900) -> None:
        self.profile = tempfile.mkdtemp(prefix="shinken-chromium-")
        to_child_r, self._w = os.pipe()
        self._r, from_child_w = os.pipe()

        def fds() -> None:  # the protocol pipe is fd 3 (commands in) and fd 4 (replies out)
            os.dup2(to_child_r, 3)
            os.dup2(from_child_w, 4)

        self.proc = subprocess.Popen(
            [binary, "--headless=new", "--remote-debugging-pipe", "--no-sandbox", "--disable-gpu",
             "--no-first-run", "--no-default-browser-check", "--disable-extensions", "--disable-sync",
             "--disable-background-networking", "--disable-component-update", "--mute-audio",
             f"--user-data-dir={self.profile}", f"--window-size={width},{height}", "about:blank"],
            stdin=subprocess.DEVNULL, stdout=subprocess.DEVNULL, stderr=subprocess.PIPE,
            preexec_fn=fds, pass_fds=(3, 4))
        os.close(to_child_r)
        os.close(from_child_w)
        self._next = 0
        self._replies: dict[int, queue.Queue] = {}
        self.events: list[dict[str, Any]] = []
        self._lock = threading.Lock()
        threading.Thread(target=self._read, daemon=True).start()

    def _read(self) -> None:
        buf = b""
        while True:
            try:
                chunk = os.read(self._r, 1 << 16)
            except OSError:
                return
            if not chunk:
                return
            buf += chunk
            while b"\0" in buf:
                raw, buf = buf.split(b"\0", 1)
                msg = json.loads(raw)
                if "id" in msg:
                    with self._lock:
                        q = self._replies.get(msg["id"])
                    if q is not None:
                        q.put(msg)
                else:
                    self.events.append(msg)

    def call(self, method: str, params: dict | None = None, session: str | None = None,
             timeout: float = 60) -> dict[str, Any]:
        with self._lock:
            self._next += 1
            mid = self._next
            q: queue.Queue = queue.Queue()
            self._replies[mid] = q
        msg: dict[str, Any] = {"id": mid, "method": method, "params": params or {}}
        if session:
            msg["sessionId"] = session
        os.write(self._w, json.dumps(msg).encode() + b"\0")
        try:
            reply = q.get(timeout=timeout)
        except queue.Empty:
            raise TimeoutError(f"{method}: no reply in {timeout:.0f}s; chromium stderr: {self.stderr()}") from None
        if "error" in reply:
            raise RuntimeError(f"{method}: {reply['error']}")
        return reply.get("result", {})

    def wait_event(self, method: str, session: str, since: int, timeout: float = 60) -> dict[str, Any]:
        deadline = time.monotonic() + timeout
        while time.monotonic() < deadline:
            for e in self.events[since:]:
                if e.get("method") == method and e.get("sessionId") == session:
                    return e
            time.sleep(0.05)
        raise TimeoutError(f"no {method} within {timeout:.0f}s")

    def stderr(self) -> str:
        if self.proc.poll() is None:
            return "(running)"
        return (self.proc.stderr.read() or b"").decode(errors="replace")[-2000:] if self.proc.stderr else ""

    def close(self) -> None:
        try:
            self.call("Browser.close", timeout=10)
        except Exception:
            pass
        try:
            self.proc.wait(timeout=10)
        except subprocess.TimeoutExpired:
            self.proc.kill()
            self.proc.wait()
        for fd in (self._w, self._r):
            try:
                os.close(fd)
            except OSError:
                pass
        shutil.rmtree(self.profile, ignore_errors=True)

    def __enter__(self) -> "Browser":
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()

    def session(self, url: str = "about:blank") -> str:
        target = self.call("Target.createTarget", {"url": url})["targetId"]
        return self.call("Target.attachToTarget", {"targetId": target, "flatten": True})["sessionId"]

    def evaluate(self, session: str, expression: str, timeout: float = 60) -> Any:
        res = self.call("Runtime.evaluate", {"expression": expression, "returnByValue": True, "awaitPromise": True},
                        session, timeout)
        if "exceptionDetails" in res:
            raise RuntimeError(f"evaluate: {res['exceptionDetails']}")
        return res["result"].get("value")


@dataclass
class Page:
    problems: list[str]  # console errors and warnings, uncaught exceptions, failed loads
    values: dict[str, list[str]]  # data-k -> the text of every element carrying it
    png: bytes
    width: int
    height: int
    requests: list[str] = field(default_factory=list)  # every URL the page asked for
    evaluated: Any = None  # what `expression` (open_page's argument) returned on the loaded page


PROBLEMS = {"Runtime.exceptionThrown", "Network.loadingFailed"}


def navigate(browser: Browser, url: str, width: int = 1100, height: int = 900) -> tuple[str, int]:
    """A new tab at `url`, loaded (its load event fired); returns the session and the index of
    its first event (for `problems_since`)."""
    s = browser.session()
    for domain in ("Page", "Runtime", "Log", "Network"):
        browser.call(f"{domain}.enable", {}, s)
    browser.call("Emulation.setDeviceMetricsOverride",
                 {"width": width, "height": height, "deviceScaleFactor": 1, "mobile": False}, s)
    since = len(browser.events)
    browser.call("Page.navigate", {"url": url}, s)
    browser.wait_event("Page.loadEventFired", s, since)
    return s, since


def problems_since(browser: Browser, s: str, since: int) -> tuple[list[str], list[str]]:
    """Console errors and warnings, uncaught exceptions and failed loads of session `s` since event
    `since`, and every URL it asked for."""
    mine = [e for e in browser.events[since:] if e.get("sessionId") == s]
    problems = []
    for e in mine:
        m, p = e.get("method"), e.get("params", {})
        if m == "Runtime.consoleAPICalled" and p.get("type") in ("error", "warning", "assert"):
            problems.append(f"console.{p['type']}: {[a.get('value', a.get('description')) for a in p.get('args', [])]}")
        elif m == "Log.entryAdded" and p.get("entry", {}).get("level") in ("error", "warning"):
            problems.append(f"log: {p['entry'].get('text')} {p['entry'].get('url', '')}")
        elif m in PROBLEMS:
            problems.append(f"{m}: {json.dumps(p)[:300]}")
    requests = [e["params"]["request"]["url"] for e in mine if e.get("method") == "Network.requestWillBeSent"]
    return problems, requests


def screenshot(browser: Browser, s: str, width: int) -> tuple[bytes, int, int]:
    """The whole page as a PNG (the viewport grown to the page's height first), and its size."""
    metrics = browser.call("Page.getLayoutMetrics", {}, s)["cssContentSize"]
    w, h = int(metrics["width"]), int(metrics["height"])
    browser.call("Emulation.setDeviceMetricsOverride",
                 {"width": width, "height": h, "deviceScaleFactor": 1, "mobile": False}, s)
    png = base64.b64decode(browser.call("Page.captureScreenshot", {"format": "png", "captureBeyondViewport": True},
                                        s, timeout=240)["data"])  # a tall page on a loaded machine
    return png, w, h


def open_page(browser: Browser, path: Path, width: int = 1100, expression: str | None = None) -> Page:
    s, since = navigate(browser, Path(path).resolve().as_uri(), width)
    values = browser.evaluate(s, "(() => { const o = {}; for (const e of document.querySelectorAll('[data-k]')) "
                                 "(o[e.dataset.k] ||= []).push(e.textContent.trim()); return o; })()")
    evaluated = browser.evaluate(s, expression) if expression else None
    png, w, h = screenshot(browser, s, width)
    problems, requests = problems_since(browser, s, since)
    return Page(problems, values, png, w, h, requests, evaluated)


def image_stats(browser: Browser, png: bytes, mime: str = "image/png") -> dict[str, Any]:
    """Decode `png` (or another image of `mime`: its first frame) in the browser: size, share of
    pixels that are not near-white, and the number of distinct colours among a sample of pixels."""
    s = browser.session()
    data = base64.b64encode(png).decode()
    return browser.evaluate(s, """new Promise((done, fail) => {
      const img = new Image();
      img.onerror = () => fail(new Error('not a decodable image'));
      img.onload = () => {
        const c = document.createElement('canvas'); c.width = img.width; c.height = img.height;
        const g = c.getContext('2d'); g.drawImage(img, 0, 0);
        const px = g.getImageData(0, 0, c.width, c.height).data;
        let ink = 0; const colours = new Set();
        for (let i = 0; i < px.length; i += 4) {
          if (px[i] < 235 || px[i + 1] < 235 || px[i + 2] < 235) ink++;
          if (i % 400 === 0) colours.add((px[i] << 16) | (px[i + 1] << 8) | px[i + 2]);
        }
        done({width: c.width, height: c.height, ink: ink / (px.length / 4), colours: colours.size});
      };
      img.src = 'data:""" + mime + """;base64,""" + data + """';
    })""")


if __name__ == "__main__":  # python tests/browser.py PAGE.html OUT.png: a full-page screenshot
    import sys

    binary = chromium_path()
    if binary is None:
        sys.exit("chromium is not installed; run scripts/setup.sh")
    with Browser(binary) as b:
        shot = open_page(b, Path(sys.argv[1]))
    if shot.problems:
        sys.exit(f"the page has problems: {shot.problems}")
    Path(sys.argv[2]).write_bytes(shot.png)
    print(f"{sys.argv[2]}: {shot.width}x{shot.height}")
