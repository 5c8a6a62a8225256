"""Write a NeMo Gym 0.7.0 workspace for a set of kept CUA-Gym tasks.

Layout (a plain folder, no pyproject.toml at its root, so Gym does not take it for a Gym
checkout; every path inside is relative to it, so it runs wherever it is copied):
  <dest>/env.yaml                        policy endpoint template, no secrets
  <dest>/.shinken-workspace.json         what was written and from what
  <dest>/environments/<name>/            manifest.yaml, config.yaml, README.md (Gym's catalog entry)
  <dest>/resources_servers/<name>/       app.py, task_data.py, configs/, requirements.txt, README.md,
                                         tests/ (test_app.py, verifier_cases.jsonl),
                                         data/{example,train,validation}.jsonl, tasks/ (the bundles),
                                         vendor/shinken-*.whl
"""

from __future__ import annotations

import getpass
import hashlib
import os
import shutil
import string
import subprocess
import tempfile
from dataclasses import dataclass, field, replace
from importlib import resources
from pathlib import Path
from typing import Any

import orjson

import shinken
from shinken.bundles.model import Bundle
from shinken.computer.profiles import Profile
from shinken.download.source import SourceInfo, read_source
from shinken.errors import ShinkenError
from shinken.images.build import DEFAULT_IMAGE
from shinken.runtime import OWNER_MARKER, register_temp_dir, unregister_temp_dir, utc_now
from shinken.schemas import write_json
from shinken.swap import swap_into_place
from shinken.probes.final_receipt import kept_alerts, kept_checks, kept_tiers
from shinken.workspace import gym_config as gymcfg
from shinken.workspace import rows as rows_mod
from shinken.workspace.evidence import Evidence, gather
from shinken.workspace.inputs import MANIFEST, check_dest, load_bundles, read_id_list
from shinken.workspace.licensing import License, resolve_license
from shinken.workspace.next_steps import missing_evidence
from shinken.workspace.split import Split, normalize_instruction, root_families, split_bundles
from shinken.workspace.store import copy_bundles
from shinken.workspace.wheel import build_wheel
from shinken.workspace.yaml_out import dump_yaml

SERVER_DIR = Path("resources_servers") / rows_mod.SERVER_NAME  # of the default name
CONFIG_REL = SERVER_DIR / "configs" / f"{rows_mod.SERVER_NAME}.yaml"
EXAMPLE_ROWS = 5  # `gym env test --all` insists on exactly five
TEMPLATES = "shinken.workspace_templates"
# Server files copied as they are (real Python, so linters and type checkers read them).
SERVER_CODE = ("__init__.py", "app.py", "task_data.py", "tests/__init__.py", "tests/test_app.py")
# The agent every workspace ships (responses_api_agents/<dir>/, file there <- template in agent/):
# Gym's simple_agent (text profiles) or the agent that delivers screenshots as input_image parts,
# each answering a seed's infrastructure failure with a masked rollout (seed_failures.py).
AGENT_CODE = {"seed_failures.py": "seed_failures.py", "requirements.txt": "requirements.txt"}
AGENT_APP = {True: "app.py", False: "text_app.py"}  # by whether the profile shows screenshots


@dataclass
class WorkspaceOptions:
    dest: Path
    task_root: Path
    ids_file: Path
    val_fraction: float = 0.1
    seed: int = 0
    stratify: str = "app_type"
    image: str = DEFAULT_IMAGE
    max_steps: int = 30
    license: str | None = None  # None: the dataset card's, from the task root's source record
    dataset_license: str | None = None  # a NeMo Gym dataset label, when the SPDX id has none
    name: str = rows_mod.SERVER_NAME
    authors: list[str] = field(default_factory=list)  # empty: git user.name, else the login name
    rollouts: list[Path] = field(default_factory=list)  # recorded solutions (probe --replay input)
    force: bool = False
    hub: str | None = None  # hub image the server starts for web tasks (mockweb)
    mock_urls: Path | None = None  # or mocks the user runs elsewhere
    profile: Profile = field(default_factory=Profile)  # what the policy sees and acts with
    screenshot_history: int | None = None  # keep only the last N screenshots (not NeMo RL prefix-safe)


