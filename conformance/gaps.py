"""conformance/KNOWN_GAPS.md: differences accepted until a not-yet-built feature lands.

The file is a markdown list; each item names one or more scenario ids in backticks and the
feature (issue) they wait for, e.g.

    - `identify_snappy`, `identify_deflate`: TLS/compression (snappy/deflate upgrades)

Other lines (headings, prose) are ignored.
"""

from __future__ import annotations

import re
from pathlib import Path
from typing import Final

GAPS_FILE: Final = Path(__file__).resolve().parent / "KNOWN_GAPS.md"
_ITEM: Final = re.compile(r"^\s*[-*]\s+(.*)$")
_ID: Final = re.compile(r"`([a-z0-9][a-z0-9_.-]*)`")


def load_gaps(path: Path = GAPS_FILE) -> dict[str, str]:
    """scenario id -> the reason text of its list item (ids stripped)."""
    gaps: dict[str, str] = {}
    if not path.exists():
        return gaps
    for line in path.read_text(encoding="utf-8").splitlines():
        m = _ITEM.match(line)
        if not m:
            continue
        ids = _ID.findall(m.group(1))
        reason = _ID.sub("", m.group(1)).strip(" ,:;-")
        for scenario_id in ids:
            gaps[scenario_id] = reason or "known gap"
    return gaps
