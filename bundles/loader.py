"""Load one task folder or a whole task root into `Bundle`s. A bad bundle never stops
the load: it becomes a typed `Defect` with its path."""

from __future__ import annotations

import errno
import hashlib
import os
import shlex
from pathlib import Path
from typing import Any, Callable

import fastjsonschema
import orjson

from shinken.bundles.model import (
    KNOWN_STEP_TYPES,
    TASK_FILE_NAMES,
    TASK_HOME,
    Bundle,
    Defect,
    SetupStep,
)
from shinken.errors import ShinkenError
from shinken.schemas import load_schema, validator

KNOWN_TOP_LEVEL = frozenset(
    {
        "id", "instruction", "app_type", "difficulty", "config", "evaluator", "ground_truth",
        "snapshot", "source", "related_apps", "proxy", "possibility_of_env_change", "trajectory",
        "generated_at", "adversarial_rounds", "reject", "train_poor_fit", "revised_query",
        "shinken_state_fidelity", "shinken_post_fork", "shinken_needs",
    }
)
MAX_TASK_FILE = 16 * 1024 * 1024  # a task.json is a few KB; refuse to parse giants
MAX_BUNDLE_FILE = 512 * 1024 * 1024


def _step_validators() -> dict[str, Any]:
    schema = load_schema("task")
    out = {}
    for kind, ref in (("download", "download"), ("execute", "command"), ("launch", "command"),
                      ("open", "open"), ("sleep", "sleep")):
        out[kind] = fastjsonschema.compile({"$ref": f"#/definitions/{ref}", "definitions": schema["definitions"]})
    return out


_STEP_VALIDATORS: dict[str, Any] | None = None


def _step_validator(kind: str) -> Callable[[Any], Any] | None:
    global _STEP_VALIDATORS
    if _STEP_VALIDATORS is None:
        _STEP_VALIDATORS = _step_validators()
    return _STEP_VALIDATORS.get(kind)


_SMALL_READ = 60 * 1024  # one read covers nearly every bundle file; below malloc's mmap threshold
_OPEN_FLAGS = os.O_RDONLY | os.O_NOFOLLOW | os.O_CLOEXEC | os.O_NONBLOCK  # never block on a FIFO swapped in
_ZERO_DIGEST = b"\0" * 32


def _read_file(path: str, keep_limit: int) -> tuple[int, bytes, bytes | None]:
    """(size, sha256 digest, content if size <= keep_limit else None). One open and
    usually one read per file: this loop runs ~33k times for the release."""
    fd = os.open(path, _OPEN_FLAGS)
    try:
        data = os.read(fd, _SMALL_READ)
        if len(data) < _SMALL_READ:  # a short read on a regular file is EOF
            return len(data), hashlib.sha256(data).digest(), data
        size = os.fstat(fd).st_size
        if size > MAX_BUNDLE_FILE:
            raise _TooLarge(size)
        h = hashlib.sha256(data)
        keep = [data] if size <= keep_limit else None
        total = len(data)
        while True:
            block = os.read(fd, 1 << 20)
            if not block:
                break
            total += len(block)
            if total > MAX_BUNDLE_FILE:
                raise _TooLarge(total)
            h.update(block)
            if keep is not None:
                keep.append(block)
        return total, h.digest(), (b"".join(keep) if keep is not None and total <= keep_limit else None)
    finally:
        os.close(fd)


class _TooLarge(Exception):
    def __init__(self, size: int) -> None:
        super().__init__(size)
        self.size = size