@dataclass
class WorkspaceResult:
    dest: Path
    name: str
    train: list[str]
    validation: list[str]
    example: list[str]
    wheel: Path
    license: str
    determinism: str
    verifier_cases: dict[str, int]
    store: dict[str, Any]
    notes: list[str] = field(default_factory=list)
    commands: list[str] = field(default_factory=list)

    def to_json(self) -> dict[str, Any]:
        return {"dest": str(self.dest), "name": self.name, "train": self.train, "validation": self.validation,
                "example": self.example, "wheel": str(self.wheel), "license": self.license,
                "determinism": self.determinism, "verifier_cases": self.verifier_cases, "store": self.store,
                "notes": self.notes, "commands": self.commands}


def default_authors() -> list[str]:
    """The git user name when git has one, else the login name: never a placeholder."""
    try:
        name = subprocess.run(["git", "config", "--get", "user.name"], capture_output=True, text=True,
                              timeout=10).stdout.strip()
    except (OSError, subprocess.SubprocessError):
        name = ""
    return [name or getpass.getuser()]


def _for_rows(bundles: list[Bundle], opts: WorkspaceOptions) -> list[Bundle]:
    """Web tasks as the server will run them: their instruction names the mock's real address
    (the hub's alias is the same in every run). A task the map cannot serve is refused here.
    The workspace stores the bundles as they are; the server materializes them again."""
    from shinken.mockweb.materialize import needs_materializing
    from shinken.mockweb.runs import web_plan

    if opts.hub is None and opts.mock_urls is None:
        web = [b.id for b in bundles if needs_materializing(b)]
        if web:
            raise ShinkenError(f"{web[0]}: a mock web task ({len(web)} in the list); pass --hub IMAGE (or --mock-urls "
                               "FILE) as given to probe, so the server can serve its mock apps")
        return bundles
    plan = web_plan(opts.hub, Path(opts.mock_urls) if opts.mock_urls else None)
    assert plan is not None
    out = []
    for b in bundles:
        prepared, blocked = plan.prepare(b)
        if blocked:
            raise ShinkenError(f"{b.id}: {blocked}; drop it from the id list or serve the app")
        out.append(prepared)
    return out


def _template(rel: str) -> str:
    return resources.files(TEMPLATES).joinpath(rel).read_text(encoding="utf-8")


def _render(rel: str, **values: Any) -> str:
    return string.Template(_template(rel)).substitute({k: str(v) for k, v in values.items()})


def _jsonl(path: Path, docs: list[dict[str, Any]]) -> None:
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_bytes(b"".join(orjson.dumps(d) + b"\n" for d in docs))


def commands_for(dest: Path, names: gymcfg.Names = gymcfg.Names(rows_mod.SERVER_NAME),
                 profile: Profile = Profile()) -> list[str]:
    return [f"cd {dest}", "# edit env.yaml (policy_base_url, policy_model_name; export POLICY_API_KEY)",
            *gymcfg.gate_commands(names), *gymcfg.run_commands(names, profile)]


