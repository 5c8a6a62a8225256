"""A seed the resources server could not serve for infrastructure ends as a masked rollout.

Gym 0.7.0's simple_agent raises when /seed_session answers an error, its /run answers 500, and
`gym eval run` stops: the rollouts of every other task are lost for one engine outage. The shinken
resources server answers such a seed 503 with the failure table's Gym failure kind (an engine
down, a golden that could not be made, no fleet slot in time). This agent answers it instead with
what the server's /verify answers for any infrastructure failure: reward 0.0, `mask_sample: true`,
the `failure_kind`, and `failure_stage: "seed"`, so trainers and `shinken profile` skip it. Only
503s are masked: a bad task (422) or a bug (500) still stops the run, loudly.
"""

import time
from typing import Any

from nemo_gym.server_utils import get_response_json

MASKED_STATUSES = (503,)


class SeedFailed(Exception):
    """/seed_session answered an infrastructure failure (its status and JSON body)."""

    def __init__(self, status: int, doc: dict) -> None:
        super().__init__(f"/seed_session answered {status}: {doc}")
        self.status, self.doc = status, doc


class _SeedWatch:
    """A server client raising SeedFailed for a seed answered with a masked status (each agent's
    `run` catches it: the route's signature stays the agent's own, which FastAPI reads)."""

    def __init__(self, inner: Any) -> None:
        self._inner = inner

    def __getattr__(self, name: str) -> Any:
        return getattr(self._inner, name)

    async def post(self, *args: Any, **kwargs: Any) -> Any:
        response = await self._inner.post(*args, **kwargs)
        if kwargs.get("url_path") == "/seed_session" and response.status in MASKED_STATUSES:
            try:
                doc = await get_response_json(response)
            except Exception:  # noqa: BLE001 - a 503 without the server's body (a proxy's) is masked too
                doc = {}
            raise SeedFailed(response.status, doc if isinstance(doc, dict) else {})
        return response


def masked_result(body: Any, failed: SeedFailed) -> dict:
    """The verify-shaped answer for a rollout that never started: the row, an empty response, masked."""
    doc = failed.doc
    params = getattr(body, "responses_create_params", None)
    response = {"id": "shinken-seed-failed", "created_at": time.time(), "model": getattr(params, "model", None) or "none",
                "object": "response", "output": [], "parallel_tool_calls": False, "tools": [], "tool_choice": "auto"}
    detail = doc.get("detail") or f"HTTP {failed.status}"
    return {**body.model_dump(), "response": response, "reward": 0.0, "mask_sample": True,
            "failure_kind": doc.get("failure_kind") or "provider_unavailable", "failure_stage": "seed",
            "failure_reason": f"infra: /seed_session answered {failed.status} ({doc.get('error', 'no body')}): {detail}"}


def watch_seeds(client: Any) -> Any:
    """The agent's server client, raising SeedFailed for a seed it should answer masked."""
    return _SeedWatch(client)
