"""Dataset hygiene: benchmark overlap (the shipped OSWorld test set and --benchmark folders)
and task families, from the reading of one instruction to the triage report, the probe's
plan, the split and the published dataset. No Docker."""

from __future__ import annotations

import json
import random
import shutil
from pathlib import Path

import orjson
import pytest

from shinken.schemas import validation_error
from shinken.triage.benchmarks import DATA_DIR, shipped
from shinken.triage.families import assign_families
from shinken.triage.overlap import OverlapIndex
from shinken.triage.wording import WORDING_VERSION, read
from shinken.workspace.split import split_ids
from tests.overlap_cases import change_parameter, reword, with_small_talk
from tests.variant_cases import VARIANT_CASES

DATA = Path(__file__).parent / "data"
MANIFEST = DATA / "triage_manifest.json"
OK_REWARD = 'import os\nprint("REWARD: " + str(1.0 if os.path.exists("/home/user/out.txt") else 0.0))\n'
# Test-set size per app of OSWorld's evaluation_examples/test_all.json
OSWORLD_APPS = {"chrome": 46, "gimp": 26, "libreoffice_calc": 47, "libreoffice_impress": 47, "libreoffice_writer": 23,
                "multi_apps": 101, "os": 24, "thunderbird": 15, "vlc": 17, "vs_code": 23}
SLOT_OF_CHANGE = {"num": "num", "quote": "quote", "file": "file", "number word": "num", "value": "value", "name": "name"}


@pytest.fixture(scope="module")
def osworld() -> OverlapIndex:
    return OverlapIndex(list(shipped("osworld").tasks))


def _ids(index: OverlapIndex, text: str) -> list[str]:
    return [m.task_id for m in index.matches(read(text))]


def test_the_shipped_index_is_osworlds_test_set_read_by_this_code() -> None:
    doc = orjson.loads((DATA_DIR / "osworld.json").read_bytes())
    assert validation_error("benchmark_index", doc) is None
    assert {a: sum(1 for t in doc["tasks"] if t["app"] == a) for a in OSWORLD_APPS} == OSWORLD_APPS
    assert len(doc["tasks"]) == 369 and doc["license"] == "Apache-2.0" and "XLANG NLP Lab" in doc["notice"]
    assert "Apache License" in (DATA_DIR / "OSWORLD_LICENSE").read_text()
    # The derived fields are what this code reads (else: scripts/osworld_index.py --refresh).
    assert doc["wording_version"] == WORDING_VERSION
    for t in doc["tasks"]:
        w = read(t["instruction"])
        assert (t["template"], t["slots"]) == (w.template, [[s.kind, s.value] for s in w.slots]), t["id"]


def test_reading_survives_rewording_and_slots_parameters() -> None:
    a = read('Could you please help me change the display language of VS Code to "Arabic"?')
    b = read("CHANGE THE DISPLAY LANGUAGE OF VS CODE TO 'Japanese' THANKS")
    assert a.words == b.words and a.words[-1] == "<quote>"
    assert read("Set line spacing to double").words == read("set the line spacing to 1.5.").words
    assert read("Give slide 2 a RED background").words == read("give slide 3 a teal background.").words
    assert read("Could you do me a favor and lock my screen when I leave, if possible? Thanks in advance!").words \
        == read("Lock my screen when I leave.").words
    assert read("Change the 2 in H2O to a subscript").slots[0].value == "2"  # not a number inside a word
    assert [s.kind for s in read("Copy /home/user/a.txt to report.docx, cell B6, at https://x.org, bob@x.org").slots] \
        == ["path", "file", "cell", "url", "email"]