def _scan_files(folder: str, defects: list[Defect]) -> tuple[dict[str, int], dict[str, bytes], dict[str, bytes]]:
    """Regular files directly in the bundle folder, read once: sizes, sha256 digests and
    the content of the small ones (task file, reward). Symlinks are never followed."""
    files: dict[str, int] = {}
    digests: dict[str, bytes] = {}
    contents: dict[str, bytes] = {}
    try:
        with os.scandir(folder) as it:
            entries = list(it)
    except OSError as exc:
        defects.append(Defect("unreadable", f"cannot list folder: {exc.strerror}", folder))
        return files, digests, contents
    for entry in entries:
        try:
            if entry.is_symlink():
                defects.append(Defect("unsafe_link", "symlink inside a bundle is not followed", entry.path))
                continue
            if not entry.is_file(follow_symlinks=False):
                continue  # folders, sockets, FIFOs: not part of a bundle
        except OSError as exc:
            defects.append(Defect("unreadable", f"cannot stat: {exc.strerror}", entry.path))
            continue
        name = entry.name
        try:
            name.encode("utf-8")
        except UnicodeEncodeError:  # it would end up in UTF-8 reports: the bundle is defective, not the run
            defects.append(Defect("unreadable", "file name is not UTF-8; rename it", shown_path(entry.path)))
            continue
        try:
            size, digest, data = _read_file(entry.path, MAX_TASK_FILE if name in TASK_FILE_NAMES else _SMALL_READ)
        except _TooLarge as exc:
            defects.append(Defect("too_large", f"{exc.size} bytes > {MAX_BUNDLE_FILE}", entry.path))
            continue
        except OSError as exc:
            if exc.errno == errno.ELOOP:  # became a symlink after the scan
                defects.append(Defect("unsafe_link", "symlink inside a bundle is not followed", entry.path))
                continue
            defects.append(Defect("unreadable", f"cannot read: {exc.strerror}", entry.path))
            files[name] = 0
            digests[name] = _ZERO_DIGEST
            continue
        files[name] = size
        digests[name] = digest
        if data is not None:
            contents[name] = data
    return files, digests, contents


def _hash_files(folder: str | os.PathLike[str], files: dict[str, int], defects: list[Defect],
                digests: dict[str, bytes] | None = None) -> str:
    """Bundle hash: sha256 over (name NUL sha256(content)) of every file, in name order."""
    h = hashlib.sha256()
    for name in sorted(files):
        digest = digests.get(name) if digests is not None else None
        if digest is None:
            path = os.path.join(folder, name)
            try:
                with open(path, "rb", buffering=0) as fh:
                    digest = hashlib.file_digest(fh, "sha256").digest()
            except OSError as exc:
                defects.append(Defect("unreadable", f"cannot read: {exc.strerror}", path))
                digest = _ZERO_DIGEST
        h.update(name.encode("utf-8", "surrogateescape") + b"\0" + digest)
    return h.hexdigest()


def _is_num(v: Any) -> bool:
    return type(v) is int or type(v) is float


def _plainly_valid(kind: str, p: dict[str, Any]) -> bool:
    """A stricter-than-the-schema check of a known step's parameters, in plain Python
    (~10x cheaper than the compiled validator). True means the schema would accept it;
    False means "ask the schema", which decides and explains."""
    if kind == "download":
        files = p.get("files")
        if type(files) is not list:
            return False
        for f in files:
            if type(f) is not dict or type(f.get("url")) is not str or type(f.get("path")) is not str:
                return False
        return True
    if kind in ("execute", "launch"):
        cmd = p.get("command")
        if type(cmd) is list:
            if any(type(c) is not str for c in cmd):
                return False
        elif type(cmd) is not str:
            return False
        t = p.get("timeout", 0)
        return _is_num(t) and t >= 0
    if kind == "open":
        return type(p.get("path")) is str
    if kind == "sleep":
        sec = p.get("seconds")
        return isinstance(sec, (int, float)) and not isinstance(sec, bool) and 0 <= sec <= 600
    return False


def _plain_steps(items: Any) -> bool:
    """A list of steps schemas/task.schema.json's `step` accepts: objects with a non-empty
    string `type` and, if present, object `parameters`."""
    if type(items) is not list:
        return False
    for st in items:
        if type(st) is not dict:
            return False
        t = st.get("type")
        if type(t) is not str or not t:
            return False
        if "parameters" in st and type(st["parameters"]) is not dict:
            return False
    return True


