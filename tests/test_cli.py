"""Bad input through the installed `shinken` entry point: one line naming the problem,
exit 2, no traceback, nothing on stdout; for every usage-error class and command."""

from __future__ import annotations

import importlib.metadata
import re
import subprocess
import sys
import tomllib
from pathlib import Path

import pytest

from shinken.errors import EXIT_USAGE

REPO = Path(__file__).resolve().parent.parent
SHINKEN = Path(sys.executable).with_name("shinken")
DEMO = str(REPO / "demo")
NOPE = "/nonexistent/shinken-test"

USAGE_ERRORS = {
    # unknown command
    "unknown command": (["foo"], "No such command 'foo'"),
    "unknown subcommand": (["image", "foo"], "No such command 'foo'"),
    "unknown option": (["gc", "--bogus"], "No such option: --bogus"),
    # missing argument / option / option value
    "triage: missing task root": (["triage"], "Missing argument"),
    "probe: missing task root": (["probe"], "Missing argument"),
    "image inspect: missing image": (["image", "inspect"], "Missing argument"),
    "make-workspace: missing option": (["make-workspace", "--dest", "/tmp/x"], "Missing option '--task-root'"),
    "download: option without value": (["download", "--revision"], "requires an argument"),
    # bad option value
    "probe: concurrency 0": (["probe", DEMO, "--concurrency", "0"], "--concurrency"),
    "probe: unknown executor": (["probe", DEMO, "--executor", "nope"], "--executor"),
    "triage: negative show": (["triage", DEMO, "--show", "-1"], "--show"),
    "triage: unknown class": (["triage", DEMO, "--class", "nope"], "--class"),
    "gc: bad duration": (["gc", "--older-than", "soon"], "--older-than"),
    "gc: bad label": (["gc", "--label", "novalue"], "KEY=VALUE"),
    "image build: unknown image": (["image", "build", "windows"], "unknown image"),
    # bad path
    "triage: no task root": (["triage", NOPE], NOPE),
    "probe: no task root": (["probe", NOPE], NOPE),
    "triage: no manifest": (["triage", DEMO, "--manifest", NOPE], NOPE),
    "triage: no mock urls": (["triage", DEMO, "--mock-urls", NOPE], NOPE),
    "probe: no triage report": (["probe", DEMO, "--triage", NOPE], NOPE),
    "probe: no ids file": (["probe", DEMO, "--ids", NOPE], NOPE),
    "probe: no rollouts": (["probe", DEMO, "--replay", NOPE], NOPE),
    "make-workspace: no ids file": (["make-workspace", "--dest", "/tmp/shinken-test-ws", "--task-root", DEMO,
                                     "--ids-file", NOPE], NOPE),
    "download: no archive": (["download", "--archive", NOPE, "--dest", "/tmp/shinken-test-x"], NOPE),
}


@pytest.mark.parametrize("args,needle", list(USAGE_ERRORS.values()), ids=list(USAGE_ERRORS))
def test_usage_error_is_one_line_exit_2(args: list[str], needle: str) -> None:
    r = subprocess.run([str(SHINKEN), *args], capture_output=True, text=True, timeout=120, stdin=subprocess.DEVNULL)
    assert r.returncode == EXIT_USAGE, (r.returncode, r.stderr)
    assert "Traceback" not in r.stderr
    lines = r.stderr.strip().splitlines()
    assert len(lines) == 1 and lines[0].startswith("shinken: error: "), r.stderr
    assert needle in lines[0]
    assert r.stdout == ""


def test_bare_group_prints_help_and_exits_0() -> None:
    for args in ([], ["image"]):
        r = subprocess.run([str(SHINKEN), *args], capture_output=True, text=True, timeout=60)
        assert r.returncode == 0, r.stderr
        assert "Usage: shinken" in r.stdout and "Commands" in r.stdout


def test_installed_versions_are_the_pinned_ones() -> None:
    # scripts/setup.sh installs with constraints.txt; a fresh machine gets these versions.
    pins = {}
    for line in (REPO / "constraints.txt").read_text().splitlines():
        if line and not line.startswith("#"):
            name, _, version = line.partition("==")
            pins[re.sub(r"[-_.]+", "-", name).lower()] = version
    project = tomllib.loads((REPO / "pyproject.toml").read_text())["project"]
    wanted = project["dependencies"] + [r for extra in project["optional-dependencies"].values() for r in extra]
    for req in wanted:
        name = re.sub(r"[-_.]+", "-", re.split(r"[<>=!~\[; ]", req, maxsplit=1)[0]).lower()
        assert name in pins, f"{name} is in pyproject.toml but not pinned: run scripts/lock.sh"
    for name, version in pins.items():
        try:
            installed = importlib.metadata.version(name)
        except importlib.metadata.PackageNotFoundError:
            continue  # an extra this environment did not install
        assert installed == version, f"{name} {installed} installed, {version} pinned: run scripts/setup.sh"
