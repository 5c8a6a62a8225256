"""Build a wheel of the shinken modules the generated server imports, offline and deterministically.

The generated server's venv (made by NeMo Gym with uv) must import shinken.computer; a wheel
shipped inside the workspace needs no shinken checkout and no build backend download. The
wheel holds the import closure of the server's own files (shinken.workspace.closure) plus the
data files of the packages in it (schemas/*.json), and declares only the third-party
requirements those modules import, so the CLI, benchmarks and their dependencies stay out.
"""

from __future__ import annotations

import base64
import functools
import hashlib
import importlib.metadata
import io
import re
import zipfile
from collections.abc import Mapping
from pathlib import Path

import shinken
from shinken.workspace.closure import Closure, import_closure

# The installed distribution whose requirements and version the wheel takes (pyproject.toml's name).
# The vendored wheel keeps the name `shinken`: it is a subset installed from the workspace only.
DISTRIBUTION = "shinken-cua"
_ZIP_DATE = (2020, 1, 1, 0, 0, 0)  # fixed timestamps: same sources, same wheel bytes
# The NeMo Gym sandbox provider rides in every workspace wheel, registered like pyproject.toml
# registers it, so Gym's registry finds `shinken` wherever the wheel is installed.
PROVIDER_SOURCE = "import shinken.provider.gym\n"
ENTRY_POINTS = b'[nemo_gym.sandbox_providers]\nshinken = shinken.provider.gym:ShinkenProvider\n'


def _package_files(root: Path, closure: Closure) -> list[tuple[str, Path]]:
    out = [(f"shinken/{path.relative_to(root).as_posix()}", path) for path in closure.modules.values()]
    for package in closure.packages() - {"shinken"}:  # the root folder is the repository, not package data
        folder = closure.modules[package].parent
        # A package carries its data files (schemas/*.json), as pyproject's package-data does.
        for p in sorted(folder.iterdir()):
            if p.is_file() and p.suffix not in (".py", ".pyc", ".pyo") and not p.name.startswith("."):
                out.append((f"shinken/{p.relative_to(root).as_posix()}", p))
    return sorted(out)


def _normalize(dist: str) -> str:
    return re.sub(r"[-_.]+", "-", dist).lower()


@functools.lru_cache(maxsize=1)
def _provides() -> Mapping[str, list[str]]:
    """Top-level import name -> the installed distributions providing it (read once per process:
    scanning every installed distribution's metadata costs a few hundred ms)."""
    return importlib.metadata.packages_distributions()


def _requirements(closure: Closure) -> list[str]:
    """shinken's own requirement lines for the distributions the closure imports."""
    provides = _provides()
    needed = {_normalize(d) for top in closure.third_party for d in provides.get(top, [])}
    out = []
    for req in importlib.metadata.requires(DISTRIBUTION) or []:
        if "extra ==" in req:
            continue
        name = re.split(r"[ ;<>=!~\[]", req, maxsplit=1)[0]
        if _normalize(name) in needed:
            out.append(req)
    return sorted(out)


def _digest(data: bytes) -> str:
    return "sha256=" + base64.urlsafe_b64encode(hashlib.sha256(data).digest()).rstrip(b"=").decode()


def build_wheel(dest_dir: Path, entry_sources: list[str]) -> Path:
    """Write `shinken-<version>+g<hash8>-py3-none-any.whl` into dest_dir holding what
    `entry_sources` (the server's Python files) and the sandbox provider import from shinken;
    return its path.
    The local version label changes with the packed sources, so installers never reuse a stale build."""
    root = Path(shinken.__file__).resolve().parent
    closure = import_closure([*entry_sources, PROVIDER_SOURCE], root)
    files = [(arc, path.read_bytes()) for arc, path in _package_files(root, closure)]
    requirements = _requirements(closure)
    src_hash = hashlib.sha256()
    for arc, data in files:
        src_hash.update(arc.encode() + b"\0" + hashlib.sha256(data).digest())
    src_hash.update("\n".join(requirements).encode())
    meta = importlib.metadata.metadata(DISTRIBUTION)
    version = f"{meta['Version'].split('+')[0]}+g{src_hash.hexdigest()[:8]}"
    dist_info = f"shinken-{version}.dist-info"

    lines = ["Metadata-Version: 2.1", "Name: shinken", f"Version: {version}",
             f"Summary: {meta.json.get('summary') or ''} (the modules a shinken_cua server imports)",
             f"Requires-Python: {meta.json.get('requires_python') or '>=3.11'}"]
    lines += [f"Requires-Dist: {r}" for r in requirements]
    extra = {
        f"{dist_info}/METADATA": ("\n".join(lines) + "\n").encode(),
        f"{dist_info}/WHEEL": b"Wheel-Version: 1.0\nGenerator: shinken.workspace.wheel\n"
                              b"Root-Is-Purelib: true\nTag: py3-none-any\n",
        f"{dist_info}/top_level.txt": b"shinken\n",
        f"{dist_info}/entry_points.txt": ENTRY_POINTS,
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