def _plainly_valid_task(raw: dict[str, Any]) -> bool:
    """Stricter than schemas/task.schema.json, in plain Python (the compiled validator
    cost ~0.1 ms a bundle): True means the schema accepts `raw`; False means "ask the
    schema", which decides and explains (as for steps, `_plainly_valid`)."""
    tid = raw.get("id")
    if type(tid) is not str or not tid:
        return False
    for key in ("instruction",):
        if key in raw and type(raw[key]) is not str:
            return False
    if "app_type" in raw:
        at = raw["app_type"]
        if type(at) is list:
            if any(type(a) is not str for a in at):
                return False
        elif type(at) is not str:
            return False
    if "difficulty" in raw and raw["difficulty"] is not None and type(raw["difficulty"]) is not str:
        return False
    if "config" in raw and not _plain_steps(raw["config"]):
        return False
    if "evaluator" in raw:
        ev = raw["evaluator"]
        if type(ev) is not dict:
            return False
        for key in ("type", "url", "script"):
            if key in ev and type(ev[key]) is not str:
                return False
        if "postconfig" in ev and not _plain_steps(ev["postconfig"]):
            return False
    if "shinken_state_fidelity" in raw and raw["shinken_state_fidelity"] not in ("filesystem", "process_memory"):
        return False
    if "shinken_post_fork" in raw and not _plain_steps(raw["shinken_post_fork"]):
        return False
    if "shinken_needs" in raw:
        needs = raw["shinken_needs"]
        if type(needs) is not list or any(type(n) is not str for n in needs):
            return False
    return True


def _parse_steps(items: Any, where: str, path: str, defects: list[Defect]) -> list[SetupStep]:
    steps: list[SetupStep] = []
    if not isinstance(items, list):
        return steps
    for i, item in enumerate(items):
        if not isinstance(item, dict) or not isinstance(item.get("type"), str):
            continue  # the schema check already reported it
        if isinstance(item.get("parameters"), dict):
            params = item["parameters"]
        else:
            # `{"type": "execute", "command": [...]}`: pipeline exports put the fields beside
            # `type`. Same meaning, so read them as the parameters (with a note).
            params = {k: v for k, v in item.items() if k not in ("type", "parameters")}
            if params:
                defects.append(Defect("normalized", f"{where}[{i}] ({item['type']}): fields beside `type` "
                                      f"read as its parameters ({', '.join(sorted(params))})", path))
        step = SetupStep(i, item["type"], params)
        if step.type not in KNOWN_STEP_TYPES:
            defects.append(Defect("unknown_step", f"{where}[{i}] has type {step.type!r} (kept)", path))
        elif not _plainly_valid(step.type, params):
            # The schema stays the judge (and writes the message); the fast check above
            # only lets the ordinary shapes through without it.
            check = _step_validator(step.type)
            try:
                if check is not None:
                    check(params)
            except fastjsonschema.JsonSchemaValueException as exc:
                defects.append(Defect("schema", f"{where}[{i}] ({step.type}): {exc.message}", path))
        steps.append(step)
    return steps


def _command_words(cmd: Any) -> list[str]:
    if isinstance(cmd, list):
        return [c for c in cmd if isinstance(c, str)]
    if not isinstance(cmd, str):
        return []
    try:
        return shlex.split(cmd, comments=True)
    except ValueError:  # unbalanced quotes: the plain words still name the files
        return cmd.split()


# Never copied into the task machine by a command's mention: the task file, the reward
# (the agent must not read it) and the pipeline's reference solution.
_NEVER_PLACED = frozenset({*TASK_FILE_NAMES, "reward.py", "golden_patch.py"})


def _relative_mention(text: str, name: str) -> bool:
    """`name` occurs in `text` not as the tail of a path (`/home/user/name`)."""
    i = text.find(name)
    while i >= 0:
        if i == 0 or text[i - 1] not in "/" or text[i - 2 : i] == "./":
            return True
        i = text.find(name, i + 1)
    return False


