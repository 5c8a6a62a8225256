"""Screenshots of a fork's display, taken in the guest: the X root window is read through XCB
(Pillow's ImageGrab; python3-xlib when Pillow lacks XCB), scaled when asked and encoded as PNG,
JPEG or WebP there; only the encoded image crosses to the host (base64 on the exec's output,
after a header line). No extra container, no image change.

Importing Pillow costs more CPU than a grab and an encode together (~100 ms against ~55 ms at
1280x800), so a rollout's first capture starts a capture server in the fork (a python holding
Pillow, listening on a Unix socket in /tmp, named by the hash of its code) and every capture is a
small client (`python3 -S`, `_socket` only, ~18 ms of CPU) that asks it. The server runs the same
grab-scale-encode code a one-shot capture would (`CAPTURE_LIB`), one request at a time; it dies
with the fork. The client starts it when the socket does not answer (the first capture, or a
server that died), so a fork committed or restarted without it still works.

A step's capture is that client, run last in the step's one exec. Captures outside a step (the
seed-time screenshot, after a shinken tool or an observation) cost no exec: the rollout's first
one opens the capture channel (sandbox.exec_channel: one long-lived exec with stdin attached)
running a relay that asks the same server per request line; a broken channel is opened once more,
then the rollout falls back to an exec per capture (`capture_exec`)."""

from __future__ import annotations

import base64
import hashlib
import json
import logging
from dataclasses import dataclass

from shinken.computer.profiles import MIME, Profile
from shinken.computer.tools import _SESSION_PREFIX, ToolContext, _guest
from shinken.sandbox.api import ExecResult, InfraError
from shinken.sandbox.exec_channel import ChannelBroken, ExecChannel

HEADER = "SHINKEN-SCREENSHOT "
CAPTURE_TIMEOUT_S = 30.0
MAX_OUTPUT = 48_000_000  # base64 of a 7680x7680 PNG fits

# capture(fmt, quality, size) -> the header line and one base64 line, as bytes; `size` is WxH or "-".
# grab() -> (the screen as an RGB image, "xcb" or "xlib"); the probe's recorder uses it too.
CAPTURE_LIB = r"""
import sys, time
sys.path.append("/usr/lib/python3/dist-packages")  # run with -S: no site scan
import base64, io, json, resource
from PIL import Image

def _cpu():
    r = resource.getrusage(resource.RUSAGE_SELF)
    return (r[0] + r[1]) * 1000

_served = []

def grab():
    # The screen as an RGB image, and how it was read.
    try:  # what ImageGrab.grab(xdisplay="") does, without importing ImageGrab's own imports
        (w0, h0), raw = Image.core.grabscreen_x11("")
        return Image.frombytes("RGB", (w0, h0), raw, "raw", "BGRX", w0 * 4, 1), "xcb"
    except Exception:
        from Xlib import X, display
        d = display.Display()
        root = d.screen().root
        g = root.get_geometry()
        raw = root.get_image(0, 0, g.width, g.height, X.ZPixmap, 0xFFFFFFFF)
        d.close()
        return Image.frombuffer("RGB", (g.width, g.height), raw.data, "raw", "BGRX", 0, 1), "xlib"

def capture(fmt, quality, size):
    # The first capture of a process counts its start (interpreter, Pillow's import) too.
    t0, c0 = time.perf_counter(), (_cpu() if _served else 0.0)
    _served.append(1)
    im, how = grab()
    sw, sh = im.size
    if size != "-":
        w, h = (int(v) for v in size.split("x"))
        if (w, h) != im.size:
            im = im.resize((w, h), Image.BOX)  # area average: sharp text for downscales, cheaper than bilinear
    buf = io.BytesIO()
    if fmt == "png":
        im.save(buf, "PNG", compress_level=1)
    elif fmt == "jpeg":
        im.save(buf, "JPEG", quality=quality)
    else:
        im.save(buf, "WEBP", quality=quality, method=0)
    data = buf.getvalue()
    head = json.dumps({"width": im.size[0], "height": im.size[1], "screen_width": sw, "screen_height": sh,
                       "bytes": len(data), "via": how, "guest_ms": round((time.perf_counter() - t0) * 1000, 1),
                       "cpu_ms": round(_cpu() - c0, 1)})
    return ("SHINKEN-SCREENSHOT " + head + "\n").encode() + base64.b64encode(data) + b"\n"
"""

