"""Bad input through the `shinken` command: one line naming the problem, exit 2, no
traceback, nothing on stdout; for every usage-error class and command (in process, through
the entry point's own `main()`; the installed entry point itself once per class of run)."""

from __future__ import annotations

import importlib.metadata
import json
import re
import tomllib
from pathlib import Path

import pytest

from shinken.errors import EXIT_USAGE

REPO = Path(__file__).resolve().parent.parent
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
    "probe: judge url without model": (["probe", DEMO, "--judge-url", "http://127.0.0.1:9/v1"], "needs --judge-model"),
    "probe: judge model without url": (["probe", DEMO, "--judge-model", "m"], "needs --judge-url"),
    "probe: judge url not http": (["probe", DEMO, "--judge-url", "127.0.0.1:9", "--judge-model", "m"], "not an http"),
    "triage: judge url not http": (["triage", DEMO, "--judge-url", "ftp://x"], "not an http"),
    # bad path
    "triage: no task root": (["triage", NOPE], NOPE),
    "probe: no task root": (["probe", NOPE], NOPE),
    "triage: no manifest": (["triage", DEMO, "--manifest", NOPE], NOPE),
    "triage: no mock urls": (["triage", DEMO, "--mock-urls", NOPE], NOPE),
    "probe: no triage report": (["probe", DEMO, "--triage", NOPE], NOPE),
    "probe: no ids file": (["probe", DEMO, "--ids", NOPE], NOPE),
    "probe: no rollouts": (["probe", DEMO, "--replay", NOPE], NOPE),
    "make-workspace: no ids file": (["make-workspace", "--dest", "/tmp/shinken-test-ws", "--task-root", DEMO,
                                     "--ids", NOPE], NOPE),
    "make-workspace: no ids file (old name)": (["make-workspace", "--dest", "/tmp/shinken-test-ws", "--task-root",
                                                DEMO, "--ids-file", NOPE], NOPE),
    # an endless stream: refused after read_json's cap instead of read until memory runs out
    "triage: manifest is a device": (["triage", DEMO, "--manifest", "/dev/urandom"], "more than 268,435,456 bytes"),
    "triage: report not writable": (["triage", DEMO, "--manifest", str(REPO / "tests/data/triage_manifest.json"),
                                     "--no-cache", "--report", "/proc/shinken-test/r.json"], "cannot write"),
    "image build: no ca bundle": (["image", "build", "linux", "--ca-bundle", NOPE], "--ca-bundle"),
    "hub build: missing source": (["hub", "build"], "Missing option '--source'"),
    "hub build: no source": (["hub", "build", "--source", NOPE], NOPE),
    "hub build: unknown app": (["hub", "build", "--source", str(REPO / "tests/data/hub"), "--apps", "nope"], "nope not in the checkout"),
    "hub build: empty apps": (["hub", "build", "--source", str(REPO / "tests/data/hub"), "--apps", ","], "--apps is empty"),
    "hub up: publish 0": (["hub", "up", "--publish", "0"], "--publish"),
    "probe: no mock urls": (["probe", DEMO, "--mock-urls", NOPE], NOPE),
    "download: no archive": (["download", "--archive", NOPE, "--dest", "/tmp/shinken-test-x"], NOPE),
    "profile: missing rollouts": (["profile"], "Missing argument"),
    "profile: missing task root": (["profile", DEMO, "--out", "/tmp/shinken-test-p"], "Missing option '--task-root'"),
    "profile: no rollouts": (["profile", NOPE, "--task-root", DEMO, "--out", "/tmp/shinken-test-p"], NOPE),
    "profile: bad band": (["profile", DEMO, "--task-root", DEMO, "--out", "/tmp/shinken-test-p", "--min-pass", "0.9",
                           "--max-pass", "0.1"], "--min-pass"),
    "profile: show -1": (["profile", DEMO, "--task-root", DEMO, "--out", "/tmp/shinken-test-p", "--show", "-1"], "--show"),
    "report: nothing to report": (["report", "--html", "/tmp/shinken-test-r.html"], "nothing to report"),
    "report: no output": (["report", "--triage", NOPE], "no output"),
    "report: no triage report": (["report", "--triage", NOPE, "--md", "-"], NOPE),
    "report: unknown option": (["report", "--bogus"], "No such option: --bogus"),
    "report: no media folder": (["report", "--triage", NOPE, "--tasks", "/tmp/shinken-test-t", "--media", NOPE], NOPE),
    "report: tasks without tasks": (["report", "--profile", NOPE, "--tasks", "/tmp/shinken-test-t"], "--tasks needs"),
    "watch: port out of range": (["watch", "abc", "--port", "70000"], "--port"),
    "publish: missing option": (["publish", "--repo-id", "a/b"], "Missing option '--receipt'"),
    "publish: bad repo id": (["publish", "--repo-id", "nope", "--receipt", NOPE], "ORG/NAME"),
    "publish: no receipt": (["publish", "--repo-id", "a/b", "--receipt", NOPE], NOPE),
    "publish: pr without hub": (["publish", "--repo-id", "a/b", "--receipt", NOPE, "--create-pr",
                                 "--local-dir", "/tmp/shinken-test-p"], "--create-pr"),
}


# These check their input only after asking the engine for the image (no --manifest): Docker tests.
ASK_THE_ENGINE_FIRST = {"triage: no task root", "triage: no mock urls", "probe: no rollouts", "probe: no mock urls"}