def _place_relative_scripts(steps: list[SetupStep], where: str, files: dict[str, int], path: str,
                            defects: list[Defect]) -> list[SetupStep]:
    """`python3 initial_setup.py` with no `download` step: the script is named relative to
    the bundle. Steps run in TASK_HOME, so placing the bundle's file there first gives the
    command its meaning; the loader adds that `download` step (marked `added_for`)."""
    # Basenames some download step already places (anywhere: `cd /tmp && python3 x.py` is fine).
    placed = {os.path.basename(f["path"]) for s in steps if s.type == "download" and isinstance(s.parameters.get("files"), list)
              for f in s.parameters["files"] if isinstance(f, dict) and isinstance(f.get("path"), str)}
    out: list[SetupStep] = []
    for st in steps:
        cmd = st.parameters.get("command")
        text = cmd if isinstance(cmd, str) else " ".join(c for c in cmd if isinstance(c, str)) if isinstance(cmd, list) else ""
        # Substring gate first: this runs for every bundle, shlex only where a name appears.
        if st.type in ("execute", "launch") and (_relative_mention(text, "initial_setup.") or any(
                _relative_mention(text, n) for n in files if n not in _NEVER_PLACED)):
            names = []
            for w in _command_words(cmd):
                name = w[2:] if w.startswith("./") else w
                if not name or "/" in name or name in _NEVER_PLACED or name in placed:
                    continue
                if name in files:
                    if name not in names:
                        names.append(name)
                elif name.startswith("initial_setup."):
                    defects.append(Defect("missing_setup_file", f"{where}[{st.index}] ({st.type}) runs {w}, "
                                          "which the bundle lacks", path))
            if names:
                why = f"{where}[{st.index}] names {', '.join(names)} relative to the bundle"
                out.append(SetupStep(st.index, "download", {"files": [
                    {"url": f"./{n}", "path": f"{TASK_HOME}/{n}"} for n in names]}, added_for=why))
                placed.update(names)
                defects.append(Defect("normalized", f"{why}: placed at {TASK_HOME}/ (the step's working "
                                      "directory) before it runs", path))
        out.append(st)
    return out


def _reward_name(evaluator: dict[str, Any], path: str, defects: list[Defect]) -> str:
    """The evaluator's script: `url: "./reward.py"` is the documented form; `url: "reward.py"`
    and `script: "reward.py"` mean the same file of the bundle."""
    for key in ("url", "script"):
        v = evaluator.get(key)
        if not isinstance(v, str) or not v:
            continue
        if key == "url" and v.startswith("./"):
            return v[2:]
        if "/" not in v and "://" not in v:
            defects.append(Defect("normalized", f"evaluator.{key} {v!r} read as ./{v} (a file of the bundle)", path))
            return v
    return "reward.py"


def _layout(folder: Path, task_name: str | None, files: dict[str, int]) -> str:
    if task_name == "task.json":
        return "release"
    if folder.parent.name == "final" and folder.parent.parent.name == "output" or "golden_patch.py" in files:
        return "pipeline"
    return "demo"


_TASK_VALIDATOR = None


def _task_validator() -> Callable[[Any], Any]:
    global _TASK_VALIDATOR
    if _TASK_VALIDATOR is None:
        _TASK_VALIDATOR = validator("task")
    return _TASK_VALIDATOR


def load_bundle(folder: str | os.PathLike[str]) -> Bundle:
    """Load one task folder. Never raises for a bad bundle; defects say what is wrong."""
    return read_bundle(folder)[0]


