"""The bundle model and loader: CUA-Gym task folders as typed `Bundle`s."""

from shinken.bundles.loader import discover, load_bundle, load_root
from shinken.bundles.model import Bundle, Defect, SetupStep

__all__ = ["Bundle", "Defect", "SetupStep", "discover", "load_bundle", "load_root"]
