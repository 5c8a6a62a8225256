"""`shinken profile`: per-task pass rates of a policy from NeMo Gym rollouts, the learnable band and its control."""
