"""The dataset card (`README.md`) of a published dataset: YAML metadata the hub reads
(license, task categories, tags, `configs` naming the split files) and a Markdown body whose
every figure comes from the provenance record. Deterministic: the same contents give the same
bytes, so an unchanged re-publish is recognised by its hash."""

from __future__ import annotations

from typing import Any

from huggingface_hub import DatasetCardData

from shinken.publish.contents import Contents

REQUIRED_TAGS = ("rl-environment", "nemo-gym", "computer-use", "shinken")
TASK_CATEGORY = "reinforcement-learning"

SPLIT_MEANING = {
    "train": "kept tasks for training (NeMo Gym rows, as `shinken make-workspace` writes them)",
    "validation": "kept tasks held out; no task family (parameter variants, near-duplicates) is shared with train",
    "band": "kept tasks whose measured pass rate lies inside the profile band",
    "control": "a seeded random sample of the profiled tasks, the size of the band (for the comparison)",
    "dropped": "tasks left out, one row each with the stage, reason and codes",
}
REASON_MEANING = {
    "zero_signal": "the untouched start state already earns the full reward: nothing to learn",
    "nondeterministic": "the untouched start state scored differently on identical forks",
    "setup_error": "the task's setup failed in the sandbox",
    "reward_error": "reward.py crashed or printed no reward",
    "reward_timeout": "reward.py did not finish in time",
    "blocked": "the task image lacks something the task needs (triage)",
    "defective": "the bundle itself is broken (triage)",
    "fidelity": "the start state could not be reproduced faithfully on a fork",
    "infra_error": "the sandbox failed repeatedly; not the task's fault, not retried to success",
    "replay_mismatch": "a recorded rollout replayed on a fork did not earn its recorded reward",
    "alert": "the start state shows an app's alert or first-run wizard (probe --alerts drop)",
    "oracle_fails": "the task's reference solution (golden_patch.py) does not pass its reward: no solution can",
    "reward_passes_vandalism": "the reward reaches 1.0 with the setup's files removed and with them garbled",
    "benchmark_overlap": "the task is an evaluation benchmark's test task (verbatim, reworded or a parameter changed; triage)",
}
TIER_MEANING = {
    "snapshot": "nothing the setup started was alive at commit: a filesystem fork is exact",
    "relaunch": "recorded processes are relaunched on every fork; desktop signature checked against the golden's",
    "reprovision": "fresh container and full setup per rollout, checked the same way",
    "filesystem": "`--state-fidelity filesystem` was passed: processes may be lost, the start state was NOT checked",
    "none": "no tier recorded (dropped before one was assigned, or probed before tiers existed)",
}


def _size_category(n: int) -> str:
    for limit, name in ((1_000, "n<1K"), (10_000, "1K<n<10K"), (100_000, "10K<n<100K"), (1_000_000, "100K<n<1M")):
        if n < limit:
            return name
    return "1M<n<10M"


def _union(*lists: Any) -> list[str]:
    out: list[str] = []
    for items in lists:
        for x in items or []:
            if isinstance(x, str) and x not in out:
                out.append(x)
    return out


def split_files(contents: Contents) -> dict[str, str]:
    """split name -> path in the repo, for every split that has rows."""
    files = {name: f"data/{name}.jsonl" for name, rows in contents.splits.items() if rows}
    if contents.dropped:
        files["dropped"] = "data/dropped.jsonl"
    return files


def metadata(contents: Contents) -> DatasetCardData:
    src = contents.source_card
    files = split_files(contents)
    # The row shapes differ (NeMo Gym rows vs dropped rows), so they are two configs: the
    # hub's viewer and `datasets` need one schema per config.
    configs = [{"config_name": "default", "default": True,
                "data_files": [{"split": s, "path": p} for s, p in files.items() if s != "dropped"]}]
    if "dropped" in files:
        configs.append({"config_name": "dropped", "data_files": [{"split": "dropped", "path": files["dropped"]}]})
    prov = contents.provenance
    extra: dict[str, Any] = {}
    if prov["license_from"] == "source":
        for key in ("license_name", "license_link"):
            if src.get(key):
                extra[key] = src[key]
    if src.get("language"):
        extra["language"] = src["language"]
    source = prov["source"]
    return DatasetCardData(
        license=contents.license,
        pretty_name=contents.repo_id.split("/", 1)[1],
        task_categories=_union([TASK_CATEGORY], src.get("task_categories")),
        tags=_union(REQUIRED_TAGS, src.get("tags")),
        size_categories=[_size_category(prov["bundles"]["tasks"])],
        source_datasets=[source["repo_id"]] if source else None,
        configs=configs,
        **extra,
    )