def test_held_out_style_osworld_tasks_are_all_flagged_with_their_id(osworld: OverlapIndex) -> None:
    """Every test task verbatim, reworded, wrapped in small talk, with one parameter changed,
    and reworded after the change: flagged, its own id among the matches, and a changed
    parameter named in slots_differ."""
    counts = {"verbatim": 0, "reworded": 0, "parameter": 0, "reworded parameter": 0}
    for i, t in enumerate(shipped("osworld").tasks):
        text = t.wording.text
        assert t.task_id in _ids(osworld, text), text
        assert t.task_id in _ids(osworld, reword(text, i)), reword(text, i)
        assert t.task_id in _ids(osworld, with_small_talk(text, i)), with_small_talk(text, i)
        counts["verbatim"] += 1
        counts["reworded"] += 1
        changed = change_parameter(text, i)
        if changed is None:
            continue
        variant, kind = changed
        found = {m.task_id: m for m in osworld.matches(read(variant))}
        assert t.task_id in found, (variant, text)
        differ = found[t.task_id].slots_differ  # the changed parameter, or the quoted name it was in
        assert {SLOT_OF_CHANGE[kind], "quote"} & {d["slot"] for d in differ}, (variant, found[t.task_id])
        assert t.task_id in _ids(osworld, reword(variant, i + 1)), reword(variant, i + 1)
        counts["parameter"] += 1
        counts["reworded parameter"] += 1
    assert counts["parameter"] >= 200, counts  # most test tasks have a parameter to change


def test_realistic_desktop_tasks_are_not_flagged(osworld: OverlapIndex, repo_root: Path) -> None:
    """Other tasks about the same apps (CUA-Gym-like instructions, the demo tasks, the loader's
    variant bundles) and generic one-liners match no test task."""
    texts = [line.strip() for line in (DATA / "overlap_negatives.txt").read_text().splitlines() if line.strip()]
    for p in sorted((repo_root / "demo").glob("*/*.json")):
        doc = json.loads(p.read_text())
        if isinstance(doc, dict) and isinstance(doc.get("instruction"), str):
            texts.append(doc["instruction"])
    for files, *_expected in VARIANT_CASES.values():
        for name, data in files.items():
            if name in ("task.json", "config.json"):
                texts.append(json.loads(data)["instruction"])
    assert len(texts) >= 100
    flagged = {t: _ids(osworld, t) for t in texts if _ids(osworld, t)}
    assert flagged == {}


def test_generic_instructions_match_only_themselves(tmp_path: Path) -> None:
    bench = tmp_path / "bench"
    bench.mkdir()
    for i, text in enumerate(["Save the file.", "Open the file in the editor.", "Rename the folder to 'archive'."]):
        (bench / f"g{i}.json").write_text(json.dumps({"id": f"g{i}", "instruction": text}))
    from shinken.triage.benchmarks import from_folder

    index = OverlapIndex(list(from_folder(bench, set()).tasks))
    assert _ids(index, "save the file") == ["g0"]
    assert _ids(index, "Close the file.") == [] and _ids(index, "Save the file as report.docx and close it.") == []
    assert _ids(index, "Print the file.") == [] and _ids(index, "Open the folder in the editor.") == []


VARIANTS = [
    ["Set the line spacing of the document to double.", "Set the line spacing of the document to 1.5.",
     "set the line spacing of the document to 2"],
    ['Rename the sheet "Sales" to "Revenue" and save the workbook.', 'Rename the sheet "Costs" to "Expenses" and save '
     "the workbook."],
    ["Export report.docx as a PDF to the Desktop.", "Export summary_2024.docx as a PDF to the Desktop."],
    ["Install the Python extension in VS Code.", "Install the Prettier extension in VS Code."],
    ["Make Times New Roman the default font in Writer.", "Make Arial the default font in Writer.",
     "Make DejaVu Sans Mono the default font in Writer."],
    ["Resize photo.png to 800x600 pixels in GIMP and export it as small.png.",
     "Resize photo.png to 1024x768 pixels in GIMP and export it as medium.png."],
    ["Find a flight from Dublin to Vienna on the 10th of next month for 2 adults.",
     "Find a flight from Dublin to Prague on the 10th of next month for 2 adults.",
     "Find a flight from Dublin to Prague on the 12th of next month for 3 adults."],
]


