"""shinken.judge: the LLM judge that CUA-Gym rewards call (`from reward_judge import
call_llm_judge`), for any OpenAI-compatible endpoint (docs/judge.md).

    from shinken.judge import JudgeConfig
    cfg = JudgeConfig.create("http://127.0.0.1:8000/v1", "qwen2.5-vl")   # --judge-url / --judge-model
    DockerProvider(judge=cfg)   # forks reach it through a relay socket; their network stays `none`
"""

from shinken.judge.config import JudgeConfig, check_judge_url

__all__ = ["JudgeConfig", "check_judge_url"]
