"""`shinken publish` on a release-sized corpus: archive levels, end-to-end publish, no-op re-publish.

    .venv/bin/python benchmarks/bench_publish.py [--n 10910] [--workdir DIR] [--levels 3,10,19]

Builds a synthetic release (benchmarks/synthetic_release.py: N tasks x 3 files) and a probe
receipt that keeps every task (the receipt shape `shinken probe` writes; nothing is run), then:
- packs the bundles with `shinken.download.pack.write_tar_zst` at each zstd level: wall and CPU
  seconds in-process, archive size, and the ratios to the first level (one run, same files);
- `GNU tar --zstd -cf` over the same folders, for reference (its default zstd level, 3);
- `shinken publish --local-dir` end to end (read receipt + bundles, rows, split, card, archive);
- a publish to the loopback hub (tests/hub_server.py, real huggingface_hub client, LFS), then the
  same publish again: the unchanged re-publish compares hashes and makes no commit.
Prints one JSON document.
"""

from __future__ import annotations

import argparse
import json
import os
import resource
import shutil
import subprocess
import sys
import tempfile
import time
from pathlib import Path

REPO = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(REPO))
from benchmarks.synthetic_release import RELEASE_SIZE, make_corpus  # noqa: E402


def _cpu() -> float:
    r = resource.getrusage(resource.RUSAGE_SELF)
    return r.ru_utime + r.ru_stime


def _receipt(root: Path, path: Path) -> None:
    from shinken.bundles.loader import load_root

    lines = []
    for b in load_root(root):
        lines.append({
            "schema": "shinken.probe.line/1", "task_id": b.id, "bundle_hash": b.bundle_hash,
            "image_id": "sha256:" + "0" * 64, "image_ref": "shinken/sandbox-cua:latest",
            "config_hash": "bench", "outcome": "kept", "reason": None, "detail": "synthetic",
            "rewards": [0.0, 0.0], "timings": {"golden_build_s": 0.0, "golden_reused": True, "fork_s": [],
                                               "reward_s": [], "total_s": 0.0},
            "attempts": 1, "finished_at": "2026-01-01T00:00:00Z",
        })
    doc = {"schema": "shinken.probe/1", "image": {"ref": "shinken/sandbox-cua:latest", "id": "sha256:" + "0" * 64},
           "task_root": str(root), "kept": [ln["task_id"] for ln in lines], "dropped": [], "tasks": lines,
           "summary": {"total": len(lines), "kept": len(lines), "dropped": 0, "by_reason": {}, "repeats": 2}}
    path.write_text(json.dumps(doc))


def _timed_cli(args: list[str], env: dict[str, str]) -> tuple[float, dict]:
    t0 = time.perf_counter()
    p = subprocess.run([str(REPO / ".venv" / "bin" / "shinken"), *args, "--json"], capture_output=True,
                       text=True, env=env)
    wall = time.perf_counter() - t0
    if p.returncode != 0:
        raise SystemExit(f"{args[0]} failed: {p.stderr}")
    return wall, json.loads(p.stdout)


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--n", type=int, default=RELEASE_SIZE)
    ap.add_argument("--workdir", type=Path)
    ap.add_argument("--levels", default="3,10,19")
    a = ap.parse_args()
    work = Path(a.workdir or tempfile.mkdtemp(prefix="bench-publish-"))
    root = make_corpus(work / "tasks", n=a.n, seed=0)
    from shinken.bundles.loader import load_root
    from shinken.download.pack import PackedFolder, write_tar_zst

    folders = [PackedFolder(b.path.name, b.path, tuple(sorted(b.files))) for b in load_root(root)]
    raw = sum((f.path / n).stat().st_size for f in folders for n in f.files)
    out: dict = {"tasks": len(folders), "bytes_uncompressed": raw, "load": os.getloadavg()[0], "levels": {}}
    for level in (int(x) for x in a.levels.split(",")):
        c0, t0 = _cpu(), time.perf_counter()
        st = write_tar_zst(folders, work / f"l{level}.tar.zst", level=level)
        out["levels"][level] = {"wall_s": round(time.perf_counter() - t0, 3), "cpu_s": round(_cpu() - c0, 3),
                                "size": st.size}
    first = out["levels"][min(out["levels"])]
    for v in out["levels"].values():
        v["size_ratio"] = round(v["size"] / first["size"], 3)
        v["wall_ratio"] = round(v["wall_s"] / first["wall_s"], 2)
    if shutil.which("tar") and shutil.which("zstd"):
        t0 = time.perf_counter()
        subprocess.run(["tar", "--zstd", "-cf", str(work / "gnu.tar.zst"), "-C", str(root),
                        *sorted(f.name for f in folders)], check=True)
        out["gnu_tar_zstd"] = {"wall_s": round(time.perf_counter() - t0, 3),
                               "size": (work / "gnu.tar.zst").stat().st_size}

    receipt = work / "receipt.json"
    _receipt(root, receipt)
    env = {k: v for k, v in os.environ.items() if not k.startswith("HF_")}
    common = ["publish", "--repo-id", "bench/cua", "--receipt", str(receipt), "--task-root", str(root),
              "--license", "apache-2.0"]
    wall, doc = _timed_cli(common + ["--local-dir", str(work / "local")], env)
    out["publish_local_dir_s"] = round(wall, 2)
    out["files"] = {f["path"]: f["size"] for f in doc["files"]}

    from tests.hub_server import HubServer

    with HubServer() as hub:
        env.update(HF_ENDPOINT=hub.endpoint, HF_TOKEN="hf_bench", HF_HOME=str(work / "hf"),
                   HF_HUB_DISABLE_XET="1", HF_HUB_DISABLE_TELEMETRY="1")
        out["publish_hub_first_s"] = round(_timed_cli(common, env)[0], 2)
        wall, doc = _timed_cli(common, env)
        assert doc["status"] == "unchanged", doc["status"]
        out["publish_hub_unchanged_s"] = round(wall, 2)
    print(json.dumps(out, indent=2))
    if not a.workdir:
        shutil.rmtree(work, ignore_errors=True)


if __name__ == "__main__":
    main()
