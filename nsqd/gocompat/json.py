"""Go's encoding/json output: compact, raw UTF-8, with <, >, & and U+2028/9 escaped, and
float64 values printed as Go prints them."""

from __future__ import annotations

import json
import math
from typing import Any

_GO_ESCAPES = str.maketrans(
    {"<": "\\u003c", ">": "\\u003e", "&": "\\u0026", "\u2028": "\\u2028", "\u2029": "\\u2029"}
)


def go_json(value: Any) -> bytes:
    """encoding/json.Marshal: compact, raw UTF-8, with <, >, & and U+2028/9 escaped."""
    text = json.dumps(value, separators=(",", ":"), ensure_ascii=False)
    if any(c in text for c in "<>&\u2028\u2029"):
        text = text.translate(_GO_ESCAPES)
    return text.encode("utf-8", "surrogateescape")


class NilList(list):  # type: ignore[type-arg]
    """An empty list Go holds as a nil slice (go-options' coerce of a config file's `[]`
    appends to a nil slice): it works as [] and /config shows it as JSON null."""


def go_float(x: float) -> float | int:
    """A float64 the way Go's JSON encoder prints it: integral values without a '.0'."""
    if math.isfinite(x) and x == int(x) and abs(x) < 1e21:
        return int(x)
    return x
