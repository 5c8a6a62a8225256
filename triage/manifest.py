"""Where triage gets the image's capabilities and the mock web URL map."""

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


def load_mock_urls(path: Path) -> dict[str, str]:
    """`{"__CUA_GYM_GMAIL_URL__": "http://127.0.0.1:8001", ...}`; values may also be objects
    with `url`/`value`/`default` (the release's url_variables.json shape)."""
    doc = read_json(path, "mock URL map", 'expected {"__CUA_GYM_X_URL__": "http://..."}', schema="mock_urls")
    out: dict[str, str] = {}
    for k, v in (doc["variables"] if isinstance(doc.get("variables"), dict) else doc).items():
        if isinstance(v, dict):
            # url_variables.json's field names are not pinned down: known names first, then
            # any string value that looks like a URL.
            v = next((v[k] for k in ("url", "value", "default", "hosted_default", "default_url")
                      if isinstance(v.get(k), str) and v[k]),
                     next((x for x in v.values() if isinstance(x, str) and "://" in x), None))
        if isinstance(v, str) and v:
            out[k] = v
    return out
