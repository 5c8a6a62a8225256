"""Ray's token authentication for every Ray process shinken starts or connects with.

Anyone who reaches a Ray head without authentication runs code on every node, and each fleet
node's agent owns that host's Docker engine (root on the host). Ray 2.60 checks a shared token on
every RPC when `RAY_AUTH_MODE=token`; it reads the token from `RAY_AUTH_TOKEN`, else from the file
`RAY_AUTH_TOKEN_PATH` names, else from `~/.ray/auth_token` (docs/fleet.md, docs/security.md).

shinken sets token mode for the head (`shinken fleet head` creates the token), each host's node
(`fleet join`), and every driver (`fleet status|gc|leave`, the workspace server, `probe --executor
ray`). Running without is the operator's choice by name: `--insecure-no-auth` or
SHINKEN_INSECURE_RAY_NO_AUTH=1; a bare RAY_AUTH_MODE=disabled left in the environment is refused."""

from __future__ import annotations

import os
import secrets
import stat
from collections.abc import Mapping
from pathlib import Path

from shinken.errors import ShinkenError

MODE_ENV = "RAY_AUTH_MODE"
TOKEN_ENV = "RAY_AUTH_TOKEN"
TOKEN_PATH_ENV = "RAY_AUTH_TOKEN_PATH"
INSECURE_ENV = "SHINKEN_INSECURE_RAY_NO_AUTH"
INSECURE_FLAG = "--insecure-no-auth"
HAND_OVER = ("copy the head's token file (`shinken fleet head` prints its path) to this machine as ~/.ray/auth_token "
             f"(mode 600), or point {TOKEN_PATH_ENV} at it")


def default_token_path() -> Path:
    return Path.home() / ".ray" / "auth_token"


def insecure(flag: bool = False, env: Mapping[str, str] | None = None) -> bool:
    """Whether the operator chose, by name, to run Ray without authentication."""
    env = os.environ if env is None else env
    return flag or env.get(INSECURE_ENV, "").strip() == "1"


def token_source(env: Mapping[str, str] | None = None) -> str:
    """Where Ray will read the token from, as the operator would name it."""
    env = os.environ if env is None else env
    if env.get(TOKEN_ENV):
        return f"${TOKEN_ENV}"
    return str(Path(env[TOKEN_PATH_ENV]) if env.get(TOKEN_PATH_ENV) else default_token_path())


def find_token(env: Mapping[str, str] | None = None) -> str | None:
    """The token Ray would use here, or None."""
    env = os.environ if env is None else env
    if env.get(TOKEN_ENV, "").strip():
        return env[TOKEN_ENV].strip()
    path = Path(env[TOKEN_PATH_ENV]) if env.get(TOKEN_PATH_ENV) else default_token_path()
    try:
        text = path.read_text(encoding="utf-8").strip()
    except (OSError, UnicodeDecodeError):
        return None
    return text or None


def auth_env(*, insecure_flag: bool = False, env: Mapping[str, str] | None = None,
             token_required: bool = True) -> dict[str, str]:
    """The RAY_AUTH_MODE a Ray process of shinken's runs with: `token` (a token must be there,
    unless `token_required` is False: a new local cluster, see local_env) or, by the
    operator's named choice, `disabled`. One-line ShinkenError otherwise."""
    env = os.environ if env is None else env
    if insecure(insecure_flag, env):
        return {MODE_ENV: "disabled"}
    if env.get(MODE_ENV, "").strip().lower() == "disabled":
        raise ShinkenError(f"{MODE_ENV}=disabled is set, but shinken runs Ray with token authentication: unset it, "
                           f"or run without authentication by name ({INSECURE_FLAG} or {INSECURE_ENV}=1; docs/security.md)")
    if token_required and find_token(env) is None:
        raise ShinkenError(f"no Ray authentication token here ({token_source(env)} is missing or empty): {HAND_OVER}")
    return {MODE_ENV: "token"}


def local_env(env: Mapping[str, str] | None = None) -> dict[str, str]:
    """auth_env for a new local cluster of this process: token mode, with a token of this run
    (in the environment its processes inherit) when the machine has none, so Ray writes none
    into ~/.ray (it would, readable by every user)."""
    env = os.environ if env is None else env
    mode = auth_env(env=env, token_required=False)
    if mode[MODE_ENV] == "token" and find_token(env) is None:
        mode[TOKEN_ENV] = secrets.token_hex(32)
    return mode


def ensure_token(env: Mapping[str, str] | None = None) -> str:
    """For the head: the token's source, the token file created (random, 256 bits, mode 600) when
    there is none. An existing file others may read is refused: whoever reads it owns the fleet."""
    env = os.environ if env is None else env
    if env.get(TOKEN_ENV, "").strip():
        return f"${TOKEN_ENV}"
    path = Path(env[TOKEN_PATH_ENV]) if env.get(TOKEN_PATH_ENV) else default_token_path()
    if not path.exists():
        path.parent.mkdir(parents=True, exist_ok=True, mode=0o700)
        fd = os.open(path, os.O_WRONLY | os.O_CREAT | os.O_EXCL | os.O_NOFOLLOW, 0o600)
        with os.fdopen(fd, "w", encoding="utf-8") as fh:
            fh.write(secrets.token_hex(32))
    mode = path.lstat().st_mode
    if not stat.S_ISREG(mode):
        raise ShinkenError(f"Ray token file {path} is not a regular file; remove it or point {TOKEN_PATH_ENV} elsewhere")
    if mode & 0o077:
        raise ShinkenError(f"Ray token file {path} can be read by others (mode {stat.S_IMODE(mode):o}): chmod 600 {path}")
    if find_token(env) is None:
        raise ShinkenError(f"Ray token file {path} is empty; remove it and start the head again to create one")
    return str(path)


def apply(mode: Mapping[str, str]) -> None:
    """Set `mode` (auth_env's answer) for this process's next `ray.init`. Ray caches its config
    and the token when it is imported; refreshing both is what Ray itself does when it turns
    token mode on (ray._private.authentication.authentication_token_setup)."""
    os.environ.update(mode)
    try:
        from ray._raylet import AuthenticationTokenLoader, Config  # type: ignore[attr-defined]
    except ImportError:  # no Ray here: the caller's import of it says so
        return
    Config.initialize("")
    AuthenticationTokenLoader.instance().reset_cache()