def _table(header: tuple[str, ...], rows: list[tuple[Any, ...]]) -> list[str]:
    out = ["| " + " | ".join(header) + " |", "|" + "|".join("---" for _ in header) + "|"]
    out += ["| " + " | ".join(str(c) for c in r) + " |" for r in rows]
    return out


def _provenance_rows(prov: dict[str, Any]) -> list[tuple[str, str]]:
    rows: list[tuple[str, str]] = []
    src = prov["source"]
    if src is None:
        rows.append(("Source dataset", "not recorded: the task root was not made by `shinken download` "
                                       "(it has no `.shinken-source.json`)"))
    else:
        rows.append(("Source dataset", f"`{src['repo_id']}` ({src['repo_type']})"))
        rows.append(("Source revision", f"`{src['revision']}`"))
        for a in src["archives"]:
            rows.append(("Source archive", f"`{a['path']}`: sha256 `{a['sha256']}`, {a['size']:,} bytes"))
    lic_from = {"source": "from the source dataset's card", "option": "given with `--license`"}[prov["license_from"]]
    source_lic = src.get("license") if src else None
    note = f"; the source's card says `{source_lic}`" if source_lic and source_lic != prov["license"] else ""
    rows.append(("License", f"`{prov['license']}` ({lic_from}{note})"))
    img = prov["image"]
    content = f", content hash `{img['content_hash']}`" if img["content_hash"] else ", content hash not known here"
    rows.append(("Task image", f"`{img['ref']}`, id `{img['id']}`{content}"))
    rows.append(("shinken", f"`{prov['shinken_version']}`"))
    probe = prov["probe"]
    hashes = ", ".join(f"`{h}`" for h in probe["config_hashes"]) or "not recorded"
    settings = []
    if probe.get("repeats"):
        settings.append(f"{probe['repeats']} no-op probe(s) per task")
    if probe.get("state_fidelity"):
        settings.append(f"state fidelity `{probe['state_fidelity']}`")
    if probe.get("executor"):
        settings.append(f"executor `{probe['executor']}`")
    rows.append(("Probe settings hash", hashes + (f" ({', '.join(settings)})" if settings else "")))
    sp = prov["split"]
    strat = "not stratified" if sp["stratify"] == "none" else f"stratified by `{sp['stratify']}`"
    rows.append(("Split", f"validation fraction {sp['val_fraction']}, seed {sp['seed']}, {strat}; "
                          "each task family (parameter variants and near-duplicates over the whole task root) stays "
                          f"on one side ({len(sp.get('families') or {})} families of more than one task)"))
    b = prov["bundles"]
    rows.append(("Task bundles", f"`{b['path']}`: {b['tasks']} kept task(s), sha256 `{b['sha256']}`, "
                                 f"{b['size']:,} bytes"))
    prof = prov.get("profile")
    if prof:
        counts = ", ".join(f"{k} {n}" for k, n in prof["counts"].items())
        control = f"; control sample {prof['control_size']} (seed {prof['seed']})" if prof["control_size"] is not None else ""
        rows.append(("Profile band", f"{prof['min_pass']} < pass rate < {prof['max_pass']} (a pass: reward >= "
                                     f"{prof['pass_threshold']}; measured with {prof['min_rollouts']}+ scored rollouts, "
                                     f"{prof['rollouts']} rollouts read): {counts}{control}"))
    return rows


def _counts_section(prov: dict[str, Any]) -> list[str]:
    c = prov["counts"]
    out: list[str] = ["## Counts", ""]
    out += _table(("split", "rows", "what"), [(f"`{s}`", n, SPLIT_MEANING.get(s, "")) for s, n in c["splits"].items()])
    if c["verdict"] is not None:
        out += ["", "Triage verdicts (static checks against the task image):", ""]
        out += _table(("verdict", "tasks"), [(f"`{v}`", n) for v, n in c["verdict"].items()])
    unprobed = (f"; {c['not_in_receipt']} more bundle(s) in the task root were not probed and are in no split"
                if c["not_in_receipt"] else "")
    out += ["", f"Probe outcomes ({c['tasks']} task(s) in the receipt{unprobed}):", ""]
    out += _table(("outcome", "tasks"), [(f"`{o}`", n) for o, n in c["outcome"].items()])
    if c["reason"]:
        out += ["", "Drop reasons:", ""]
        out += _table(("reason", "tasks", "meaning"),
                      [(f"`{r}`", n, REASON_MEANING.get(r, "")) for r, n in c["reason"].items()])
    if c["triage_reason"]:
        out += ["", "Triage reason codes (a task can have several; see shinken's docs/triage.md):", ""]
        out += _table(("code", "tasks"), [(f"`{r}`", n) for r, n in c["triage_reason"].items()])
    out += ["", "Start-state tiers (from the probe receipt):", ""]
    out += _table(("tier", "tasks", "meaning"), [(f"`{t}`", n, TIER_MEANING.get(t, "")) for t, n in c["tier"].items()])
    if any(k != "not_run" for k in (*c.get("oracle", {}), *c.get("vandal", {}))):
        out += ["", "Reward checks (from the probe receipt): can the reference solution pass the reward (oracle), "
                "can damage to the setup's files pass it (vandal); a partial or one-variant pass is kept and flagged "
                "in the rows' `shinken_oracle` / `shinken_vandal`:", ""]
        out += _table(("probe", "outcome", "tasks"),
                      [(probe, f"`{o}`", n) for probe in ("oracle", "vandal") for o, n in c.get(probe, {}).items()])
    return out


