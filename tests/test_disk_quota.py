"""A fork's share of the engine's disk (sandbox/disk_quota.py) on the real engine: this machine's
overlay2 over ext4 cannot enforce `storage_opt size=`, so the watchdog stops a rollout's fork
that writes past its share and the rollout is masked (`provider_quota_exhausted`), while a
rollout beside it is served and scored as ever."""

from __future__ import annotations

import shutil
import time
import uuid
from pathlib import Path

import pytest

from shinken.computer.contract import EngineConfig
from shinken.computer.engine import ComputerEngine
from shinken.sandbox import disk_quota

pytestmark = pytest.mark.docker

DEMO = Path(__file__).resolve().parent.parent / "demo"
SHARE_MIB = 64
# ~40 MiB/s for up to 400 MiB: the watchdog (polling every 0.5 s here) stops it long before the end.
WRITER = ("nohup bash -c 'for i in $(seq 1 100); do head -c 4194304 /dev/zero >> /home/user/fill; sleep 0.1; done' "
          ">/dev/null 2>&1 &")


def _size_rw(docker_client, cid: str) -> int:
    listed = docker_client.api.containers(all=True, size=True, filters={"id": [cid]})
    return int(listed[0].get("SizeRw") or 0)


def test_a_fork_writing_past_its_share_is_stopped_and_its_rollout_masked(tmp_path: Path, linux_image, docker_client):
    root = tmp_path / "tasks"
    shutil.copytree(DEMO / "hello-file", root / "hello-file")
    with open(root / "hello-file" / "reward.py", "a", encoding="utf-8") as fh:
        fh.write(f"\n# test salt {uuid.uuid4().hex}\n")  # a golden of its own: deleted at close
    eng = ComputerEngine(EngineConfig(root, linux_image, accept_filesystem=True, idle_ttl_s=600, demand_pools=False),
                         gc_interval_s=None, disk_share_mib=SHARE_MIB)
    eng.disk_watch.interval_s = 0.5
    try:
        hog, other = eng.seed("hog", "hello-file"), eng.seed("other", "hello-file")
        if disk_quota.enforced(eng.provider.api):  # type: ignore[attr-defined]
            pytest.skip("this engine enforces storage_opt size: the storage driver holds forks to their share")
        hog_id = eng.sandbox_id("hog", hog).split(":")[0]  # type: ignore[union-attr]
        other_id = eng.sandbox_id("other", other).split(":")[0]  # type: ignore[union-attr]
        assert eng.tool("hog", hog, "computer_exec", {"command": WRITER}).startswith("exit code 0")
        deadline = time.monotonic() + 120
        while hog_id not in eng.disk_watch.stopped and time.monotonic() < deadline:
            time.sleep(0.2)
        assert eng.disk_watch.stopped == [hog_id]
        state = docker_client.api.inspect_container(hog_id)["State"]
        assert state["Paused"], state  # every process of it frozen, the writer mid-write
        stopped_at = _size_rw(docker_client, hog_id)
        assert SHARE_MIB * 2**20 < stopped_at < 400 * 2**20
        time.sleep(1.5)
        assert _size_rw(docker_client, hog_id) == stopped_at  # it writes no more
        said = eng.tool("hog", hog, "computer_exec", {"command": "echo still here"})
        assert "will not be scored" in said and "still here" not in said
        res = eng.verify("hog", hog)
        assert (res.mask_sample, res.failure_kind, res.reward) == (True, "provider_quota_exhausted", 0.0), res
        assert res.failure_reason.startswith("disk_quota: ") and f"share of {SHARE_MIB} MiB" in res.failure_reason
        # The rollout beside it: served and scored as ever.
        assert not docker_client.api.inspect_container(other_id)["State"]["Paused"]
        out = eng.tool("other", other, "computer_exec", {"command": "printf 'hello shinken' > /home/user/hello.txt"})
        assert out.startswith("exit code 0"), out
        ok = eng.verify("other", other)
        assert (ok.reward, ok.mask_sample, ok.failure_kind) == (1.0, False, None), ok
    finally:
        eng.close()
    assert docker_client.api.containers(all=True, filters={"id": [hog_id, other_id]}) == []  # freed with the rollout
