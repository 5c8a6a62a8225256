"""Safe .tar.zst extraction: real archives (tarfile + zstandard, and GNU tar itself),
hostile members of every kind, caps, and all-or-nothing behaviour."""

from __future__ import annotations

import io
import os
import shutil
import signal
import subprocess
import sys
import tarfile
import time
from pathlib import Path

import pytest
import zstandard

from shinken.download.archive import extract_tar_zst
from shinken.errors import ShinkenError
from shinken.runtime import OWNER_MARKER

REPO = Path(__file__).resolve().parent.parent
if str(REPO) not in sys.path:
    sys.path.insert(0, str(REPO))
from benchmarks.synthetic_release import make_archive, make_corpus  # noqa: E402


def _info(name: str, *, type=tarfile.REGTYPE, size: int = 0, mode: int = 0o644, linkname: str = "") -> tarfile.TarInfo:
    ti = tarfile.TarInfo(name)
    ti.type = type
    ti.size = size
    ti.mode = mode
    ti.linkname = linkname
    ti.mtime = 1_700_000_000
    return ti


def make_tar_zst(path: Path, members: list[tuple[tarfile.TarInfo, bytes | None]], fmt=tarfile.GNU_FORMAT) -> Path:
    raw = io.BytesIO()
    with tarfile.open(fileobj=raw, mode="w", format=fmt) as tar:
        for ti, data in members:
            if data is not None:
                ti.size = len(data)
                tar.addfile(ti, io.BytesIO(data))
            else:
                tar.addfile(ti)
    path.write_bytes(zstandard.ZstdCompressor().compress(raw.getvalue()))
    return path


def file(name: str, data: bytes = b"x", mode: int = 0o644):
    return (_info(name, mode=mode), data)


def _assert_nothing_left(tmp_path: Path, dest: Path) -> None:
    assert not dest.exists(), "refused extraction left DEST behind"
    leftovers = [p.name for p in dest.parent.iterdir() if ".partial-" in p.name]
    assert leftovers == [], f"temp folder left behind: {leftovers}"


@pytest.fixture()
def outside(tmp_path: Path) -> Path:
    """A folder next to DEST that hostile members aim at; must stay empty."""
    d = tmp_path / "outside"
    d.mkdir()
    return d


def test_release_shaped_archive_matches_gnu_tar(tmp_path: Path) -> None:
    src = make_corpus(tmp_path / "src", n=60, seed=3)
    archive = make_archive(src, tmp_path / "rel.tar.zst")
    stats = extract_tar_zst(archive, tmp_path / "ours", progress=True)
    assert stats.members == stats.files == 180
    theirs = tmp_path / "theirs"
    theirs.mkdir()
    subprocess.run(["tar", "--zstd", "-xf", str(archive), "-C", str(theirs)], check=True)
    diff = subprocess.run(["diff", "-r", str(tmp_path / "ours"), str(theirs)], capture_output=True, text=True)
    assert diff.returncode == 0, diff.stdout[:2000]
    assert len(list((tmp_path / "ours").iterdir())) == 60


def test_archive_made_by_gnu_tar_with_dirs_links_and_long_names(tmp_path: Path) -> None:
    src = tmp_path / "src"
    deep = src / "t1" / ("d" * 120) / "sub"
    deep.mkdir(parents=True)
    (deep / ("f" * 150 + ".py")).write_text("print('long')\n")
    (src / "t1" / "run.sh").write_text("#!/bin/sh\necho hi\n")
    os.chmod(src / "t1" / "run.sh", 0o755)
    os.symlink("run.sh", src / "t1" / "alias.sh")
    os.link(src / "t1" / "run.sh", src / "t1" / "hard.sh")
    for fmt in ("gnu", "posix"):
        archive = tmp_path / f"{fmt}.tar.zst"
        subprocess.run(["tar", f"--format={fmt}", "--zstd", "-cf", str(archive), "-C", str(src), "t1"], check=True)
        dest = tmp_path / f"out-{fmt}"
        extract_tar_zst(archive, dest)
        assert (dest / "t1" / ("d" * 120) / "sub" / ("f" * 150 + ".py")).read_text() == "print('long')\n"
        assert os.access(dest / "t1" / "run.sh", os.X_OK)
        assert os.readlink(dest / "t1" / "alias.sh") == "run.sh"
        assert os.stat(dest / "t1" / "hard.sh").st_ino == os.stat(dest / "t1" / "run.sh").st_ino


