"""Go's text forms of values, as nsqd's flags, config files and query strings take and show
them: time.ParseDuration, strconv.ParseBool/ParseInt, Duration.String, %v of a float64.

Every number a user writes goes through `parse_int64` or `parse_int`: ASCII digits only, as
Go. Python's int() and str.isdigit() also take other scripts' digits ("١٢" is 12, "²" is a
digit that int() refuses), which nsqd never accepts."""

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
    s = text  # Go trims nothing: " 5s" is an invalid duration
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
    if total * 1e9 >= 2**63:  # a time.Duration is int64 nanoseconds: Go refuses, not wraps
        raise OptionError(f'time: invalid duration "{text}"')
    return sign * total


def parse_bool(text: str) -> bool:
    """Go's strconv.ParseBool."""
    if text in ("1", "t", "T", "true", "TRUE", "True"):
        return True
    if text in ("0", "f", "F", "false", "FALSE", "False"):
        return False
    raise OptionError(f'parse error: invalid boolean "{text}"')


_DECIMAL = re.compile(r"[+-]?[0-9]+\Z")  # [0-9], not \d: ASCII only


def parse_int64(text: str) -> int | None:
    """strconv.ParseInt(text, 10, 64): None where Go answers an error (not a number in ASCII
    digits with an optional sign, or out of int64's range)."""
    if not _DECIMAL.match(text):
        return None
    value = int(text)
    return value if -(2**63) <= value < 2**63 else None


def parse_int(text: str, *, base_prefixes: bool = True) -> int:
    """Go's strconv.ParseInt(text, base, 64): base 0 for flags (0x.., 0o.., 0b.., a leading 0
    for octal, _ between digits), base 10 in config files; out of int64's range is an error."""
    try:
        if not text.isascii():
            raise ValueError(text)
        if base_prefixes:
            sign, body = (text[0], text[1:]) if text[:1] in ("+", "-") else ("", text)
            if not body or not (body[0].isdigit() and body[-1].isalnum()):
                raise ValueError(text)  # a second sign, spaces: Python's int() takes those
            if len(body) > 1 and body[0] == "0" and body[1] in "01234567_":
                body = "0o" + body[1:]  # Go reads "010" as octal 8; Python's base 0 refuses it
            value = int(sign + body, 0)
        elif _DECIMAL.match(text):
            value = int(text)
        else:
            raise ValueError(text)
    except ValueError:
        raise OptionError(f'parse error: invalid integer "{text}"') from None
    if not -(2**63) <= value < 2**63:
        raise OptionError(f'value out of range: "{text}"')
    return value


_DIGITS = r"[0-9](?:_?[0-9])*"  # Go's underscoreOK: a "_" only between two digits
_FLOAT = re.compile(rf"[+-]?({_DIGITS}\.?(?:{_DIGITS})?|\.{_DIGITS})([eE][+-]?{_DIGITS})?\Z")
_HEX_FLOAT = re.compile(r"[+-]?0[xX](_?[0-9a-fA-F])*\.?(_?[0-9a-fA-F])*[pP][+-]?[0-9]+\Z")
_FLOAT_WORDS = ("inf", "+inf", "-inf", "infinity", "+infinity", "-infinity", "nan")


def parse_float(text: str) -> float:
    """Go's strconv.ParseFloat(text, 64): no spaces, no empty text (Python's float() takes
    both); hex floats with their p exponent; inf and nan; a finite number
    too large for a float64 is an error, not infinity."""
    if text.lower() in _FLOAT_WORDS:
        return float(text)
    if _FLOAT.match(text):
        value = float(text)
    elif _HEX_FLOAT.match(text) and re.search(r"[0-9a-f]", text.lower()[2:].partition("p")[0]):
        try:  # the mantissa holds a digit ("0xp1" has none)
            value = float.fromhex(text.replace("_", "").replace("P", "p"))
        except OverflowError:
            raise OptionError(f'value out of range: "{text}"') from None
    else:
        raise OptionError(f'parse error: invalid float "{text}"')
    if value in (float("inf"), float("-inf")):
        raise OptionError(f'value out of range: "{text}"')
    return value


def format_float(value: float) -> str:
    """Go's %v of a float64 (2 -> "2", 0.99 -> "0.99")."""
    text = repr(float(value))
    return text[:-2] if text.endswith(".0") else text


def format_duration(seconds: float) -> str:
    """Go's Duration.String of a duration given in seconds (as nsqd's --help shows defaults)."""
    return go_duration(round(seconds * 1e9))
