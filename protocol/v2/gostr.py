"""Go's %q quoting, so error texts that quote client input match nsqd byte for byte."""

from __future__ import annotations

from bisect import bisect_left

from .goprint import NOT_PRINT16, NOT_PRINT32, PRINT16, PRINT32

_ESCAPES = {
    "\a": "\\a",
    "\b": "\\b",
    "\f": "\\f",
    "\n": "\\n",
    "\r": "\\r",
    "\t": "\\t",
    "\v": "\\v",
    "\\": "\\\\",
    '"': '\\"',
}


def go_quote(raw: bytes) -> str:
    """Quote bytes as Go's strconv.Quote does: printable runes as is, invalid UTF-8 as \\xNN."""
    try:
        text = raw.decode("utf-8")
    except UnicodeDecodeError:
        return _quote_invalid(raw)
    # Python's isprintable agrees with Go on ASCII; past it, Go's tables (goprint) decide.
    if text.isascii() and text.isprintable() and '"' not in text and "\\" not in text:
        return f'"{text}"'
    return '"' + "".join(_quote_rune(ch) for ch in text) + '"'


def _quote_rune(ch: str) -> str:
    if ch in _ESCAPES:
        return _ESCAPES[ch]
    code = ord(ch)
    if is_print(code):
        return ch
    if code < 0x80:
        return f"\\x{code:02x}"
    if code < 0x10000:
        return f"\\u{code:04x}"
    return f"\\U{code:08x}"


def _quote_invalid(raw: bytes) -> str:
    out: list[str] = []
    i = 0
    while i < len(raw):
        for width in (1, 2, 3, 4):
            try:
                ch = raw[i : i + width].decode("utf-8")
            except UnicodeDecodeError:
                continue
            out.append(_quote_rune(ch))
            i += width
            break
        else:
            out.append(f"\\x{raw[i]:02x}")
            i += 1
    return '"' + "".join(out) + '"'


def is_print(code: int) -> bool:
    """Go's strconv.IsPrint(rune(code)), on Go's tables (goprint): what %q leaves as it is."""
    if code <= 0xFF:
        if 0x20 <= code <= 0x7E:
            return True
        return 0xA1 <= code <= 0xFF and code != 0xAD
    if code < 0x10000:
        ranges, holes, hole = PRINT16, NOT_PRINT16, code
    else:
        ranges, holes, hole = PRINT32, NOT_PRINT32, code - 0x10000
    i = bisect_left(ranges, code)
    if i >= len(ranges) or code < ranges[i & ~1] or ranges[i | 1] < code:
        return False
    if code >= 0x20000:
        return True
    j = bisect_left(holes, hole)
    return j >= len(holes) or holes[j] != hole
