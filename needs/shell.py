"""Which programs a shell command (string or argv) calls, statically. Best effort and
conservative: anything dynamic (`$CMD`, globs) is skipped rather than guessed."""

from __future__ import annotations

import re

from shinken.needs import pyscan
from shinken.needs.urls import fetched_url_needs
from shinken.needs.vocab import BROWSERS, GUI_PROGRAMS, SOFFICE_FLAGS

Need = list  # [kind, [alternatives...], where]

_PUNCT = frozenset("();<>|&")
_ASSIGN = re.compile(r"^[A-Za-z_][A-Za-z0-9_]*(\[[^\]]*\])?\+?=")
_EXE_NAME = re.compile(r"^[A-Za-z_][\w.+-]*$")
_BIN_DIRS = ("/usr/bin/", "/bin/", "/usr/local/bin/", "/usr/sbin/", "/sbin/", "/usr/local/sbin/")
_BUILTINS = frozenset(
    "cd echo export set unset source . true false test [ [[ printf read exit return shift eval exec local "
    "declare typeset readonly alias unalias trap wait pushd popd dirs umask ulimit let break continue "
    "getopts hash type command builtin enable shopt jobs fg bg disown kill history caller times : "
    "if then else elif fi for while until do done case esac function select in ! time coproc mapfile "
    "readarray compgen complete".split()
)
# Skip the whole simple command: its words are not programs.
_SKIP_WHOLE = frozenset({"for", "case", "select", "[", "[[", "test", "command", "type", "hash", "which",
                         "local", "declare", "export", "readonly", "alias", "unset", "trap", "let", "read",
                         "echo", "printf", "return", "exit", "shift", "set", "getopts", "ulimit", "umask",
                         "mapfile", "readarray", "kill", "wait", "cd", "pushd", "popd", "source", "."})
# Wrappers that run the next word as the program: name -> options taking a value.
_WRAPPERS: dict[str, frozenset[str]] = {
    "sudo": frozenset({"-u", "-g", "-p", "-C", "-h", "-U", "-r", "-t", "-D"}),
    "env": frozenset({"-u", "-C", "-S"}), "nohup": frozenset(), "nice": frozenset({"-n"}),
    "timeout": frozenset({"-s", "-k", "--signal", "--kill-after"}), "stdbuf": frozenset({"-i", "-o", "-e"}),
    "setsid": frozenset(), "ionice": frozenset({"-c", "-n", "-p"}), "xvfb-run": frozenset({"-a", "-s", "-n"}),
    "dbus-launch": frozenset(), "dbus-run-session": frozenset(), "runuser": frozenset({"-u", "-g"}),
    "su": frozenset({"-c", "-s", "-g"}), "chroot": frozenset(), "exec": frozenset({"-a"}), "time": frozenset(),
    "flock": frozenset({"-w", "-E"}), "taskset": frozenset(),
}
_NEEDS_ARG0 = frozenset({"sudo", "xvfb-run", "dbus-launch", "dbus-run-session", "flock", "taskset", "ionice",
                         "stdbuf", "setsid", "timeout", "nice", "nohup", "env", "runuser"})
# Keywords after which the next word is a command (`then rm x`, `do gzip $f`).
_PREFIX_KEYWORDS = frozenset({"$", "!", "then", "do", "else", "elif", "if", "while", "until", "{", "time"})
_SHELLS = frozenset({"bash", "sh", "dash", "zsh", "ksh"})
_PYTHON = re.compile(r"^python(3(\.\d+)?)?$")
_INSTALLERS = {"pip": "install", "pip3": "install", "apt-get": "install", "apt": "install", "npm": "install",
               "conda": "install", "snap": "install", "uv": "pip"}
# Programs whose URL arguments are fetched (a URL handed to `echo` or written to a file is data).
_FETCHERS = frozenset({"curl", "wget", "aria2c", "http", "https", "xh", "lynx", "links", "w3m"})
_GIT_REMOTE = frozenset({"clone", "fetch", "pull", "push", "ls-remote"})
_URL_OPENERS = frozenset({"xdg-open", "sensible-browser", "x-www-browser", "gio", "gnome-www-browser"})
_VAR = re.compile(r"\$(?:\{([A-Za-z_][A-Za-z0-9_]*)\}|([A-Za-z_][A-Za-z0-9_]*))")


def _expand(word: str, variables: dict[str, str] | None) -> str:
    if not variables or "$" not in word:
        return word
    return _VAR.sub(lambda m: variables.get(m.group(1) or m.group(2), m.group(0)), word)