def _profile_section(profile: Profile, history: int | None, names: gymcfg.Names) -> str:
    """The generated README's words on a non-default profile (empty for the default)."""
    if profile.is_default:
        return ""
    p = profile.to_json()
    lines = ["", "", "## Profile", "",
             f"Observation `{p['observation']}`, actions `{p['actions']}`, shell tool "
             f"{'on' if profile.exec else 'off (`--no-exec`: desktop tasks must be done through the GUI)'}"
             + (f", screenshots {p['image_format']}"
                + (f" (quality {p['quality']})" if p['image_format'] != 'png' else "")
                + f" at {p['size'] or 'the display size'}" if profile.screenshots else "")
             + ". Every row carries this profile (`shinken_profile`) and the server refuses rows made for another "
               "one, so a pass rate measured here is never used with another profile by accident."]
    if profile.screenshots:
        keep = (f"only the last {history} screenshots are kept in the model's context (Gym's recency policy); "
                "that rewrites earlier turns, so NeMo RL's exact-prefix check refuses such rollouts for training: use "
                "it for evaluation" if history is not None else
                "every screenshot stays in the history (the exact prefix NeMo RL checks)")
        lines += ["",
                  f"Rows name the agent `{names.vision_agent_instance}` (`responses_api_agents/{gymcfg.VISION_AGENT_DIR}/`"
                  ", Gym 0.7.0's `simple_agent_with_compaction` with its hooks filled in): each tool result's screenshot "
                  "becomes a `role: \"user\"` message with an `input_image` part (a data URL) after the "
                  "function_call_output, which keeps the text without the base64; the screen at seed time is the first "
                  f"such message. By default {keep}.",
                  "",
                  "Who accepts these rollouts: collecting them for evaluation and profiling works with any "
                  "vision-language model served through an OpenAI-compatible endpoint (vLLM, SGLang, hosted APIs). "
                  "Training a VLM policy on them with NeMo RL needs its main branch after Aug 2026 and a Nemotron "
                  "VL/Omni processor; NeMo Gym's plain `simple_agent` would hand the screenshot to the model as "
                  "base64 text, and vLLM refuses images inside a function_call_output."]
    return "\n".join(lines)


def _case_table(cases: list[dict[str, Any]]) -> str:
    rows = ["| case | kind | expected |", "|---|---|---|"]
    for c in cases:
        expected = f"reward {c['expected_reward']}" if "expected_reward" in c else f"error containing `{c['expected_error']}`"
        rows.append(f"| {c['name']} | {c['kind']} | {expected} |")
    return "\n".join(rows)


def _describe_source(source: Any) -> str:
    if source is None:
        return "a local task folder (no download record)"
    return f"`{source.repo_id}` ({source.repo_type}) at revision `{source.revision}`"


def make_workspace(opts: WorkspaceOptions) -> WorkspaceResult:
    """Check the options, plan what the workspace holds, then write it (a failed run leaves dest untouched)."""
    return write_workspace(plan_workspace(opts))


@dataclass
class WorkspacePlan:
    """What make_workspace will write: every input read and checked, every row and split made.
    Nothing is written while planning (bad input is said before a folder is touched)."""

    opts: WorkspaceOptions
    dest: Path
    task_root: Path
    names: gymcfg.Names
    engine: gymcfg.EngineSettings
    authors: list[str]
    source: SourceInfo | None  # the download record; None for a local task folder
    lic: License
    bundles: list[Bundle]
    split: Split
    example: list[str]
    evidence: Evidence  # verifier cases and determinism from the probe's evidence
    split_rows: dict[str, list[dict[str, Any]]]
    data_hash: str
    description: str


