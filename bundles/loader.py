"""Load one task folder or a whole task root into `Bundle`s. A bad bundle never stops
the load: it becomes a typed `Defect` with its path."""

from __future__ import annotations

import hashlib
import os
import stat
from concurrent.futures import ProcessPoolExecutor
from pathlib import Path
from typing import Any, Iterable, Iterator

import fastjsonschema
import orjson

from shinken.bundles.model import (
    KNOWN_STEP_TYPES,
    TASK_FILE_NAMES,
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
PARALLEL_THRESHOLD = 400  # below this, process start-up costs more than it saves


def _step_validators() -> dict[str, Any]:
    schema = load_schema("task")
    out = {}
    for kind, ref in (("download", "download"), ("execute", "command"), ("launch", "command"),
                      ("open", "open"), ("sleep", "sleep")):
        out[kind] = fastjsonschema.compile({"$ref": f"#/definitions/{ref}", "definitions": schema["definitions"]})
    return out


_STEP_VALIDATORS: dict[str, Any] | None = None


def _step_validator(kind: str):
    global _STEP_VALIDATORS
    if _STEP_VALIDATORS is None:
        _STEP_VALIDATORS = _step_validators()
    return _STEP_VALIDATORS.get(kind)


def _scan_files(folder: Path, defects: list[Defect]) -> dict[str, int]:
    """Regular files directly in the bundle folder. Symlinks are never followed."""
    files: dict[str, int] = {}
    try:
        with os.scandir(folder) as it:
            for entry in it:
                try:
                    st = entry.stat(follow_symlinks=False)
                except OSError as exc:
                    defects.append(Defect("unreadable", f"cannot stat: {exc.strerror}", entry.path))
                    continue
                if stat.S_ISLNK(st.st_mode):
                    defects.append(Defect("unsafe_link", "symlink inside a bundle is not followed", entry.path))
                elif stat.S_ISREG(st.st_mode):
                    if st.st_size > MAX_BUNDLE_FILE:
                        defects.append(Defect("too_large", f"{st.st_size} bytes > {MAX_BUNDLE_FILE}", entry.path))
                    else:
                        files[entry.name] = st.st_size
    except OSError as exc:
        defects.append(Defect("unreadable", f"cannot list folder: {exc.strerror}", str(folder)))
    return files


def _hash_files(folder: Path, files: dict[str, int], defects: list[Defect]) -> str:
    h = hashlib.sha256()
    for name in sorted(files):
        try:
            with open(folder / name, "rb", buffering=0) as fh:
                digest = hashlib.file_digest(fh, "sha256").digest()
        except OSError as exc:
            defects.append(Defect("unreadable", f"cannot read: {exc.strerror}", str(folder / name)))
            digest = b"\0" * 32
        h.update(name.encode("utf-8", "surrogateescape") + b"\0" + digest)
    return h.hexdigest()


def _parse_steps(items: Any, where: str, path: str, defects: list[Defect]) -> list[SetupStep]:
    steps: list[SetupStep] = []
    if not isinstance(items, list):
        return steps
    for i, item in enumerate(items):
        if not isinstance(item, dict) or not isinstance(item.get("type"), str):
            continue  # the schema check already reported it
        params = item.get("parameters") if isinstance(item.get("parameters"), dict) else {}
        step = SetupStep(i, item["type"], params)
        if step.type not in KNOWN_STEP_TYPES:
            defects.append(Defect("unknown_step", f"{where}[{i}] has type {step.type!r} (kept)", path))
        else:
            check = _step_validator(step.type)
            try:
                check(params)
            except fastjsonschema.JsonSchemaException as exc:
                defects.append(Defect("schema", f"{where}[{i}] ({step.type}): {exc.message}", path))
        steps.append(step)
    return steps


def _layout(folder: Path, task_name: str | None, files: dict[str, int]) -> str:
    if task_name == "task.json":
        return "release"
    if folder.parent.name == "final" and folder.parent.parent.name == "output" or "golden_patch.py" in files:
        return "pipeline"
    return "demo"


def load_bundle(folder: str | os.PathLike[str]) -> Bundle:
    """Load one task folder. Never raises for a bad bundle; defects say what is wrong."""
    folder = Path(folder)
    defects: list[Defect] = []
    files = _scan_files(folder, defects)
    task_name = next((n for n in TASK_FILE_NAMES if n in files), None)
    raw: dict[str, Any] = {}
    task_path = folder / task_name if task_name else None
    if task_path is None:
        defects.append(Defect("missing_task_file", "neither task.json nor config.json", str(folder)))
    elif files[task_name] > MAX_TASK_FILE:
        defects.append(Defect("too_large", f"task file is {files[task_name]} bytes", str(task_path)))
    else:
        try:
            data = task_path.read_bytes()
            parsed = orjson.loads(data)  # orjson rejects invalid UTF-8 too
            if isinstance(parsed, dict):
                raw = parsed
            else:
                defects.append(Defect("invalid_json", f"top level is {type(parsed).__name__}, not an object", str(task_path)))
        except orjson.JSONDecodeError as exc:
            defects.append(Defect("invalid_json", str(exc).splitlines()[0], str(task_path)))
        except OSError as exc:
            defects.append(Defect("unreadable", f"cannot read: {exc.strerror}", str(task_path)))

    bundle_hash = _hash_files(folder, files, defects)
    tpath = str(task_path or folder)
    if raw:
        try:
            validator("task")(raw)
        except fastjsonschema.JsonSchemaException as exc:
            defects.append(Defect("schema", exc.message, tpath))
        extra = sorted(k for k in raw if k not in KNOWN_TOP_LEVEL)
        if extra:
            defects.append(Defect("extra_fields", ", ".join(extra) + " (kept)", tpath))
    task_id = raw.get("id") if isinstance(raw.get("id"), str) and raw.get("id") else folder.name
    if raw and task_id != folder.name and _layout(folder, task_name, files) != "demo":
        defects.append(Defect("id_mismatch", f"id {task_id!r} in folder {folder.name!r}", tpath))
    instruction = raw.get("instruction")
    if isinstance(instruction, str) and not instruction.strip():
        defects.append(Defect("empty_instruction", "instruction is empty", tpath))

    evaluator = raw.get("evaluator") if isinstance(raw.get("evaluator"), dict) else {}
    setup = _parse_steps(raw.get("config"), "config", tpath, defects)
    postconfig = _parse_steps(evaluator.get("postconfig"), "evaluator.postconfig", tpath, defects)
    post_fork = _parse_steps(raw.get("shinken_post_fork"), "shinken_post_fork", tpath, defects)

    reward_name = "reward.py"
    url = evaluator.get("url")
    if isinstance(url, str) and url.startswith("./"):
        reward_name = url[2:]
    if task_path is not None and reward_name not in files:
        defects.append(Defect("missing_reward", f"{reward_name} is not in the bundle", str(folder / reward_name)))
    elif reward_name in files and not _has_code(folder / reward_name, files[reward_name]):
        defects.append(Defect("empty_reward", f"{reward_name} has no code", str(folder / reward_name)))

    for step in setup:
        if step.type != "download":
            continue
        for f in step.parameters.get("files") or []:
            u = f.get("url") if isinstance(f, dict) else None
            if isinstance(u, str) and u.startswith("./") and u[2:] not in files:
                defects.append(Defect("missing_setup_file", f"download names {u} which the bundle lacks", tpath))

    return Bundle(
        id=task_id,
        path=folder,
        layout=_layout(folder, task_name, files),
        task_file=task_path,
        raw=raw,
        files=files,
        bundle_hash=bundle_hash,
        setup=setup,
        postconfig=postconfig,
        post_fork=post_fork,
        defects=defects,
    )


def _has_code(path: Path, size: int) -> bool:
    if size == 0:
        return False
    if size > 4096:
        return True
    try:
        text = path.read_bytes()
    except OSError:
        return True  # reported elsewhere as unreadable
    for line in text.splitlines():
        s = line.strip()
        if s and not s.startswith(b"#"):
            return True
    return False


def discover(root: str | os.PathLike[str]) -> list[Path]:
    """Task folders under `root`: the root itself when it is one task, the pipeline's
    `output/final/*`, or the root's immediate subfolders (hidden ones skipped)."""
    root = Path(root)
    if not root.exists():
        raise ShinkenError(f"{root}: no such task root; pass a folder of task bundles (see `shinken download`)")
    if not root.is_dir():
        raise ShinkenError(f"{root}: not a folder; pass a folder of task bundles")
    if any((root / n).is_file() for n in TASK_FILE_NAMES):
        return [root]
    final = root / "output" / "final"
    base = final if final.is_dir() else root
    out: list[Path] = []
    try:
        with os.scandir(base) as it:
            for e in it:
                if e.name.startswith(".") or not e.is_dir(follow_symlinks=False):
                    continue
                out.append(Path(e.path))
    except OSError as exc:
        raise ShinkenError(f"{base}: cannot list the task root ({exc.strerror})") from None
    out.sort(key=lambda p: p.name)
    return out


def _load_chunk(paths: list[str]) -> list[Bundle]:
    return [load_bundle(p) for p in paths]


def _chunks(items: list[Path], n: int) -> Iterator[list[str]]:
    size = max(1, len(items) // n)
    for i in range(0, len(items), size):
        yield [str(p) for p in items[i : i + size]]


def load_root(root: str | os.PathLike[str], workers: int | None = None) -> list[Bundle]:
    """Load every bundle under `root`, in folder-name order, in parallel when large."""
    folders = discover(root)
    workers = workers or os.cpu_count() or 1
    if len(folders) < PARALLEL_THRESHOLD or workers == 1:
        return [load_bundle(p) for p in folders]
    out: list[Bundle] = []
    with ProcessPoolExecutor(max_workers=workers) as pool:
        for chunk in pool.map(_load_chunk, _chunks(folders, workers * 4)):
            out.extend(chunk)
    return out


def iter_ok(bundles: Iterable[Bundle]) -> Iterator[Bundle]:
    return (b for b in bundles if b.ok)
