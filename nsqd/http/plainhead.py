"""The plainly valid request head: what h1fast serves itself, parsed in one split of the head
and one regex per header line; anything else is None, for h11 (and h11head) to judge.

Plain: `GET`/`POST`/`PUT`/`DELETE`, HTTP/1.1, a target from the root, exactly one Host, at most
one numeric Content-Length, printable ASCII in the headers, no Transfer-Encoding, Connection,
Expect or Upgrade. A publisher sends the same head again and again, so short heads' results
are remembered (a Head is never changed once made)."""

from __future__ import annotations

import re

# methods taken here; others (HEAD's framing, CONNECT, OPTIONS *) go to h11
_METHODS = frozenset({b"GET", b"POST", b"PUT", b"DELETE"})
# request target: from the root, visible ASCII or bytes past it (net/http takes them, h11 not)
_TARGET = re.compile(rb"/[\x21-\x7e\x80-\xff]*")
# a header line: a token, a colon, optional blanks, a value of printable ASCII (no tabs inside)
_HEADER = re.compile(rb"([-!#$%&'*+.^_`|~0-9A-Za-z]+):[ \t]*([\x20-\x7e]*?)[ \t]*")
_DIGITS = re.compile(rb"[0-9]{1,18}")
# headers whose presence sends the request to h11 (framing, keep-alive, 100-continue, upgrade)
_TO_H11 = frozenset({b"transfer-encoding", b"connection", b"expect", b"upgrade"})
# recent request heads (up to this long) -> parse_head's result
_REMEMBERED_HEAD_MAX = 1024
_parsed: dict[bytes, tuple[Head, int] | None] = {}
_UNSEEN = object()


class Head:
    """The request head as the server reads it from h11's Request."""

    __slots__ = ("headers", "http_version", "method", "target")

    def __init__(self, method: bytes, target: bytes, headers: list[tuple[bytes, bytes]]) -> None:
        self.method = method
        self.target = target
        self.http_version = b"1.1"
        self.headers = headers  # names in lower case, values without surrounding blanks


def parse_head(head: bytes) -> tuple[Head, int] | None:
    """(head, body length) of a plainly valid request head (without its blank line), or None
    for anything h11 must judge."""
    lines = head.split(b"\r\n")
    request_line = lines[0].split(b" ")
    if len(request_line) != 3:
        return None
    method, target, version = request_line
    if method not in _METHODS or version != b"HTTP/1.1" or not _TARGET.fullmatch(target):
        return None
    headers = []
    hosts = 0
    length = 0
    lengths = 0
    match = _HEADER.fullmatch
    for line in lines[1:]:
        found = match(line)
        if found is None:
            return None  # obs-fold, bare LF or CR, control bytes, obs-text, no colon...
        name = found[1].lower()
        value = found[2]
        if name == b"host":
            hosts += 1
        elif name == b"content-length":
            if not _DIGITS.fullmatch(value):
                return None
            length = int(value)
            lengths += 1
        elif name in _TO_H11:
            return None
        headers.append((name, value))
    if hosts != 1 or lengths > 1:
        return None
    return Head(method, target, headers), length


def remembered(head: bytes) -> tuple[Head, int] | None:
    """parse_head, remembered for short heads: a publisher sends the same head again and again
    (same path, same length), and a Head is never changed once made."""
    found = _parsed.get(head, _UNSEEN)
    if found is _UNSEEN:
        found = parse_head(head)
        if len(head) <= _REMEMBERED_HEAD_MAX:
            if len(_parsed) >= 256:
                _parsed.clear()
            _parsed[head] = found
    return found  # type: ignore[return-value]


_STARTS = tuple(method + b" " for method in _METHODS)


def plausible_start(buf: bytearray) -> bool:
    """Whether a partial head may still become a request this class takes (else h11 reads it,
    once its request line ended)."""
    start = bytes(buf[:8])
    return any(start.startswith(s) or s.startswith(start) for s in _STARTS)
