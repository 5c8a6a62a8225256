"""shinken as a NeMo Gym sandbox provider (docs/provider.md)."""