def _url_args(args: list[str], where: str, variables: dict[str, str] | None) -> list[Need]:
    out: list[Need] = []
    for a in args:
        if "://" in a or "$" in a:
            out.extend(fetched_url_needs(_expand(a, variables), where))
    return out


_TOKEN = re.compile(
    r"""(#[^\n]*)"""  # a comment (only where a word could start)
    r"""|((?:[^\s;&|()<>'"\\]|\\[\s\S]|'[^']*'|"(?:\\[\s\S]|[^"\\])*")+)"""  # a word, quotes kept
    r"""|([;&|()<>]+|\n)"""  # operators, glued like shlex's punctuation_chars; newline ends a command
)
_UNQUOTE = re.compile(r"""'([^']*)'|"((?:\\[\s\S]|[^"\\])*)"|\\([\s\S])""")


def _unquote(word: str) -> str:
    if "'" not in word and '"' not in word and "\\" not in word:
        return word
    return _UNQUOTE.sub(lambda m: m.group(1) if m.group(1) is not None else
                        (m.group(2) if m.group(2) is not None else m.group(3)), word)


def tokenize(cmd: str) -> list[str]:
    """Shell words and operators by one C-level regex (shlex is ~10x slower, and the
    words in command position are all triage needs). Unbalanced quotes degrade to words."""
    out: list[str] = []
    for m in _TOKEN.finditer(cmd.replace("\\\n", " ")):
        if m.group(2) is not None:
            out.append(_unquote(m.group(2)))
        elif m.group(3) is not None:
            out.append(";" if m.group(3) == "\n" else m.group(3))
    return out


def _simple_commands(tokens: list[str]) -> list[list[str]]:
    out: list[list[str]] = []
    cur: list[str] = []
    skip_next = False
    for tok in tokens:
        if skip_next:
            skip_next = False
            continue
        if tok and all(c in _PUNCT for c in tok):
            # shlex glues adjacent punctuation (`);`, `>&`): split roles by character.
            if "<" in tok or ">" in tok:
                skip_next = not tok.endswith("&") or tok in (">&", "<&")
            if any(c in ";|()&" for c in tok.replace(">&", "").replace("<&", "").replace("&>", "")):
                if cur:
                    out.append(cur)
                cur = []
        elif tok in ("{", "}", "!"):
            if cur:
                out.append(cur)
            cur = []
        else:
            cur.append(tok)
    if cur:
        out.append(cur)
    return out


def argv_needs(argv: list[str], where: str, functions: frozenset[str] = frozenset(), depth: int = 0,
               variables: dict[str, str] | None = None) -> list[Need]:
    """Needs of one simple command given as words (`variables`: the script's plain
    assignments, expanded in the URL arguments of fetchers and browsers)."""
    needs: list[Need] = []
    i = 0
    while i < len(argv) and (_ASSIGN.match(argv[i]) or argv[i] in _PREFIX_KEYWORDS):
        i += 1
    while i < len(argv):
        word = argv[i]
        base = word.rsplit("/", 1)[-1] if word.startswith(_BIN_DIRS) else word
        if base in _WRAPPERS and base != "su":
            if base in _NEEDS_ARG0:
                needs.append(["exe", [base], where])
            opts = _WRAPPERS[base]
            i += 1
            while i < len(argv):
                w = argv[i]
                if base == "timeout" and not w.startswith("-") and re.match(r"^[\d.]+[smhd]?$", w):
                    i += 1
                    break
                if _ASSIGN.match(w):  # sudo/env VAR=value
                    i += 1
                    continue
                if w == "--":
                    i += 1
                    break
                if w.startswith("-"):
                    i += 2 if w in opts else 1
                    continue
                break
            continue
        break
    if i >= len(argv) or depth > 4:
        return needs
    exe, args = argv[i], argv[i + 1 :]
    if exe in _SKIP_WHOLE or exe in functions:
        return needs
    if exe.startswith(("/", "./", "~", "../")):
        if not exe.startswith(_BIN_DIRS):
            return needs  # a script the bundle downloads; its interpreter is what matters
        exe = exe.rsplit("/", 1)[-1]
    if exe in _BUILTINS or not _EXE_NAME.match(exe):
        return needs
    if exe in GUI_PROGRAMS:
        apps = GUI_PROGRAMS[exe]
        if exe in ("soffice", "libreoffice"):
            for a in args:
                if a in SOFFICE_FLAGS:
                    apps = (SOFFICE_FLAGS[a],)
        needs.append(["app", list(apps), f"{where}: {exe}"])
        if set(apps) & BROWSERS:
            needs.extend(_url_args(args, f"{where}: {exe}", variables))  # the page it opens
        return needs
    if exe in _URL_OPENERS and any("://" in _expand(a, variables) for a in args):
        needs.append(["app", sorted(BROWSERS), f"{where}: {exe}"])
        needs.extend(_url_args(args, f"{where}: {exe}", variables))
        return needs
    needs.append(["exe", [exe], where])
    if exe in _FETCHERS:
        needs.extend(_url_args(args, f"{where}: {exe}", variables))
    elif exe == "git" and args and args[0] in _GIT_REMOTE:
        found = _url_args(args, f"{where}: git {args[0]}", variables)
        needs.extend(found or [["network", [f"git {args[0]}"], where]])
    if exe in _SHELLS:
        for j, a in enumerate(args):
            if a == "-c" and j + 1 < len(args):
                needs.extend(command_needs(args[j + 1], where, depth=depth + 1))
                break
            if a.startswith("-c") is False and not a.startswith("-"):
                break
    elif _PYTHON.match(exe):
        for j, a in enumerate(args):
            if a == "-m" and j + 1 < len(args):
                mod = args[j + 1].split(".")[0]
                needs.append(["module", [mod], f"{where}: -m {args[j + 1]}"])
                if mod == "pip" and "install" in args[j + 2 :]:
                    needs.append(["network", ["pip install"], where])
                break
            if a == "-c" and j + 1 < len(args):
                for name in pyscan.regex_imports(args[j + 1].encode()):
                    needs.append(["module", [name], f"{where}: -c"])
                break
            if not a.startswith("-"):
                break
    elif exe in _INSTALLERS and _INSTALLERS[exe] in args:
        needs.append(["network", [f"{exe} {_INSTALLERS[exe]}"], where])
    return needs


