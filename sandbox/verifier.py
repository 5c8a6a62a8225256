"""The verifier: how a fork's reward.py is run so that nothing the policy wrote or left running
can forge its result (docs/integrity.md).

1. `place`: reward.py, the runner and the verifier's own empty home go in a root-owned folder;
   the judge's files and the rollout's web sid go in /tmp as root-owned files, replacing whatever
   the policy left at those paths (none of them can the task's user change or remove).
2. `run`, one exec that starts as root and first seals the computer (SEAL): every process of a
   non-root uid that started after the computer was handed out is frozen (SIGSTOP, until none of
   them runs), then killed; what shinken started before handing it out (the desktop, the task's
   apps as the setup or the relaunch left them) keeps running, so a reward may still read a live
   app. Then the same exec drops to the verifier (guest.VERIFIER_UID, never the policy's uid; it may
   read every file, as root can, and nothing else of root's) and runs reward.py under `python3 -I`
   (no user site, no PYTHON* variables, no working folder on sys.path), a fixed PATH and
   environment, from that folder, through sandbox/reward_runner.py, whose output is the one
   channel shinken reads.
"""

from __future__ import annotations

import io
import json
import secrets
import tarfile
import time
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING

import docker.errors

from shinken.needs.reward import MARKER_PATTERN, NUMBER
from shinken.sandbox import guest
from shinken.sandbox.api import ExecResult, InfraError
from shinken.sandbox.container import infra

if TYPE_CHECKING:
    from shinken.sandbox.container import Container

RUNNER = "run.py"
REWARD = "reward.py"
HOME = f"{guest.REWARD_DIR}/home"  # the verifier's own, empty, its working folder

# The uid drop the reward's exec runs under: root starts it, setpriv (util-linux) leaves only the
# verifier's uid and the one capability it needs (reading every file, as the task's apps wrote it).
VERIFY_AS = ("setpriv", f"--reuid={guest.VERIFIER_UID}", f"--regid={guest.VERIFIER_UID}", "--clear-groups",
             "--inh-caps=-all,+dac_override", "--ambient-caps=-all,+dac_override", "--")

# As root (python3 -I -S: no site, no working folder on sys.path). argv: the uptime (s) when the
# computer was handed out, or -1 when shinken started nothing in it as another user; the token its
# report line starts with. A process's
# uids come from /proc/PID/status: a process that made itself non-dumpable shows root as the owner
# of its /proc folder, never in its Uid line.
SEAL = r"""
import json, os, signal, sys, time
since, token = float(sys.argv[1]), sys.argv[2]
hz = os.sysconf('SC_CLK_TCK')
me = os.getpid()
def scan():
    targets, kept = {}, []
    for d in os.listdir('/proc'):
        if not d.isdigit() or int(d) == me:
            continue
        try:
            uids = next(l for l in open(f'/proc/{d}/status') if l.startswith('Uid:')).split()[1:]
            st = open(f'/proc/{d}/stat', 'rb').read()
        except (OSError, StopIteration):
            continue
        rest = st[st.rindex(b')') + 2:].split()
        state, start = rest[0].decode(), int(rest[19]) / hz
        if all(u == '0' for u in uids) or state in 'ZX':
            continue
        if start > since:
            targets[int(d)] = state
        else:
            kept.append(st[st.index(b'(') + 1:st.rindex(b')')].decode('utf-8', 'replace'))
    return targets, kept
deadline = time.monotonic() + 10
frozen = set()
while True:
    targets, kept = scan()
    running = [p for p, s in targets.items() if s not in 'Tt']
    frozen.update(targets)
    if not running or time.monotonic() > deadline:
        break
    for p in running:
        try:
            os.kill(p, signal.SIGSTOP)
        except OSError:
            pass
for p in frozen:
    try:
        os.kill(p, signal.SIGKILL)
    except OSError:
        pass
while time.monotonic() < deadline:
    left, _ = scan()
    if not left:
        break
    for p in left:
        try:
            os.kill(p, signal.SIGKILL)
        except OSError:
            pass
    time.sleep(0.01)
left, kept = scan()
print(token, json.dumps({'stopped': len(frozen), 'left': len(left), 'kept': sorted(set(kept)),
                         'display': os.path.exists('/tmp/.X11-unix/X0')}))
"""


@dataclass(frozen=True)
class Seal:
    """What sealing a computer did: how many of the policy's processes were stopped, which
    programs were kept (started before the hand-out), whether a display is up for the reward."""

    stopped: int
    kept: tuple[str, ...]
    display: bool

    def describe(self) -> str:
        return f"stopped {self.stopped} process(es); kept {', '.join(self.kept) or 'none'}"


def _seal_from(res: ExecResult, token: str) -> tuple[Seal, ExecResult]:
    """The seal's report (the line SEAL printed after `token`) and the run without it; InfraError
    when the seal did not report (it failed, or left processes alive: masked, never scored)."""
    text = res.output
    at = text.find(token + " ")
    doc = None
    if at >= 0:
        end = text.find("\n", at)
        end = len(text) if end < 0 else end
        try:
            doc = json.loads(text[at + len(token) + 1:end])
        except ValueError:
            doc = None
        text = text[:at] + text[end + 1:]
    if not isinstance(doc, dict):
        raise InfraError(f"stopping the policy's processes before the reward failed (exit {res.exit_code}): "
                         f"{res.output.strip()[-300:]}")
    if doc.get("left"):
        raise InfraError(f"{doc['left']} of the policy's processes outlived the kill before the reward")
    sealed = Seal(int(doc.get("stopped", 0)), tuple(doc.get("kept") or ()), bool(doc.get("display")))
    return sealed, ExecResult(res.exit_code, text, res.timed_out, res.duration_s, res.truncated, res.oom_kills,
                              res.pids_limit_hits)


