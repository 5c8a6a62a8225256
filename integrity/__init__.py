"""Reward integrity: the red-team battery a policy's forged rewards are tested against, the
canary task it runs on, and `shinken image audit` (docs/integrity.md)."""