@pytest.mark.parametrize(
    "members, needle",
    [
        ([file("/ABS/evil.txt")], "absolute"),
        ([file("../evil.txt")], "'..'"),
        ([file("task/../../evil.txt")], "'..'"),
        ([(_info("t/link", type=tarfile.SYMTYPE, linkname="/etc/passwd"), None)], "outside"),
        ([(_info("t/link", type=tarfile.SYMTYPE, linkname="../../outside"), None)], "outside"),
        # A link that looks inside but, through another link, escapes (realpath check).
        ([(_info("t/up", type=tarfile.SYMTYPE, linkname=".."), None),
          (_info("t/esc", type=tarfile.SYMTYPE, linkname="up/../up/.."), None)], "outside"),
        # Writing through a link made by the archive is refused even when it points inside.
        ([(_info("t/sub", type=tarfile.DIRTYPE, mode=0o755), None),
          (_info("t/alias", type=tarfile.SYMTYPE, linkname="sub"), None),
          file("t/alias/evil.txt")], "symlink"),
        ([(_info("t/hard", type=tarfile.LNKTYPE, linkname="../outside/secret"), None)], "hardlink"),
        ([(_info("t/hard", type=tarfile.LNKTYPE, linkname="/etc/passwd"), None)], "hardlink"),
        ([(_info("t/hard", type=tarfile.LNKTYPE, linkname="t/not-extracted"), None)], "hardlink"),
        ([(_info("t/tty", type=tarfile.CHRTYPE), None)], "device"),
        ([(_info("t/disk", type=tarfile.BLKTYPE), None)], "device"),
        ([(_info("t/pipe", type=tarfile.FIFOTYPE), None)], "FIFO"),
    ],
    ids=["absolute", "dotdot", "nested-dotdot", "symlink-abs", "symlink-up", "symlink-chain",
         "write-through-link", "hardlink-up", "hardlink-abs", "hardlink-missing", "chardev", "blockdev", "fifo"],
)
def test_hostile_member_refused_and_nothing_written(tmp_path: Path, outside: Path, members, needle: str) -> None:
    # A good member first so a half tree would exist if the refusal were not all-or-nothing.
    archive = make_tar_zst(tmp_path / "evil.tar.zst", [file("good/task.json", b"{}")] + members)
    dest = tmp_path / "dest"
    with pytest.raises(ShinkenError) as err:
        extract_tar_zst(archive, dest)
    msg = str(err.value)
    assert needle in msg
    bad_name = members[-1][0].name
    assert repr(bad_name) in msg or bad_name.lstrip("/") in msg, msg
    assert "nothing was extracted" in msg
    _assert_nothing_left(tmp_path, dest)
    assert list(outside.iterdir()) == []
    assert not Path("/ABS").exists()


def test_symlink_inside_is_kept(tmp_path: Path) -> None:
    archive = make_tar_zst(tmp_path / "a.tar.zst", [
        file("t/reward.py", b"print('REWARD: 1')\n"),
        (_info("t/sub", type=tarfile.DIRTYPE, mode=0o755), None),
        (_info("t/sub/r.py", type=tarfile.SYMTYPE, linkname="../reward.py"), None),
    ])
    extract_tar_zst(archive, tmp_path / "d")
    assert (tmp_path / "d" / "t" / "sub" / "r.py").read_text() == "print('REWARD: 1')\n"


def test_duplicate_member_later_wins_and_link_is_replaced_not_followed(tmp_path: Path, outside: Path) -> None:
    archive = make_tar_zst(tmp_path / "a.tar.zst", [
        file("t/a.txt", b"first"),
        file("t/a.txt", b"second"),
        (_info("t/l", type=tarfile.SYMTYPE, linkname="a.txt"), None),
        file("t/l", b"replaced"),
    ])
    extract_tar_zst(archive, tmp_path / "d")
    assert (tmp_path / "d/t/a.txt").read_bytes() == b"second"
    assert not (tmp_path / "d/t/l").is_symlink()
    assert (tmp_path / "d/t/l").read_bytes() == b"replaced"


def test_member_cap(tmp_path: Path) -> None:
    archive = make_tar_zst(tmp_path / "a.tar.zst", [file(f"t{i}/f", b"") for i in range(50)])
    with pytest.raises(ShinkenError, match="max_members"):
        extract_tar_zst(archive, tmp_path / "d", max_members=20)
    _assert_nothing_left(tmp_path, tmp_path / "d")
    assert extract_tar_zst(archive, tmp_path / "d", max_members=50).members == 50


