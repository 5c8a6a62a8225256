"""Where triage gets the image's capabilities (the mock URL map is read by mockweb.runs.web_plan)."""

from __future__ import annotations

from pathlib import Path
from typing import Any, cast


from shinken.errors import EnvironmentProblem, ShinkenError
from shinken.schemas import read_json, validation_error

def check_manifest(doc: Any, where: str) -> dict[str, Any]:
    err = validation_error("capabilities", doc)
    if err:
        raise ShinkenError(f"{where}: not a valid capability manifest ({err}); "
                           "regenerate it with `shinken image inspect IMAGE --json`")
    return cast(dict[str, Any], doc)


def load_manifest_file(path: Path) -> dict[str, Any]:
    doc: dict[str, Any] = read_json(path, "manifest", "pass a file from `shinken image inspect --json`")
    return check_manifest(doc, str(path))


def manifest_for_image(ref: str) -> dict[str, Any]:
    """The live manifest of a local image (needs Docker)."""
    from shinken.images.capabilities import get_manifest

    try:
        doc = get_manifest(ref)
    except ShinkenError:
        raise
    except Exception as exc:  # Docker down, image missing: an environment problem, not bad input
        raise EnvironmentProblem(f"{ref}: cannot inspect the image ({type(exc).__name__}: {exc}); "
                                 "build it with `shinken image build` or pass --manifest FILE") from None
    return check_manifest(doc, f"manifest of {ref}")
