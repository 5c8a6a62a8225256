"""What a fork gets when a judge is configured: the relay's folder mounted read-only at
MOUNT, and for each reward run /tmp/reward_judge.py (also beside reward.py, so a plain
`from reward_judge import ...` finds it first) and /tmp/reward_env, root-owned. Pure: the
provider places the bytes."""

from __future__ import annotations

import urllib.parse

from shinken.judge.config import GUEST_MODULE, JudgeConfig
from shinken.judge.relay import SOCKET_NAME

MOUNT = "/run/shinken-judge"
MODULE_NAME = "reward_judge.py"
ENV_NAME = "reward_env"


def base_url() -> str:
    return "http+unix://" + urllib.parse.quote(f"{MOUNT}/{SOCKET_NAME}", safe="") + "/v1"


def guest_files(config: JudgeConfig, token: str) -> dict[str, bytes]:
    """reward_judge.py and reward_env for one reward run (`token`: its relay grant)."""
    env = (f"# written by shinken for one reward run; the relay holds the real key\n"
           f"OPENAI_BASE_URL={base_url()}\nOPENAI_API_KEY={token}\nSHINKEN_JUDGE_MODEL={config.model}\n")
    return {MODULE_NAME: GUEST_MODULE.read_bytes(), ENV_NAME: env.encode()}
