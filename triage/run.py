"""Triage a whole task root: discover, analyse (cached, in worker processes), evaluate."""

from __future__ import annotations

import gc
import multiprocessing
import os
import threading
import time
from concurrent.futures import ProcessPoolExecutor
from concurrent.futures.process import BrokenProcessPool
from dataclasses import dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING, Any, Callable, Iterator

from shinken.bundles.loader import discover_entries
from shinken.triage.cache import ResultsMemo, TriageCache, cache_dir, stat_key
from shinken.triage.evaluate import Capabilities, Evaluator, StateDefects

if TYPE_CHECKING:
    from shinken.triage.hygiene import Hygiene

CHUNK = 48  # folders per worker task: big enough to amortise IPC, small enough to balance
INLINE_BELOW = 200  # fewer misses than this: a pool costs more than it saves


@dataclass
class RunStats:
    folders: int = 0
    cache_hits: int = 0
    analysed: int = 0
    workers: int = 0
    seconds: float = 0.0
    hygiene_seconds: float = 0.0  # the whole-root pass: benchmark overlap and families (in `seconds`)
    hygiene_reused: bool = False  # its result came from the last run's (nothing it reads changed)
    cache_error: str | None = None


@dataclass
class TriageRun:
    tasks: list[dict[str, Any]] = field(default_factory=list)
    stats: RunStats = field(default_factory=RunStats)
    hygiene: dict[str, Any] = field(default_factory=dict)  # Hygiene.settings() of the run (the report's summary)


def _safe_analyze(folder: str, py: tuple[int, int]) -> dict[str, Any]:
    # Imported where it is used: a re-run that analyses nothing never loads the analysers.
    from shinken.needs.analyze import analyze_folder

    try:
        return analyze_folder(folder, py)
    except Exception as exc:  # a hostile folder must never stop the run
        return {
            "id": os.path.basename(folder), "path": folder, "app_type": "", "difficulty": None, "bundle_hash": "",
            "class": "file_cli", "needs": [],
            "reasons": [["unreadable", f"triage could not analyse this folder: {type(exc).__name__}: {exc}"]],
        }


def _worker_init() -> None:
    # Analysis makes no reference cycles worth collecting; the cyclic GC re-scanning
    # every parsed tree costs ~10% of a worker's time.
    gc.disable()


def _work(folders: list[str], py: tuple[int, int], keyed: bool = True) -> list[tuple[str, tuple[str, list[str]] | None, dict[str, Any]]]:
    """Analyse `folders`; `keyed`: with their stat keys, for the cache."""
    out = []
    for f in folders:
        skey = stat_key(f) if keyed else None  # before reading: a change during the read shows up next run
        out.append((f, skey, _safe_analyze(f, py)))
    return out


_PEEK_FLAGS = os.O_RDONLY | os.O_NONBLOCK | os.O_NOFOLLOW | os.O_CLOEXEC  # never block on a FIFO, never follow


def _bundle_fds(folder: str) -> Iterator[int]:
    """An fd for each regular file directly in `folder`, closed after use. Best effort:
    errors are the loader's to report."""
    try:
        with os.scandir(folder) as it:
            paths = [e.path for e in it if e.is_file(follow_symlinks=False)]
    except OSError:
        return
    for path in paths:
        try:
            fd = os.open(path, _PEEK_FLAGS)
        except OSError:
            continue
        try:
            yield fd
        finally:
            os.close(fd)


def _readahead(folders: list[str], stop: threading.Event) -> None:
    """Ask the kernel to start reading every bundle file, in the order the workers will
    want them. A cold run is otherwise bound by I/O latency (a few synchronous reads in
    flight); WILLNEED readahead is asynchronous, so the disk queue stays deep while the
    workers parse, and their reads find the page cache warm."""
    for folder in folders:
        if stop.is_set():
            return
        for fd in _bundle_fds(folder):
            try:
                os.posix_fadvise(fd, 0, 0, os.POSIX_FADV_WILLNEED)
            except OSError:
                pass


