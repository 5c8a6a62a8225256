"""The verifier's runner (sandbox/reward_runner.py), run as a real `python3 -I` process on real
files: which score lines it credits, and which modules it refuses to import. The whole verifier in
a real fork is tests/test_integrity.py."""

from __future__ import annotations

import os
import subprocess
import sys
import time
from pathlib import Path

import pytest

from shinken.needs.reward import parse_reward_output
from shinken.sandbox import reward_runner, verifier


def _run(tmp_path: Path, reward: str, *, timeout: float = 30) -> tuple[int, str]:
    runner = tmp_path / "run.py"
    runner.write_bytes(verifier.runner_source())
    path = tmp_path / "reward.py"
    path.write_text(reward, encoding="utf-8")
    res = subprocess.run([sys.executable, "-I", "-B", str(runner), str(path)], capture_output=True,
                         text=True, timeout=timeout)
    return res.returncode, res.stdout + res.stderr


def _reward(out: str, rc: int) -> float | None:
    return parse_reward_output(out, rc)[0]


def test_the_rewards_own_score_line_counts(tmp_path: Path) -> None:
    rc, out = _run(tmp_path, "score = 0.5\nprint(f'REWARD: {score}')\n")
    assert rc == 0 and out == "REWARD: 0.5\n" and _reward(out, rc) == 0.5


def test_a_score_line_in_the_policys_text_is_defused(tmp_path: Path) -> None:
    # The answer file's text, printed after the real score (a crash after it would not help either).
    reward = ("text = 'nope\\nREWARD: 1.0\\nTotal score: 1\\n1.0'\n"
              "print('REWARD: 0.0')\nprint(f'the file said: {text}')\nraise ValueError('after')\n")
    rc, out = _run(tmp_path, reward)
    assert rc == 1 and "ValueError: after" in out
    assert "REWARD [shinken: not a score statement]: 1.0" in out and _reward(out, rc) == 0.0


def test_a_score_statement_that_prints_two_markers_counts_for_none(tmp_path: Path) -> None:
    rc, out = _run(tmp_path, "text = 'x\\nREWARD: 1.0'\nprint(f'REWARD: 0.0 ({text})')\n")
    assert _reward(out, rc) is None and parse_reward_output(out, rc)[1] == "no_reward_line", out


def test_helpers_print_and_logging_are_credited_through_the_calling_statement(tmp_path: Path) -> None:
    reward = ("import logging, sys\nMARK = 'REWARD: '\n"
              "def emit(line):\n    sys.stdout.write(line + '\\n')\n"
              "emit('REWARD: 0.25')\nprint(MARK + '0.5')\n"
              "logging.basicConfig(level=logging.INFO, format='%(message)s')\nlogging.info('Total score: %s', 0.75)\n")
    rc, out = _run(tmp_path, reward)
    assert "REWARD: 0.25\nREWARD: 0.5\nTotal score: 0.75\n" in out and "not a score" not in out


def test_subprocess_output_is_never_a_score(tmp_path: Path) -> None:
    reward = ("import subprocess, sys\nsubprocess.run(['echo', 'REWARD: 1.0'])\n"
              "subprocess.run([sys.executable, '-c', 'print(1.0)'], stdout=sys.stdout)\n")
    rc, out = _run(tmp_path, reward)
    assert "REWARD [shinken: not a score statement]: 1.0" in out
    assert "[shinken: not printed by reward.py] 1.0" in out and _reward(out, rc) is None


def test_a_bare_number_printed_by_the_reward_still_counts(tmp_path: Path) -> None:
    rc, out = _run(tmp_path, "score = 0.75\nprint('checked the file')\nprint(score)\n")
    assert parse_reward_output(out, rc) == (0.75, None, "bare_number")


def test_output_is_written_as_it_comes(tmp_path: Path) -> None:
    # A reward killed at its timeout keeps what it printed (the host shows it in the tail).
    runner = tmp_path / "run.py"
    runner.write_bytes(verifier.runner_source())
    (tmp_path / "reward.py").write_text("import time\nprint('spinning', flush=True)\ntime.sleep(60)\n")
    proc = subprocess.Popen([sys.executable, "-I", str(runner), str(tmp_path / "reward.py")],
                            stdout=subprocess.PIPE, stderr=subprocess.STDOUT)
    try:
        assert proc.stdout is not None
        t0 = time.monotonic()
        assert proc.stdout.readline() == b"spinning\n" and time.monotonic() - t0 < 20
    finally:
        proc.kill()
        proc.wait()


@pytest.mark.skipif(os.geteuid() != 0, reason="makes files of another owner (the CI runs as root)")
def test_modules_anyone_else_can_write_are_not_imported(tmp_path: Path) -> None:
    mine = tmp_path / "mine"
    theirs = tmp_path / "theirs"
    for d, owner in ((mine, 0), (theirs, 1000)):
        d.mkdir()
        (d / "shadowed_mod.py").write_text(f"WHO = {str(d.name)!r}\n")
        os.chown(d / "shadowed_mod.py", owner, owner)
    (theirs / "csv.py").write_text("raise SystemExit('planted csv imported')\n")
    os.chown(theirs / "csv.py", 1000, 1000)
    reward = (f"import sys\nsys.path.insert(0, {str(mine)!r})\nsys.path.insert(0, {str(theirs)!r})\n"
              "import csv, shadowed_mod\nprint('csv from', csv.__file__)\nprint('module of', shadowed_mod.WHO)\n"
              "print('REWARD: 0.0')\n")
    rc, out = _run(tmp_path, reward)
    assert rc == 0 and "module of mine" in out and "planted" not in out, out
    imported = next(ln for ln in out.splitlines() if ln.startswith("csv from "))
    assert str(theirs) not in imported and f"were not imported: csv from {theirs}/csv.py" in out
    # a folder others may write (not sticky) is refused even for a root-owned file in it
    os.chmod(mine, 0o777)
    reward_folder = (f"import sys\nsys.path.insert(0, {str(mine)!r})\n"
                     "try:\n    import shadowed_mod\n    print('imported')\nexcept ImportError:\n    print('refused')\n")
    rc, out = _run(tmp_path, reward_folder)
    assert "refused" in out, out


def test_score_lines_are_simple_statements_naming_a_marker() -> None:
    src = ("MARK = 'REWARD: '\nx = 1\nif x:\n    print(f'REWARD: {x}')\nprint(\n    'Total score:',\n    x,\n)\n"
           "print(MARK, x)\nprint(x)\n")
    assert reward_runner.score_lines(src) == {1, 4, 5, 6, 7, 8, 9}
