"""The verifier: how a fork's reward.py is run so that nothing the policy wrote or left running
can forge its result (docs/integrity.md).

1. One exec that starts as root and first lets the task's own machinery settle (a setup script
   the task started, never a terminal's shell, finishes what the last action set off, within
   SETTLE_S; the policy's processes run on meanwhile, as if verify came that much later), then
   seals the computer (SEAL): every process of a non-root
   uid but those shinken started before handing the computer out (the desktop, the task's apps as
   the setup or the relaunch left them, recorded by `handed_out`; never a shell or another
   interpreter) is frozen (SIGSTOP, until none of them runs), then killed; the kept ones run on,
   so a reward may still read a live app.
2. The same exec, still root, places the reward's files (`placements`, its arguments): reward.py,
   the runner and the verifier's own empty home in a root-owned folder; the judge's files and the
   rollout's web sid in /tmp as root-owned files, whatever the policy left at those paths removed
   first (nothing of the policy runs by then). Files too large for an argument are uploaded
   before the exec instead (`place`).
3. Then it drops to the verifier (guest.VERIFIER_UID, never the policy's uid; it may read every
   file, as root can, and nothing else of root's) and runs reward.py under `python3 -I` (no user
   site, no PYTHON* variables, no working folder on sys.path), a fixed PATH and environment, from
   that folder, through sandbox/reward_runner.py, whose output is the one channel shinken reads.
"""

from __future__ import annotations

import base64
import functools
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
from shinken.sandbox import guest, reward_runner
from shinken.sandbox.api import DiskFull, ExecResult, InfraError
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

# Guest Python shared by the hand-out record and the seal (run as root with python3 -I -S: no
# site, no working folder on sys.path). A process is known by (pid, start time, name, command
# line): a process the policy started has another pid or start time, one it made run something else
# (exec) another name or command line. The name is the kernel's (comm: the executed file's name);
# root here holds no CAP_SYS_PTRACE, so /proc/PID/exe of the user's processes is closed to it. A
# process's uids come from /proc/PID/status: one that made itself non-dumpable shows root as the
# owner of its /proc folder, never in its Uid line. Command interpreters (a terminal's shell,
# python, ...) are never kept: the policy drives them. procs(): pid -> (identity, state, name, parent
# pid, controlling terminal).
_PROCS = r"""
import os, signal, sys, time, zlib
me = os.getpid()
def procs():
    out = {}
    for d in os.listdir('/proc'):
        if not d.isdigit() or int(d) == me:
            continue
        try:
            uids = next(l for l in open(f'/proc/{d}/status') if l.startswith('Uid:')).split()[1:]
            st = open(f'/proc/{d}/stat', 'rb').read()
            cmd = open(f'/proc/{d}/cmdline', 'rb').read()
        except (OSError, StopIteration):
            continue
        rest = st[st.rindex(b')') + 2:].split()
        if all(u == '0' for u in uids) or rest[0] in (b'Z', b'X'):
            continue
        name = st[st.index(b'(') + 1:st.rindex(b')')].decode('utf-8', 'replace')
        out[int(d)] = ([int(d), int(rest[19]), name, f'{len(cmd)}:{zlib.crc32(cmd):08x}'], rest[0].decode(), name,
                       int(rest[1]), int(rest[4]))
    return out
"""

# At hand-out, as root: the identities of the processes shinken started (the desktop, the task's apps:
# `keep`) and of the interpreters among them that no terminal drives (a task's setup script waiting
# on the app it started: `scripts`, let finish at verify, never kept). argv: how long the set of
# processes must hold still first (0: at once; apps launched by replayed steps may still be starting
# their children), and the bound on that wait.
HANDOUT = _PROCS + r"""
import json, re
INTERPRETER = re.compile(r'((ba|da|z|k|mk|tc|c|fi|a)?sh|busybox|python[0-9.]*|perl[0-9.]*|ruby[0-9.]*|node(js)?|'
                         r'lua[0-9.]*|tclsh[0-9.]*|wish[0-9.]*|php[0-9.]*|R|Rscript|gdb|expect|tmux.*|screen|script)')
quiet, bound = float(sys.argv[1]), float(sys.argv[2])
seen, since, end = None, time.monotonic(), time.monotonic() + bound
while True:
    now = procs()
    ids = {tuple(ident[:2]) for ident, *_ in now.values()}
    if ids != seen:
        seen, since = ids, time.monotonic()
    if time.monotonic() - since >= quiet or time.monotonic() >= end:
        break
    time.sleep(0.1)
out = {'keep': [], 'scripts': []}
for ident, state, name, parent, tty in now.values():
    if not INTERPRETER.fullmatch(name):
        out['keep'].append(ident)
    elif tty == 0:
        out['scripts'].append(ident)
print(json.dumps(out))
"""
HANDOUT_BOUND_S = 15.0