def plan_workspace(opts: WorkspaceOptions) -> WorkspacePlan:
    dest = Path(opts.dest).expanduser().absolute()
    task_root = Path(opts.task_root).expanduser().resolve()
    names = gymcfg.Names(opts.name)
    if opts.screenshot_history is not None and (opts.screenshot_history < 1 or not opts.profile.screenshots):
        raise ShinkenError(f"--screenshot-history {opts.screenshot_history}: give N >= 1, with --observation screenshot "
                           "or both")
    engine = gymcfg.EngineSettings(image=opts.image, state_fidelity="checked", max_steps=opts.max_steps,
                                   profile=opts.profile, screenshot_history=opts.screenshot_history,
                                   hub_image=opts.hub,
                                   mock_urls=str(Path(opts.mock_urls).resolve()) if opts.mock_urls else None)
    if not 0.0 <= opts.val_fraction < 1.0:
        raise ShinkenError(f"--val-fraction {opts.val_fraction}: must be at least 0 and below 1")
    if opts.max_steps < 1:
        raise ShinkenError(f"--max-steps {opts.max_steps}: must be at least 1")
    authors = [a.strip() for a in opts.authors if a.strip()] or default_authors()
    if any(a.casefold().startswith("todo") for a in authors) or len(set(authors)) != len(authors):
        raise ShinkenError(f"--author {authors}: give each author once, by name (Gym refuses TODO placeholders)")
    for path in opts.rollouts:
        if not Path(path).is_file():
            raise ShinkenError(f"--rollouts {path}: no such file; pass the rollouts JSONL given to `shinken probe --replay`")
    check_dest(dest, opts.force)
    listed = read_id_list(Path(opts.ids_file))
    _check_band_profile(Path(opts.ids_file), opts.profile)
    source = read_source(task_root) if task_root.is_dir() else None
    lic = resolve_license(opts.license, source.license if source else None, task_root=task_root,
                          dataset_label=opts.dataset_license)
    bundles, every_bundle = load_bundles(task_root, listed.ids)

    # The server seeds each task at the tier its probe verified; a probe run with --state-fidelity
    # filesystem chose unchecked forks, and so does its workspace.
    tiers = kept_tiers(listed.receipt)
    alerts = kept_alerts(listed.receipt)
    if listed.receipt is not None and (listed.receipt.get("summary") or {}).get("state_fidelity") == "filesystem":
        engine = replace(engine, state_fidelity="filesystem")
    checks = kept_checks(listed.receipt)
    rows = {b.id: rows_mod.make_row(b, agent_name=names.agent_for(opts.profile), tier=tiers.get(b.id),
                                    alerts=alerts.get(b.id), checks=checks.get(b.id, (None, None)),
                                    profile=opts.profile)
            for b in _for_rows(bundles, opts)}
    split = split_bundles(bundles, val_fraction=opts.val_fraction, seed=opts.seed, stratify=opts.stratify,
                          families=root_families(every_bundle))
    _check_disjoint(split, rows)
    pool = split.train + split.validation  # tiny sets: examples may reuse validation tasks
    example = [pool[i % len(pool)] for i in range(EXAMPLE_ROWS)]
    evidence = gather(rows, listed.ids, listed.receipt, [Path(p) for p in opts.rollouts])
    if not lic.stated:
        evidence.notes.append("license unknown (--license unknown): `gym env publish` will refuse it")
    evidence.notes += missing_evidence(evidence.counts(), names, dest=dest, task_root=task_root,
                                       ids_file=Path(opts.ids_file).resolve(), image=opts.image,
                                       has_receipt=listed.receipt is not None)
    split_rows = {"train": [rows[i] for i in split.train], "validation": [rows[i] for i in split.validation],
                  "example": [rows[i] for i in example]}
    description = (f"CUA-Gym computer-use tasks ({len(split.train)} train, {len(split.validation)} validation) "
                   "on Linux desktop containers forked per rollout from each task's set-up golden state and "
                   "scored by the task's own reward.py (partial credit in [0, 1])")
    return WorkspacePlan(opts, dest, task_root, names, engine, authors, source, lic, bundles, split, example,
                         evidence, split_rows, hashlib.sha256(orjson.dumps(split_rows)).hexdigest()[:8], description)


