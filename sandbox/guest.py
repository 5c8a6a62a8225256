"""Shell and Python snippets shinken runs INSIDE sandbox containers. Kept as constants
so each exec is one round trip (no script upload) and the host never runs bundle code."""

from __future__ import annotations

from shinken.bundles.model import TASK_HOME as HOME  # the task machine's home

USER = "user"  # the unprivileged account untrusted code runs as (images/core creates it)
REWARD_DIR = "/opt/shinken-reward"  # root-owned; reward.py is readable, not writable, by `user`
# The verifier: the uid reward.py runs as, never the policy's. The images name it (the D-Bus
# session and accessibility buses let it in by that name); a task image without the entry still
# runs rewards as this number (docs/integrity.md).
VERIFIER = "shinken-verifier"
VERIFIER_UID = 64999
# Every exec's PATH: the image's root-owned folders only (`shinken image audit` checks that
# `user` can write none of them).
PATH = "/usr/local/sbin:/usr/local/bin:/usr/sbin:/usr/bin:/sbin:/bin"


def session_env(uid: int) -> dict[str, str]:
    """The desktop session's settings (what shinken-desktop-up starts the session with), given
    to every exec through its own environment. Constants: no exec ever reads them from a file
    in the sandbox, which the policy could write."""
    run = f"/tmp/runtime-{uid}"
    return {
        "DISPLAY": ":0", "XDG_RUNTIME_DIR": run, "DBUS_SESSION_BUS_ADDRESS": f"unix:path={run}/bus",
        "NO_AT_BRIDGE": "0", "GTK_MODULES": "gail:atk-bridge", "ACCESSIBILITY_ENABLED": "1",
        "GNOME_ACCESSIBILITY": "1", "QT_ACCESSIBILITY": "1", "QT_LINUX_ACCESSIBILITY_ALWAYS_ON": "1",
        "GSETTINGS_BACKEND": "memory", "LIBGL_ALWAYS_SOFTWARE": "1", "XDG_SESSION_TYPE": "x11",
    }

# Every exec runs under this wrapper: `bash -c OUTER shinken <timeout> <nonce> <kill> argv...`.
# It reads the container cgroup's OOM-kill and pids-limit counters before and after (bash
# builtins only: after a fork bomb no fork may be possible), runs the command under `timeout -s KILL` (which kills the command's whole process
# group) and prints one marker line `<nonce> <rc> <oom kills> <pids-limit hits>` on
# stderr. The nonce is random per exec, so command output cannot forge the marker.
# It reads no file the policy can write: the session settings come in the exec's environment
# (session_env), never from a file in /tmp (a function `timeout` defined there once ran every
# exec, root's and the reward's included, as the policy's code).
# The command's stdout goes to stderr too: the daemon copies the two streams separately,
# so only one stream keeps the command's output strictly before the marker (and in
# write order); ExecResult.output is the combined output anyway.
# With <kill> = 1 (reward runs), a run killed at its timeout or one that hit a limit is
# followed by `kill -KILL -1` from the wrapper itself: every process of the exec's user
# dies, a fork bomb that left the timeout's process group with setsid() included. The
# builtin needs no new process; a separate `docker exec kill` does, and a bomb holding
# the pids limit denies it one (on a loaded machine, for longer than any timeout).
OUTER = r"""T=$1; N=$2; K=$3; shift 3
rd() { RV=0; local k x; if [ -r "$1" ]; then while read -r k x; do if [ "$k" = "$2" ]; then RV=$x; fi; done < "$1"; fi; }
of=/sys/fs/cgroup/memory/memory.oom_control; [ -r $of ] || of=/sys/fs/cgroup/memory.events
pf=/sys/fs/cgroup/pids/pids.events; [ -r $pf ] || pf=/sys/fs/cgroup/pids.events
rd $of oom_kill; o0=$RV; rd $pf max; p0=$RV
exec 3>&2 2>/dev/null  # no "Killed" job notice from this shell in the command's output
command timeout -s KILL "$T" "$@" >&3 2>&3 3>&-; rc=$?
exec 2>&3 3>&-
rd $of oom_kill; o1=$RV; rd $pf max; p1=$RV
if [ "$K" = 1 ] && { [ "$rc" = 137 ] || [ "$o1" != "$o0" ] || [ "$p1" != "$p0" ]; }; then kill -KILL -1; fi
printf '\n%s %d %d %d\n' "$N" "$rc" $((o1-o0)) $((p1-p0)) >&2
"""

# Desktop forks start the desktop as the container's own command, so it comes up while
# the client is still on its way back from `start`; `DESKTOP_WAIT` (one exec) then waits
# for the exit status file. (Root runs it; shinken-desktop-up drops to `user` itself.)
# A golden whose build container was kept as a computer holds, in /tmp/.shinken-hidden, the build
# session's files that were moved aside for the commit (see SNAPSHOT): stale here, so removed first.
HIDDEN = "/tmp/.shinken-hidden"  # in a golden image: removed when a fork boots (DESKTOP_BOOT)
DESKTOP_BOOT = f"rm -rf {HIDDEN}\n" + r"""shinken-desktop-up >/tmp/.shinken-desktop-boot.log 2>&1; echo $? > /tmp/.shinken-desktop-boot.tmp
mv -f /tmp/.shinken-desktop-boot.tmp /tmp/.shinken-desktop-boot.rc
exec sleep infinity
"""
DESKTOP_WAIT = r"""exec {z}<> <(:)
until [ -e /tmp/.shinken-desktop-boot.rc ]; do read -r -t 0.005 -u $z || true; done
read -r rc < /tmp/.shinken-desktop-boot.rc
if [ "$rc" != 0 ]; then cat /tmp/.shinken-desktop-boot.log; fi
exit "$rc"
"""

