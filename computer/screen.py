"""Screenshots of a fork's display, taken in the guest in one exec: the X root window is read
through XCB (Pillow's ImageGrab; python3-xlib when Pillow lacks XCB), scaled when asked and
encoded as PNG, JPEG or WebP there; only the encoded image crosses to the host (base64 on the
exec's output, after a header line). No extra container, no file left in the guest."""

from __future__ import annotations

import base64
import json
from dataclasses import dataclass

from shinken.computer.profiles import MIME, Profile
from shinken.computer.tools import ToolContext, _guest
from shinken.sandbox.api import ExecResult, InfraError

HEADER = "SHINKEN-SCREENSHOT "
CAPTURE_TIMEOUT_S = 30.0
MAX_OUTPUT = 48_000_000  # base64 of a 7680x7680 PNG fits

# argv: format quality WxH|- ; the image goes out as one base64 line after a JSON header line.
CAPTURE_PY = r"""
import sys, time
t0 = time.perf_counter()
sys.path.append("/usr/lib/python3/dist-packages")  # run with -S: no site scan (~10 ms of CPU per capture)
import base64, io, json, resource
fmt, quality, size = sys.argv[1], int(sys.argv[2]), sys.argv[3]
from PIL import Image
try:  # what ImageGrab.grab(xdisplay="") does, without importing ImageGrab's own imports
    (w0, h0), raw = Image.core.grabscreen_x11("")
    im = Image.frombytes("RGB", (w0, h0), raw, "raw", "BGRX", w0 * 4, 1)
    how = "xcb"
except Exception:
    from Xlib import X, display
    d = display.Display()
    root = d.screen().root
    g = root.get_geometry()
    raw = root.get_image(0, 0, g.width, g.height, X.ZPixmap, 0xFFFFFFFF)
    im = Image.frombuffer("RGB", (g.width, g.height), raw.data, "raw", "BGRX", 0, 1)
    how = "xlib"
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
sys.stdout.write("SHINKEN-SCREENSHOT " + json.dumps({"width": im.size[0], "height": im.size[1],
    "screen_width": sw, "screen_height": sh, "bytes": len(data), "via": how,
    "guest_ms": round((time.perf_counter() - t0) * 1000, 1),
    "cpu_ms": round(sum(resource.getrusage(resource.RUSAGE_SELF)[:2]) * 1000, 1)}) + "\n")
sys.stdout.write(base64.b64encode(data).decode() + "\n")
sys.stdout.flush()
"""


@dataclass(frozen=True)
class Screenshot:
    data: bytes
    mime: str
    width: int  # of the image (what the policy's coordinates refer to)
    height: int
    screen_width: int  # of the display
    screen_height: int
    guest_ms: float = 0.0  # grab + scale + encode inside the guest (the exec's overhead excluded)
    via: str = ""  # "xcb" (Pillow's ImageGrab) or "xlib"
    cpu_ms: float = 0.0  # CPU of the capture process, interpreter start included (the X server's excluded)

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


def capture(ctx: ToolContext, profile: Profile) -> Screenshot:
    size = f"{profile.size[0]}x{profile.size[1]}" if profile.size else "-"
    res = _guest(ctx, ["python3", "-S", "-c", CAPTURE_PY, profile.image_format, str(profile.quality), size],
                 timeout=CAPTURE_TIMEOUT_S, max_output=MAX_OUTPUT)
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
    at = text.rfind(HEADER)
    if res.exit_code != 0 or at < 0:
        raise ScreenshotError(f"the screen could not be read (exit {res.exit_code}): {text[-300:]}")
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
                      str(meta.get("via", "")), float(meta.get("cpu_ms", 0.0)))
    ctx.extra["screen"] = (shot.screen_width, shot.screen_height)
    ctx.extra["image_size"] = (shot.width, shot.height)
    return shot
