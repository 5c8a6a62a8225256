"""Goldens are a cache every process on a Docker engine shares (sandbox/goldens.py: a lease per
process that serves from one). Two servers and a probe on one engine: one server expires and closes
its goldens while the other (another process) serves from them and the probe runs; the serving
one never fails. A golden forced out from under an engine (`docker rmi -f`, what a process holding
no lease could do) is built again by the next seed instead of failing it.

Real Docker, real processes: the second server is a ComputerEngine in a child Python process."""

from __future__ import annotations

import json
import subprocess
import sys
import textwrap
import time
from pathlib import Path

import pytest

from shinken.computer.contract import EngineConfig
from shinken.computer.engine import ComputerEngine

pytestmark = [pytest.mark.docker]

REPO = Path(__file__).resolve().parent.parent
SOLVE = {"command": "printf 'hello shinken' > /home/user/hello.txt"}

# The other server: an engine in its own process, driven line by line ("seed" / "close"), each
# answered with one JSON line (the rollout's golden origin, exec output and reward, or the error).
SERVER = textwrap.dedent("""
    import json, sys
    from shinken.computer.contract import EngineConfig
    from shinken.computer.engine import ComputerEngine
    eng = ComputerEngine(EngineConfig(sys.argv[1], sys.argv[2], golden_ttl_s=3600), gc_interval_s=None)
    print(json.dumps({"ready": True}), flush=True)
    for n, line in enumerate(sys.stdin):
        if line.strip() == "close":
            eng.close()
            print(json.dumps({"closed": True}), flush=True)
            break
        try:
            g = eng.seed(f"s{n}", "hello-file")
            golden = eng.seed_timing(f"s{n}").get("golden")
            out = eng.tool(f"s{n}", g, "computer_exec", {"command": "printf 'hello shinken' > /home/user/hello.txt"})
            res = eng.verify(f"s{n}", g)
            eng.end(f"s{n}", g)
            print(json.dumps({"golden": golden, "out": out[:60],
                              "reward": res.reward, "masked": res.mask_sample}), flush=True)
        except Exception as exc:
            print(json.dumps({"error": f"{type(exc).__name__}: {exc}"}), flush=True)
""")


def _goldens(client, bundle_hash: str) -> list[str]:
    return [i["Id"] for i in client.api.images(filters={"label": ["shinken.kind=golden",
                                                                  f"shinken.bundle_hash={bundle_hash}"]})]


def _ask(proc: subprocess.Popen, line: str, timeout: float = 600) -> dict:
    assert proc.stdin is not None and proc.stdout is not None
    proc.stdin.write(line + "\n")
    proc.stdin.flush()
    return _read(proc, timeout)


def _read(proc: subprocess.Popen, timeout: float) -> dict:
    import select

    assert proc.stdout is not None
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        ready, _, _ = select.select([proc.stdout], [], [], 1.0)
        if ready:
            text = proc.stdout.readline()
            if text.startswith("{"):
                return dict(json.loads(text))
            if not text:
                break
    raise AssertionError(f"the other server did not answer (exit {proc.poll()})")