def _hygiene_section(h: dict[str, Any] | None) -> list[str]:
    """Benchmark overlap per benchmark, the published tasks that match one, family sizes, settings."""
    if not h:
        return []
    ov, fam = h["benchmark_overlap"], h["families"]
    out = ["", "## Benchmark overlap and task families", ""]
    kept = (f"{len(ov['published'])} published task(s) match a benchmark's test task and were KEPT "
            "(`--keep-benchmark-overlap`, or selected past triage): " + ", ".join(
                f"`{p['task_id']}` ({p['benchmark']} `{p['benchmark_task']}`, score {p['score']})" for p in ov["published"][:20])
            + (" ..." if len(ov["published"]) > 20 else "") if ov["published"]
            else "No published task matches a benchmark's test task.")
    out += [f"Every task was compared with the test tasks of these evaluation benchmarks; {ov['dropped']} task(s) "
            f"were dropped for it (`benchmark_overlap`). {kept}", ""]
    out += _table(("benchmark", "its tasks", "tasks matching (triage)", "where from"),
                  [(f"`{b['name']}`", b["tasks"], b["flagged"], b["origin"]) for b in ov["benchmarks"]])
    st = ov["settings"]
    out += ["", f"Overlap check: {st['method']}; a match scores at least {st['threshold']} and shares at least "
                f"{st['min_shared_words']} words; policy `{ov['policy']}`.", ""]
    fs = fam["settings"]
    out += [f"Task families of the published tasks: {fam['families']} ({fam['with_variants']} with more than one task); "
            f"families: {fs['method']}, threshold {fs['threshold']}.", ""]
    out += _table(("family size", "families"), [(size, n) for size, n in fam["sizes"].items()])
    return out


def render_card(contents: Contents) -> str:
    prov = contents.provenance
    src = prov["source"]
    origin = f"`{src['repo_id']}` at revision `{src['revision'][:12]}`" if src else "a local task folder"
    n_kept = prov["bundles"]["tasks"]
    body: list[str] = [
        f"# {contents.repo_id}",
        "",
        f"Computer-use reinforcement-learning tasks from {origin}, curated by "
        f"shinken `{prov['shinken_version']}`: each task was checked against the task image "
        f"(triage) and run on sandbox forks of its start state (probe). {n_kept} task(s) are kept; every task left "
        "out is listed in the `dropped` config with its reason.",
        "",
        f"Rows are NeMo Gym `responses_create_params` rows for the `{prov['environment']}` environment "
        "(the resources server `shinken make-workspace` writes); "
        f"`{prov['bundles']['path']}` holds the kept task bundles themselves (`task.json`, `reward.py`, setup files).",
        "",
        "## Provenance",
        "",
    ]
    body += _table(("what", "value"), _provenance_rows(prov))
    body += [""]
    body += _counts_section(prov)
    body += _hygiene_section(prov.get("hygiene"))
    if contents.summary_md:
        body += ["", "The run in figures, as `shinken report --md` renders the same inputs:",
                 "", contents.summary_md.strip()]
    body += [
        "",
        "## Use it",
        "",
        "```bash",
        f"shinken download --repo-id {contents.repo_id} --local-dir data/{contents.repo_id.split('/', 1)[1]}"
        "   # the kept bundles, as a task root",
        "```",
        "",
        "then `shinken triage` and `shinken probe` that task root (they give the same verdicts and outcomes: "
        "the bundles are byte-identical) and `shinken make-workspace` for a NeMo Gym workspace. "
        "`provenance.json` holds every figure above in machine-readable form (schema `shinken.provenance/1`).",
        "",
    ]
    return "---\n" + metadata(contents).to_yaml() + "\n---\n\n" + "\n".join(body)