def write_workspace(plan: WorkspacePlan) -> WorkspaceResult:
    """Write `plan` into a fresh sibling folder of its destination, then swap it into place."""
    opts, dest, task_root, names, engine = plan.opts, plan.dest, plan.task_root, plan.names, plan.engine
    authors, source, lic, bundles, split = plan.authors, plan.source, plan.lic, plan.bundles, plan.split
    example, evidence, split_rows, data_hash = plan.example, plan.evidence, plan.split_rows, plan.data_hash
    description = plan.description

    # Write into a fresh sibling folder, then swap it in: a failed run leaves dest untouched. The
    # folder is registered with gc's temp-folder registry, so a kill -9 leftover is reclaimable.
    dest.parent.mkdir(parents=True, exist_ok=True)
    stage = Path(tempfile.mkdtemp(prefix=f".{dest.name}.", dir=dest.parent))
    register_temp_dir(stage, labels={"shinken.kind": "workspace-staging"})
    try:
        server = stage / names.server_dir
        for rel in SERVER_CODE:
            (server / rel).parent.mkdir(parents=True, exist_ok=True)
            (server / rel).write_text(_template(f"server/{rel}"))
        wheel = build_wheel(server / "vendor", [(server / rel).read_text() for rel in SERVER_CODE])
        agent_dir = stage / "responses_api_agents" / gymcfg.agent_dir(opts.profile)
        agent_dir.mkdir(parents=True)
        for rel, template in {"app.py": AGENT_APP[opts.profile.screenshots], **AGENT_CODE}.items():
            (agent_dir / rel).write_text(_template(f"agent/{template}"))
        store = copy_bundles(bundles, stage / names.tasks, task_root)
        for split_name, docs in split_rows.items():
            _jsonl(stage / names.data(split_name), docs)
        _jsonl(server / "tests" / "verifier_cases.jsonl", evidence.cases)
        (server / "requirements.txt").write_text(_render(
            "server/requirements.txt.tmpl", shinken_requirement=f"./vendor/{wheel.name}"))
        (stage / names.server_config).parent.mkdir(parents=True, exist_ok=True)
        (stage / names.server_config).write_text(dump_yaml(
            gymcfg.server_config(names, engine, lic, description),
            comment=f"Generated by `shinken make-workspace` (shinken {shinken.__version__}). Paths are relative to "
                    "the workspace root;\n${oc.env:VAR,default} values may be overridden by setting VAR "
                    f"(see {names.server_dir}/README.md)."))
        (stage / names.sandbox_config).write_text(dump_yaml(
            gymcfg.sandbox_config(names, engine),
            comment="The shinken NeMo Gym sandbox provider (docs/provider.md): add this file to config_paths and "
                    "name\n`sandbox_provider: shinken_sandbox` in an agent or server; install the wheel in vendor/ "
                    "into its venv."))
        env_dir = stage / names.env_dir
        env_dir.mkdir(parents=True)
        (env_dir / "__init__.py").write_text("")
        (env_dir / "config.yaml").write_text(dump_yaml(gymcfg.environment_config(names)))
        (env_dir / "manifest.yaml").write_text(dump_yaml(gymcfg.manifest(
            names, version=f"{shinken.__version__.split('+')[0]}+{data_hash}", description=description, lic=lic,
            authors=authors, determinism=evidence.determinism, profile=opts.profile)))
        counts = evidence.counts()
        common = dict(
            name=names.name, shinken_version=shinken.__version__, source=_describe_source(source),
            state_fidelity=engine.state_fidelity,
            image=opts.image, license=lic.spdx, dataset_license=lic.gym_label, license_source=lic.source,
            n_train=len(split.train), n_validation=len(split.validation), seed=opts.seed, stratify=opts.stratify,
            val_fraction=opts.val_fraction, n_bundles=store.bundles, bytes_total=store.bytes_total,
            bytes_stored=store.bytes_stored, linked=store.linked, determinism=evidence.determinism,
            determinism_why=evidence.sources.get("determinism", "no probe receipt"),
            n_cases=len(evidence.cases), cases=_case_table(evidence.cases),
            gates="\n".join(gymcfg.gate_commands(names)), run="\n".join(gymcfg.run_commands(names, opts.profile)),
            profile_section=_profile_section(opts.profile, opts.screenshot_history, names),
            zero=counts["zero_reward"], full=counts["full_reward"], model_config=gymcfg.MODEL_CONFIG,
            agent=names.agent_for(opts.profile), server_dir=names.server_dir, tasks=names.tasks)
        (server / "README.md").write_text(_render("server/README.md.tmpl", **common))
        (env_dir / "README.md").write_text(_render("environment/README.md.tmpl", **common))
        (stage / "env.yaml").write_text(_template("env.yaml"))
        manifest = {
            "schema": "shinken.workspace/1",
            "created_at": utc_now(),
            "shinken_version": shinken.__version__,
            "name": names.name,
            "task_root": str(task_root),
            "ids_file": str(Path(opts.ids_file).resolve()),
            "image": opts.image,
            "seed": opts.seed,
            "val_fraction": opts.val_fraction,
            "stratify": opts.stratify,
            "max_steps": opts.max_steps,
            "license": lic.spdx,
            "dataset_license": lic.gym_label,
            "license_source": lic.source,
            "authors": authors,
            "source": source.to_json() if source else None,
            "wheel": str(names.server_dir / "vendor" / wheel.name),
            "store": {**store.to_json(), "path": str(names.tasks), "index": store.index},
            "evidence": {**evidence.sources, "determinism_level": evidence.determinism, "verifier_cases": counts},
            "train": split.train,
            "validation": split.validation,
            "families": split.families,
            "example": example,
        }
        if not opts.profile.is_default:
            manifest["profile"] = {**opts.profile.to_json(), "screenshot_history": opts.screenshot_history}
        write_json(stage / MANIFEST, manifest, "workspace_manifest")
        os.chmod(stage, 0o755)
        (stage / OWNER_MARKER).unlink()
        swap_into_place(stage, dest)
    except BaseException:
        shutil.rmtree(stage, ignore_errors=True)
        raise
    finally:
        unregister_temp_dir(stage)
    return WorkspaceResult(dest, names.name, split.train, split.validation, example,
                           dest / names.server_dir / "vendor" / wheel.name, lic.spdx, evidence.determinism,
                           counts, store.to_json(), evidence.notes, commands_for(dest, names, opts.profile))