def test_two_servers_and_a_probe_share_goldens_one_expiring_and_closing(linux_image, docker_client, tmp_path):
    from desktop_demos import salted_copy
    from shinken.bundles.loader import load_bundle

    root = salted_copy(tmp_path / "tasks", ["hello-file"], REPO)
    bundle_hash = load_bundle(root / "hello-file").bundle_hash
    # Server A: a short golden TTL and a fast maintenance tick, so it expires its golden within the test.
    a = ComputerEngine(EngineConfig(root, linux_image, golden_ttl_s=1.0), maintenance_interval_s=0.5,
                       gc_interval_s=None)
    b = subprocess.Popen([sys.executable, "-c", SERVER, str(root), linux_image], stdin=subprocess.PIPE,
                         stdout=subprocess.PIPE, text=True, cwd=tmp_path)
    probe: subprocess.Popen | None = None
    try:
        g = a.seed("a0", "hello-file")  # A builds the golden
        assert a.seed_timing("a0")["golden"] == "built"
        a.end("a0", g)
        assert _read(b, 120) == {"ready": True}
        first = _ask(b, "seed")
        assert first["golden"] == "cached" and first["reward"] == 1.0 and not first["masked"], first
        # The probe: a third process serving from the same golden, while A lets go of it.
        probe = subprocess.Popen([sys.executable, "-m", "shinken.cli.main", "probe", str(root), "--image", linux_image,
                                  "--receipt", str(tmp_path / "receipt.json"), "--run-dir", str(tmp_path / "run"),
                                  "--state-fidelity", "filesystem"], cwd=tmp_path, stdout=subprocess.PIPE,
                                 stderr=subprocess.PIPE, text=True)
        deadline = time.monotonic() + 120
        while a.goldens():  # A's TTL ran out: it let go of the golden
            assert time.monotonic() < deadline, a.goldens()
            time.sleep(0.3)
        assert a.stats["goldens_kept"] >= 1, a.stats  # its deletion was refused: B holds it
        assert _goldens(docker_client, bundle_hash), "A deleted the golden B serves from"
        second = _ask(b, "seed")  # B's engine still holds it: warm, and the rollout scores
        assert second == {**first, "golden": "warm"}, second
        g = a.seed("a1", "hello-file")  # A seeds again (found again, leased again) ...
        assert a.seed_timing("a1")["golden"] == "cached", a.seed_timing("a1")
        a.end("a1", g)
        a.close()  # ... and closes, deleting goldens it may delete: not this one
        assert _goldens(docker_client, bundle_hash)
        third = _ask(b, "seed")
        assert third == second, third
        _, err = probe.communicate(timeout=900)
        assert probe.returncode == 0, err[-2000:]
        line = json.loads((tmp_path / "receipt.json").read_text())["tasks"][0]
        assert line["outcome"] == "kept" and line["timings"]["golden_reused"], line
        # B closes last: nobody else holds the golden, so it goes.
        assert _ask(b, "close") == {"closed": True}
        b.wait(60)
        assert _goldens(docker_client, bundle_hash) == []
    finally:
        a.close()
        for proc in (b, probe):
            if proc is not None and proc.poll() is None:
                proc.terminate()  # the probe and the engine clean up on SIGTERM
                proc.wait(120)
        for image_id in _goldens(docker_client, bundle_hash):
            docker_client.api.remove_image(image_id, force=True)


def test_a_golden_forced_out_is_built_again_by_the_next_seed(linux_image, docker_client, tmp_path):
    """`docker rmi -f` of a golden an engine holds (what a process holding no lease, e.g. an older
    shinken, could do): the engine's next seed builds it again and the rollout scores; before, that
    seed answered 503 infra_error ("image ... is gone")."""
    from desktop_demos import salted_copy
    from shinken.bundles.loader import load_bundle

    root = salted_copy(tmp_path / "tasks", ["hello-file"], REPO)
    bundle_hash = load_bundle(root / "hello-file").bundle_hash
    eng = ComputerEngine(EngineConfig(root, linux_image), gc_interval_s=None)
    try:
        g = eng.seed("s0", "hello-file")
        eng.end("s0", g)
        (old,) = _goldens(docker_client, bundle_hash)
        docker_client.api.remove_image(old, force=True)  # forced out: its lease container does not stop -f
        g = eng.seed("s1", "hello-file")
        timing = eng.seed_timing("s1")
        assert timing["golden"] == "built" and timing["golden_note"] == "the golden this engine held was gone", timing
        assert eng.tool("s1", g, "computer_exec", SOLVE).startswith("exit code 0")
        res = eng.verify("s1", g)
        assert (res.reward, res.mask_sample) == (1.0, False), res
        eng.end("s1", g)
        assert _goldens(docker_client, bundle_hash) not in ([], [old])
    finally:
        eng.close()
    assert _goldens(docker_client, bundle_hash) == []  # nobody else held it: the engine's close deleted it
