"""Topic and channel name rules: 1..64 of [.a-zA-Z0-9_-], optionally ending in #ephemeral."""

from __future__ import annotations

import re

EPHEMERAL_SUFFIX = "#ephemeral"
_VALID = re.compile(rb"[.a-zA-Z0-9_-]+(#ephemeral)?")


def is_valid_name(name: bytes) -> bool:
    # The 64-byte limit includes the #ephemeral suffix, as in nsqd.
    return 0 < len(name) <= 64 and _VALID.fullmatch(name) is not None


def is_ephemeral(name: str) -> bool:
    return name.endswith(EPHEMERAL_SUFFIX)
