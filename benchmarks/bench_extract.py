"""Extraction and loading of a release-sized corpus, measured against GNU tar in one run.

    .venv/bin/python benchmarks/bench_extract.py [--n 10910] [--rounds 3] [--workdir DIR]

Ratios are medians (and best-of) over the rounds; CPU ratios are reported too, because
on a shared 2-core machine background load inflates wall times run by run.

Builds a synthetic release (benchmarks/synthetic_release.py: N tasks x 3 files) as a
.tar.zst, then, alternating rounds so background load hits both alike:
- `tar --zstd -xf` (GNU tar + zstd, the reference),
- `shinken.download.archive.extract_tar_zst` in a fresh subprocess (wall time of the whole
  process, and the time inside extract_tar_zst), with its peak RSS (ru_maxrss),
- optionally `tarfile` with the `data` filter (the stdlib's safe path), once.
Peak RSS is also measured on an archive holding one 1 GiB member, to show memory does
not grow with archive or member size. Finally `load_root` on the extracted bundles
(parse + schema check + hash), in a fresh process. Prints one JSON document.
"""

from __future__ import annotations

import argparse
import json
import os
import resource
import shutil
import statistics
import subprocess
import sys
import tarfile
import tempfile
import time
from pathlib import Path

REPO = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(REPO))
from benchmarks.synthetic_release import RELEASE_SIZE, make_archive, make_corpus  # noqa: E402

_CHILD_EXTRACT = r"""
import json, resource, sys, time
t0 = time.perf_counter()
from shinken.download.archive import extract_tar_zst
t1 = time.perf_counter()
st = extract_tar_zst(sys.argv[1], sys.argv[2], max_total_bytes=1 << 40)
t2 = time.perf_counter()
print(json.dumps({"import_s": t1 - t0, "extract_s": t2 - t1, "members": st.members,
                  "maxrss_kb": resource.getrusage(resource.RUSAGE_SELF).ru_maxrss}))
"""

_CHILD_TARFILE = r"""
import sys, tarfile, time, zstandard
t = time.perf_counter()
with open(sys.argv[1], "rb") as raw, zstandard.ZstdDecompressor().stream_reader(raw) as r:
    with tarfile.open(fileobj=r, mode="r|") as tf:
        tf.extractall(sys.argv[2], filter="data")
print(time.perf_counter() - t)
"""

_CHILD_LOAD = r"""
import json, resource, sys, time
t0 = time.perf_counter()
from shinken.bundles.loader import load_root
t1 = time.perf_counter()
c1 = time.process_time()
bundles = load_root(sys.argv[1])
t2 = time.perf_counter()
print(json.dumps({"import_s": t1 - t0, "load_s": t2 - t1, "load_cpu_s": time.process_time() - c1,
                  "bundles": len(bundles),
                  "ok": sum(b.ok for b in bundles),
                  "maxrss_kb": resource.getrusage(resource.RUSAGE_SELF).ru_maxrss}))
"""


def _fresh(path: Path) -> None:
    shutil.rmtree(path, ignore_errors=True)
    os.sync()  # do not bill one run for the previous run's writeback


def _children_cpu() -> float:
    r = resource.getrusage(resource.RUSAGE_CHILDREN)
    return r.ru_utime + r.ru_stime


def _run_tar(archive: Path, dest: Path) -> tuple[float, float]:
    """(wall, CPU) of tar and its zstd child: CPU is what background load cannot inflate."""
    _fresh(dest)
    dest.mkdir()
    c = _children_cpu()
    t = time.perf_counter()
    subprocess.run(["tar", "--zstd", "-xf", str(archive), "-C", str(dest)], check=True)
    return time.perf_counter() - t, _children_cpu() - c


def _run_ours(archive: Path, dest: Path) -> dict:
    _fresh(dest)
    c = _children_cpu()
    t = time.perf_counter()
    p = subprocess.run([sys.executable, "-c", _CHILD_EXTRACT, str(archive), str(dest)],
                       check=True, capture_output=True, text=True)
    wall = time.perf_counter() - t
    doc = json.loads(p.stdout)
    doc["process_s"] = wall
    doc["cpu_s"] = _children_cpu() - c
    return doc


