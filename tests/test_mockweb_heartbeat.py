"""An app build that prints nothing for longer than the Docker client's read timeout still builds:
`npm ci` on a busy machine is silent for minutes, and the survey of the public hub lost builds to
"Read timed out. (read timeout=60)": reading a build's quiet output stream, and committing a large
app at load 20-60. The build script now says it is alive every few seconds (the progress shows
it) and a build's engine calls get a patient timeout of their own."""

from __future__ import annotations

import json
from pathlib import Path

import docker
import pytest

from shinken.images.build import _read_ca
from shinken.mockweb.apps import discover_apps, select_apps
from shinken.mockweb.build import build_app, ensure_node_image
from tests.hub_standins import _copy

READ_TIMEOUT_S = 15  # the impatient client's; the build below is silent for longer
QUIET_S = 25


@pytest.mark.docker
@pytest.mark.slow
def test_a_build_silent_longer_than_the_read_timeout_builds(docker_client, tmp_path: Path) -> None:
    folder = _copy(tmp_path / "hub", "quiet")
    pkg = json.loads((folder / "package.json").read_text())
    pkg["scripts"]["build"] = f"sleep {QUIET_S} && {pkg['scripts']['build']}"
    (folder / "package.json").write_text(json.dumps(pkg, indent=2) + "\n")
    (app,) = select_apps(discover_apps(tmp_path / "hub"), ["quiet"])
    node_tag, node_id, _ = ensure_node_image(docker_client)
    impatient = docker.from_env(timeout=READ_TIMEOUT_S)
    lines: list[str] = []
    built = build_app(impatient, app, node_tag, node_id, _read_ca(None), nocache=True, heartbeat_s=2,
                      progress=lines.append)
    try:
        assert built.phases["build"] >= QUIET_S, built.phases
        beats = [ln for ln in lines if "[quiet] still building (" in ln]
        assert len(beats) >= QUIET_S // 2 - 2, lines[-20:]
        log = Path(str(built.log)).read_text()
        assert "sleep" in log and "error" not in log.lower(), log[-2000:]
    finally:
        docker_client.api.remove_image(built.tag, force=True)
        impatient.close()