# The capture server: argv = socket path. Serves one request at a time ("fmt quality size\n" ->
# capture()'s bytes, or one "SHINKEN-SCREENSHOT-ERROR ..." line); exits when another server
# already answers on the path.
SERVER_PY = CAPTURE_LIB + r"""
import os, socket
path = sys.argv[1]
sock = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
try:
    sock.bind(path)
except OSError:
    probe = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
    try:
        probe.connect(path)
        sys.exit(0)  # a live server
    except OSError:
        os.unlink(path)  # a dead server's socket
        sock.bind(path)
    finally:
        probe.close()
sock.listen(16)
while True:
    conn, _ = sock.accept()
    try:
        conn.settimeout(20)
        req = b""
        while not req.endswith(b"\n") and len(req) < 200:
            chunk = conn.recv(256)
            if not chunk:
                break
            req += chunk
        try:
            fmt, quality, size = req.decode().split()
            out = capture(fmt, int(quality), size)
        except Exception as exc:
            out = ("SHINKEN-SCREENSHOT-ERROR " + type(exc).__name__ + ": " + str(exc)[:300] + "\n").encode()
        conn.sendall(out)
    except OSError:
        pass
    finally:
        conn.close()
"""

log = logging.getLogger(__name__)

SERVER_ID = hashlib.sha256(SERVER_PY.encode()).hexdigest()[:12]

# How a guest process asks the capture server (the client and the relay below share it): ask(req)
# sends one request and returns the server's answer; it starts the server (detached, stdio on
# /dev/null so no exec waits for it) when nothing answers, and waits for it up to 20 s.
CLIENT_LIB = r"""
import sys, os, time, _socket
path = "/tmp/.shinken-capture-%d-SERVER_ID.sock" % os.getuid()
def ask_once(req):
    s = _socket.socket(_socket.AF_UNIX, _socket.SOCK_STREAM)
    s.settimeout(25)
    try:
        s.connect(path)
        s.sendall(req)
        parts = []
        while True:
            b = s.recv(1 << 20)
            if not b:
                return b"".join(parts)
            parts.append(b)
    finally:
        s.close()
# No server (no socket, or one nobody answers), or one that died with the request queued: start one.
GONE = (FileNotFoundError, ConnectionRefusedError, ConnectionResetError, BrokenPipeError)
def spawn(server_py):
    pid = os.fork()
    if pid == 0:  # twice, so the server is nobody's child here (no zombie in a long-lived relay)
        os.setsid()
        if os.fork() != 0:
            os._exit(0)
        fd = os.open("/dev/null", os.O_RDWR)
        for k in (0, 1, 2):
            os.dup2(fd, k)
        os.execv(sys.executable, [sys.executable, "-S", "-c", server_py, path])
    os.waitpid(pid, 0)
def ask(req, server_py):
    try:
        return ask_once(req)
    except GONE:
        pass
    start = time.monotonic()
    spawned = start
    spawn(server_py)
    while True:
        try:
            return ask_once(req)
        except GONE:
            now = time.monotonic()
            if now > start + 20:
                return b"SHINKEN-SCREENSHOT-ERROR the capture server did not start\n"
            # A server killed a moment ago may still have held the socket when ours looked, and ours
            # then left: start another now and then (two starting at once keep one; the other exits).
            if now > spawned + 5:
                spawned = now
                spawn(server_py)
            time.sleep(0.02)
import resource
def cpu_ms():
    r = resource.getrusage(resource.RUSAGE_SELF)
    return (r[0] + r[1]) * 1000
tag = b"SHINKEN-SCREENSHOT {"
def with_cpu(out, ms):
    if out.startswith(tag):
        out = tag + b'"client_cpu_ms": %.1f, ' % ms + out[len(tag):]
    return out
"""