@pytest.mark.parametrize("args,needle", [
    pytest.param(*case, id=name, marks=[pytest.mark.docker] if name in ASK_THE_ENGINE_FIRST else [])
    for name, case in USAGE_ERRORS.items()])
def test_usage_error_is_one_line_exit_2(args: list[str], needle: str, shinken_cli) -> None:
    r = shinken_cli(*args)
    assert r.returncode == EXIT_USAGE, (r.returncode, r.stderr)
    assert "Traceback" not in r.stderr
    lines = r.stderr.strip().splitlines()
    assert len(lines) == 1 and lines[0].startswith("shinken: error: "), r.stderr
    assert needle in lines[0]
    assert r.stdout == ""


def test_installed_entry_point_usage_error_is_one_line_exit_2(shinken_cli) -> None:
    # The same contract from the installed `shinken` script in its own process.
    r = shinken_cli("probe", DEMO, "--concurrency", "0", subprocess_=True)
    assert r.returncode == EXIT_USAGE and "Traceback" not in r.stderr and r.stdout == ""
    lines = r.stderr.strip().splitlines()
    assert len(lines) == 1 and lines[0].startswith("shinken: error: ") and "--concurrency" in lines[0], r.stderr


def test_bare_group_prints_help_and_exits_0(shinken_cli) -> None:
    for args, subprocess_ in (([], True), (["image"], False)):
        r = shinken_cli(*args, subprocess_=subprocess_)
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


MANIFEST = REPO / "tests" / "data" / "triage_manifest.json"


def test_triage_json_is_stdout_and_report_is_a_file(tmp_path: Path, shinken_cli) -> None:
    # --json means stdout for every command (it took a PATH for triage); --report PATH writes the file.
    report = tmp_path / "out" / "triage.json"
    r = shinken_cli("triage", DEMO, "--manifest", MANIFEST, "--no-cache", "--json", "--report", report)
    assert r.returncode == 0, r.stderr
    doc = json.loads(r.stdout)
    assert doc["schema"] == "shinken.triage/1" and doc["summary"]["total"] == len(doc["tasks"]) > 0
    assert json.loads(report.read_text()) == doc
    assert doc["image"]["ref"] == "shinken/sandbox-linux:fixture"  # no --image: the manifest's image


def test_every_command_has_examples_and_one_default_image() -> None:
    import typer.main

    from shinken.cli.main import app
    from shinken.computer.contract import EngineConfig
    from shinken.images.build import DEFAULT_IMAGE
    from shinken.workspace.writer import WorkspaceOptions

    assert DEFAULT_IMAGE == "shinken/sandbox-cua:latest"  # the full task image

    def commands(group, path=("shinken",)):
        for name, cmd in group.commands.items():
            if hasattr(cmd, "commands"):
                yield from commands(cmd, (*path, name))
            else:
                yield " ".join((*path, name)), cmd

    seen = dict(commands(typer.main.get_command(app)))
    assert {"shinken triage", "shinken probe", "shinken make-workspace", "shinken image build"} <= set(seen)
    for path, cmd in seen.items():
        assert cmd.epilog and f"$ {path}" in cmd.epilog, f"{path}: --help shows no example of itself"
        image = next((p for p in cmd.params if p.name == "image" and "--image" in p.opts), None)
        if image is not None and image.default is not None:  # triage: None = the manifest's or the default
            assert image.default == DEFAULT_IMAGE, path
    assert WorkspaceOptions.__dataclass_fields__["image"].default == DEFAULT_IMAGE
    assert EngineConfig.__dataclass_fields__["image"].default == DEFAULT_IMAGE  # the engines' default


def test_names_that_are_not_utf8_are_one_line_or_a_defect(tmp_path: Path, shinken_cli) -> None:
    """A task folder whose name is not UTF-8 (it would be a task id in UTF-8 reports) ended in an
    orjson traceback; now one line naming it, exit 2. A file of a bundle with such a name makes
    that bundle defective (`unreadable`) and the report is written."""
    import os
    import shutil

    root = tmp_path / "tasks"
    shutil.copytree(REPO / "demo" / "hello-file", root / "hello-file")
    bad = root / os.fsdecode(b"bad\xff")
    shutil.copytree(REPO / "demo" / "hello-file", bad)
    report = tmp_path / "triage.json"
    r = shinken_cli("triage", root, "--manifest", MANIFEST, "--report", report)
    assert r.returncode == EXIT_USAGE and "Traceback" not in r.stderr and r.stdout == "", r.stderr
    lines = r.stderr.strip().splitlines()
    assert len(lines) == 1 and lines[0].startswith("shinken: error: ") and "'bad\\xff'" in lines[0], r.stderr
    assert "not UTF-8" in lines[0] and not report.exists()
    shutil.rmtree(bad)
    (root / "hello-file" / os.fsdecode(b"notes\xfe.txt")).write_text("x")
    r = shinken_cli("triage", root, "--manifest", MANIFEST, "--report", report)
    assert r.returncode == 0 and "Traceback" not in r.stderr, r.stderr
    task = json.loads(report.read_text())["tasks"][0]
    assert task["verdict"] == "defective", task
    assert any(x["code"] == "unreadable" and "notes\\xfe.txt: file name is not UTF-8" in x["detail"]
               for x in task["reasons"]), task["reasons"]
