"""Reason codes of `shinken triage`, each with the verdict it forces.

severity `defect` -> verdict `defective` (the bundle itself is broken),
`blocker` -> `blocked` (the bundle is sound but this image/environment lacks something),
`note` -> reported, the task stays `runnable`.
"""

from __future__ import annotations

from shinken.bundles.model import FATAL_DEFECTS, NOTE_DEFECTS

DEFECT, BLOCKER, NOTE = "defect", "blocker", "note"

# code -> (severity, one-line meaning). docs/triage.md renders this table.
CODES: dict[str, tuple[str, str]] = {
    # --- from the bundle loader (shinken.bundles) ---
    "invalid_json": (DEFECT, "task file is not UTF-8 JSON or not an object"),
    "schema": (DEFECT, "task file violates schemas/task.schema.json"),
    "missing_task_file": (DEFECT, "folder has neither task.json nor config.json"),
    "missing_reward": (DEFECT, "reward.py (or the evaluator's url) is not in the bundle"),
    "empty_reward": (DEFECT, "reward.py has no code"),
    "missing_setup_file": (DEFECT, "a `download` step names a ./ file the bundle lacks"),
    "unreadable": (DEFECT, "I/O error, permission denied or a folder that cannot be listed"),
    "too_large": (DEFECT, "a bundle file over the loader's size cap"),
    "unsafe_link": (DEFECT, "a symlink in the bundle, or the bundle folder itself is a symlink (never followed)"),
    "unknown_step": (NOTE, "a setup step type shinken does not know (kept)"),
    "extra_fields": (NOTE, "top-level fields outside the known set (kept)"),
    "id_mismatch": (NOTE, "task id differs from the folder name"),
    "empty_instruction": (NOTE, "instruction is empty"),
    "normalized": (NOTE, "a variant real bundles use, read as its documented form (the detail says which)"),
    # --- reward contract (static, parsed on the host, never run) ---
    "reward_not_text": (DEFECT, "reward.py is binary (NUL bytes), not Python source"),
    "reward_too_large": (DEFECT, "reward.py is over the triage parse cap (1 MiB)"),
    "reward_syntax_error": (DEFECT, "reward.py does not parse under the image's Python"),
    "reward_no_marker": (DEFECT, "reward.py never prints `REWARD: <x>` (nor a bare number / Total score)"),
    "reward_marker_unreachable": (DEFECT, "every `REWARD:` print is in dead code (uncalled function, after exit)"),
    "reward_bare_number": (NOTE, "reward.py prints a bare number instead of `REWARD: <x>` (accepted, flagged)"),
    "reward_total_score": (NOTE, "reward.py prints `Total score: X` instead of `REWARD: <x>` (accepted, flagged)"),
    "reward_lowercase_marker": (NOTE, "reward.py prints `reward:` in another case (accepted, flagged)"),
    "setup_not_text": (DEFECT, "initial_setup.py/.sh is binary (NUL bytes) or over the 1 MiB parse cap"),
    "oracle_unusable": (NOTE, "golden_patch.py (the reference solution) is binary or over 96 KiB: the probe runs no oracle for the task"),
    "syntax_unchecked": (NOTE, "the host Python is older than the image's; a syntax error may be a newer feature"),
    # --- requirements matched against the image's capability manifest ---
    "missing_executable": (BLOCKER, "a command the setup/reward calls is not on the image's PATH"),
    "missing_python_module": (BLOCKER, "reward.py/initial_setup.py imports a module the image lacks"),
    "missing_app": (BLOCKER, "the desktop app for app_type, an `open` file type or a launched program is absent"),
    "missing_display": (BLOCKER, "the task needs a display (GUI app, pyautogui) and the image has none"),
    "needs_network": (BLOCKER, "a URL that is fetched or opened, or a package install, needs the internet, which sandboxes lack"),
    "private_host": (BLOCKER, "a hard-coded private/LAN address that no sandbox can reach"),
    "needs_mock_web": (BLOCKER, "a __CUA_GYM_*_URL__/_HOST__ placeholder, a hosted mock host (cua-gym-<app>.xlang.ai) or a mock app_type with no --mock-urls mapping"),
    "mock_state_api_defect": (BLOCKER, "the reward reads a State API field (state_diff, current_state, initial_state) that `shinken hub check` found wrong in the task's mock app (--hub)"),
    "needs_newer_python": (BLOCKER, "syntax or a stdlib module newer than the image's Python"),
    "needs_judge": (BLOCKER, "reward.py calls an LLM judge (reward_judge) and no --judge-url is configured"),
    "unknown_app_type": (NOTE, "app_type is not in the desktop_apps mapping (no app requirement derived)"),
    # --- dataset hygiene over the whole root (triage/hygiene.py) ---
    "benchmark_overlap": (BLOCKER, "the instruction is an evaluation benchmark's test task (verbatim, reworded or one parameter changed): kept out of the training data; a note with --keep-benchmark-overlap"),
}

# Every loader defect code must be known here, with the loader's own fatal/note split.
assert FATAL_DEFECTS | NOTE_DEFECTS <= set(CODES), sorted((FATAL_DEFECTS | NOTE_DEFECTS) - set(CODES))
assert all(CODES[c][0] == DEFECT for c in FATAL_DEFECTS)

VERDICTS = ("runnable", "blocked", "defective")
CLASSES = ("file_cli", "desktop_app", "mock_web")


def severity(code: str) -> str:
    return CODES[code][0]


def verdict_of(reasons: list[dict[str, str]]) -> str:
    """The verdict the reasons' own severities give (a code may be reported at a weaker
    severity than its table entry when the run says so: benchmark_overlap with
    --keep-benchmark-overlap)."""
    sev = {r["severity"] for r in reasons}
    if DEFECT in sev:
        return "defective"
    if BLOCKER in sev:
        return "blocked"
    return "runnable"


def verdict_for(codes: list[str]) -> str:
    sev = {CODES[c][0] for c in codes}
    if DEFECT in sev:
        return "defective"
    if BLOCKER in sev:
        return "blocked"
    return "runnable"