def command_needs(cmd: str | list[str], where: str, depth: int = 0) -> list[Need]:
    """Needs of an execute/launch command: argv list or shell string."""
    if isinstance(cmd, list):
        argv = [a for a in cmd if isinstance(a, str)]
        return argv_needs(argv, where, depth=depth) if argv else []
    needs: list[Need] = []
    variables: dict[str, str] = {}
    for sc in _simple_commands(tokenize(cmd)):
        _assignments(sc, variables)
        needs.extend(argv_needs(sc, where, depth=depth, variables=variables))
    return needs


def _assignments(sc: list[str], variables: dict[str, str]) -> None:
    """`URL=https://x` (alone or `export URL=...`): remembered for later expansion."""
    words = sc[1:] if sc and sc[0] in ("export", "readonly", "local", "declare") else sc
    if words and all(_ASSIGN.match(w) for w in words):
        for w in words:
            name, _, value = w.partition("=")
            variables[name.rstrip("+")] = _expand(value, variables)


_HEREDOC = re.compile(r"<<-?\s*(['\"]?)([A-Za-z_][A-Za-z0-9_]*)\1")
_FUNC = re.compile(r"^\s*(?:function\s+([\w-]+)|([\w-]+)\s*\(\s*\))", re.M)


def script_needs(text: str, where: str) -> list[Need]:
    """Needs of a shell script: its simple commands (one tokenizer pass over the whole
    text), heredoc bodies skipped, functions the script defines ignored."""
    functions = frozenset(a or b for a, b in _FUNC.findall(text)) if "(" in text or "function" in text else frozenset()
    if "<<" in text:
        kept: list[str] = []
        end_marker: str | None = None
        for line in text.splitlines():
            if end_marker is not None:
                if line.strip() == end_marker:
                    end_marker = None
                continue
            m = _HEREDOC.search(line)
            if m:
                end_marker = m.group(2)
                line = line[: m.start()]
            kept.append(line)
        text = "\n".join(kept)
    needs: list[Need] = []
    seen: set[str] = set()
    variables: dict[str, str] = {}
    for sc in _simple_commands(tokenize(text)):
        _assignments(sc, variables)
        head = sc[0]
        if head in seen or head in _SKIP_WHOLE or _DYNAMIC.search(head):
            continue  # repeated, a builtin that runs nothing, or computed (`$CMD`, globs)
        found = argv_needs(sc, where, functions, variables=variables)
        if (len(found) == 1 and found[0][1][0] == head and head not in _WRAPPERS and head not in _SHELLS
                and head not in _INSTALLERS and head not in _FETCHERS and head != "git" and not _PYTHON.match(head)):
            seen.add(head)  # plain `head args`: the same result every time
        needs.extend(found)
    return needs


_DYNAMIC = re.compile(r"[*?$`\\[]")
