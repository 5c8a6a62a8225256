"""Mock web apps (CUA-Gym-Hub) served beside the sandbox: the hub image built from a user's
checkout, the hub container and the per-run internal network it shares with the forks of web
tasks, the State API client, per-fork hub state (one sid per rollout), placeholder
materialization and the reclaiming of leaked sids. See docs/mock-web.md."""
