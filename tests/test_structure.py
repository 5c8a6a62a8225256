"""The import structure (docs/structure.md): the import-linter contracts in pyproject.toml hold
on this tree, and they do catch an arrow from a lower layer up and a circle between modules.

No Docker: the graph is read statically by grimp (imports at any depth, TYPE_CHECKING ones too).
"""

from __future__ import annotations

import os
import shutil
import subprocess
import sys
from pathlib import Path

REPO = Path(__file__).resolve().parents[1]
LAYERS = "layers: a package imports only from layers below it"
ACYCLIC = "no import circle between the packages, nor between the modules of one package"


def _lint(cwd: Path, pythonpath: Path | None = None) -> subprocess.CompletedProcess[str]:
    env = {**os.environ, "PYTHONPATH": str(pythonpath)} if pythonpath else dict(os.environ)
    lint = Path(sys.executable).with_name("lint-imports")  # the venv's console script (dev extra)
    return subprocess.run([str(lint), "--no-cache", "--config", str(cwd / "pyproject.toml")], cwd=cwd, env=env,
                          capture_output=True, text=True, timeout=120)


def test_import_contracts_hold() -> None:
    r = _lint(REPO)
    out = r.stdout + r.stderr
    assert r.returncode == 0, out
    assert f"{LAYERS} KEPT" in out and f"{ACYCLIC} KEPT" in out, out
    assert "Contracts: 2 kept, 0 broken." in out, out


def test_contracts_catch_an_upward_arrow_and_a_circle(tmp_path: Path) -> None:
    # A copy of the package's Python files, importable as `shinken` from tmp_path, with two seams
    # put back: needs/ reaching up into triage's run (needs -> triage -> needs), and the images
    # circle issue 23 closed (capabilities importing build, which imports capabilities).
    pkg = tmp_path / "shinken"
    for folder, dirs, files in os.walk(REPO):
        dirs[:] = [d for d in dirs if not d.startswith(".") and d != "__pycache__"]  # not .venv, .git
        for name in files:
            if name.endswith(".py"):
                rel = Path(folder, name).relative_to(REPO)
                (pkg / rel).parent.mkdir(parents=True, exist_ok=True)
                shutil.copyfile(REPO / rel, pkg / rel)
    shutil.copyfile(REPO / "pyproject.toml", tmp_path / "pyproject.toml")
    with open(pkg / "needs" / "vocab.py", "a") as fh:
        fh.write("\n\ndef _up() -> None:\n    import shinken.triage.run  # noqa: F401\n")
    with open(pkg / "images" / "capabilities.py", "a") as fh:
        fh.write("\n\nfrom shinken.images.build import _client  # noqa: E402,F401\n")

    r = _lint(tmp_path, pythonpath=tmp_path)
    out = r.stdout + r.stderr
    assert r.returncode == 1, out
    assert f"{LAYERS} BROKEN" in out and f"{ACYCLIC} BROKEN" in out, out
    assert "shinken.needs is not allowed to import shinken.triage" in out, out
    assert "shinken.needs.vocab -> shinken.triage.run" in out, out
    assert "No cycles are allowed in shinken.images." in out and ".capabilities -> .build" in out, out


GUEST_STATE = REPO / "images" / "guest" / "shinken-desktop-state"


def test_guest_desktop_state_program_is_importable_and_type_checked() -> None:
    """images/guest/shinken-desktop-state (Python without a .py name, run inside the image) loads
    as a module by its path, offers the subcommands the sandbox calls, and scripts/typecheck.sh
    names it (mypy checks its bodies; its signatures are not all annotated yet)."""
    import importlib.machinery
    import importlib.util

    loader = importlib.machinery.SourceFileLoader("shinken_desktop_state", str(GUEST_STATE))
    spec = importlib.util.spec_from_loader(loader.name, loader)
    assert spec is not None
    module = importlib.util.module_from_spec(spec)
    loader.exec_module(module)
    assert callable(module.main)
    r = subprocess.run([sys.executable, str(GUEST_STATE), "--help"], capture_output=True, text=True, timeout=60)
    assert r.returncode == 0, r.stderr
    for sub in ("baseline", "record", "windows", "restore", "clean"):
        assert sub in r.stdout, sub
    assert "images/guest/shinken-desktop-state" in (REPO / "scripts" / "typecheck.sh").read_text()
