"""The installable distribution: named `shinken-cua` (`shinken` on PyPI is another project), it
installs the `shinken` command and the `shinken` import package. Built from a copy of the
checkout's tracked files (setuptools writes build/ and egg-info beside the sources; its build
requirements come from the package index, as in scripts/setup.sh's editable install) and installed
with pip into a folder of its own; the command it installs runs from there."""

from __future__ import annotations

import os
import shutil
import subprocess
import sys
import tomllib
import zipfile
from pathlib import Path

REPO = Path(__file__).resolve().parent.parent
DISTRIBUTION = "shinken-cua"


def test_pyproject_names_the_distribution_and_keeps_the_command() -> None:
    project = tomllib.loads((REPO / "pyproject.toml").read_text())["project"]
    assert project["name"] == DISTRIBUTION
    assert project["scripts"] == {"shinken": "shinken.cli.main:main"}
    from shinken.workspace.wheel import DISTRIBUTION as VENDOR_READS

    assert VENDOR_READS == DISTRIBUTION  # the workspace wheel reads this distribution's metadata


def test_the_wheel_installs_the_shinken_command(tmp_path: Path) -> None:
    src = tmp_path / "src"
    tracked = subprocess.run(["git", "ls-files", "-z", "--cached", "--others", "--exclude-standard"], cwd=REPO, capture_output=True, check=True).stdout
    for rel in filter(None, tracked.decode().split("\0")):
        if (REPO / rel).is_file():
            (src / rel).parent.mkdir(parents=True, exist_ok=True)
            shutil.copy2(REPO / rel, src / rel)
    pip = [sys.executable, "-m", "pip"]
    r = subprocess.run([*pip, "wheel", "--no-deps", "-q", "-w", str(tmp_path / "dist"), str(src)],
                       capture_output=True, text=True)
    assert r.returncode == 0, r.stderr[-2000:]
    wheel = next((tmp_path / "dist").glob("*.whl"))
    assert wheel.name.startswith("shinken_cua-0.1.0-"), wheel.name
    with zipfile.ZipFile(wheel) as z:
        names = set(z.namelist())
        entry = next(n for n in names if n.endswith(".dist-info/entry_points.txt"))
        assert "shinken = shinken.cli.main:main" in z.read(entry).decode()
        assert "shinken/cli/main.py" in names and "shinken/schemas/probe_receipt.schema.json" in names
    target = tmp_path / "site"
    r = subprocess.run([*pip, "install", "--no-deps", "-q", "--target", str(target), str(wheel)],
                       capture_output=True, text=True)
    assert r.returncode == 0, r.stderr[-2000:]
    # The installed command, its dependencies from this environment, the package from the install.
    env = {**os.environ, "PYTHONPATH": str(target)}
    out = subprocess.run([str(target / "bin" / "shinken"), "--help"], capture_output=True, text=True, env=env,
                         cwd=tmp_path)
    assert out.returncode == 0, out.stderr[-2000:]
    assert "report" in out.stdout and "probe" in out.stdout
    where = subprocess.run([sys.executable, "-c", "import shinken; print(shinken.__file__)"], capture_output=True,
                           text=True, env=env, cwd=tmp_path)
    assert where.stdout.strip() == str(target / "shinken" / "__init__.py")