def test_parameter_variants_are_one_family_and_other_tasks_are_not() -> None:
    texts = [t for group in VARIANTS for t in group]
    negatives = [line.strip() for line in (DATA / "overlap_negatives.txt").read_text().splitlines() if line.strip()]
    ids = [f"v{i:03d}" for i in range(len(texts))] + [f"n{i:03d}" for i in range(len(negatives))]
    families = assign_families(ids, [read(t) for t in texts + negatives])
    by_id = dict(zip(ids, families))
    i = 0
    for group in VARIANTS:
        assert len({by_id[f"v{j:03d}"] for j in range(i, i + len(group))}) == 1, group
        i += len(group)
    assert len(set(families)) == len(VARIANTS) + len(negatives)  # nothing else joins
    # The family id is its smallest member id, whatever the order the tasks come in.
    assert assign_families(ids[::-1], [read(t) for t in (texts + negatives)[::-1]]) == families[::-1]


def test_no_family_is_ever_split_across_train_and_validation() -> None:
    """Property: random families (sizes 1 to 40, the larger rarer), strata, seeds and
    fractions; every family lands wholly on one side, the split is a partition, and a
    positive fraction over two or more families gives validation something."""
    rng = random.Random(20261206)
    for _case in range(300):
        items = []
        for f in range(rng.randint(1, 60)):
            size = min(40, int(rng.paretovariate(1.2)))
            stratum = rng.choice("abcd")
            items += [(f"t{f:03d}-{k:02d}", f"fam{f:03d}", stratum if rng.random() < 0.9 else rng.choice("abcd"))
                      for k in range(size)]
        fraction = rng.choice([0.0, 0.01, 0.1, 0.2, 0.5, 0.9, rng.random() * 0.99])
        seed = rng.randint(0, 2**31)
        s = split_ids(items, key=lambda t: t[0], family=lambda t: t[1], stratum=lambda t: t[2],
                      val_fraction=fraction, seed=seed)
        side = {i: "train" for i in s.train} | {i: "validation" for i in s.validation}
        assert sorted(side) == sorted(t[0] for t in items)
        fams: dict[str, set[str]] = {}
        for tid, fam, _ in items:
            fams.setdefault(fam, set()).add(side[tid])
        assert all(len(sides) == 1 for sides in fams.values()), (seed, fraction)
        assert {f: sorted(i for i, g, _ in items if g == f) for f, sides in fams.items()
                if sum(1 for t in items if t[1] == f) > 1} == s.families
        if fraction > 0 and len(fams) >= 2 and round(len(fams) * fraction) >= 1:
            assert s.validation and s.train


def _write_task(root: Path, tid: str, instruction: str, app_type: str = "os") -> None:
    d = root / tid
    d.mkdir(parents=True)
    (d / "task.json").write_text(json.dumps({"id": tid, "instruction": instruction, "app_type": app_type, "config": [],
                                             "evaluator": {"type": "python", "url": "./reward.py"}}))
    (d / "reward.py").write_text(OK_REWARD)


@pytest.fixture()
def mixed_root(tmp_path: Path) -> Path:
    """Two OSWorld test tasks (one verbatim, one with its language changed), parameter
    variants of one task, and two unrelated tasks."""
    root = tmp_path / "tasks"
    _write_task(root, "copy-verbatim", "I want to have my computer automatically locked after I leaved. Can you help me?")
    _write_task(root, "copy-param", 'Please help me change the display language of VS Code to "Japanese".')
    _write_task(root, "spacing-a", "Set the line spacing of notes.docx to double and save it.")
    _write_task(root, "spacing-b", "Set the line spacing of notes.docx to 1.5 and save it.")
    _write_task(root, "own-1", "Write the number of CSV files in /home/user/data into /home/user/count.txt.")
    _write_task(root, "own-2", "Create the folder /home/user/backup and copy every .log file of /home/user/logs into it.")
    return root


def _triage(shinken_cli, root: Path, tmp_path: Path, *extra: str) -> dict:
    report = tmp_path / f"triage-{len(list(tmp_path.glob('triage-*.json')))}.json"
    p = shinken_cli("triage", root, "--manifest", MANIFEST, "--report", report, *extra,
                    setenv={"SHINKEN_CACHE_DIR": str(tmp_path / "cache")})
    assert p.returncode == 0, p.stderr
    doc = json.loads(report.read_text())
    assert validation_error("triage", doc) is None
    return doc


