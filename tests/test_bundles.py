"""The bundle loader on every layout, every defect code, and hostile folders.

Bundles are real folders written by the tests (and the repo's demo bundles); nothing is
faked. Each defect code in bundles/model.py has a test that produces it on purpose."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest

from shinken.bundles.loader import MAX_BUNDLE_FILE, MAX_TASK_FILE, discover, load_bundle, load_root
from shinken.bundles.model import FATAL_DEFECTS, NOTE_DEFECTS
from shinken.errors import ShinkenError

UUID = "0018392e-cfed-5e2f-8278-a4580d64a00a"
REWARD = b"import os\nprint('REWARD: 1.0' if os.path.exists('/home/user/x') else 'REWARD: 0.0')\n"


def task_doc(tid: str = UUID, **over) -> dict:
    doc = {
        "id": tid,
        "instruction": "Create /home/user/x",
        "app_type": "os",
        "difficulty": "easy",
        "config": [
            {"type": "download", "parameters": {"files": [{"url": "./initial_setup.py", "path": "/home/user/initial_setup.py"}]}},
            {"type": "execute", "parameters": {"command": "python3 /home/user/initial_setup.py"}},
        ],
        "evaluator": {"type": "python", "url": "./reward.py"},
    }
    doc.update(over)
    return {k: v for k, v in doc.items() if v is not None}


def write_bundle(folder: Path, doc: dict | bytes | None = None, *, task_name: str = "task.json",
                 reward: bytes | None = REWARD, setup: dict[str, bytes] | None = None) -> Path:
    folder.mkdir(parents=True, exist_ok=True)
    if doc is not None:
        (folder / task_name).write_bytes(doc if isinstance(doc, bytes) else json.dumps(doc).encode())
    if reward is not None:
        (folder / "reward.py").write_bytes(reward)
    for name, data in (setup if setup is not None else {"initial_setup.py": b"print('setup')\n"}).items():
        (folder / name).write_bytes(data)
    return folder


def codes(bundle) -> set[str]:
    return {d.code for d in bundle.defects}


# ---------------------------------------------------------------------------- layouts


def test_release_layout(tmp_path: Path) -> None:
    folder = write_bundle(tmp_path / UUID, task_doc())
    b = load_bundle(folder)
    assert b.layout == "release" and b.id == UUID and b.ok and b.defects == []
    assert b.task_file == folder / "task.json"
    assert set(b.files) == {"task.json", "reward.py", "initial_setup.py"}
    assert b.files["reward.py"] == len(REWARD)
    assert [s.type for s in b.setup] == ["download", "execute"]
    assert b.setup[1].command() == "python3 /home/user/initial_setup.py"
    assert b.reward_path == folder / "reward.py" and b.setup_files == ["initial_setup.py"]
    assert b.difficulty == "easy" and b.app_type == "os" and b.state_fidelity == "process_memory"
    assert len(b.bundle_hash) == 64
    assert json.loads(json.dumps(b.to_json()))["layout"] == "release"


def test_pipeline_layout_output_final(tmp_path: Path) -> None:
    final = tmp_path / "export" / "output" / "final"
    for tid in ("calc_gsd_044", "calc_gsd_002"):
        write_bundle(final / tid, task_doc(tid, generated_at="2025-01-01", adversarial_rounds=2), task_name="config.json",
                     setup={"initial_setup.py": b"print(1)\n", "golden_patch.py": b"print('solve')\n",
                            "REVIEW.md": b"ok\n"})
    (tmp_path / "export" / "README.md").write_text("not a task")
    folders = discover(tmp_path / "export")
    assert [f.name for f in folders] == ["calc_gsd_002", "calc_gsd_044"]  # sorted
    bundles = load_root(tmp_path / "export")
    assert [b.layout for b in bundles] == ["pipeline", "pipeline"]
    assert all(b.ok and b.defects == [] for b in bundles)  # pipeline extras are known fields
    assert bundles[0].task_file.name == "config.json"
    assert bundles[0].raw["generated_at"] == "2025-01-01"


def test_pipeline_layout_recognised_by_golden_patch(tmp_path: Path) -> None:
    folder = write_bundle(tmp_path / "calc_1", task_doc("calc_1"), task_name="config.json",
                          setup={"initial_setup.py": b"x=1\n", "golden_patch.py": b"x=2\n"})
    assert load_bundle(folder).layout == "pipeline"


def test_demo_layout_and_repo_demo_bundles(demo_root: Path) -> None:
    bundles = {b.id: b for b in load_root(demo_root)}
    assert bundles["hello-file"].layout == "demo"
    assert bundles["hello-file"].state_fidelity == "filesystem"
    assert bundles["9a1f6c2e-5b3d-4e8a-9c71-2f0d4b6a8e13"].layout == "release"
    assert bundles["hello-file"].ok
    # A hand-written demo may use a readable id that is not its folder name.
    folder = write_bundle(demo_root / "my-demo", task_doc("another-name"), task_name="config.json")
    b = load_bundle(folder)
    assert b.layout == "demo" and b.id == "another-name" and "id_mismatch" not in codes(b)


def test_task_json_wins_over_config_json(tmp_path: Path) -> None:
    folder = write_bundle(tmp_path / UUID, task_doc(instruction="from task.json"))
    (folder / "config.json").write_text(json.dumps(task_doc(instruction="from config.json")))
    b = load_bundle(folder)
    assert b.task_file.name == "task.json" and b.instruction == "from task.json" and b.layout == "release"


def test_root_that_is_itself_a_bundle(tmp_path: Path) -> None:
    folder = write_bundle(tmp_path / UUID, task_doc())
    assert discover(folder) == [folder]
    assert [b.id for b in load_root(folder)] == [UUID]


def test_discover_skips_hidden_and_files_and_rejects_bad_roots(tmp_path: Path) -> None:
    write_bundle(tmp_path / "root" / UUID, task_doc())
    write_bundle(tmp_path / "root" / ".partial-x" / "t", task_doc())
    (tmp_path / "root" / "notes.txt").write_text("x")
    assert [p.name for p in discover(tmp_path / "root")] == [UUID]
    with pytest.raises(ShinkenError, match="no such task root"):
        discover(tmp_path / "missing")
    with pytest.raises(ShinkenError, match="not a folder"):
        discover(tmp_path / "root" / "notes.txt")


def test_bundle_hash_is_content_addressed(tmp_path: Path) -> None:
    a = load_bundle(write_bundle(tmp_path / "a" / UUID, task_doc()))
    b = load_bundle(write_bundle(tmp_path / "b" / UUID, task_doc()))
    assert a.bundle_hash == b.bundle_hash  # same names + bytes, different place
    (tmp_path / "b" / UUID / "reward.py").write_bytes(REWARD + b"# changed\n")
    assert load_bundle(tmp_path / "b" / UUID).bundle_hash != a.bundle_hash
    big = tmp_path / "c" / UUID
    write_bundle(big, task_doc(), setup={"initial_setup.py": os.urandom(300_000)})
    first = load_bundle(big).bundle_hash
    assert load_bundle(big).bundle_hash == first  # files beyond one read hash the same way


def test_synthetic_release_corpus_loads_clean(tmp_path: Path) -> None:
    sys.path.insert(0, str(Path(__file__).resolve().parent.parent))
    from benchmarks.synthetic_release import make_corpus

    bundles = load_root(make_corpus(tmp_path / "rel", n=200, seed=4))
    assert len(bundles) == 200 and all(b.ok and b.defects == [] and b.layout == "release" for b in bundles)
    assert len({b.bundle_hash for b in bundles}) == 200


# ---------------------------------------------------------------------------- defect codes

FATAL_CASES = {}
NOTE_CASES = {}


def _case(table: dict, code: str):
    def deco(fn):
        table.setdefault(code, []).append(fn)
        return fn
    return deco


@_case(FATAL_CASES, "invalid_json")
def _not_utf8(d: Path):
    write_bundle(d, '{"id": "caf\xe9"}'.encode("latin-1"))


@_case(FATAL_CASES, "invalid_json")
def _binary_garbage(d: Path):
    write_bundle(d, bytes(range(256)) * 8)


@_case(FATAL_CASES, "invalid_json")
def _top_level_list(d: Path):
    write_bundle(d, b"[1, 2, 3]")


@_case(FATAL_CASES, "invalid_json")
def _empty_task_file(d: Path):
    write_bundle(d, b"")


@_case(FATAL_CASES, "invalid_json")
def _absurdly_deep(d: Path):
    write_bundle(d, b"[" * 5000 + b"]" * 5000)


@_case(FATAL_CASES, "schema")
def _missing_id(d: Path):
    doc = task_doc()
    del doc["id"]
    write_bundle(d, doc)


@_case(FATAL_CASES, "schema")
def _empty_object(d: Path):
    write_bundle(d, b"{}")


@_case(FATAL_CASES, "schema")
def _bad_step_parameters(d: Path):
    doc = task_doc()
    doc["config"].append({"type": "sleep", "parameters": {"seconds": "two"}})
    write_bundle(d, doc)


@_case(FATAL_CASES, "schema")
def _download_files_not_a_list(d: Path):
    doc = task_doc()
    doc["config"][0]["parameters"]["files"] = 7  # used to crash the loader
    write_bundle(d, doc)


@_case(FATAL_CASES, "missing_task_file")
def _no_task_file(d: Path):
    write_bundle(d, None)


@_case(FATAL_CASES, "missing_reward")
def _no_reward(d: Path):
    write_bundle(d, task_doc(), reward=None)


@_case(FATAL_CASES, "missing_reward")
def _evaluator_names_missing_file(d: Path):
    write_bundle(d, task_doc(evaluator={"type": "python", "url": "./grade.py"}))


@_case(FATAL_CASES, "empty_reward")
def _zero_byte_reward(d: Path):
    write_bundle(d, task_doc(), reward=b"")


@_case(FATAL_CASES, "empty_reward")
def _comment_only_reward(d: Path):
    write_bundle(d, task_doc(), reward=b"# TODO write the checker\n\n   \n# later\n")


@_case(FATAL_CASES, "missing_setup_file")
def _download_names_missing_file(d: Path):
    write_bundle(d, task_doc(), setup={})


@_case(FATAL_CASES, "too_large")
def _huge_task_file(d: Path):
    write_bundle(d, None)
    with open(d / "task.json", "wb") as fh:  # sparse: costs no disk
        fh.truncate(MAX_TASK_FILE + 1)


@_case(FATAL_CASES, "too_large")
def _huge_setup_file(d: Path):
    write_bundle(d, task_doc(), setup={})
    with open(d / "initial_setup.py", "wb") as fh:
        fh.truncate(MAX_BUNDLE_FILE + 1)


@_case(FATAL_CASES, "unsafe_link")
def _link_out_of_bundle(d: Path):
    write_bundle(d, task_doc(), reward=None)
    os.symlink("/etc/passwd", d / "reward.py")


@_case(FATAL_CASES, "unsafe_link")
def _symlink_loop(d: Path):
    write_bundle(d, task_doc())
    os.symlink("loop.py", d / "loop.py")


@_case(NOTE_CASES, "unknown_step")
def _unknown_step(d: Path):
    doc = task_doc()
    doc["config"].append({"type": "activate_window", "parameters": {"window_name": "Calc"}})
    write_bundle(d, doc)


@_case(NOTE_CASES, "extra_fields")
def _extra_fields(d: Path):
    write_bundle(d, task_doc(homepage="x", reviewer="y"))


@_case(NOTE_CASES, "id_mismatch")
def _id_mismatch(d: Path):
    write_bundle(d, task_doc("ffffffff-0000-4000-8000-000000000000"))


@_case(NOTE_CASES, "empty_instruction")
def _empty_instruction(d: Path):
    write_bundle(d, task_doc(instruction="   "))


@_case(NOTE_CASES, "normalized")
def _step_fields_beside_type(d: Path):
    # The pipeline export's shape: no `parameters`, the script named relative to the bundle.
    write_bundle(d, task_doc(config=[{"type": "execute", "command": ["python3", "initial_setup.py"]}]))


@_case(NOTE_CASES, "normalized")
def _evaluator_url_without_dot(d: Path):
    write_bundle(d, task_doc(evaluator={"type": "python", "url": "reward.py"}))


@_case(NOTE_CASES, "normalized")
def _evaluator_script(d: Path):
    write_bundle(d, task_doc(evaluator={"type": "python", "script": "reward.py"}))


@_case(NOTE_CASES, "normalized")
def _app_type_list(d: Path):
    write_bundle(d, task_doc(app_type=["chrome", "gimp"]))


@_case(FATAL_CASES, "missing_setup_file")
def _relative_script_missing(d: Path):
    write_bundle(d, task_doc(config=[{"type": "execute", "command": "python3 initial_setup.py"}]), setup={})


def test_every_defect_code_has_a_case() -> None:
    covered = set(FATAL_CASES) | set(NOTE_CASES) | {"unreadable"}  # unreadable: its own test below
    assert covered == FATAL_DEFECTS | NOTE_DEFECTS


@pytest.mark.parametrize("code, make", [(c, f) for c, fs in FATAL_CASES.items() for f in fs],
                         ids=lambda v: v if isinstance(v, str) else v.__name__.strip("_"))
def test_fatal_defect(tmp_path: Path, code: str, make) -> None:
    folder = tmp_path / UUID
    make(folder)
    b = load_bundle(folder)
    assert code in codes(b), b.defects
    assert not b.ok
    d = next(d for d in b.defects if d.code == code)
    assert d.fatal and d.path.startswith(str(folder)) and d.detail
    # A defective bundle still loads as part of a root and never stops the load.
    write_bundle(tmp_path / "good", task_doc("good"), task_name="config.json")
    assert {x.path.name: x.ok for x in load_root(tmp_path)} == {UUID: False, "good": True}


@pytest.mark.parametrize("code, make", [(c, f) for c, fs in NOTE_CASES.items() for f in fs],
                         ids=lambda v: v if isinstance(v, str) else v.__name__.strip("_"))
def test_note_defect(tmp_path: Path, code: str, make) -> None:
    folder = tmp_path / UUID
    make(folder)
    b = load_bundle(folder)
    assert codes(b) == {code}, b.defects
    assert b.ok and not b.defects[0].fatal


def test_pipeline_variants_read_as_their_documented_form(tmp_path: Path) -> None:
    """What the pipeline export writes means the same as the documented shape: the loader
    gives the sandbox the steps it would have had (a placing download, then the command)."""
    doc = task_doc(config=[{"type": "execute", "command": ["python3", "initial_setup.py"]},
                           {"type": "sleep", "seconds": 2}],
                   evaluator={"type": "python", "script": "check.py"}, app_type=["gmail_mock", "chrome"])
    folder = write_bundle(tmp_path / UUID, doc, reward=None,
                          setup={"initial_setup.py": b"print(1)\n", "check.py": REWARD, "golden_patch.py": b"x = 1\n"})
    b = load_bundle(folder)
    assert b.ok and codes(b) == {"normalized"}, b.defects
    assert [(s.index, s.type, s.parameters, bool(s.added_for)) for s in b.setup] == [
        (0, "download", {"files": [{"url": "./initial_setup.py", "path": "/home/user/initial_setup.py"}]}, True),
        (0, "execute", {"command": ["python3", "initial_setup.py"]}, False),
        (1, "sleep", {"seconds": 2}, False),
    ]
    assert b.reward_name == "check.py" and b.reward_path == folder / "check.py"
    assert b.app_type == "gmail_mock,chrome"
    details = " | ".join(d.detail for d in b.defects)
    assert "fields beside `type`" in details and "placed at /home/user/" in details and "evaluator.script" in details
    # A string command, `./` form, and a script already placed by a download are read the same way.
    doc = task_doc(config=[{"type": "execute", "parameters": {"command": "cd /home/user && bash ./initial_setup.sh"}}])
    b = load_bundle(write_bundle(tmp_path / "b", doc, setup={"initial_setup.sh": b"echo hi\n"}))
    assert [s.type for s in b.setup] == ["download", "execute"] and codes(b) == {"normalized", "id_mismatch"}
    assert [s.added_for for s in load_bundle(write_bundle(tmp_path / "c", task_doc("c"))).setup] == [None, None]
    # The reference solution is never copied in because a command mentions it.
    doc = task_doc(config=[{"type": "execute", "command": ["python3", "golden_patch.py"]}])
    b = load_bundle(write_bundle(tmp_path / "d", doc, setup={"golden_patch.py": b"x = 1\n"}))
    assert [s.type for s in b.setup] == ["execute"]


def test_unknown_step_and_extras_are_kept(tmp_path: Path) -> None:
    doc = task_doc(homepage="x")
    doc["config"].append({"type": "activate_window", "parameters": {"window_name": "Calc"}})
    b = load_bundle(write_bundle(tmp_path / UUID, doc))
    assert b.raw["homepage"] == "x"
    assert b.setup[-1].type == "activate_window" and not b.setup[-1].known
    assert b.setup[-1].to_json() == {"type": "activate_window", "parameters": {"window_name": "Calc"}}


def _without_dac(cmd: list[str]) -> list[str]:
    """Root reads anything, so drop CAP_DAC_OVERRIDE/READ_SEARCH in the child; an
    ordinary user is already subject to permissions."""
    if os.geteuid() != 0:
        return cmd
    return ["setpriv", "--bounding-set", "-dac_override,-dac_read_search",
            "--inh-caps", "-dac_override,-dac_read_search", "--", *cmd]


def test_unreadable_file_without_dac_override(tmp_path: Path) -> None:
    folder = write_bundle(tmp_path / UUID, task_doc())
    (folder / "reward.py").chmod(0)
    code = (
        "import json, sys\n"
        "from shinken.bundles.loader import load_bundle\n"
        "b = load_bundle(sys.argv[1])\n"
        "print(json.dumps(b.to_json()))\n"
    )
    p = subprocess.run(_without_dac([sys.executable, "-c", code, str(folder)]),
                       capture_output=True, text=True, timeout=60)
    assert p.returncode == 0, p.stderr
    doc = json.loads(p.stdout)
    unreadable = [d for d in doc["defects"] if d["code"] == "unreadable"]
    assert unreadable and unreadable[0]["path"].endswith("reward.py") and unreadable[0]["fatal"]


def test_unreadable_folder_without_dac_override(tmp_path: Path) -> None:
    folder = write_bundle(tmp_path / UUID, task_doc())
    folder.chmod(0)
    code = "import sys; from shinken.bundles.loader import load_bundle; print([d.code for d in load_bundle(sys.argv[1]).defects])"
    try:
        p = subprocess.run(_without_dac([sys.executable, "-c", code, str(folder)]),
                           capture_output=True, text=True, timeout=60)
    finally:
        folder.chmod(0o755)
    assert p.returncode == 0, p.stderr
    assert "unreadable" in p.stdout


# ---------------------------------------------------------------------------- hostile folders


def test_symlink_out_of_bundle_is_never_read(tmp_path: Path) -> None:
    outside = tmp_path / "outside.py"
    outside.write_bytes(REWARD)
    a = write_bundle(tmp_path / "a" / UUID, task_doc())
    os.symlink(outside, a / "extra.py")
    b = load_bundle(a)
    assert "unsafe_link" in codes(b) and "extra.py" not in b.files
    clean = load_bundle(write_bundle(tmp_path / "b" / UUID, task_doc()))
    assert b.bundle_hash == clean.bundle_hash  # the link's target did not enter the hash


def test_symlink_loops_in_root_do_not_hang(tmp_path: Path) -> None:
    root = tmp_path / "root"
    write_bundle(root / UUID, task_doc())
    os.symlink("self", root / "self")  # a loop next to the bundles
    os.symlink("..", root / UUID / "up")  # a link to a folder, inside a bundle
    bundles = load_root(root)
    assert [b.id for b in bundles] == [UUID]
    assert "unsafe_link" in codes(bundles[0])
    loop = tmp_path / "loop"
    os.symlink("loop", loop)
    with pytest.raises(ShinkenError, match="loop or a dangling link"):
        discover(loop)


def test_fifo_named_like_a_bundle_file_does_not_block(tmp_path: Path) -> None:
    folder = write_bundle(tmp_path / UUID, task_doc(), reward=None)
    os.mkfifo(folder / "reward.py")
    os.mkfifo(folder / "config.json")
    b = load_bundle(folder)  # would hang forever if either FIFO were opened
    assert "missing_reward" in codes(b) and b.task_file.name == "task.json"


def test_utf8_bom_is_tolerated(tmp_path: Path) -> None:
    folder = write_bundle(tmp_path / UUID, b"\xef\xbb\xbf" + json.dumps(task_doc()).encode())
    b = load_bundle(folder)
    assert b.ok and b.id == UUID


def test_binary_reward_and_setup_do_not_break_loading(tmp_path: Path) -> None:
    folder = write_bundle(tmp_path / UUID, task_doc(), reward=os.urandom(5000),
                          setup={"initial_setup.py": b"\x00\xff" * 40000})
    b = load_bundle(folder)
    assert b.files["initial_setup.py"] == 80000 and len(b.bundle_hash) == 64


def test_plain_task_check_never_accepts_what_the_schema_refuses() -> None:
    """The loader skips the compiled task schema when a plain check passes (cheaper per
    bundle); that check must be stricter than schemas/task.schema.json. Every top-level
    field the schema constrains is varied over JSON values of every type, nested steps
    too; a schema that gains or loses a field fails here until the plain check follows."""
    import itertools

    import fastjsonschema

    from shinken.bundles.loader import _plainly_valid_task
    from shinken.schemas import load_schema, validator

    schema = load_schema("task")
    assert set(schema["properties"]) == {"id", "instruction", "app_type", "difficulty", "config", "evaluator",
                                         "shinken_state_fidelity", "shinken_post_fork", "shinken_needs"}
    assert schema["required"] == ["id"]
    assert set(schema["definitions"]["step"]["properties"]) == {"type", "parameters"}
    assert set(schema["properties"]["evaluator"]["properties"]) == {"type", "url", "script", "postconfig"}
    scalars: list = [None, True, 0, 1.5, "", "x", "filesystem", "process_memory", "memory", [], ["x"], [1], {},
                     {"type": "x"}]
    steps = [[{"type": "execute"}], [{"type": ""}], [{"type": 1}], [{"parameters": {}}], [{"type": "x", "parameters": []}],
             [{"type": "x", "parameters": {}}], ["execute"], [{"type": "x"}, 3]]
    def accepted(doc: dict) -> bool:
        try:
            validator("task")(doc)
        except fastjsonschema.JsonSchemaValueException:
            return False
        return True

    docs = [task_doc()]
    for key in schema["properties"]:
        for v in scalars + (steps if key in ("config", "shinken_post_fork") else []):
            docs.append({**task_doc(), key: v})
    for key, v in itertools.product(("type", "url", "script", "postconfig"), scalars + steps):
        docs.append(task_doc(evaluator={"type": "python", key: v}))
    docs.append({k: v for k, v in task_doc().items() if k != "id"})
    docs.append([task_doc()])
    plain = 0
    for doc in docs:
        if isinstance(doc, dict) and _plainly_valid_task(doc):
            plain += 1
            assert accepted(doc), doc
    assert plain > 20 and accepted(task_doc())  # the check does pass the ordinary shapes


# ---------------------------------------------------------------------------- the catalog


def test_catalog_finds_by_id_refuses_unknown_and_defective_and_prepares(tmp_path: Path) -> None:
    """The one task -> bundle lookup every server of rollouts uses (bundles/catalog.py)."""
    from shinken.bundles.catalog import BundleCatalog

    write_bundle(tmp_path / UUID, task_doc())
    other = "11111111-2222-3333-4444-555555555555"
    write_bundle(tmp_path / "renamed-folder", task_doc(other))  # a folder not named by its id
    write_bundle(tmp_path / "broken", task_doc("broken", evaluator=None), reward=None)
    seen: list[str] = []

    def prepare(b):
        seen.append(b.id)
        return b, ("needs_mock_web: X not served" if b.id == other else None)

    cat = BundleCatalog(tmp_path, prepare)
    assert cat.get(UUID).id == UUID and cat.get(UUID) is cat.get(UUID)  # prepared once, then cached
    assert cat.raw(other).path.name == "renamed-folder"
    with pytest.raises(ShinkenError, match=f"task '{other}': needs_mock_web"):
        cat.get(other)
    with pytest.raises(ShinkenError, match="not found under"):
        cat.get("no-such-task")
    with pytest.raises(ShinkenError, match="defective"):
        cat.get("broken")
    assert seen == [UUID, other]
    # A folder added later (a fleet host receiving a bundle) is found by its id and replaces the cached one.
    new = write_bundle(tmp_path / "late", task_doc("late-task"))
    with pytest.raises(ShinkenError, match="not found"):
        cat.get("late-task")
    cat.add_folder(new)
    assert cat.get("late-task").path == new
    (tmp_path / UUID / "reward.py").write_bytes(b"print('REWARD: 0.0')\n")
    cat.add_folder(tmp_path / UUID)
    assert cat.get(UUID).files["reward.py"] == len(b"print('REWARD: 0.0')\n")
