"""Computer-use engine: accessibility-tree tools over sandbox forks, with bounded ownership."""
