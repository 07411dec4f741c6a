"""Go's text forms of values, as nsqd's flags and config files take and show them:
time.ParseDuration, strconv.ParseBool/ParseInt, Duration.String, %v of a float64."""

from __future__ import annotations

import re

from .timefmt import go_duration


class OptionError(ValueError):
    """A bad option value: nsqd prints it and exits 1."""


_UNITS = {
    "ns": 1e-9,
    "us": 1e-6,
    "µs": 1e-6,
    "μs": 1e-6,
    "ms": 1e-3,
    "s": 1.0,
    "m": 60.0,
    "h": 3600.0,
}
_DURATION_PART = re.compile(r"(\d+(?:\.\d*)?|\.\d+)(ns|us|µs|μs|ms|s|m|h)")


def parse_duration(text: str) -> float:
    """Go's time.ParseDuration, returning seconds."""
    s = text.strip()
    sign = -1.0 if s.startswith("-") else 1.0
    s = s.lstrip("+-")
    if s == "0":
        return 0.0
    if not s:
        raise OptionError(f'time: invalid duration "{text}"')
    total, pos = 0.0, 0
    while pos < len(s):
        m = _DURATION_PART.match(s, pos)
        if m is None:
            if re.fullmatch(r"(\d+(\.\d*)?|\.\d+)", s[pos:]):
                raise OptionError(f'time: missing unit in duration "{text}"')
            raise OptionError(f'time: invalid duration "{text}"')
        total += float(m.group(1)) * _UNITS[m.group(2)]
        pos = m.end()
    return sign * total


def parse_bool(text: str) -> bool:
    """Go's strconv.ParseBool."""
    if text in ("1", "t", "T", "true", "TRUE", "True"):
        return True
    if text in ("0", "f", "F", "false", "FALSE", "False"):
        return False
    raise OptionError(f'parse error: invalid boolean "{text}"')


def parse_int(text: str, *, base_prefixes: bool = True) -> int:
    """Go's strconv.ParseInt: base 0 (0x.., 0o.., 0b.. too) for flags, base 10 in config files."""
    try:
        if base_prefixes and text.lstrip("+-").lower().startswith(("0x", "0o", "0b")):
            return int(text, 0)
        if not text.lstrip("+-").isdigit():
            raise ValueError(text)
        return int(text)
    except ValueError:
        raise OptionError(f'parse error: invalid integer "{text}"') from None


def format_float(value: float) -> str:
    """Go's %v of a float64 (2 -> "2", 0.99 -> "0.99")."""
    text = repr(float(value))
    return text[:-2] if text.endswith(".0") else text


def format_duration(seconds: float) -> str:
    """Go's Duration.String of a duration given in seconds (as nsqd's --help shows defaults)."""
    return go_duration(round(seconds * 1e9))