def _check_band_profile(ids_file: Path, profile: Profile) -> None:
    """A band (or its control) from `shinken profile` was measured with one observation/action
    profile; a workspace of another profile would train on a band that means nothing for it."""
    from shinken.profiles.run import BAND_FILE, CONTROL_FILE, PROFILE_FILE

    doc_path = ids_file.parent / PROFILE_FILE
    if ids_file.name not in (BAND_FILE, CONTROL_FILE) or not doc_path.is_file():
        return
    try:
        measured = orjson.loads(doc_path.read_bytes()).get("policy_profile")
    except (OSError, ValueError, AttributeError):
        return  # not a profile document we can read: the id list stands on its own
    if measured is None or Profile.from_json(measured) == profile:
        return
    m = Profile.from_json(measured)
    raise ShinkenError(f"--ids {ids_file}: this band was measured with profile {m.name} ({doc_path}), the workspace "
                       f"would serve {profile.name}; make it with --observation {m.observation} --actions {m.actions}"
                       + ("" if m.exec else " --no-exec") + " (and the same screenshot settings), or profile this "
                       "profile's rollouts first")


def _check_disjoint(split: Split, rows: dict[str, dict[str, Any]]) -> None:
    # Defence in depth: the split guarantees this; a violation is a bug, not bad input.
    train, val = split.train, split.validation
    assert not set(train) & set(val), "train and validation share task ids"
    side = {i: "train" for i in train} | {i: "validation" for i in val}
    assert all(len({side[i] for i in members}) == 1 for members in split.families.values()), \
        "a task family is on both sides of the split"
    ti = {normalize_instruction(rows[i]["instruction"]) for i in train}
    assert not any(normalize_instruction(rows[i]["instruction"]) in ti for i in val), \
        "train and validation share an instruction"
