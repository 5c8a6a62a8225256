"""Match a bundle's needs against an image's capability manifest (and the --mock-urls
map) and decide the verdict. Cheap: re-run on every triage, so a changed manifest or
mock map never needs a re-analysis."""

from __future__ import annotations

import re
import sys
import hashlib
from dataclasses import dataclass
from typing import Any

import orjson

from shinken.triage.codes import CODES, verdict_for
from shinken.needs.vocab import DISTRIBUTION, stdlib_status


@dataclass(frozen=True)
class Capabilities:
    """The parts of a capability manifest (schemas/capabilities.schema.json) triage uses."""

    ref: str
    id: str
    python_version: tuple[int, int]
    python_modules: frozenset[str]
    executables: frozenset[str]
    desktop_apps: frozenset[str]
    display: bool

    @classmethod
    def from_manifest(cls, m: dict[str, Any]) -> "Capabilities":
        ver = (m.get("python") or {}).get("version")
        # No python on the image: parse with the host's grammar; the missing python3 blocks anyway.
        parts = [int(p) for p in str(ver).split(".")[:2] if p.isdigit()] if ver else list(sys.version_info[:2])
        parts += [0, 0]
        image = m.get("image") or {}
        return cls(
            ref=str(image.get("ref", "")),
            id=str(image.get("id", "")),
            python_version=(parts[0], parts[1]),
            python_modules=frozenset(m.get("python_modules") or ()),
            executables=frozenset(m.get("executables") or ()),
            desktop_apps=frozenset(m.get("desktop_apps") or ()),
            display=bool(m.get("display")),
        )


def _module_label(name: str) -> str:
    dist = DISTRIBUTION.get(name)
    return f"{name} ({dist})" if dist and dist != name else name


# app key (the middle of __CUA_GYM_<KEY>_URL__) -> (app name, {failed check: the /go fields it
# found wrong}): what `shinken hub check` recorded in the hub image's manifest.
StateDefects = dict[str, tuple[str, dict[str, tuple[str, ...]]]]
_PLACEHOLDER_KEY = re.compile(r"^__CUA_GYM_([A-Z0-9_]+?)_(?:URL|HOST)__$")


def app_key(name: str) -> str:
    return re.sub(r"[^A-Z0-9]+", "_", name.upper()).strip("_")


def _task_app_keys(needs: list[list[Any]]) -> list[str]:
    keys: list[str] = []
    for kind, alts, _ in needs:
        key = None
        if kind == "placeholder":
            m = _PLACEHOLDER_KEY.match(alts[0])
            key = m.group(1) if m else None
        elif kind == "mock" and alts[0] != "mock_websites":
            key = app_key(alts[0])
        elif kind == "mock_host" and len(alts) > 1:
            key = app_key(alts[1])
        if key and key not in keys:
            keys.append(key)
    return keys