# The client: argv = fmt quality WxH|- SERVER_PY; prints what the server answers, its own CPU
# added to the header (`client_cpu_ms`). Runs last in a step's exec (and in a capture's own exec
# when the channel below is not available).
CAPTURE_PY = (CLIENT_LIB + r"""
out = with_cpu(ask((" ".join(sys.argv[1:4]) + "\n").encode(), sys.argv[4]), cpu_ms())
sys.stdout.buffer.write(out)
sys.stdout.flush()
sys.exit(0 if out.startswith(tag) else 1)
""").replace("SERVER_ID", SERVER_ID)

# The relay: one long-lived process per fork on an exec's stdin/stdout (sandbox.exec_channel), so
# a capture outside a step costs no `docker exec`: each request line ("fmt quality WxH|-") is
# asked of the capture server and its answer written as one frame (`SHINKEN-FRAME <n>\n` + n
# bytes), the relay's CPU for the request as `client_cpu_ms`. argv = SERVER_PY. Ends at stdin's end.
RELAY_PY = (CLIENT_LIB + r"""
inp, outp = sys.stdin.buffer, sys.stdout.buffer
while True:
    line = inp.readline()
    if not line:
        break
    c0 = cpu_ms()
    try:
        out = ask(line if line.endswith(b"\n") else line + b"\n", sys.argv[1])
    except OSError as exc:
        out = ("SHINKEN-SCREENSHOT-ERROR relay: " + type(exc).__name__ + ": " + str(exc)[:300] + "\n").encode()
    out = with_cpu(out, cpu_ms() - c0)
    outp.write(b"SHINKEN-FRAME %d\n" % len(out) + out)
    outp.flush()
""").replace("SERVER_ID", SERVER_ID)


# The same capture in a fresh process of its own (no server): how every capture ran before the
# server; kept for comparisons (tests, bench_computer).
ONESHOT_PY = CAPTURE_LIB + r"""
sys.stdout.buffer.write(capture(sys.argv[1], int(sys.argv[2]), sys.argv[3]))
sys.stdout.flush()
"""


def capture_argv(profile: Profile) -> list[str]:
    """The client's argv after `python3 -S -c CAPTURE_PY` (the server's code travels with it)."""
    size = f"{profile.size[0]}x{profile.size[1]}" if profile.size else "-"
    return [profile.image_format, str(profile.quality), size, SERVER_PY]


@dataclass(frozen=True)
class Screenshot:
    data: bytes
    mime: str
    width: int  # of the image (what the policy's coordinates refer to)
    height: int
    screen_width: int  # of the display
    screen_height: int
    guest_ms: float = 0.0  # grab + scale + encode in the capture server (the exec's overhead excluded)
    via: str = ""  # "xcb" (Pillow's ImageGrab) or "xlib"
    # CPU of the capture in the guest: the client (its interpreter start included) and the server's
    # work for this request (its start and Pillow's import too on its first); the X server's excluded.
    cpu_ms: float = 0.0

    @property
    def b64(self) -> str:
        return base64.b64encode(self.data).decode()

    @property
    def data_url(self) -> str:
        return f"data:{self.mime};base64,{self.b64}"

    def to_json(self) -> dict[str, object]:
        return {"mime": self.mime, "width": self.width, "height": self.height, "screen_width": self.screen_width,
                "screen_height": self.screen_height, "data": self.b64}


class ScreenshotError(Exception):
    """The display could not be read (no desktop, X error): told to the model as text."""


CHANNEL = "capture"  # its key in ToolContext.resources
CHANNEL_OFF = "capture_channel_off"  # ctx.extra: why this rollout's captures went back to an exec each


def capture(ctx: ToolContext, profile: Profile) -> Screenshot:
    """The screen now. Through the fork's capture channel (one long-lived exec running RELAY_PY,
    opened by the rollout's first capture): a request line and a framed reply, no `docker exec`
    per capture. A channel that broke is closed and opened again once; if that fails too, this
    capture and the rollout's later ones take a fresh exec each (capture_exec), which also
    reports a lost fork the way every tool does."""
    if CHANNEL_OFF not in ctx.extra:
        try:
            return _capture_channel(ctx, profile)
        except ChannelBroken as exc:
            if exc.timed_out:
                raise ScreenshotError("taking the screenshot timed out") from None
            ctx.extra[CHANNEL_OFF] = str(exc)
            log.warning("fork %s: the capture channel failed (%s); this rollout's captures take an exec each",
                        ctx.fork.id[:12], exc)
    return capture_exec(ctx, profile)


