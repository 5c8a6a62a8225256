"""What build, extra and capabilities share, imported downward by all three: where the image
sources live (this folder, the guest scripts copied into the sandbox images) and the labels a
built image carries."""

from __future__ import annotations

from pathlib import Path

IMAGES_DIR = Path(__file__).resolve().parent
GUEST_DIR = IMAGES_DIR / "guest"

LABEL_HASH = "shinken.content_hash"
LABEL_IMAGE = "shinken.image"
LABEL_PARENT = "shinken.parent_image"
# `shinken image build --extra FRAGMENT`: the fragment image's shinken.image label and what names its fragment.
EXTRA_KIND = "extra"
LABEL_FRAGMENT_SHA = "shinken.extra_sha256"
LABEL_FRAGMENT_NAME = "shinken.extra_name"