def test_total_size_cap(tmp_path: Path) -> None:
    archive = make_tar_zst(tmp_path / "a.tar.zst", [file(f"t/f{i}", b"y" * 1000) for i in range(10)])
    with pytest.raises(ShinkenError, match="max_total_bytes") as err:
        extract_tar_zst(archive, tmp_path / "d", max_total_bytes=5500)
    assert "t/f5" in str(err.value)  # names the member that crosses the cap
    _assert_nothing_left(tmp_path, tmp_path / "d")


def test_zstd_bomb_stops_cleanly(tmp_path: Path) -> None:
    """A 2 GiB file of zeros compresses to ~64 KB; the cap stops it at its header, before
    any data is decompressed or written, quickly and in little memory."""
    archive = tmp_path / "bomb.tar.zst"
    size = 2 * 1024**3
    ti = _info("bomb/zeros.bin", size=size)
    zero = bytes(1 << 20)
    with open(archive, "wb") as fh, zstandard.ZstdCompressor(level=1).stream_writer(fh) as zw:
        zw.write(ti.tobuf(format=tarfile.GNU_FORMAT))
        for _ in range(size // len(zero)):
            zw.write(zero)
        zw.write(bytes(1024))
    assert archive.stat().st_size < 1024 * 1024
    t = time.perf_counter()
    with pytest.raises(ShinkenError, match="max_total_bytes"):
        extract_tar_zst(archive, tmp_path / "d", max_total_bytes=100 * 1024 * 1024)
    assert time.perf_counter() - t < 10.0  # stops at the header: decompressing 2 GiB is not needed
    _assert_nothing_left(tmp_path, tmp_path / "d")


def test_many_tiny_members_bomb(tmp_path: Path) -> None:
    raw = io.BytesIO()
    with tarfile.open(fileobj=raw, mode="w", format=tarfile.GNU_FORMAT) as tar:
        for i in range(5000):
            tar.addfile(_info(f"x/{i}"), io.BytesIO(b""))
    archive = tmp_path / "many.tar.zst"
    archive.write_bytes(zstandard.ZstdCompressor().compress(raw.getvalue()))
    with pytest.raises(ShinkenError, match="max_members"):
        extract_tar_zst(archive, tmp_path / "d", max_members=1000)
    _assert_nothing_left(tmp_path, tmp_path / "d")


@pytest.mark.parametrize("content, needle", [
    (b"this is not zstd at all" * 100, "zstd"),
    (zstandard.ZstdCompressor().compress(b"\x01" * 4096), "not a tar archive"),
])
def test_garbage_refused(tmp_path: Path, content: bytes, needle: str) -> None:
    archive = tmp_path / "junk.tar.zst"
    archive.write_bytes(content)
    with pytest.raises(ShinkenError, match=needle):
        extract_tar_zst(archive, tmp_path / "d")
    _assert_nothing_left(tmp_path, tmp_path / "d")


def test_truncated_archive_leaves_nothing(tmp_path: Path) -> None:
    src = make_corpus(tmp_path / "src", n=40, seed=5)
    archive = make_archive(src, tmp_path / "a.tar.zst")
    cut = tmp_path / "cut.tar.zst"
    cut.write_bytes(archive.read_bytes()[: archive.stat().st_size // 2])
    with pytest.raises(ShinkenError):
        extract_tar_zst(cut, tmp_path / "d")
    _assert_nothing_left(tmp_path, tmp_path / "d")


def test_archive_cut_at_a_member_boundary_is_refused(tmp_path: Path) -> None:
    """Cut exactly after a member (no end-of-archive blocks): every header and data block
    is intact, only the marker tells that tasks are missing."""
    raw = io.BytesIO()
    with tarfile.open(fileobj=raw, mode="w", format=tarfile.GNU_FORMAT) as tar:
        for i in range(3):
            tar.addfile(_info(f"t{i}/f", size=600), io.BytesIO(b"z" * 600))
    body = raw.getvalue()
    cut = body[: 3 * (512 + 1024)]  # three members, no trailing zero blocks
    assert cut + bytes(len(body) - len(cut)) == body
    archive = tmp_path / "cut.tar.zst"
    archive.write_bytes(zstandard.ZstdCompressor().compress(cut))
    with pytest.raises(ShinkenError, match="end-of-archive"):
        extract_tar_zst(archive, tmp_path / "d")
    _assert_nothing_left(tmp_path, tmp_path / "d")


def test_dest_rules(tmp_path: Path) -> None:
    archive = make_tar_zst(tmp_path / "a.tar.zst", [file("t/f", b"1")])
    full = tmp_path / "full"
    full.mkdir()
    (full / "keep").write_text("mine")
    with pytest.raises(ShinkenError, match="not empty"):
        extract_tar_zst(archive, full)
    assert (full / "keep").read_text() == "mine" and sorted(p.name for p in full.iterdir()) == ["keep"]
    empty = tmp_path / "empty"
    empty.mkdir()
    extract_tar_zst(archive, empty)
    assert (empty / "t" / "f").read_bytes() == b"1"
    with pytest.raises(ShinkenError, match="no such archive"):
        extract_tar_zst(tmp_path / "missing.tar.zst", tmp_path / "x")


def test_unthreaded_path_gives_same_tree(tmp_path: Path) -> None:
    src = make_corpus(tmp_path / "src", n=30, seed=9)
    archive = make_archive(src, tmp_path / "a.tar.zst")
    extract_tar_zst(archive, tmp_path / "a", threaded=False)
    extract_tar_zst(archive, tmp_path / "b", threaded=True)
    diff = subprocess.run(["diff", "-r", str(tmp_path / "a"), str(tmp_path / "b")], capture_output=True)
    assert diff.returncode == 0
    diff = subprocess.run(["diff", "-r", str(src), str(tmp_path / "a")], capture_output=True)
    assert diff.returncode == 0


def test_big_member_streams_across_reads(tmp_path: Path) -> None:
    """A member larger than one read (4 MiB) is written in pieces, byte-exact."""
    import hashlib
    import random

    data = random.Random(1).randbytes(9 * 1024 * 1024 + 123)
    archive = make_tar_zst(tmp_path / "a.tar.zst", [file("t/big.bin", data), file("t/after.txt", b"after")])
    extract_tar_zst(archive, tmp_path / "d")
    assert hashlib.sha256((tmp_path / "d/t/big.bin").read_bytes()).digest() == hashlib.sha256(data).digest()
    assert (tmp_path / "d/t/after.txt").read_bytes() == b"after"


_CHILD = """
import sys
from shinken.download.archive import extract_tar_zst
print("start", flush=True)
extract_tar_zst(sys.argv[1], sys.argv[2], threaded=True)
"""


@pytest.fixture(scope="module")
def big_archive(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """4,500 members: long enough an extraction to interrupt in the middle (made once for both signals)."""
    tmp = tmp_path_factory.mktemp("big-archive")
    archive = make_archive(make_corpus(tmp / "src", n=1500, seed=2), tmp / "a.tar.zst")
    shutil.rmtree(tmp / "src")
    return archive


def _filling(tmp_path: Path) -> bool:
    """A partial folder of the extraction exists and has members written into it."""
    for p in tmp_path.iterdir():
        if ".partial-" in p.name:
            try:
                return any(c.name != OWNER_MARKER for c in p.iterdir())
            except OSError:
                return False
    return False


@pytest.mark.parametrize("sig", [signal.SIGINT, signal.SIGKILL])
def test_interrupted_run_leaves_no_tree(tmp_path: Path, sig: int, monkeypatch: pytest.MonkeyPatch,
                                        big_archive: Path) -> None:
    # A private temp-folder registry, so this test sees only its own extraction's folder.
    monkeypatch.setenv("SHINKEN_RUNTIME_DIR", str(tmp_path / "runtime"))
    archive = big_archive
    dest = tmp_path / "dest"
    proc = subprocess.Popen([sys.executable, "-c", _CHILD, str(archive), str(dest)],
                            stdout=subprocess.PIPE, stderr=subprocess.PIPE)
    assert proc.stdout.readline().strip() == b"start"
    # Wait until the temp tree is being filled (members written into it), then interrupt.
    deadline = time.time() + 20
    while time.time() < deadline and not _filling(tmp_path):
        time.sleep(0.005)
    proc.send_signal(sig)
    proc.wait(timeout=30)
    assert not dest.exists() or proc.returncode == 0, "interrupted run left a half DEST"
    if proc.returncode == 0:
        pytest.skip("extraction finished before the signal arrived")  # pragma: no cover
    partials = [p for p in tmp_path.iterdir() if ".partial-" in p.name]
    if sig == signal.SIGINT:
        assert partials == []
    else:
        # SIGKILL cannot clean up: the registered partial folder is what `shinken gc` reclaims ...
        from shinken.reclaim import find_reclaimable

        found = find_reclaimable(None, include_goldens=False, older_than=None, all_=False)
        assert [Path(r.id) for r in found if r.resource == "tempdir"] == [p.resolve() for p in partials]
        # ... and the next run into the same dest sweeps it too.
        extract_tar_zst(archive, dest)
        assert [p for p in tmp_path.iterdir() if ".partial-" in p.name] == []
        assert len(list(dest.iterdir())) == 1500