# At verify, as root. argv: the hand-out's identities to keep and its scripts (encode_keep), the token
# its report line starts with. First, while a script of the hand-out lives, settle: until two scans
# 10 ms apart find none of them running, no child of theirs that was not handed out (the `mv` after
# the dialog) and no handed-out child of theirs running (the dialog handling the last key), at most
# SETTLE_S. Then every process of a non-root uid not kept is frozen (SIGSTOP, until none runs: a
# fork bomb stops growing), then killed. No json here (its import of re is a third of the seal's
# cost): the report is `token stopped left display free-KiB settle-ms kept-names-hex,...`. The free
# room (what an unprivileged writer may still use on /, /tmp and the user's home, as `df` says it)
# rides along so that an unsolved reward's check of the machine (DockerFork.check_machine) costs no
# exec of its own.
FREE_PATHS = ("/", "/tmp", guest.HOME)
SETTLE_S = 1.0
SEAL = _PROCS + f"FREE_PATHS = {FREE_PATHS!r}\nSETTLE_S = {SETTLE_S!r}\n" + r"""
def ident(field):
    pid, start, name, crc = field.split('/')
    return (int(pid), int(start), bytes.fromhex(name).decode('utf-8', 'replace'), crc)
def idents(arg):
    return {ident(f) for f in arg.split(',') if f}
keep, scripts, token, places = idents(sys.argv[1]), idents(sys.argv[2]), sys.argv[3], sys.argv[4:]
def settling():
    now = procs()
    live = {pid for pid, p in now.items() if tuple(p[0]) in scripts}
    if not live:
        return None
    return any((pid in live and state in 'RD') or
               (parent in live and (tuple(i) not in keep or state in 'RD'))
               for pid, (i, state, name, parent, tty) in now.items())
t0, quiet = time.monotonic(), 0
while scripts and quiet < 2 and time.monotonic() - t0 < SETTLE_S:
    busy = settling()
    if busy is None:
        break
    quiet = 0 if busy else quiet + 1
    if quiet < 2:
        time.sleep(0.01)
settle_ms = int((time.monotonic() - t0) * 1000)
def scan():
    targets, kept = {}, []
    for pid, (ident, state, name, parent, tty) in procs().items():
        if tuple(ident) in keep:
            kept.append(name)
        else:
            targets[pid] = state
    return targets, kept
deadline = time.monotonic() + 10
frozen = set()
left, kept = scan()
while left:
    running = [p for p, s in left.items() if s not in 'Tt']
    frozen.update(left)
    if not running or time.monotonic() > deadline:
        break
    for p in running:
        try:
            os.kill(p, signal.SIGSTOP)
        except OSError:
            pass
    left, kept = scan()
for p in frozen:
    try:
        os.kill(p, signal.SIGKILL)
    except OSError:
        pass
# Until two scans 10 ms apart find none: what a kept app spawns as its child dies goes too.
quiet = 0 if frozen else 2
while quiet < 2 and time.monotonic() < deadline:
    time.sleep(0.01)
    left, kept = scan()
    quiet = 0 if left else quiet + 1
    for p in left:
        try:
            os.kill(p, signal.SIGKILL)
        except OSError:
            pass
# Place the reward's files (PLACE): nothing of the policy runs now, so whatever it left at these
# paths (a file, a link, a folder) is removed and the file made anew, owned by root.
def clear(path):
    try:
        st = os.lstat(path)
    except FileNotFoundError:
        return
    if st.st_mode & 0o170000 != 0o040000:
        os.unlink(path)
        return
    for top, dirs, files in os.walk(path, topdown=False):
        for f in files:
            os.unlink(os.path.join(top, f))
        for d in dirs:
            q = os.path.join(top, d)
            (os.unlink if os.path.islink(q) else os.rmdir)(q)
    os.rmdir(path)
if not left and places:
    import binascii
    try:
        for spec in places:
            path, mode, uid, data = spec.split('|', 3)
            path, mode, uid = bytes.fromhex(path).decode(), int(mode, 8), int(uid)
            if path.endswith('/'):
                path = path.rstrip('/')
                clear(path)
                os.mkdir(path, 0o700)
                os.chown(path, uid, uid)
                os.chmod(path, mode)
                continue
            clear(path)
            fd = os.open(path, os.O_WRONLY | os.O_CREAT | os.O_EXCL | os.O_NOFOLLOW, 0o600)
            try:
                view = memoryview(binascii.a2b_base64(data))
                while view:
                    view = view[os.write(fd, view):]
                os.fchown(fd, uid, uid)
                os.fchmod(fd, mode)
            finally:
                os.close(fd)
    except OSError as exc:
        print(f'{token}-place placing {path} failed: {exc.strerror}', flush=True)
        sys.exit(4)
try:
    free = min(v.f_bavail * v.f_frsize // 1024 for v in map(os.statvfs, FREE_PATHS))
except OSError:
    free = -1
print(token, len(frozen), len(left), int(os.path.exists('/tmp/.X11-unix/X0')), free, settle_ms,
      ','.join(sorted({k.encode().hex() for k in kept})), flush=True)
sys.exit(3 if left else 0)
"""


