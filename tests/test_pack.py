"""The bundle archive writer (shinken.download.pack): release-shaped, readable by GNU tar, the
stdlib and shinken's own extractor alike, and byte-for-byte reproducible."""

from __future__ import annotations

import os
import subprocess
import tarfile
from pathlib import Path

import pytest
import zstandard

from shinken.download.archive import extract_tar_zst
from shinken.download.pack import PackedFolder, write_tar_zst
from shinken.errors import ShinkenError

LONG = "x" * 90 + ".json"  # with the task folder in front, over ustar's 100-byte name field


def _tree(root: Path) -> list[PackedFolder]:
    a = root / "0018392e-cfed-5e2f-8278-a4580d64a00a"
    b = root / "calc_gsd_044"
    for d in (a, b):
        d.mkdir(parents=True)
    (a / "task.json").write_text('{"id": "0018392e-cfed-5e2f-8278-a4580d64a00a"}')
    (a / "reward.py").write_text("print('REWARD: 0')\n")
    (a / "initial_setup.sh").write_text("#!/bin/sh\ntrue\n")
    (a / "initial_setup.sh").chmod(0o775)
    (a / LONG).write_bytes(os.urandom(3000))
    (b / "config.json").write_text('{"id": "calc_gsd_044", "instruction": "caf\\u00e9"}')
    (b / "empty.txt").write_bytes(b"")
    (b / "data.xlsx").write_bytes(os.urandom(70_000))
    return [PackedFolder(d.name, d, tuple(p.name for p in d.iterdir())) for d in (b, a)]


def test_readers_agree_and_bytes_are_reproducible(tmp_path: Path) -> None:
    folders = _tree(tmp_path / "src")
    st = write_tar_zst(folders, tmp_path / "a.tar.zst")
    assert st.folders == 2 and st.members == 7
    again = write_tar_zst(list(reversed(folders)), tmp_path / "b.tar.zst")  # order of input does not matter
    assert (tmp_path / "a.tar.zst").read_bytes() == (tmp_path / "b.tar.zst").read_bytes() and again.size == st.size
    expected = {f"{f.name}/{n}": (f.path / n).read_bytes() for f in folders for n in f.files}
    # GNU tar lists the same members, sorted, and no folder entries.
    listed = subprocess.run(["tar", "--zstd", "-tf", str(tmp_path / "a.tar.zst")], capture_output=True,
                            text=True, check=True).stdout.split("\n")[:-1]
    assert listed == sorted(expected)
    # The stdlib reads the same bytes, modes 0644/0755, fixed mtime and owner.
    with open(tmp_path / "a.tar.zst", "rb") as raw, zstandard.ZstdDecompressor().stream_reader(raw) as r, \
            tarfile.open(fileobj=r, mode="r|") as t:
        for m in t:
            assert m.isreg() and m.mtime == 0 and m.uid == 0 and m.uname == ""
            assert t.extractfile(m).read() == expected[m.name]
            assert m.mode == (0o755 if m.name.endswith(".sh") else 0o644)
    # shinken's extractor gives back the same tree.
    extract_tar_zst(tmp_path / "a.tar.zst", tmp_path / "out")
    got = {str(p.relative_to(tmp_path / "out")): p.read_bytes() for p in (tmp_path / "out").rglob("*") if p.is_file()}
    assert got == expected
    assert os.stat(tmp_path / "out" / "0018392e-cfed-5e2f-8278-a4580d64a00a" / "initial_setup.sh").st_mode & 0o111


def test_refuses_what_is_not_a_bundle_file(tmp_path: Path) -> None:
    folders = _tree(tmp_path / "src")
    link = folders[1].path / "link"
    link.symlink_to("reward.py")
    bad = PackedFolder(folders[1].name, folders[1].path, folders[1].files + ("link",))
    with pytest.raises(ShinkenError, match="link"):
        write_tar_zst([folders[0], bad], tmp_path / "a.tar.zst")
    with pytest.raises(ShinkenError, match="duplicate"):
        write_tar_zst([folders[0], folders[0]], tmp_path / "a.tar.zst")
    assert not list(tmp_path.glob("*.tar.zst")) and not list(tmp_path.glob(".*tmp*"))  # nothing half-written