def read_bundle(folder: str | os.PathLike[str]) -> tuple[Bundle, dict[str, bytes]]:
    """`load_bundle`, and the bytes of the bundle's small files (up to 60 KiB, the task
    file up to its cap) as read for the hash, so a caller that reads them too (triage)
    does not open them again."""
    folder = Path(folder)
    fs = os.fspath(folder)
    defects: list[Defect] = []
    files, digests, contents = _scan_files(fs, defects)
    task_name = next((n for n in TASK_FILE_NAMES if n in files), None)
    raw: dict[str, Any] = {}
    parsed_ok = False  # `{}` is a valid object that must still meet the schema
    task_path = folder / task_name if task_name else None
    tpath = os.path.join(fs, task_name) if task_name else fs
    if task_name is None or task_path is None:
        defects.append(Defect("missing_task_file", "neither task.json nor config.json", fs))
    elif files[task_name] > MAX_TASK_FILE:
        defects.append(Defect("too_large", f"task file is {files[task_name]} bytes", tpath))
    elif task_name in contents:
        data = contents[task_name]
        if data[:3] == b"\xef\xbb\xbf":
            data = data[3:]  # a UTF-8 byte order mark from an editor is harmless
        try:
            parsed = orjson.loads(data)  # orjson rejects invalid UTF-8 too
            if isinstance(parsed, dict):
                raw = parsed
                parsed_ok = True
            else:
                defects.append(Defect("invalid_json", f"top level is {type(parsed).__name__}, not an object", tpath))
        except orjson.JSONDecodeError as exc:
            defects.append(Defect("invalid_json", str(exc).splitlines()[0], tpath))
    # else: the read failed and _scan_files reported it as unreadable

    bundle_hash = _hash_files(fs, files, defects, digests)
    if parsed_ok and not _plainly_valid_task(raw):
        try:
            _task_validator()(raw)
        except fastjsonschema.JsonSchemaValueException as exc:
            defects.append(Defect("schema", exc.message, tpath))
    if parsed_ok:
        extra = sorted(k for k in raw if k not in KNOWN_TOP_LEVEL)
        if extra:
            defects.append(Defect("extra_fields", ", ".join(extra) + " (kept)", tpath))
    rid = raw.get("id")
    task_id = rid if isinstance(rid, str) and rid else folder.name
    layout = _layout(folder, task_name, files)
    if parsed_ok and task_id != folder.name and layout != "demo":
        defects.append(Defect("id_mismatch", f"id {task_id!r} in folder {folder.name!r}", tpath))
    instruction = raw.get("instruction")
    if isinstance(instruction, str) and not instruction.strip():
        defects.append(Defect("empty_instruction", "instruction is empty", tpath))

    ev = raw.get("evaluator")
    evaluator: dict[str, Any] = ev if isinstance(ev, dict) else {}
    setup = _parse_steps(raw.get("config"), "config", tpath, defects)
    postconfig = _parse_steps(evaluator.get("postconfig"), "evaluator.postconfig", tpath, defects)
    post_fork = _parse_steps(raw.get("shinken_post_fork"), "shinken_post_fork", tpath, defects)
    setup = _place_relative_scripts(setup, "config", files, tpath, defects)
    post_fork = _place_relative_scripts(post_fork, "shinken_post_fork", files, tpath, defects)
    if isinstance(raw.get("app_type"), list):
        defects.append(Defect("normalized", "app_type is a list; read as the comma-joined names", tpath))

    reward_name = _reward_name(evaluator, tpath, defects) if parsed_ok else "reward.py"
    reward_path = os.path.join(fs, reward_name)
    if task_path is not None and reward_name not in files:
        defects.append(Defect("missing_reward", f"{reward_name} is not in the bundle", reward_path))
    elif reward_name in files and not _has_code_bytes(contents.get(reward_name), files[reward_name]):
        defects.append(Defect("empty_reward", f"{reward_name} has no code", reward_path))

    for step in setup:
        if step.type != "download":
            continue
        entries = step.parameters.get("files")
        if not isinstance(entries, list):
            continue  # the step schema check reported it
        for f in entries:
            u = f.get("url") if isinstance(f, dict) else None
            if isinstance(u, str) and u.startswith("./") and u[2:] not in files:
                defects.append(Defect("missing_setup_file", f"download names {u} which the bundle lacks", tpath))

    return Bundle(
        id=task_id,
        path=folder,
        layout=layout,
        task_file=task_path,
        raw=raw,
        files=files,
        bundle_hash=bundle_hash,
        setup=setup,
        postconfig=postconfig,
        post_fork=post_fork,
        defects=defects,
        reward_name=reward_name,
    ), contents