@dataclass(frozen=True)
class Seal:
    """What sealing a computer did: how many of the policy's processes were stopped, which
    programs were kept (started before the hand-out), whether a display is up for the reward."""

    stopped: int  # -1: not known (the reward's output pushed the report out of the kept tail)
    kept: tuple[str, ...]
    display: bool
    free_kib: int | None = None  # the least free room on FREE_PATHS at the seal; None: not known
    settle_ms: int = 0  # how long the hand-out's scripts were let finish before the seal

    def describe(self) -> str:
        return f"stopped {self.stopped} process(es); kept {', '.join(self.kept) or 'none'}"


SEAL_FAILED = 97  # the exec's status when the seal failed: nothing of the reward ran


def encode_keep(keep: frozenset[Identity]) -> str:
    """Identities of the hand-out as SEAL reads them from its argv."""
    return ",".join(f"{pid}/{start}/{name.encode().hex()}/{crc}" for pid, start, name, crc in sorted(keep))


def _seal_from(res: ExecResult, token: str) -> tuple[Seal, ExecResult]:
    """The seal's report (the line SEAL printed after `token`) and the run without it. InfraError
    when the seal failed (masked, never scored): it left processes alive, or could not run. A
    report the reward's own output pushed out of the kept tail only costs its figures."""
    text = res.output
    at = text.find(token + " ")
    fields: list[str] | None = None
    if at >= 0:
        end = text.find("\n", at)
        end = len(text) if end < 0 else end
        fields = text[at + len(token) + 1:end].split(" ")
        text = text[:at] + text[end + 1:]
    try:
        stopped, left, display, free, settle = (int(x) for x in fields[:5]) if fields else (-1, 0, 0, -1, 0)
        kept = tuple(bytes.fromhex(h).decode("utf-8", "replace") for h in (fields[5].split(",") if fields and
                                                                             len(fields) > 5 and fields[5] else []))
    except ValueError:
        fields, stopped, left, display, free, settle, kept = None, -1, 0, 0, -1, 0, ()
    if left:
        raise InfraError(f"{left} of the policy's processes outlived the kill before the reward")
    if fields is None and res.exit_code == SEAL_FAILED:
        why = res.output.strip()[-300:]
        if "no space left on device" in why.lower():  # placing the reward's files on a full disk
            raise DiskFull(f"placing the reward's files failed: {why}")
        raise InfraError(f"stopping the policy's processes before the reward failed: {why}")
    sealed = Seal(stopped, kept, bool(display), free if free >= 0 else None, settle)
    return sealed, ExecResult(res.exit_code, text, res.timed_out, res.duration_s, res.truncated, res.oom_kills,
                              res.pids_limit_hits)


Identity = tuple[int, int, str, str]  # pid, start time (clock ticks), name (comm), command line's length:crc32


@dataclass(frozen=True)
class HandOut:
    """The processes shinken started in a computer before handing it out: `keep`, what the seal
    keeps (never an interpreter: a terminal's shell is the policy's to drive); `scripts`, the
    interpreters no terminal drives (a task's setup script), let finish before the seal."""

    keep: frozenset[Identity] = frozenset()
    scripts: frozenset[Identity] = frozenset()


def handed_out(box: Container, quiet_s: float = 0.0) -> HandOut:
    """What shinken started in the computer before handing it out (HANDOUT). `quiet_s`: first
    wait (at most HANDOUT_BOUND_S) until no process came or went for that long."""
    res = box.exec(["python3", "-I", "-S", "-c", HANDOUT, str(quiet_s), str(HANDOUT_BOUND_S)],
                   timeout=HANDOUT_BOUND_S + 30, user="root")
    try:
        doc = json.loads(res.output.strip().splitlines()[-1])
        keep, scripts = (frozenset((int(p), int(t), str(e), str(h)) for p, t, e, h in doc[k]) for k in ("keep", "scripts"))
        return HandOut(keep, scripts)
    except (IndexError, ValueError, TypeError, KeyError):
        raise InfraError(f"recording the computer's processes at hand-out failed: {res.output.strip()[-200:]}") from None


