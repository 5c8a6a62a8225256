"""shinken: CUA-Gym task bundles to clean RL data and a NeMo Gym workspace."""

__version__ = "0.1.0"