def test_triage_blocks_benchmark_tasks_and_names_families(mixed_root: Path, tmp_path: Path, shinken_cli) -> None:
    doc = _triage(shinken_cli, mixed_root, tmp_path)
    tasks = {t["id"]: t for t in doc["tasks"]}
    verbatim, param = tasks["copy-verbatim"], tasks["copy-param"]
    assert verbatim["verdict"] == "blocked" and verbatim["benchmark_matches"][0]["benchmark"] == "osworld"
    assert verbatim["benchmark_matches"][0]["task_id"] == "a4d98375-215b-4a4d-aee9-3d4370fccc41"
    assert verbatim["benchmark_matches"][0]["score"] == 1.0 and verbatim["benchmark_matches"][0]["slots_differ"] == []
    match = param["benchmark_matches"][0]
    assert match["task_id"] == "7c4cc09e-7a92-40dd-8338-b2286535c4ed"
    assert match["slots_differ"] == [{"slot": "quote", "benchmark": "arabic", "task": "japanese"}]
    reason = next(r for r in param["reasons"] if r["code"] == "benchmark_overlap")
    assert reason["severity"] == "blocker" and reason["subject"] == f"osworld:{match['task_id']}"
    assert "'arabic' -> 'japanese'" in reason["detail"]
    for tid in ("spacing-a", "spacing-b", "own-1", "own-2"):
        assert tasks[tid]["verdict"] == "runnable" and tasks[tid]["benchmark_matches"] == [], tasks[tid]
    assert tasks["spacing-a"]["family"] == tasks["spacing-b"]["family"] == "spacing-a"
    assert len({t["family"] for t in doc["tasks"]}) == 5
    s = doc["summary"]
    assert s["benchmark_overlap"]["flagged"] == 2 and s["benchmark_overlap"]["policy"] == "drop"
    assert s["benchmark_overlap"]["benchmarks"][0] | {"origin": ""} == {
        "name": "osworld", "origin": "", "tasks": 369, "skipped_files": 0, "flagged": 2, "benchmark_tasks_matched": 2}
    assert s["families"]["sizes"] == {"1": 4, "2": 1} and s["families"]["largest"] == {"family": "spacing-a", "tasks": 2}
    assert s["by_reason"]["benchmark_overlap"] == 2
    # An unchanged re-run takes every task from the results memo and the families and matches
    # from the last pass, and gives the same report; an edited instruction is matched anew.
    again = _triage(shinken_cli, mixed_root, tmp_path)
    assert again["summary"]["run"]["analysed"] == 0 and again["tasks"] == doc["tasks"]
    assert again["summary"]["run"]["hygiene_reused"] and not doc["summary"]["run"]["hygiene_reused"]
    task_file = mixed_root / "copy-param" / "task.json"
    task_file.write_text(task_file.read_text().replace("change the display language of VS Code to",
                                                       "archive every message from the vendor named"))
    edited = _triage(shinken_cli, mixed_root, tmp_path)
    assert not edited["summary"]["run"]["hygiene_reused"] and edited["summary"]["benchmark_overlap"]["flagged"] == 1
    assert {t["id"]: t for t in edited["tasks"]}["copy-param"]["verdict"] == "runnable"