def _page_cache_warm(folders: list[str], samples: int = 32) -> bool:
    """Whether the bundles' files are already in the page cache (a re-triage of a root just
    downloaded or triaged): a sample of them, spread over the run, each answer a read with
    RWF_NOWAIT, which fails instead of waiting for the disk. Then the readahead would only
    cost CPU (~0.5 CPU-s for 10,910 bundles). Unknown (no RWF_NOWAIT, a file system that
    refuses it): not warm."""
    nowait = getattr(os, "RWF_NOWAIT", None)
    if nowait is None or not hasattr(os, "preadv") or not folders:
        return False
    buf = bytearray(4096)
    for folder in folders[:: max(1, len(folders) // samples)][:samples]:
        for fd in _bundle_fds(folder):
            try:
                os.preadv(fd, [buf], 0, nowait)
            except OSError:  # EAGAIN: on disk only; anything else: cannot tell
                return False
    return True


def _pool(n: int) -> ProcessPoolExecutor:
    ctx = multiprocessing.get_context("fork") if "fork" in multiprocessing.get_all_start_methods() else None
    return ProcessPoolExecutor(max_workers=n, mp_context=ctx, initializer=_worker_init)


def _pooled(chunks: list[list[str]], py: tuple[int, int], n: int, keyed: bool = True) -> Iterator[list[tuple[str, tuple[str, list[str]] | None, dict[str, Any]]]]:
    """Yield analysed chunks. A worker that dies (OOM kill, a crash in a C extension on a
    hostile file) breaks the whole pool: the unfinished chunks are retried in a fresh pool,
    and chunks that break that one too are redone one folder per process, so only a folder
    that kills its own process is lost (as an `unreadable` reason)."""
    pending = chunks
    for _attempt in range(2):
        failed: list[list[str]] = []
        with _pool(n) as pool:
            futures = []
            for chunk in pending:
                try:
                    futures.append((pool.submit(_work, chunk, py, keyed), chunk))
                except BrokenProcessPool:  # a worker died while we were still submitting
                    failed.append(chunk)
            for fut, chunk in futures:
                try:
                    yield fut.result()
                except BrokenProcessPool:
                    failed.append(chunk)
        if not failed:
            return
        pending = failed
    for chunk in pending:
        for folder in chunk:
            with _pool(1) as solo:
                try:
                    batch = solo.submit(_work, [folder], py, keyed).result()
                except BrokenProcessPool:
                    batch = [(folder, None, _crashed(folder))]
            yield batch


def _crashed(folder: str) -> dict[str, Any]:
    return {
        "id": os.path.basename(folder), "path": folder, "app_type": "", "difficulty": None, "bundle_hash": "",
        "class": "file_cli", "needs": [],
        "reasons": [["unreadable", "analysing this folder killed the worker process (hostile or huge content)"]],
    }


def analyze_root(root: str | os.PathLike[str], py: tuple[int, int], *, workers: int | None = None) -> list[dict[str, Any]]:
    """The image-independent analysis of every bundle under `root` (what the triage cache
    holds), uncached, in folder-name order: for callers that match one analysis against
    several manifests or settings (benchmarks/runnable_share.py) with Evaluator."""
    folders, links = discover_entries(Path(root).absolute())
    chunks = [folders[i : i + CHUNK] for i in range(0, len(folders), CHUNK)]
    n = min(workers or default_workers(), max(1, len(folders) // CHUNK))
    batches = (_work(c, py, False) for c in chunks) if n <= 1 or len(folders) < INLINE_BELOW else _pooled(chunks, py, n, False)
    out = [analysis for batch in batches for _f, _k, analysis in batch]
    out.extend(_symlink_result(link) for link in links)
    return sorted(out, key=lambda a: os.path.basename(a["path"]))


def _symlink_result(link: str) -> dict[str, Any]:
    from shinken.needs.analyze import symlink_folder_result

    return symlink_folder_result(link)


def default_workers() -> int:
    # One per core (at least two): the readahead thread keeps the disk queue deep on a cold
    # page cache, so more workers than cores only add CPU (2 x cores cost ~10% more CPU-s).
    try:
        cores = len(os.sched_getaffinity(0))
    except AttributeError:  # not Linux
        cores = os.cpu_count() or 1
    return max(2, cores)


def triage_root(
    root: str | os.PathLike[str],
    caps: Capabilities,
    mock_urls: dict[str, str] | None = None,
    *,
    workers: int | None = None,
    use_cache: bool = True,
    cache_directory: Path | None = None,
    progress: Callable[[int, int], None] | None = None,
    judge: bool = False,
    state_defects: StateDefects | None = None,
    hygiene: Hygiene | None = None,
) -> TriageRun:
    """`judge`: an LLM judge will be configured (probe/server --judge-url), so rewards that
    import reward_judge are not blocked for it. `state_defects`: the State API checks the
    hub's apps failed (`shinken hub check`), by app key. `hygiene`: the benchmarks to
    compare with and the family settings (default: the shipped benchmarks, tasks that match
    one blocked)."""
    # Loading a 10k-entry cache and building 10k results makes millions of objects and no
    # garbage cycles: the cyclic GC would only re-scan them (~15% of a cached re-run).
    was_enabled = gc.isenabled()
    gc.disable()
    try:
        return _triage_root(root, caps, mock_urls, workers=workers, use_cache=use_cache,
                            cache_directory=cache_directory, progress=progress, judge=judge,
                            state_defects=state_defects, hygiene=hygiene)
    finally:
        if was_enabled:
            gc.enable()


def _triage_root(
    root: str | os.PathLike[str],
    caps: Capabilities,
    mock_urls: dict[str, str] | None,
    *,
    workers: int | None,
    use_cache: bool,
    cache_directory: Path | None,
    progress: Callable[[int, int], None] | None,
    judge: bool,
    state_defects: StateDefects | None = None,
    hygiene: Hygiene | None = None,
) -> TriageRun:
    t0 = time.perf_counter()
    root = Path(root).absolute()
    folders, links = discover_entries(root)
    run = TriageRun()
    st = run.stats
    st.folders = len(folders) + len(links)
    py = caps.python_version
    pyver = f"{py[0]}.{py[1]}"
    # Evaluated as results arrive, so matching overlaps the workers' analysis.
    ev = Evaluator(caps, mock_urls, judge=judge, state_defects=state_defects)
    results: dict[str, dict[str, Any]] = {}
    instructions: dict[str, str | None] = {}  # folder -> its instruction, for the hygiene pass
    misses: list[str] = folders
    cache = TriageCache(pyver, cache_directory) if use_cache else None
    memo = ResultsMemo(pyver, ev.fingerprint(), cache_directory) if use_cache else None
    if memo is not None:
        # Folders unchanged since the last run with this setting: its tasks as they were,
        # without loading the analyses (most of an unchanged re-run's time otherwise).
        memo.load()
        if memo.tasks:
            misses = []
            for f in folders:
                remembered_task = memo.lookup(f)
                if remembered_task is not None:
                    results[f], instructions[f] = remembered_task
                else:
                    misses.append(f)
    remembered = len(results)
    stale = memo is not None and memo.stale(str(root), set(folders))  # folders gone: forget them
    if cache is not None and (misses or stale):
        cache.load()
    if cache is not None and cache.stat and misses:
        rest, misses = misses, []
        for f in rest:
            hit = cache.lookup(f)
            if hit is not None:
                # The analysis is content-keyed; the path is this run's.
                results[f] = ev.evaluate({**hit, "path": f})
                instructions[f] = hit.get("instruction")
            else:
                misses.append(f)
    st.cache_hits = len(results)
    st.analysed = len(misses)
    done = len(results)
    if progress:
        progress(done, st.folders)

    def take(batch: list[tuple[str, tuple[str, list[str]] | None, dict[str, Any]]]) -> None:
        nonlocal done
        for f, skey, analysis in batch:
            results[f] = ev.evaluate(analysis)
            instructions[f] = analysis.get("instruction")
            if cache is not None:
                cache.put(f, skey, analysis)
        done += len(batch)
        if progress:
            progress(done, st.folders)

    if misses:
        import shinken.needs.analyze  # noqa: F401  (once, before the workers fork)
    n_workers = min(workers or default_workers(), max(1, len(misses) // CHUNK))
    if len(misses) < INLINE_BELOW or n_workers <= 1:
        st.workers = 1
        for i in range(0, len(misses), CHUNK):
            take(_work(misses[i : i + CHUNK], py, cache is not None))
    else:
        st.workers = n_workers
        chunks = [misses[i : i + CHUNK] for i in range(0, len(misses), CHUNK)]
        stop = threading.Event()
        if os.environ.get("SHINKEN_TRIAGE_READAHEAD", "1") != "0" and not _page_cache_warm(misses):  # "0": for A/B benchmarks
            threading.Thread(target=_readahead, args=(misses, stop), name="triage-readahead", daemon=True).start()
        try:
            for batch in _pooled(chunks, py, n_workers, cache is not None):
                take(batch)
        finally:
            stop.set()
    for link in links:
        results[link] = ev.evaluate(_symlink_result(link))

    if cache is not None and memo is not None and (remembered < len(folders) or stale):
        try:
            cache.save(str(root), set(folders))
            memo.save(str(root), {f: (results[f], instructions.get(f)) for f in folders}, cache.stat)
        except OSError as exc:  # a read-only home must not cost the results
            st.cache_error = f"{exc.filename or cache.path}: {exc.strerror or exc}"
    order = sorted(results, key=os.path.basename)
    if hygiene is None:
        from shinken.triage.hygiene import Hygiene, HygieneOptions

        hygiene = Hygiene.load(HygieneOptions())
    # Over the whole root, after every task is known: families link tasks across it.
    t1 = time.perf_counter()
    run.tasks, st.hygiene_reused = hygiene.apply([results[f] for f in order], [instructions.get(f) for f in order],
                                                 memo_dir=(cache_directory or cache_dir()) if use_cache else None)
    run.hygiene = hygiene.settings()
    st.hygiene_seconds = time.perf_counter() - t1
    st.seconds = time.perf_counter() - t0
    return run