def uptime(box: Container) -> float:
    """The sandbox's clock for `seal`: seconds since boot, as /proc/PID/stat start times count."""
    res = box.exec(["cat", "/proc/uptime"], timeout=30, user="root")
    try:
        return float(res.output.split()[0])
    except (IndexError, ValueError):
        raise InfraError(f"reading the computer's uptime failed: {res.output.strip()[-200:]}") from None


def runner_source() -> bytes:
    """sandbox/reward_runner.py with the score grammar's patterns of needs/reward.py."""
    body = (Path(__file__).with_name("reward_runner.py")).read_text(encoding="utf-8")
    future = "from __future__ import annotations\n"  # must stay the file's first statement
    head, sep, rest = body.partition(future)
    return (head + sep + f"SHINKEN_MARKER = {MARKER_PATTERN!r}\nSHINKEN_NUMBER = {NUMBER!r}\n" + rest).encode()


def _tar(entries: list[tuple[str, bytes | None, int, int]]) -> bytes:
    """A tar of (name, content or None for a folder, mode, uid) entries, all dated now."""
    buf = io.BytesIO()
    now = int(time.time())
    with tarfile.open(fileobj=buf, mode="w", format=tarfile.PAX_FORMAT) as tar:
        for name, content, mode, uid in entries:
            info = tarfile.TarInfo(name)
            info.mode, info.mtime, info.uid, info.gid = mode, now, uid, uid
            if content is None:
                info.type = tarfile.DIRTYPE
                tar.addfile(info)
            else:
                info.size = len(content)
                tar.addfile(info, io.BytesIO(content))
    return buf.getvalue()


def place(box: Container, reward: bytes, extra: dict[str, bytes] | None = None,
          tmp_files: dict[str, bytes] | None = None) -> None:
    """The reward folder (root-owned: reward.py, the runner, `extra` beside them; the verifier's
    home) and `tmp_files` in /tmp, root-owned and world-readable."""
    top = guest.REWARD_DIR.rsplit("/", 1)[1]
    entries: list[tuple[str, bytes | None, int, int]] = [
        (top, None, 0o755, 0), (f"{top}/{REWARD}", reward, 0o644, 0), (f"{top}/{RUNNER}", runner_source(), 0o644, 0),
        (f"{top}/home", None, 0o700, guest.VERIFIER_UID),
        *((f"{top}/{name}", data, 0o644, 0) for name, data in (extra or {}).items()),
    ]
    _put(box, guest.REWARD_DIR.rsplit("/", 1)[0] or "/", _tar(entries), "placing reward.py")
    if tmp_files:
        _put(box, "/tmp", _tar([(n, d, 0o644, 0) for n, d in tmp_files.items()]),
             f"placing {', '.join(tmp_files)} in /tmp")


def _put(box: Container, folder: str, data: bytes, what: str) -> None:
    try:
        box.api.put_archive(box.id, folder, data)
    except docker.errors.APIError as exc:
        raise infra(what, exc) from None


def environment(box: Container, extra: dict[str, str] | None = None) -> dict[str, str]:
    """The reward's whole environment as shinken sets it (the image's own ENV lies under it): a fixed
    PATH, the verifier's home, the desktop session (the runner drops it when no display is up)."""
    env = {"PATH": guest.PATH, "HOME": HOME, "USER": guest.VERIFIER, "LOGNAME": guest.VERIFIER, "SHELL": "/bin/sh",
           **guest.session_env(box.ids.uid)}
    return {**env, **(extra or {})}


# The exec's first part, as root: SEAL (its report on stderr after a token), then the drop to the
# verifier. A seal that fails ends the exec (97) before anything of the reward runs.
_SEAL_THEN = 'python3 -I -S -c "$1" "$2" "$3" >&2 || exit 97; shift 3; exec "$@"'


def run(box: Container, handed_out_at: float | None, env: dict[str, str], timeout: float) -> tuple[Seal, ExecResult]:
    """Seal the computer and run reward.py (placed) as the verifier through the runner, in one exec;
    the runner's output is the result."""
    token = "__shinken_seal_" + secrets.token_hex(8)
    since = str(-1.0 if handed_out_at is None else handed_out_at)
    prefix = ("/bin/sh", "-c", _SEAL_THEN, "shinken-seal", SEAL, since, token, *VERIFY_AS)
    argv = ["python3", "-I", "-B", f"{guest.REWARD_DIR}/{RUNNER}", f"{guest.REWARD_DIR}/{REWARD}"]
    res = box.exec(argv, timeout=timeout, user="root", env=env, workdir=HOME, kill_user_on_failure=True,
                   prefix=prefix, replace_env=True)
    return _seal_from(res, token)