def test_keep_option_and_benchmark_folders(mixed_root: Path, tmp_path: Path, shinken_cli) -> None:
    kept = _triage(shinken_cli, mixed_root, tmp_path, "--keep-benchmark-overlap")
    t = {x["id"]: x for x in kept["tasks"]}["copy-param"]
    assert t["verdict"] == "runnable" and t["benchmark_matches"]
    assert next(r for r in t["reasons"] if r["code"] == "benchmark_overlap")["severity"] == "note"
    assert kept["summary"]["benchmark_overlap"]["policy"] == "keep"
    # A lab's private benchmark: a folder of task JSONs with an instruction, nested, other files skipped.
    lab = tmp_path / "lab-eval"
    (lab / "calc").mkdir(parents=True)
    (lab / "calc" / "t1.json").write_text(json.dumps({"id": "lab-001", "instruction":
                                                      "Write the number of CSV files in /srv/in into /srv/n.txt."}))
    (lab / "settings.json").write_text(json.dumps({"theme": "dark"}))
    (lab / "broken.json").write_text("{")
    doc = _triage(shinken_cli, mixed_root, tmp_path, "--benchmark", lab)
    own = {x["id"]: x for x in doc["tasks"]}["own-1"]
    assert [(m["benchmark"], m["task_id"]) for m in own["benchmark_matches"]] == [("lab-eval", "lab-001")]
    assert {d["slot"] for d in own["benchmark_matches"][0]["slots_differ"]} == {"path"}
    lab_row = next(b for b in doc["summary"]["benchmark_overlap"]["benchmarks"] if b["name"] == "lab-eval")
    assert (lab_row["tasks"], lab_row["skipped_files"], lab_row["flagged"]) == (1, 2, 1)
    # Bad folders are one line and exit 2.
    for bad, needle in ((tmp_path / "nope", "not a folder"), (tmp_path / "cache", "no task JSON")):
        p = shinken_cli("triage", mixed_root, "--manifest", MANIFEST, "--benchmark", bad,
                        setenv={"SHINKEN_CACHE_DIR": str(tmp_path / "cache")})
        assert p.returncode == 2 and needle in p.stderr and "Traceback" not in p.stderr, p.stderr


def test_probe_drops_benchmark_tasks_with_their_own_reason(mixed_root: Path, tmp_path: Path, shinken_cli) -> None:
    from shinken.probes.pipeline import ProbeRequest, plan

    report = tmp_path / "triage.json"
    report.write_text(json.dumps(_triage(shinken_cli, mixed_root, tmp_path)))
    p = plan(ProbeRequest(task_root=mixed_root, image="unused:latest", triage=report))
    assert {tid: why[0] for tid, why in p.dropped.items()} == {"copy-verbatim": "benchmark_overlap",
                                                                "copy-param": "benchmark_overlap"}
    assert "osworld test task 7c4cc09e" in p.dropped["copy-param"][1]
    kept = tmp_path / "kept.json"
    kept.write_text(json.dumps(_triage(shinken_cli, mixed_root, tmp_path, "--keep-benchmark-overlap")))
    assert plan(ProbeRequest(task_root=mixed_root, image="unused:latest", triage=kept)).dropped == {}


def test_make_workspace_keeps_a_family_on_one_side(tmp_path: Path, shinken_cli) -> None:
    """Ten families of four parameter variants each (numbers, quoted and file names): at every seed
    tried a family is wholly in train or in validation, and the manifest lists them."""
    root = tmp_path / "tasks"
    frames = ("Set cell B{k} of budget.xlsx to {n} and save.", 'Rename the sheet "Q{k}" of sales.ods to "Archive {n}".',
              "Scale photo{k}.png to {n} pixels wide in GIMP.", "Add {n} empty slides after slide {k} of deck.pptx.",
              "Set the volume of VLC to {n} percent and mute track {k}.", "Indent paragraph {k} of letter.odt by {n} cm.",
              "Create {n} folders named part{k} to part9 under /home/user/out.",
              "Move the bookmark 'Site {k}' into the folder 'Team {n}' in Chrome.",
              "Write the first {n} lines of log{k}.txt to head.txt.", "Set the font size of heading {k} to {n} pt in Writer.")
    topics = ("budget", "harbour", "orchard", "glacier", "lantern", "meadow", "quarry", "tundra", "violin", "walrus")
    ids = []
    for f, (topic, frame) in enumerate(zip(topics, frames)):
        for k in range(4):
            tid = f"{topic}-{k}"
            _write_task(root, tid, frame.format(k=k + 2, n=10 * k + f + 3), app_type=("calc", "writer")[f % 2])
            ids.append(tid)
    ids_file = tmp_path / "ids.txt"
    ids_file.write_text("\n".join(ids) + "\n")
    for seed in range(4):
        dest = tmp_path / f"ws{seed}"
        p = shinken_cli("make-workspace", "--dest", dest, "--task-root", root, "--ids", ids_file, "--seed", seed,
                        "--val-fraction", "0.3", "--license", "CC-BY-4.0")
        assert p.returncode == 0, p.stderr
        manifest = json.loads((dest / ".shinken-workspace.json").read_text())
        assert manifest["families"] == {f"{t}-0": [f"{t}-{k}" for k in range(4)] for t in topics}
        val = set(manifest["validation"])
        assert val and all(set(m) <= val or not set(m) & val for m in manifest["families"].values())
        shutil.rmtree(dest)


