"""Build a wheel of the installed shinken package, offline and deterministically.

The generated server's venv (made by NeMo Gym with uv) must import shinken.computer; a wheel
shipped inside the workspace needs no shinken checkout and no build backend download. The
wheel holds every Python package under shinken's package root (folders with __init__.py)
with all their files, which is what pyproject's packages + package-data select.
"""

from __future__ import annotations

import base64
import hashlib
import importlib.metadata
import io
import zipfile
from pathlib import Path

import shinken

_SKIP_DIRS = {"__pycache__", ".git", ".venv", "build", ".pytest_cache", "dist"}
_ZIP_DATE = (2020, 1, 1, 0, 0, 0)  # fixed timestamps: same sources, same wheel bytes


def _package_files(root: Path) -> list[tuple[str, Path]]:
    out: list[tuple[str, Path]] = []

    def walk(folder: Path, arc: str) -> None:
        for p in sorted(folder.iterdir()):
            if p.is_dir():
                if p.name in _SKIP_DIRS or p.name.endswith(".egg-info"):
                    continue
                # Top-level folders count only when they are packages (demo/, docs/ are not);
                # below a package every folder is package data (images/guest, templates).
                if folder == root and (p.name == "tests" or not (p / "__init__.py").is_file()):
                    continue
                walk(p, f"{arc}/{p.name}")
            elif p.is_file() and not p.name.endswith((".pyc", ".pyo")):
                # At the package root only Python modules belong to the package (not README etc.).
                if folder == root and p.suffix != ".py":
                    continue
                out.append((f"{arc}/{p.name}", p))

    walk(root, "shinken")
    return out


def _digest(data: bytes) -> str:
    return "sha256=" + base64.urlsafe_b64encode(hashlib.sha256(data).digest()).rstrip(b"=").decode()


def build_wheel(dest_dir: Path) -> Path:
    """Write `shinken-<version>+g<hash8>-py3-none-any.whl` into dest_dir; return its path.
    The local version label changes with the sources, so installers never reuse a stale build."""
    root = Path(shinken.__file__).resolve().parent
    files = [(arc, path.read_bytes()) for arc, path in _package_files(root)]
    src_hash = hashlib.sha256()
    for arc, data in files:
        src_hash.update(arc.encode() + b"\0" + hashlib.sha256(data).digest())
    meta = importlib.metadata.metadata("shinken")
    version = f"{meta['Version'].split('+')[0]}+g{src_hash.hexdigest()[:8]}"
    dist_info = f"shinken-{version}.dist-info"

    lines = ["Metadata-Version: 2.1", "Name: shinken", f"Version: {version}",
             f"Summary: {meta.get('Summary') or ''}", f"Requires-Python: {meta.get('Requires-Python') or '>=3.11'}"]
    lines += [f"Provides-Extra: {x}" for x in meta.get_all("Provides-Extra") or []]
    lines += [f"Requires-Dist: {r}" for r in importlib.metadata.requires("shinken") or []]
    extra = {
        f"{dist_info}/METADATA": ("\n".join(lines) + "\n").encode(),
        f"{dist_info}/WHEEL": b"Wheel-Version: 1.0\nGenerator: shinken.workspace.wheel\n"
                              b"Root-Is-Purelib: true\nTag: py3-none-any\n",
        f"{dist_info}/entry_points.txt": b"[console_scripts]\nshinken = shinken.cli.main:main\n",
        f"{dist_info}/top_level.txt": b"shinken\n",
    }
    entries = files + sorted(extra.items())
    record = "".join(f"{arc},{_digest(data)},{len(data)}\n" for arc, data in entries)
    record += f"{dist_info}/RECORD,,\n"

    dest_dir.mkdir(parents=True, exist_ok=True)
    target = dest_dir / f"shinken-{version}-py3-none-any.whl"
    buf = io.BytesIO()
    with zipfile.ZipFile(buf, "w", zipfile.ZIP_DEFLATED) as zf:
        for arc, data in entries + [(f"{dist_info}/RECORD", record.encode())]:
            info = zipfile.ZipInfo(arc, _ZIP_DATE)
            info.external_attr = 0o644 << 16
            info.compress_type = zipfile.ZIP_DEFLATED
            zf.writestr(info, data)
    target.write_bytes(buf.getvalue())
    return target