def _has_code_bytes(text: bytes | None, size: int) -> bool:
    if size == 0:
        return False
    if text is None:
        return True  # larger than one read: certainly not an empty stub (or unreadable, reported)
    for line in text.splitlines():
        s = line.strip()
        if s and not s.startswith(b"#"):
            return True
    return False


def discover_entries(root: str | os.PathLike[str]) -> tuple[list[str], list[str]]:
    """(task folders, symlinked entries) under `root`, as str paths in folder-name order:
    the root itself when it is one task, the pipeline's `output/final/*`, or the root's
    immediate subfolders (hidden ones skipped). The one discovery of task folders (discover
    and triage build on it); str paths from one scandir, since 10,910 Path objects cost
    ~0.3 s. Symlinked entries are never loaded as bundles; triage reports them."""
    root = Path(root)
    try:
        str(root).encode("utf-8")
    except UnicodeEncodeError:
        raise ShinkenError(f"{shown_path(root)}: the task root's path is not UTF-8; rename it or pass it by a "
                           "UTF-8 path (a symlink named in UTF-8 works)") from None
    if not root.exists():
        if root.is_symlink():
            raise ShinkenError(f"{root}: a symlink that does not resolve (a loop or a dangling link); pass the real folder")
        raise ShinkenError(f"{root}: no such task root; pass a folder of task bundles (see `shinken download`)")
    if not root.is_dir():
        raise ShinkenError(f"{root}: not a folder; pass a folder of task bundles")
    if any((root / n).is_file() for n in TASK_FILE_NAMES):
        return [str(root)], []
    final = root / "output" / "final"
    base = str(final if final.is_dir() else root)
    folders: list[str] = []
    links: list[str] = []
    try:
        with os.scandir(base) as it:
            for e in it:
                if e.name.startswith("."):
                    continue
                if e.is_symlink():
                    try:
                        if os.path.isdir(e.path) or not os.path.exists(e.path):
                            links.append(e.path)
                    except OSError:  # e.g. ELOOP
                        links.append(e.path)
                elif e.is_dir(follow_symlinks=False):
                    folders.append(e.path)
    except OSError as exc:
        raise ShinkenError(f"{base}: cannot list the task root ({exc.strerror})") from None
    for path in (*folders, *links):
        _require_utf8(path, base)
    folders.sort(key=os.path.basename)
    links.sort(key=os.path.basename)
    return folders, links


def shown_path(path: str | os.PathLike[str]) -> str:
    """A path as text that can be printed and written to UTF-8 files (JSON, receipts): the
    bytes of a name that is not UTF-8 shown as backslash escapes."""
    return os.fsencode(path).decode("utf-8", "backslashreplace")


def _require_utf8(path: str, base: str) -> None:
    """Task ids are folder names and end up in UTF-8 reports, receipts and rows: a name that
    is not UTF-8 is refused here, once, instead of failing whichever writer meets it first."""
    try:
        os.path.basename(path).encode("utf-8")
    except UnicodeEncodeError:
        raise ShinkenError(f"{shown_path(base)}: the entry '{shown_path(os.path.basename(path))}' has a name that is "
                           "not UTF-8; rename it (task ids become report, receipt and dataset fields)") from None


def discover(root: str | os.PathLike[str]) -> list[Path]:
    """The task folders under `root` (see discover_entries)."""
    return [Path(p) for p in discover_entries(root)[0]]


def load_root(root: str | os.PathLike[str], workers: int | None = None) -> list[Bundle]:
    """Load every bundle under `root`, in folder-name order.

    Serial by default: measured on 10,910 release-shaped bundles, loading costs ~1.1 s
    of CPU while pickling the results back from worker processes costs ~1.2 s more, so
    a process pool is slower on any core count. `workers > 1` uses threads, which only
    pays on high-latency file systems (NFS) where the reads dominate."""
    folders = discover(root)
    if not workers or workers <= 1 or len(folders) < 64:
        return [load_bundle(p) for p in folders]
    from concurrent.futures import ThreadPoolExecutor

    with ThreadPoolExecutor(max_workers=workers) as pool:
        return list(pool.map(load_bundle, folders, chunksize=64))