def test_published_dataset_drops_benchmark_tasks_and_names_kept_ones(tmp_path: Path, repo_root: Path,
                                                                     shinken_cli) -> None:
    """The recorded demo receipt plus two OSWorld copies: one the probe dropped for overlap (a
    `dropped` row of stage triage), one kept (--keep-benchmark-overlap): the card and
    provenance.json name it, the overlap per benchmark, the family sizes and the settings."""
    from shinken.bundles.loader import load_bundle

    root = tmp_path / "demo"
    shutil.copytree(repo_root / "demo", root)
    _write_task(root, "osworld-dropped", "Could you tone down the brightness of my photo?")
    _write_task(root, "osworld-kept", 'Please help me change the display language of VS Code to "Japanese".')
    doc = json.loads((DATA / "demo_receipt.json").read_text())
    dropped_line = next(t for t in doc["tasks"] if t["reason"] == "zero_signal")
    kept_line = next(t for t in doc["tasks"] if t["outcome"] == "kept")
    detail = "triage: matches osworld test task 7a4deb26-d57d-4ea9-9a73-630f66a7b568 (score 1.00; no parameter differs)"
    for tid, line, extra in (("osworld-dropped", dropped_line, {"reason": "benchmark_overlap", "detail": detail}),
                             ("osworld-kept", kept_line, {})):
        doc["tasks"].append({**line, "task_id": tid, "bundle_hash": load_bundle(root / tid).bundle_hash, **extra})
    doc["kept"].append("osworld-kept")
    doc["dropped"].append({"id": "osworld-dropped", "reason": "benchmark_overlap", "detail": detail})
    doc["summary"]["by_reason"]["benchmark_overlap"] = 1
    receipt = tmp_path / "receipt.json"
    receipt.write_text(json.dumps(doc))
    out = tmp_path / "out"
    p = shinken_cli("publish", "--repo-id", "team/clean", "--receipt", receipt, "--task-root", root,
                    "--license", "apache-2.0", "--local-dir", out, "--json")
    assert p.returncode == 0, p.stderr
    rows = [json.loads(x) for x in (out / "data" / "dropped.jsonl").read_text().splitlines()]
    row = next(r for r in rows if r["task_id"] == "osworld-dropped")
    assert (row["stage"], row["reason"], row["codes"]) == ("triage", "benchmark_overlap", ["benchmark_overlap"])
    prov = json.loads((out / "provenance.json").read_text())
    ov = prov["hygiene"]["benchmark_overlap"]
    assert ov["dropped"] == 1 and [(x["task_id"], x["benchmark_task"]) for x in ov["published"]] == \
        [("osworld-kept", "7c4cc09e-7a92-40dd-8338-b2286535c4ed")]
    assert ov["benchmarks"][0]["name"] == "osworld" and ov["settings"]["threshold"] == 0.6
    assert sum(int(k) * n for k, n in prov["hygiene"]["families"]["sizes"].items()) == len(doc["kept"])
    card = (out / "README.md").read_text()
    assert "## Benchmark overlap and task families" in card and "`osworld-kept`" in card and "KEPT" in card
    assert "1 task(s) were dropped for it" in card and "| `osworld` | 369 |" in card
    assert "each task family" in card and "policy `keep`" in card