# A launched program gets its own session (setsid) so everything it spawns is
# attributable at commit time: the session id is written to /tmp/.shinken-launch/<sid>.
LAUNCH = r"""mkdir -p /tmp/.shinken-launch 2>/dev/null
echo $$ > /tmp/.shinken-launch/$$
exec "$@" >> /tmp/.shinken-launch/$$.log 2>&1 < /dev/null
"""

# `open`: the file's desktop app by extension when installed, else xdg-open.
OPEN = r"""f=$1
have() { command -v "$1" >/dev/null 2>&1; }
lo=; have libreoffice && lo=libreoffice; [ -z "$lo" ] && have soffice && lo=soffice
case "${f,,}" in
  *.xlsx|*.xls|*.ods|*.csv) [ -n "$lo" ] && exec $lo --calc "$f" ;;
  *.docx|*.doc|*.odt|*.rtf) [ -n "$lo" ] && exec $lo --writer "$f" ;;
  *.pptx|*.ppt|*.odp) [ -n "$lo" ] && exec $lo --impress "$f" ;;
  *.pdf) for a in evince okular xdg-open; do have $a && exec $a "$f"; done ;;
  *.png|*.jpg|*.jpeg|*.xcf) have gimp && exec gimp "$f" ;;
  *.mp4|*.mkv|*.mp3|*.avi) have vlc && exec vlc "$f" ;;
  *.txt|*.py|*.md|*.json) for a in gedit code xdg-open; do have $a && exec $a "$f"; done ;;
esac
have xdg-open && exec xdg-open "$f"
echo "shinken: no application to open $f" >&2; exit 127
"""

# Process snapshot at commit time (python3 is part of the image contract; procps is not).
# Prints JSON: every live process except this snapshot's own ancestry, the launched
# session ids, then takes away files that would make a fork's restarted apps misbehave:
# the X server's lock/socket of the build container and stale LibreOffice lock files.
# CLEAN = "delete" removes them; CLEAN = "hide" moves them into HIDDEN (same filesystem, so
# a rename: sockets keep working) and prints the moves, so UNHIDE puts them back after the
# commit and the build container goes on as a working computer (the golden's own).
SNAPSHOT = r"""
import json, os, glob
def stat(pid):
    st = open(f'/proc/{pid}/stat', 'rb').read()
    rest = st[st.rindex(b')') + 2:].split()
    return rest[0].decode(), int(rest[1]), int(rest[3]), st[st.index(b'(') + 1:st.rindex(b')')].decode('utf-8', 'replace')
procs, mine = [], set()
p = os.getpid()
while p > 1:
    mine.add(p)
    try:
        p = stat(p)[1]
    except OSError:
        break
for d in os.listdir('/proc'):
    if not d.isdigit() or int(d) in mine:
        continue
    try:
        state, ppid, sid, comm = stat(d)
        args = open(f'/proc/{d}/cmdline', 'rb').read().replace(b'\0', b' ').strip().decode('utf-8', 'replace')
    except (OSError, ValueError, IndexError):
        continue
    if state != 'Z':
        procs.append({'pid': int(d), 'ppid': ppid, 'sid': sid, 'args': args or f'[{comm}]'})
try:
    launched = sorted(int(x) for x in os.listdir('/tmp/.shinken-launch') if x.isdigit())
except OSError:
    launched = []
moved = []
if CLEAN:
    if CLEAN == 'hide':
        os.makedirs(HIDDEN, mode=0o700, exist_ok=True)
    for pat in ('/tmp/.shinken-desktop-boot.*', '/tmp/.X*-lock', '/tmp/.X11-unix/X*', '/tmp/runtime-*/bus', '/tmp/.shinken-launch/*',
                '/home/user/**/.~lock.*#'):
        for f in glob.glob(pat, recursive=True):
            try:
                if CLEAN == 'hide':
                    to = os.path.join(HIDDEN, str(len(moved)))
                    os.rename(f, to)
                    moved.append([to, f])
                else:
                    os.unlink(f)
            except OSError:
                pass
print(json.dumps({'procs': procs, 'launched': launched, 'moved': moved}))
"""


def snapshot_script(clean: str | None) -> str:
    """clean: None (look only), "delete" or "hide" (see SNAPSHOT)."""
    return f"CLEAN = {clean!r}\nHIDDEN = {HIDDEN!r}\n" + SNAPSHOT


# Puts back what SNAPSHOT hid (argv: JSON list of [hidden, original]), then removes HIDDEN.
UNHIDE = r"""
import json, os, sys
for hidden, original in json.loads(sys.argv[1]):
    os.rename(hidden, original)
os.rmdir(sys.argv[2])
"""


FETCH_URL = r"""
import sys, urllib.request
url, dest = sys.argv[1], sys.argv[2]
with urllib.request.urlopen(url, timeout=60) as r, open(dest, 'wb') as f:
    while True:
        b = r.read(1 << 20)
        if not b:
            break
        f.write(b)
"""