def _open_channel(ctx: ToolContext) -> ExecChannel:
    ch = ctx.fork.open_channel(["bash", "-c", _SESSION_PREFIX, "shinken-capture", "python3", "-S", "-c", RELAY_PY,
                                SERVER_PY])
    ctx.resources[CHANNEL] = ch
    return ch


def _capture_channel(ctx: ToolContext, profile: Profile) -> Screenshot:
    request = " ".join(capture_argv(profile)[:3]).encode() + b"\n"
    ch = ctx.resources.get(CHANNEL)
    for attempt in (0, 1):
        if ch is None or ch.closed:
            ch = _open_channel(ctx)
        try:
            reply = ch.request(request, CAPTURE_TIMEOUT_S)
            break
        except ChannelBroken as exc:
            ctx.resources.pop(CHANNEL, None)  # request() closed it
            if exc.timed_out or attempt == 1 or ch is None:
                raise
            ch = None  # a relay that died, a stream the engine dropped: open it once more
    text = reply.decode("utf-8", "replace")
    if not text.startswith(HEADER):
        raise ScreenshotError(f"the screen could not be read: {text.strip()[-300:]}")
    return parse_text(ctx, profile, text)


def capture_exec(ctx: ToolContext, profile: Profile) -> Screenshot:
    """The screen now, through a fresh exec running the capture client (the path before the
    channel; the channel's fallback, and the comparison in bench_computer)."""
    res = _guest(ctx, ["python3", "-S", "-c", CAPTURE_PY, *capture_argv(profile)], timeout=CAPTURE_TIMEOUT_S,
                 max_output=MAX_OUTPUT)
    return parse(ctx, profile, res)


def capture_oneshot(ctx: ToolContext, profile: Profile) -> Screenshot:
    """The same screenshot taken by a process of its own, Pillow imported for it (no server)."""
    res = _guest(ctx, ["python3", "-S", "-c", ONESHOT_PY, *capture_argv(profile)[:3]], timeout=CAPTURE_TIMEOUT_S,
                 max_output=MAX_OUTPUT)
    return parse(ctx, profile, res)


def parse(ctx: ToolContext, profile: Profile, res: ExecResult) -> Screenshot:
    """The screenshot in an exec's output (the capture ran last in it)."""
    if res.exit_code == 127:
        raise InfraError(f"screenshot: the sandbox image lacks python3: {res.output[-300:]}")
    if res.timed_out:
        raise ScreenshotError("taking the screenshot timed out")
    if res.truncated:
        raise ScreenshotError("the screenshot is too large; choose a smaller --screenshot-size")
    text = res.output.rstrip("\n")
    if res.exit_code != 0 or text.rfind(HEADER) < 0:
        raise ScreenshotError(f"the screen could not be read (exit {res.exit_code}): {text[-300:]}")
    return parse_text(ctx, profile, text)


def parse_text(ctx: ToolContext, profile: Profile, text: str) -> Screenshot:
    """The screenshot in a capture's output: the last header line and the base64 line after it."""
    text = text.rstrip("\n")
    at = text.rfind(HEADER)
    header, _, b64 = text[at + len(HEADER):].partition("\n")
    try:
        meta = json.loads(header)
        data = base64.b64decode(b64.strip(), validate=True)
    except ValueError:
        raise ScreenshotError(f"the screenshot could not be read: {text[-300:]}") from None
    if len(data) != meta.get("bytes"):
        raise ScreenshotError("the screenshot arrived cut")
    shot = Screenshot(data, MIME[profile.image_format], int(meta["width"]), int(meta["height"]),
                      int(meta["screen_width"]), int(meta["screen_height"]), float(meta.get("guest_ms", 0.0)),
                      str(meta.get("via", "")),
                      float(meta.get("cpu_ms", 0.0)) + float(meta.get("client_cpu_ms", 0.0)))
    ctx.extra["screen"] = (shot.screen_width, shot.screen_height)
    ctx.extra["image_size"] = (shot.width, shot.height)
    return shot
