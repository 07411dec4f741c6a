"""A request head as net/http reads it where h11 would read it otherwise: the bytes h1fast gives
h11 for one request it does not take itself, and whether a request line is refused at its end.

h11 refuses a request target with bytes past ASCII, which net/http serves (the router's 404, a
topic name nsqd's own check refuses); it takes `Content-Length: 1, 1` (equal values in a list),
which net/http refuses (ParseUint, alone or beside another), and refuses an empty
`Content-Length:`, which net/http reads as absent. So before h11 reads a head, such a target's
high bytes are replaced by `_` (h11 only validates a target; the request keeps the raw one), an
empty Content-Length is left out, a listed one refused (a chunked request's too: net/http judges
Content-Length before it drops it). And net/http judges a request line as soon as it ended
(h11 by its first byte, or at the head's end): `line_ok`."""

from __future__ import annotations

import re

_HIGH = re.compile(rb"[\x80-\xff]")
_HIGH_TO_ASCII = bytes(range(128)) + b"_" * 128
_HEAD_END = re.compile(rb"\n\r?\n")  # where h11 (and net/http) end a head
_LENGTH_LINE = re.compile(rb"content-length:[ \t]*([^\r\n]*?)[ \t]*\r?\n", re.I)


class BadContentLength(ValueError):
    """net/http's 400 Bad Request: a Content-Length that ParseUint does not read."""


def for_h11(data: bytes) -> tuple[bytes, bytes | None]:
    """(the bytes h11 is to read for the request at the start of `data`, and the raw target
    where h11 is given another); BadContentLength where net/http refuses the head."""
    line_end = data.find(b"\n")
    if line_end < 0:
        return data, None
    target = None
    line = data[:line_end]
    if _HIGH.search(line):
        method, space, rest = line.partition(b" ")
        raw, space2, version = rest.partition(b" ")
        if space and space2:  # else h11 refuses the line as net/http does
            target = raw
            line = b"%s %s %s" % (method, raw.translate(_HIGH_TO_ASCII), version)
            data = line + data[line_end:]
    end = _HEAD_END.search(data, line_end)
    if end is None:
        return data, target
    head = data[line_end : end.start() + 1]
    values = set()
    empty = []
    for found in _LENGTH_LINE.finditer(head):
        if head[found.start() - 1] != 10:  # not at a line's start (X-Content-Length)
            continue
        value = found[1]
        if b"," in value:  # h11 takes a list of equal values; for net/http it is no number
            raise BadContentLength("bad Content-Length")
        values.add(value)
        if not value:
            empty.append(found.span())
    if values == {b""}:  # read as absent
        for start, stop in reversed(empty):
            head = head[:start] + head[stop:]
        data = data[:line_end] + head + data[end.start() + 1 :]
    return data, target


# a request line net/http reads on (parseRequestLine, validMethod, ParseRequestURI's scheme and
# control bytes, ParseHTTPVersion); a CONNECT's authority is left to the head's end
_URI = rb"(?:\*|/[^ \x00-\x1f\x7f]*|[A-Za-z][-+.A-Za-z0-9]*:[^ \x00-\x1f\x7f]*)"
_TOKEN = rb"[-!#$%&'*+.^_`|~0-9A-Za-z]+"
_LINE = re.compile(rb"(?:CONNECT [^ ]+|" + _TOKEN + b" " + _URI + rb") HTTP/[0-9]\.[0-9]")


def line_ok(buf: bytearray, line_end: int) -> bool:
    """Whether net/http reads on after the request line ending at `line_end` (its LF)."""
    if line_end and buf[line_end - 1] == 13:  # CR LF
        line_end -= 1
    return _LINE.fullmatch(buf, 0, line_end) is not None
