"""Shared fixtures. Docker tests use the real engine: if it does not answer, they
fail (CI starts dockerd first); they are never skipped silently."""

from __future__ import annotations

import shutil
import sys
from pathlib import Path

import pytest

REPO = Path(__file__).resolve().parent.parent
DEMO = REPO / "demo"

# The suite's one NeMo Gym session (tests/gym_harness.py): fixtures defined here are shared by
# every module, so the demo workspace is probed, made and served once.
sys.path.insert(0, str(Path(__file__).resolve().parent))
from gym_harness import gym_env, gym_examples, gym_runner, gym_workspace  # noqa: E402,F401
from tests.cli_runner import run_cli  # noqa: E402


# The modules that run NeMo Gym (they use tests/gym_harness.py): scripts/test.sh runs them as one
# pytest beside another for the rest, so the suite's two long poles overlap on CI's 2 cores.
GYM_FIXTURES = {"gym_env", "gym_examples", "gym_runner", "gym_workspace"}


def pytest_collection_modifyitems(config: pytest.Config, items: list[pytest.Item]) -> None:
    gym_paths = {i.path for i in items if GYM_FIXTURES & set(getattr(i, "fixturenames", ()))}
    gym_paths |= {p for p in {i.path for i in items} if "gym_harness" in p.read_text()}
    for item in items:
        if item.path in gym_paths:
            item.add_marker(pytest.mark.gym)


@pytest.fixture(scope="session")
def shinken_cli():
    """Runs `shinken ARGS` and returns (returncode, stdout, stderr): in process unless `env=`
    or `subprocess_=True` asks for the installed entry point (tests/cli_runner.py)."""
    return run_cli


@pytest.fixture(scope="session")
def repo_root() -> Path:
    return REPO


@pytest.fixture()
def demo_root(tmp_path: Path) -> Path:
    """A private copy of the demo bundles that a test may modify."""
    dest = tmp_path / "demo"
    shutil.copytree(DEMO, dest)
    return dest


@pytest.fixture(scope="session")
def docker_client():
    import docker

    client = docker.from_env()
    try:
        client.ping()
    except Exception as exc:  # pragma: no cover - CI guarantees a daemon
        pytest.fail(f"Docker engine not reachable ({exc}); run scripts/ensure-docker.sh", pytrace=False)
    return client


@pytest.fixture(scope="session")
def linux_image(docker_client) -> str:
    """`shinken/sandbox-linux:<hash>` for the current sources (built once, then cached by content hash)."""
    from shinken.images.build import build_image

    return build_image("linux", client=docker_client).tag


@pytest.fixture(scope="session")
def cua_image(docker_client) -> str:
    """`shinken/sandbox-cua:<hash>` (LibreOffice, GIMP, evince); a first build takes several minutes."""
    from shinken.images.build import build_image

    return build_image("cua", client=docker_client).tag


@pytest.fixture(scope="session")
def hub_image(docker_client) -> str:
    """`shinken/hub:<hash>` serving the stand-in mock app of tests/data/hub (built with npm
    from the registry once, then cached by content hash)."""
    from shinken.mockweb.build import build_hub

    return build_hub(REPO / "tests" / "data" / "hub", client=docker_client).tag
