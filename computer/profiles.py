"""Observation and action profiles: what a rollout's policy sees (the accessibility tree as text,
a screenshot, or both) and which tools it acts with (shinken's element tools, pixel tools of the
common computer-use schemas, or one pyautogui tool as in OSWorld), with or without a shell.

A profile is chosen once per workspace (`make-workspace --observation/--actions/--no-exec`);
the dataset rows, the server config and the workspace manifest carry it, and the server refuses
a row made for another profile, so a pass-rate band measured with one profile is never used
with another by accident. The default profile (a11y + shinken + exec) is written nowhere, so a
default workspace is byte-identical to one made before profiles existed.
"""

from __future__ import annotations

import re
from dataclasses import dataclass
from typing import Any

from shinken.errors import ShinkenError

OBSERVATIONS = ("a11y", "screenshot", "both")
ACTIONS = ("shinken", "pixel", "pyautogui")
FORMATS = ("png", "jpeg", "webp")
MIME = {"png": "image/png", "jpeg": "image/jpeg", "webp": "image/webp"}
_SIZE_RE = re.compile(r"^([1-9][0-9]{1,4})x([1-9][0-9]{1,4})$")
MAX_SIDE = 7680


@dataclass(frozen=True)
class Profile:
    observation: str = "a11y"
    actions: str = "shinken"
    exec: bool = True  # False: no tool that runs arbitrary commands
    image_format: str = "png"
    quality: int = 80  # JPEG/WebP quality (PNG ignores it)
    size: tuple[int, int] | None = None  # scale screenshots to WxH; None: the display's size

    def __post_init__(self) -> None:
        if self.observation not in OBSERVATIONS:
            raise ShinkenError(f"--observation {self.observation!r}: use one of {', '.join(OBSERVATIONS)}")
        if self.actions not in ACTIONS:
            raise ShinkenError(f"--actions {self.actions!r}: use one of {', '.join(ACTIONS)}")
        if self.image_format not in FORMATS:
            raise ShinkenError(f"--screenshot-format {self.image_format!r}: use one of {', '.join(FORMATS)}")
        if not 1 <= self.quality <= 100:
            raise ShinkenError(f"--screenshot-quality {self.quality}: use 1..100")
        if self.size is not None and not all(1 <= s <= MAX_SIDE for s in self.size):
            raise ShinkenError(f"--screenshot-size {self.size[0]}x{self.size[1]}: each side 1..{MAX_SIDE}")

    @property
    def screenshots(self) -> bool:
        return self.observation in ("screenshot", "both")

    @property
    def a11y(self) -> bool:
        return self.observation in ("a11y", "both")

    @property
    def is_default(self) -> bool:
        return self == Profile()

    @property
    def mime(self) -> str:
        return MIME[self.image_format]

    @property
    def name(self) -> str:
        """Short label for reports: `screenshot+pixel-noexec`."""
        return f"{self.observation}+{self.actions}" + ("" if self.exec else "-noexec")

    def to_json(self) -> dict[str, Any]:
        return {"observation": self.observation, "actions": self.actions, "exec": self.exec,
                "image_format": self.image_format, "quality": self.quality,
                "size": f"{self.size[0]}x{self.size[1]}" if self.size else None}

    @classmethod
    def from_json(cls, doc: dict[str, Any] | None) -> "Profile":
        if not doc:
            return cls()
        return cls(observation=doc.get("observation", "a11y"), actions=doc.get("actions", "shinken"),
                   exec=bool(doc.get("exec", True)), image_format=doc.get("image_format", "png"),
                   quality=int(doc.get("quality", 80)), size=parse_size(doc.get("size")))

    def same_policy_view(self, other: "Profile") -> bool:
        """Two profiles give the policy the same observations and tools (what a band depends on)."""
        return self == other


def parse_size(text: str | None) -> tuple[int, int] | None:
    if text is None or text == "":
        return None
    m = _SIZE_RE.match(text.strip())
    if not m:
        raise ShinkenError(f"--screenshot-size {text!r}: give WIDTHxHEIGHT, e.g. 1280x800")
    return int(m.group(1)), int(m.group(2))
