"""The license a workspace states, and where it came from.

Two places hold it: the Gym manifest's `licensing` (an SPDX expression, or `unknown`) and each
dataset's `license` in the config, which NeMo Gym 0.7.0 restricts to a few labels
(`nemo_gym.config_types.DatasetConfig.license`). The value comes from the task root's source
record (the dataset card's `license:`, kept by `shinken download`) or from `--license`; a
workspace never says TBD/unknown unless the user passed that.
"""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path

from shinken.errors import ShinkenError

# SPDX id -> NeMo Gym 0.7.0 dataset label. Hugging Face cards use the lower-case SPDX ids.
GYM_LABELS = {
    "Apache-2.0": "Apache 2.0",
    "MIT": "MIT",
    "CC-BY-4.0": "Creative Commons Attribution 4.0 International",
    "CC-BY-SA-4.0": "Creative Commons Attribution-ShareAlike 4.0 International",
    "CC-BY-NC-3.0": "CC BY-NC 3.0",
    "GPL-3.0-only": "GNU General Public License v3.0",
}
# Other licenses a dataset card may name: valid in the manifest, without a Gym dataset label.
KNOWN_SPDX = [*GYM_LABELS, "CC0-1.0", "CC-BY-NC-4.0", "CC-BY-NC-SA-4.0", "CC-BY-ND-4.0", "CC-BY-3.0",
              "BSD-2-Clause", "BSD-3-Clause", "GPL-2.0-only", "LGPL-3.0-only", "MPL-2.0", "ODC-By-1.0",
              "ODbL-1.0", "PDDL-1.0", "Unlicense"]
ALIASES = {
    "gpl-3.0": "GPL-3.0-only", "gpl-2.0": "GPL-2.0-only", "lgpl-3.0": "LGPL-3.0-only", "odc-by": "ODC-By-1.0",
    "odbl": "ODbL-1.0", "pddl": "PDDL-1.0", "cc0": "CC0-1.0", "unlicense": "Unlicense",
    **{label.casefold(): spdx for spdx, label in GYM_LABELS.items()},
    "cc by-sa 4.0": "CC-BY-SA-4.0",
}
UNSTATED = ("unknown", "tbd")


@dataclass(frozen=True)
class License:
    spdx: str  # manifest `licensing`: an SPDX id, or "unknown" (only when the user said so)
    gym_label: str  # every dataset's `license` in the config
    source: str  # where it came from, for the README and the workspace manifest

    @property
    def stated(self) -> bool:
        return self.spdx != "unknown"


def _canonical(value: str) -> str | None:
    text = value.strip()
    by_fold = {s.casefold(): s for s in KNOWN_SPDX}
    return by_fold.get(text.casefold()) or ALIASES.get(text.casefold())


def resolve_license(option: str | None, card_license: str | None, *, task_root: Path,
                    dataset_label: str | None = None) -> License:
    """The workspace license from `--license` (wins) or the source record's card license."""
    if option is not None:
        value, source = option, "--license"
    elif card_license:
        value, source = card_license, f"dataset card ({task_root}/.shinken-source.json)"
    else:
        raise ShinkenError(
            f"{task_root}: no license is known for these tasks (the task root holds no .shinken-source.json "
            "from `shinken download`, or its dataset card names none); pass --license SPDX-ID "
            "(e.g. --license CC-BY-4.0), or --license unknown to leave it unstated")
    if value.strip().casefold() in UNSTATED:
        return License("unknown", "TBD", source)
    spdx = _canonical(value)
    if spdx is None:
        raise ShinkenError(f"license {value!r} ({source}): not an SPDX id shinken knows; pass --license with one of "
                           f"{', '.join(KNOWN_SPDX)}")
    label = dataset_label or GYM_LABELS.get(spdx)
    if label is None:
        raise ShinkenError(
            f"license {spdx} ({source}): NeMo Gym 0.7.0 accepts only these dataset licenses: "
            f"{', '.join(GYM_LABELS.values())}, TBD; pass --dataset-license with the label to write "
            "(the manifest keeps {spdx})".replace("{spdx}", spdx))
    if label not in (*GYM_LABELS.values(), "TBD"):
        raise ShinkenError(f"--dataset-license {label!r}: NeMo Gym 0.7.0 accepts only "
                           f"{', '.join(GYM_LABELS.values())}, TBD")
    return License(spdx, label, source)
