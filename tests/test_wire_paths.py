"""Names that crossed the wire (a bundle payload sent to a fleet host or a probe node) never place
a file outside the task folder: a folder or file name with `../`, a separator or a leading dot is
refused, and nothing is written (bundles/wire.py, used by the host agent's add_task and the
probe's payload copy)."""

from __future__ import annotations

import uuid
from pathlib import Path

import pytest

from shinken.errors import ShinkenError

DEMO = Path(__file__).resolve().parent.parent / "demo"


def _payload(name: str, files: dict[str, bytes]) -> dict:
    return {"path": "/nonexistent/shinken-task", "name": name, "bundle_hash": "0" * 64, "files": files}


def _attacks(mark: str) -> list[dict]:
    """Payloads whose names point outside the task folder, each leaving `mark` where it lands."""
    return [
        _payload(f"../{mark}", {"config.json": b"{}"}),
        _payload("t", {f"../{mark}": b"x"}),
        _payload("t", {f"../../{mark}": b"x"}),
        _payload("t", {f"/tmp/{mark}": b"x"}),
        _payload("..", {mark: b"x"}),
        _payload(f".{mark}", {"config.json": b"{}"}),
    ]


def _landed(roots: list[Path], mark: str) -> list[Path]:
    return [p for root in roots for p in root.rglob(f"*{mark}*")] + [p for p in (Path("/tmp") / mark,) if p.exists()]


def test_a_probe_payload_with_dotdot_names_is_refused_and_writes_nothing() -> None:
    from shinken.probes.executors import materialized
    from shinken.runtime import runtime_root

    mark = f"shinken-escape-{uuid.uuid4().hex[:8]}"
    for payload in _attacks(mark):
        with pytest.raises(ShinkenError, match="one file name"):
            with materialized(payload):
                pass
    root = runtime_root() / "dirs"
    assert _landed([root.parent, root], mark) == []


@pytest.mark.docker
def test_a_host_agents_add_task_refuses_dotdot_names_and_keeps_a_good_bundle(linux_image: str) -> None:
    from shinken.bundles.loader import load_bundle
    from shinken.fleet.agent import HostAgent
    from shinken.fleet.nodes import bundle_payload

    mark = f"shinken-escape-{uuid.uuid4().hex[:8]}"
    agent = HostAgent("wire", 1, linux_image, demand_pools=False)
    try:
        tasks = agent.tasks_dir
        for payload in _attacks(mark):
            answer = agent.add_task(payload)
            assert answer.get("error") == "task" and "one file name" in answer["detail"], (payload["name"], answer)
        assert _landed([tasks.parent, tasks], mark) == []
        assert not agent.has_task("../" + tasks.name, "0" * 64)
        # A well-formed bundle is still written and found.
        bundle = load_bundle(DEMO / "hello-file")
        assert agent.add_task(bundle_payload(bundle)) == {"ok": True}
        assert agent.has_task(bundle.path.name, bundle.bundle_hash)
    finally:
        agent.close()
