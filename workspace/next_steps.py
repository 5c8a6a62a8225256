"""What to run when a workspace lacks the evidence Gym's gates demand: `gym env test` requires a
full_reward, a zero_reward and the malformed verifier cases (plus determinism when the manifest
says seeded), and `gym env publish` requires a passing `gym env test`. The commands are spelled
out with this workspace's own paths, so there is no silent dead end."""

from __future__ import annotations

import shlex
from pathlib import Path

from shinken.workspace import gym_config as gymcfg


def missing_evidence(counts: dict[str, int], names: gymcfg.Names, *, dest: Path, task_root: Path, ids_file: Path,
                     image: str, has_receipt: bool) -> list[str]:
    """Notes (one block each) for the required case kinds the workspace has none of."""
    missing = [k for k in ("full_reward", "zero_reward") if not counts.get(k)]
    if not missing:
        return []
    q = shlex.quote
    root, ids, ws = q(str(task_root)), q(str(ids_file)), q(str(dest))
    work = q(str(dest.parent / f"{dest.name}-evidence"))
    gates = (f"`gym env test {names.name}` (and so `gym env publish {names.name}`) will fail: NeMo Gym requires "
             f"{' and '.join(missing)} verifier case(s) and this workspace has none.")
    lines = [gates]
    if "zero_reward" in missing:
        lines += ["  zero_reward comes from a probe receipt (tasks whose untouched start scored 0.0):" if has_receipt
                  else "  zero_reward comes from a probe receipt; --ids was a plain id list:",
                  f"    shinken probe {root} --ids {ids} --image {q(image)} --receipt {work}/receipt.json"]
    if "full_reward" in missing:
        lines += [
            "  full_reward comes from a solution the probe saw pass. With reference solutions (pipeline exports ship "
            "golden_patch.py beside reward.py; otherwise a folder of <task id>.py scripts):",
            f"    shinken probe {root} --ids {ids} --image {q(image)} --probes noop,oracle --oracle SOLUTIONS_DIR "
            f"--receipt {work}/receipt.json      # drop --oracle when the bundles ship golden_patch.py",
            f"    shinken make-workspace --dest {ws} --task-root {root} --ids {work}/receipt.json --image {q(image)} --force",
            "  Without them, from a policy's rollouts of this workspace (served with `gym env start`, see the printed "
            "commands):",
            f"    gym eval run --no-serve --agent {names.agent_instance} --input {names.data('train')} "
            "--output results/profile.jsonl --num-repeats 4     # in the workspace",
            f"    shinken profile {ws}/results/profile.jsonl --task-root {root} --out {work}/profile",
            f"    shinken probe {root} --ids {ids} --image {q(image)} --replay {work}/profile/solved.jsonl "
            f"--receipt {work}/receipt.json",
            f"    shinken make-workspace --dest {ws} --task-root {root} --ids {work}/receipt.json --image {q(image)} "
            f"--rollouts {work}/profile/solved.jsonl --force",
        ]
    return ["\n".join(lines)]