def _big_member_archive(path: Path, size: int) -> Path:
    import zstandard

    ti = tarfile.TarInfo("big/blob.bin")
    ti.size = size
    block = bytes(range(256)) * 4096  # 1 MiB, compresses well: a small archive, a big member
    with open(path, "wb") as fh, zstandard.ZstdCompressor(level=1).stream_writer(fh) as zw:
        zw.write(ti.tobuf(format=tarfile.GNU_FORMAT))
        for _ in range(size // len(block)):
            zw.write(block)
        zw.write(bytes(1024))
    return path


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--n", type=int, default=RELEASE_SIZE)
    ap.add_argument("--rounds", type=int, default=3)
    ap.add_argument("--workdir", type=Path, default=None, help="where to build and extract (default: a temp dir)")
    ap.add_argument("--no-tarfile", action="store_true", help="skip the slow stdlib tarfile baseline")
    a = ap.parse_args()

    work = Path(tempfile.mkdtemp(prefix="bench-extract-", dir=a.workdir))
    try:
        t = time.perf_counter()
        src = make_corpus(work / "src", n=a.n, seed=0)
        archive = make_archive(src, work / "release.tar.zst")
        shutil.rmtree(src)
        build_s = time.perf_counter() - t

        tar_s, tar_cpu, ours = [], [], []
        for _ in range(a.rounds):
            w, c = _run_tar(archive, work / "by-tar")
            tar_s.append(w)
            tar_cpu.append(c)
            ours.append(_run_ours(archive, work / "by-shinken"))
        diff = subprocess.run(["diff", "-rq", str(work / "by-tar"), str(work / "by-shinken")], capture_output=True)
        shutil.rmtree(work / "by-tar", ignore_errors=True)

        tarfile_s = None
        if not a.no_tarfile:
            _fresh(work / "by-tarfile")
            p = subprocess.run([sys.executable, "-c", _CHILD_TARFILE, str(archive), str(work / "by-tarfile")],
                               check=True, capture_output=True, text=True)
            tarfile_s = float(p.stdout)
            shutil.rmtree(work / "by-tarfile", ignore_errors=True)

        p = subprocess.run([sys.executable, "-c", _CHILD_LOAD, str(work / "by-shinken")],
                           check=True, capture_output=True, text=True)
        load = json.loads(p.stdout)
        p2 = subprocess.run([sys.executable, "-c", _CHILD_LOAD, str(work / "by-shinken")],
                            check=True, capture_output=True, text=True)
        load2 = json.loads(p2.stdout)

        big = _big_member_archive(work / "big.tar.zst", 1 << 30)
        big_run = _run_ours(big, work / "big-out")
        shutil.rmtree(work / "big-out", ignore_errors=True)

        med_tar = statistics.median(tar_s)
        med_proc = statistics.median(r["process_s"] for r in ours)
        med_in = statistics.median(r["extract_s"] for r in ours)
        result = {
            "tasks": a.n,
            "members": ours[0]["members"],
            "archive_bytes": archive.stat().st_size,
            "workdir_fs": str(work),
            "build_s": round(build_s, 2),
            "identical_to_tar": diff.returncode == 0,
            "tar_s": [round(x, 3) for x in tar_s],
            "shinken_process_s": [round(r["process_s"], 3) for r in ours],
            "shinken_extract_s": [round(r["extract_s"], 3) for r in ours],
            "tar_cpu_s": [round(x, 3) for x in tar_cpu],
            "shinken_process_cpu_s": [round(r["cpu_s"], 3) for r in ours],
            "ratio_process_vs_tar": round(med_proc / med_tar, 2),
            "ratio_best_process_vs_best_tar": round(min(r["process_s"] for r in ours) / min(tar_s), 2),
            "ratio_process_cpu_vs_tar_cpu": round(statistics.median(r["cpu_s"] for r in ours) / statistics.median(tar_cpu), 2),
            "ratio_extract_vs_tar": round(med_in / med_tar, 2),
            "tarfile_data_filter_s": None if tarfile_s is None else round(tarfile_s, 3),
            "peak_rss_mb_release": round(max(r["maxrss_kb"] for r in ours) / 1024, 1),
            "peak_rss_mb_1gib_member": round(big_run["maxrss_kb"] / 1024, 1),
            "big_member_extract_s": round(big_run["extract_s"], 3),
            "load_root_s": [round(load["load_s"], 3), round(load2["load_s"], 3)],
            "load_root_cpu_s": [round(load["load_cpu_s"], 3), round(load2["load_cpu_s"], 3)],
            "load_root_with_import_s": [round(load["load_s"] + load["import_s"], 3),
                                        round(load2["load_s"] + load2["import_s"], 3)],
            "bundles_ok": load["ok"],
            "load_peak_rss_mb": round(load["maxrss_kb"] / 1024, 1),
            "loadavg_1m": round(os.getloadavg()[0], 2),
            "cpus": os.cpu_count(),
        }
        print(json.dumps(result, indent=2))
    finally:
        shutil.rmtree(work, ignore_errors=True)


if __name__ == "__main__":
    main()
