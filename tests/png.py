"""Just enough image decoding for the tests, without an imaging library on the host: a PNG is
checked chunk by chunk (signature, CRCs, IHDR, IDAT inflated, every row's filter undone), a JPEG
by its markers and frame header. A stub policy uses it to check that what reached it is an image."""

from __future__ import annotations

import struct
import zlib
from dataclasses import dataclass

PNG_SIG = b"\x89PNG\r\n\x1a\n"


@dataclass
class Raster:
    width: int
    height: int
    bpp: int  # bytes per pixel
    rows: list[bytes]

    def pixel(self, x: int, y: int) -> tuple[int, ...]:
        row = self.rows[y]
        return tuple(row[x * self.bpp:(x + 1) * self.bpp])

    def bbox(self, threshold: int = 24) -> tuple[int, int, int, int] | None:
        """(x0, y0, x1, y1) of pixels brighter than `threshold` in any channel (x1, y1 exclusive)."""
        xs: list[int] = []
        ys: list[int] = []
        for y, row in enumerate(self.rows):
            bright = [i // self.bpp for i, v in enumerate(row) if v > threshold]
            if bright:
                ys.append(y)
                xs += (bright[0], bright[-1])
        if not ys:
            return None
        return min(xs), ys[0], max(xs) + 1, ys[-1] + 1


def png_size(data: bytes) -> tuple[int, int]:
    if data[:8] != PNG_SIG or data[12:16] != b"IHDR":
        raise ValueError("not a PNG")
    return struct.unpack(">II", data[16:24])


def decode_png(data: bytes) -> Raster:
    """8-bit RGB/RGBA, non-interlaced (what the guest writes); raises ValueError otherwise."""
    if data[:8] != PNG_SIG:
        raise ValueError("no PNG signature")
    pos, idat, ihdr, end = 8, bytearray(), None, False
    while pos < len(data):
        (length,) = struct.unpack(">I", data[pos:pos + 4])
        kind, body = data[pos + 4:pos + 8], data[pos + 8:pos + 8 + length]
        (crc,) = struct.unpack(">I", data[pos + 8 + length:pos + 12 + length])
        if zlib.crc32(kind + body) & 0xFFFFFFFF != crc:
            raise ValueError(f"bad CRC in chunk {kind!r}")
        if kind == b"IHDR":
            ihdr = struct.unpack(">IIBBBBB", body)
        elif kind == b"IDAT":
            idat += body
        elif kind == b"IEND":
            end = True
            break
        pos += 12 + length
    if ihdr is None or not end:
        raise ValueError("PNG without IHDR or IEND")
    width, height, depth, color, _, _, interlace = ihdr
    if depth != 8 or color not in (2, 6) or interlace:
        raise ValueError(f"unsupported PNG (depth {depth}, colour type {color}, interlace {interlace})")
    bpp = 3 if color == 2 else 4
    raw = zlib.decompress(bytes(idat))
    stride = width * bpp
    if len(raw) != height * (stride + 1):
        raise ValueError("PNG data has the wrong length")
    rows: list[bytes] = []
    prev = bytearray(stride)
    for y in range(height):
        f = raw[y * (stride + 1)]
        line = bytearray(raw[y * (stride + 1) + 1:(y + 1) * (stride + 1)])
        if f == 1:
            for i in range(bpp, stride):
                line[i] = (line[i] + line[i - bpp]) & 0xFF
        elif f == 2:
            line = bytearray((a + b) & 0xFF for a, b in zip(line, prev))
        elif f == 3:
            for i in range(stride):
                left = line[i - bpp] if i >= bpp else 0
                line[i] = (line[i] + ((left + prev[i]) >> 1)) & 0xFF
        elif f == 4:
            for i in range(stride):
                a = line[i - bpp] if i >= bpp else 0
                b = prev[i]
                c = prev[i - bpp] if i >= bpp else 0
                p = a + b - c
                pa, pb, pc = abs(p - a), abs(p - b), abs(p - c)
                line[i] = (line[i] + (a if pa <= pb and pa <= pc else b if pb <= pc else c)) & 0xFF
        elif f != 0:
            raise ValueError(f"bad PNG filter {f}")
        rows.append(bytes(line))
        prev = line
    return Raster(width, height, bpp, rows)


def jpeg_size(data: bytes) -> tuple[int, int]:
    """(width, height) from a baseline/progressive JPEG's frame header; ValueError if not a JPEG."""
    if data[:2] != b"\xff\xd8" or data[-2:] != b"\xff\xd9":
        raise ValueError("no JPEG start/end marker")
    pos = 2
    while pos + 4 <= len(data):
        if data[pos] != 0xFF:
            raise ValueError("broken JPEG marker chain")
        marker = data[pos + 1]
        (length,) = struct.unpack(">H", data[pos + 2:pos + 4])
        if marker in (0xC0, 0xC1, 0xC2):
            h, w = struct.unpack(">HH", data[pos + 5:pos + 9])
            return w, h
        pos += 2 + length
    raise ValueError("JPEG without a frame header")


def webp_size(data: bytes) -> tuple[int, int]:
    if data[:4] != b"RIFF" or data[8:12] != b"WEBP":
        raise ValueError("not a WebP")
    if data[12:16] == b"VP8 ":
        w, h = struct.unpack("<HH", data[26:30])
        return w & 0x3FFF, h & 0x3FFF
    if data[12:16] == b"VP8L":
        b = data[21:25]
        return 1 + (((b[1] & 0x3F) << 8) | b[0]), 1 + (((b[3] & 0xF) << 10) | (b[2] << 2) | ((b[1] & 0xC0) >> 6))
    raise ValueError(f"unsupported WebP chunk {data[12:16]!r}")


def image_size(data: bytes, mime: str) -> tuple[int, int]:
    """Checked size of an image the server sent; ValueError when the bytes are not that format."""
    if mime == "image/png":
        r = decode_png(data)
        return r.width, r.height
    if mime == "image/jpeg":
        return jpeg_size(data)
    if mime == "image/webp":
        return webp_size(data)
    raise ValueError(f"unexpected image type {mime}")