@functools.cache
def runner_source() -> bytes:
    """sandbox/reward_runner.py with the score grammar's patterns of needs/reward.py."""
    body = Path(reward_runner.__file__).read_text(encoding="utf-8")  # imported: the workspace wheel carries it
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


def _entries(reward: bytes, extra: dict[str, bytes] | None) -> list[tuple[str, bytes | None, int, int]]:
    """The reward folder's entries (name under the folder's parent, content or None, mode, uid)."""
    top = guest.REWARD_DIR.rsplit("/", 1)[1]
    return [
        (top, None, 0o755, 0), (f"{top}/{REWARD}", reward, 0o644, 0), (f"{top}/{RUNNER}", runner_source(), 0o644, 0),
        (f"{top}/home", None, 0o700, guest.VERIFIER_UID),
        *((f"{top}/{name}", data, 0o644, 0) for name, data in (extra or {}).items()),
    ]


def place(box: Container, reward: bytes, extra: dict[str, bytes] | None = None,
          tmp_files: dict[str, bytes] | None = None) -> None:
    """The reward folder (root-owned: reward.py, the runner, `extra` beside them; the verifier's
    home) and `tmp_files` in /tmp, root-owned and world-readable, through the engine's archive
    upload (files too large for `placements`)."""
    _put(box, guest.REWARD_DIR.rsplit("/", 1)[0] or "/", _tar(_entries(reward, extra)), "placing reward.py")
    if tmp_files:
        _put(box, "/tmp", _tar([(n, d, 0o644, 0) for n, d in tmp_files.items()]),
             f"placing {', '.join(tmp_files)} in /tmp")


# One argument of an exec may hold 128 KiB (the kernel's MAX_ARG_STRLEN); all of them together stay
# well under ARG_MAX. Larger files go through `place`.
PLACE_ARG_MAX = 120_000
PLACE_TOTAL_MAX = 1_000_000


def placements(reward: bytes, extra: dict[str, bytes] | None = None,
               tmp_files: dict[str, bytes] | None = None) -> list[str] | None:
    """What `place` puts, as the seal's arguments (`hex(path)|mode|uid|base64`, a folder's path
    ending in /): the seal writes them after the policy's processes are gone, in the reward's own exec, so
    verify makes no upload of its own. None when a file is too large for an argument."""
    parent = guest.REWARD_DIR.rsplit("/", 1)[0]
    files = [(f"{parent}/{name}", data, mode, uid) for name, data, mode, uid in _entries(reward, extra)]
    files += [(f"/tmp/{name}", data, 0o644, 0) for name, data in (tmp_files or {}).items()]
    out = []
    for path, data, mode, uid in files:
        body = "" if data is None else base64.b64encode(data).decode()
        # the path in hex: the seal's command line names no file (a process of the policy that
        # waits for `reward.py` to show up in a command line must not take the seal for the reward)
        out.append(f"{(path + ('/' if data is None else '')).encode().hex()}|{mode:o}|{uid}|{body}")
        if len(out[-1]) > PLACE_ARG_MAX:
            return None
    return out if sum(map(len, out)) <= PLACE_TOTAL_MAX else None


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
def _seal_then(n: int) -> str:
    """The exec's shell: $1 is SEAL's code, the next `n` arguments SEAL's own (named one by one, so
    the seal's command line holds nothing of the reward's command, which follows them). The exec
    starts in / (the seal makes the verifier's home) and moves there for the reward."""
    mine = " ".join(f'"${{{i}}}"' for i in range(2, 2 + n))
    return (f'python3 -I -S -c "$1" {mine} >&2 || exit {SEAL_FAILED}; shift {1 + n}; '
            f'cd {HOME} || exit {SEAL_FAILED}; exec "$@"')


def run(box: Container, handout: HandOut, env: dict[str, str], timeout: float,
        places: list[str] | None = None) -> tuple[Seal, ExecResult]:
    """Let the hand-out's scripts settle, seal the computer (every non-root process not kept stopped), write `places`
    (`placements`: the reward's files, when `place` did not put them) and run reward.py as the
    verifier through the runner, in one exec; the runner's output is the result."""
    token = "__shinken_seal_" + secrets.token_hex(8)
    mine = (encode_keep(handout.keep), encode_keep(handout.scripts), token, *(places or ()))
    prefix = ("/bin/sh", "-c", _seal_then(len(mine)), "shinken-seal", SEAL, *mine, *VERIFY_AS)
    argv = ["python3", "-I", "-B", f"{guest.REWARD_DIR}/{RUNNER}", f"{guest.REWARD_DIR}/{REWARD}"]
    res = box.exec(argv, timeout=timeout, user="root", env=env, workdir="/", kill_user_on_failure=True,
                   prefix=prefix, replace_env=True)
    return _seal_from(res, token)