class Evaluator:
    def __init__(self, caps: Capabilities, mock_urls: dict[str, str] | None = None, *, judge: bool = False,
                 state_defects: StateDefects | None = None) -> None:
        self.caps = caps
        self.mock = dict(mock_urls or {})
        self.judge = judge  # a judge endpoint is configured (probe/server --judge-url)
        self.state_defects = dict(state_defects or {})
        self._std: dict[str, str] = {}
        self._memo: dict[tuple[str, ...], tuple[str, str, str] | None] = {}

    def fingerprint(self) -> str:
        """Everything besides the analysis that `evaluate` reads: equal fingerprints, equal
        tasks for equal analyses (the code is fingerprinted by the triage cache)."""
        c = self.caps
        doc = [list(c.python_version), sorted(c.python_modules), sorted(c.executables), sorted(c.desktop_apps),
               c.display, sorted(self.mock.items()), self.judge,
               sorted((k, n, sorted(d.items())) for k, (n, d) in self.state_defects.items())]
        return hashlib.sha256(orjson.dumps(doc)).hexdigest()[:16]

    def _module_missing(self, name: str) -> str | None:
        """None if importable on the image, else the reason code."""
        st = self._std.get(name)
        if st is None:
            st = self._std[name] = stdlib_status(name, self.caps.python_version)
        if st == "stdlib" or name in self.caps.python_modules:
            return None
        return "needs_newer_python" if st in ("too_new",) else "missing_python_module"

    def _mock_ok(self, placeholder: str) -> bool:
        if placeholder in self.mock:
            return True
        if placeholder.endswith("_HOST__"):  # a mapped URL gives its host too
            return placeholder[: -len("_HOST__")] + "_URL__" in self.mock
        return False

    def _judge(self, kind: str, alts: list[str]) -> tuple[str, str, str] | None:
        """(code, subject, detail with a {where} slot) when the image lacks this need."""
        caps = self.caps
        pv = f"{caps.python_version[0]}.{caps.python_version[1]}"
        if kind == "module":
            misses = [(a, self._module_missing(a)) for a in alts]
            if not all(m for _, m in misses):
                return None
            code = misses[0][1] or "missing_python_module"  # every alternative misses here
            subject = alts[0] if len(alts) == 1 else " | ".join(alts)
            label = " or ".join(_module_label(a) for a in alts)
            if code == "needs_newer_python":
                return code, subject, f"{label} is not in Python {pv}'s stdlib ({{where}})"
            detail = f"import {label} ({{where}})"
            if any(m == "missing_python_module" and stdlib_status(a, caps.python_version) == "removed" for a, m in misses):
                detail += f"; removed from the stdlib by Python {pv}"
            return code, subject, detail
        if kind == "exe":
            return None if any(a in caps.executables for a in alts) else ("missing_executable", alts[0], f"{alts[0]} ({{where}})")
        if kind == "app":
            if any(a in caps.desktop_apps for a in alts):
                return None
            return "missing_app", " | ".join(alts), f"{' or '.join(alts)} ({{where}})"
        if kind == "display":
            return None if caps.display else ("missing_display", "display", "image has no display ({where})")
        if kind in ("network", "private_host"):
            return ("needs_network" if kind == "network" else "private_host"), alts[0], f"{alts[0]} ({{where}})"
        if kind == "placeholder":
            if self._mock_ok(alts[0]):
                return None
            return "needs_mock_web", alts[0], f"{alts[0]} ({{where}}); map it with --mock-urls"
        if kind == "mock":
            if alts[0] == "mock_websites":
                return ("needs_mock_web", "mock_websites", "app_type names mock websites but no host or placeholder "
                        "says which app ({where}); no --mock-urls entry can be matched")
            prefix = f"__CUA_GYM_{alts[0].upper()}_"
            if any(k.startswith(prefix) for k in self.mock):
                return None
            return "needs_mock_web", f"{alts[0]}_mock", f"mock web app {alts[0]!r} ({{where}}); map {prefix}URL__ with --mock-urls"
        if kind == "mock_host":
            host, app = alts[0], alts[1]
            prefix = f"__CUA_GYM_{app.upper()}_"
            if any(k.startswith(prefix) for k in self.mock):
                return None
            return ("needs_mock_web", host, f"hosted mock {host} (app {app!r}, {{where}}); "
                    f"map {prefix}URL__ with --mock-urls")
        if kind == "judge":
            if self.judge:
                return None
            return ("needs_judge", "reward_judge", "reward imports reward_judge ({where}); "
                    "give probe/the server --judge-url and --judge-model")
        if kind == "newer_python":
            return "needs_newer_python", "syntax", f"{alts[0]} ({{where}})"
        return None  # "hint" and future kinds: no requirement

    def reasons_for(self, needs: list[list[Any]]) -> list[dict[str, str]]:
        out: list[dict[str, str]] = []
        memo = self._memo
        for kind, alts, where in needs:
            key = (kind, *alts)
            try:
                verdict = memo[key]
            except KeyError:  # most needs repeat across bundles; judge each once
                verdict = memo[key] = self._judge(kind, alts)
            if verdict is not None:
                code, subject, detail = verdict
                out.append({"code": code, "detail": detail.replace("{where}", where), "severity": CODES[code][0],
                            "subject": subject})
        return out

    def state_api_reasons(self, needs: list[list[Any]]) -> list[dict[str, str]]:
        """`mock_state_api_defect` for every State API field the reward reads that a hub check
        of an app the task uses found wrong (subject `<app>:<check>:<field>`)."""
        fields = [(alts[0], where) for kind, alts, where in needs if kind == "state_api"]
        if not fields or not self.state_defects:
            return []
        out: list[dict[str, str]] = []
        for key in _task_app_keys(needs):
            hit = self.state_defects.get(key)
            if hit is None:
                continue
            app, failed = hit
            for field, where in fields:
                for check, wrong in sorted(failed.items()):
                    if field in wrong:
                        out.append({"code": "mock_state_api_defect", "severity": CODES["mock_state_api_defect"][0],
                                    "subject": f"{app}:{check}:{field}",
                                    "detail": f"the reward reads {field} ({where}); mock app {app!r} failed hub check "
                                              f"{check}, which found {field} wrong (`shinken hub check`)"})
        return out

    def evaluate(self, a: dict[str, Any]) -> dict[str, Any]:
        reasons = [{"code": c, "detail": d, "severity": CODES[c][0]} for c, d in a["reasons"]]
        reasons.extend(self.reasons_for(a["needs"]))
        reasons.extend(self.state_api_reasons(a["needs"]))
        return {
            "id": a["id"],
            "path": a["path"],
            "class": a["class"],
            "verdict": verdict_for([r["code"] for r in reasons]),
            "reasons": reasons,
            "app_type": a["app_type"],
            "difficulty": a["difficulty"],
            "bundle_hash": a["bundle_hash"],
        }
