"""Fail the image build when a pinned PyPI distribution is missing or one of its own requirements is
not met by what is installed (Debian's packages included). Unlike `pip check`, Debian's own
inconsistencies (e.g. its fastapi pinning an older starlette) are not ours to fail on.
Usage: python3 check_requirements.py requirements.txt (with the staging dir on PYTHONPATH)."""

from __future__ import annotations

import sys
from importlib import metadata

from packaging.requirements import Requirement
from packaging.utils import canonicalize_name


def main(path: str) -> int:
    pins = [Requirement(line.split("#", 1)[0].strip()) for line in open(path, encoding="utf-8")
            if line.split("#", 1)[0].strip()]
    installed = {canonicalize_name(d.metadata["Name"]): d.version for d in metadata.distributions()}
    problems = []
    for pin in pins:
        have = installed.get(canonicalize_name(pin.name))
        if have is None or not pin.specifier.contains(have, prereleases=True):
            problems.append(f"{pin}: installed {have}")
            continue
        for raw in metadata.requires(pin.name) or []:
            req = Requirement(raw)
            if req.marker is not None and not req.marker.evaluate({"extra": ""}):
                continue
            got = installed.get(canonicalize_name(req.name))
            if got is None or not req.specifier.contains(got, prereleases=True):
                problems.append(f"{pin.name} needs {req}, installed {got}")
    for p in problems:
        print(f"check_requirements: {p}", file=sys.stderr)
    print(f"check_requirements: {len(pins)} pinned distributions, {len(problems)} problems")
    return 1 if problems else 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1]))
