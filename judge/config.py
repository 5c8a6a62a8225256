"""Where the judge is and which model answers: `--judge-url` / `--judge-model` (probe),
`shinken_judge_url` / `shinken_judge_model` (the workspace server's config)."""

from __future__ import annotations

import os
import urllib.parse
from dataclasses import dataclass
from pathlib import Path

from shinken.errors import ShinkenError

# The host environment variable holding the endpoint's API key (never copied into a sandbox;
# the relay adds it). OPENAI_API_KEY is read when it is unset, as OpenAI clients do.
API_KEY_ENV = "SHINKEN_JUDGE_API_KEY"
GUEST_MODULE = Path(__file__).parent / "guest" / "reward_judge.py"


def check_judge_url(url: str, name: str = "--judge-url") -> str:
    """The base URL of an OpenAI-compatible API (`.../v1`, requests go to `<url>/chat/completions`)."""
    u = urllib.parse.urlsplit(url.strip())
    if u.scheme not in ("http", "https") or not u.hostname:
        raise ShinkenError(f"{name} {url!r}: not an http(s) URL; pass the base of an OpenAI-compatible API, "
                           "e.g. http://127.0.0.1:8000/v1")
    return url.strip().rstrip("/")


@dataclass(frozen=True)
class JudgeConfig:
    url: str  # base URL, no trailing slash
    model: str
    api_key_env: str = API_KEY_ENV

    @classmethod
    def create(cls, url: str | None, model: str | None,
               names: tuple[str, str] = ("--judge-url", "--judge-model")) -> "JudgeConfig | None":
        """From the two settings (`names` say what the user calls them); None when neither
        is given. Both or neither."""
        if not url and not model:
            return None
        if not url:
            raise ShinkenError(f"{names[1]} needs {names[0]} (the OpenAI-compatible endpoint that serves it)")
        if not model or not model.strip():
            raise ShinkenError(f"{names[0]} needs {names[1]} (the model name the endpoint serves)")
        return cls(check_judge_url(url, names[0]), model.strip())

    def api_key(self) -> str | None:
        return os.environ.get(self.api_key_env) or os.environ.get("OPENAI_API_KEY") or None

    def describe(self) -> str:
        return f"{self.model} at {self.url}"

    def fingerprint(self) -> str:
        """What decides judged rewards (probe receipts key on it); never the key."""
        return f"{self.url}|{self.model}"
