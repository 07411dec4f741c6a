"""Redis's glob patterns (util.c's stringmatchlen, Redis 7.0), for KEYS, SCAN's MATCH,
PSUBSCRIBE, PUBSUB CHANNELS and CONFIG GET: `*`, `?`, `[...]` with `^` for not, ranges either
way round and `\\` escapes, and `\\` outside a class. On bytes, as Redis matches them.

Redis's quirks are kept: an unclosed class runs to the pattern's end; `[a-]` is a range to
the `]`; a lone `\\` at the end is itself; the empty text matches only the empty pattern (the
callers that list everything for a lone `*` say so themselves, as Redis's do); and a pattern
whose match would nest past 1,000 stars matches nothing (Redis 7.0.15's guard against a
stack overflow).

A pattern is read once into tokens (a byte set each, or a star) and compiled to a regular
expression whose stars are atomic groups, `(?>.*?SEGMENT)`: each segment between two stars
has a fixed length, so its first occurrence is the one to take, and a match costs at most
the text's length times the pattern's, whatever the pattern (Python's fnmatch translated
`[[[[...` in quadratic time: a 20 KB pattern held the daemon for 12 s). A pattern too long
to compile cheaply only matches texts at least that long; those are matched by `_slow`, the
same algorithm as Redis's, over the same tokens."""

from __future__ import annotations

import re
from collections.abc import Callable
from functools import lru_cache

STAR = None  # a token that is a star; any other token is the frozenset of bytes it matches
MAX_NESTING = 1000  # Redis 7.0.15: a match deeper in stars than this fails
# past this many tokens the pattern is matched by `_slow` (the texts it can match are as long)
COMPILED_MAX = 4096

_ALL = frozenset(range(256))
_NONE: frozenset[int] = frozenset()
_LOWER = bytes(range(256)).lower()


def matcher(pattern: bytes, nocase: bool = False) -> Callable[[bytes], bool]:
    """A test of texts against `pattern`, as Redis's stringmatchlen (`nocase`: ASCII letters
    of either case match)."""
    return _matcher(bytes(pattern), nocase)


def match(pattern: bytes, text: bytes, nocase: bool = False) -> bool:
    return _matcher(bytes(pattern), nocase)(text)


@lru_cache(maxsize=512)
def _matcher(pattern: bytes, nocase: bool) -> Callable[[bytes], bool]:
    tokens = tokens_of(pattern, nocase)
    if not tokens:
        return _is_empty
    stars = tokens.count(STAR)
    if stars - (tokens[-1] is STAR) > MAX_NESTING:
        return _never
    if len(tokens) - stars > COMPILED_MAX:
        shortest = len(tokens) - stars
        return lambda text: len(text) >= shortest and _slow(tokens, text)
    fullmatch = re.compile(_regex(tokens), re.DOTALL).fullmatch
    return lambda text: bool(text) and fullmatch(text) is not None


def _is_empty(text: bytes) -> bool:
    return not text


def _never(text: bytes) -> bool:
    return False


def tokens_of(pattern: bytes, nocase: bool = False) -> list[frozenset[int] | None]:
    """The pattern as Redis reads it: STAR, or the set of bytes one position matches (runs of
    stars are one star)."""
    out: list[frozenset[int] | None] = []
    n, i = len(pattern), 0
    while i < n:
        c = pattern[i]
        if c == 42:  # *
            if not out or out[-1] is not STAR:
                out.append(STAR)
        elif c == 63:  # ?
            out.append(_ALL)
        elif c == 91:  # [
            token, i = _class(pattern, i + 1, nocase)
            out.append(token)
        else:
            if c == 92 and n - i >= 2:  # \x is x; a \ at the end is itself
                i += 1
                c = pattern[i]
            out.append(_folded({_LOWER[c]}) if nocase else frozenset((c,)))
        i += 1
    return out


def _class(p: bytes, i: int, nocase: bool) -> tuple[frozenset[int], int]:
    """The class opened before `i`, read as stringmatchlen reads it, and the index of its
    last byte (its `]`, or the pattern's last byte)."""
    n = len(p)
    negate = i < n and p[i] == 94  # ^
    if negate:
        i += 1
    members: set[int] = set()
    while True:
        if i < n and p[i] == 92 and n - i >= 2:  # \x
            i += 1
            members.add(_LOWER[p[i]] if nocase else p[i])
        elif i < n and p[i] == 93:  # ]
            break
        elif i >= n:  # unclosed: to the end
            i = n - 1
            break
        elif n - i >= 3 and p[i + 1] == 45:  # a-z (or z-a), even a-] or a-\
            start, end = sorted((p[i], p[i + 2]))
            if nocase:
                start, end = _LOWER[start], _LOWER[end]
            members.update(range(start, end + 1))
            i += 2
        else:
            members.add(_LOWER[p[i]] if nocase else p[i])
        i += 1
    token = _folded(members) if nocase else frozenset(members)
    return (_ALL - token if negate else token), i


def _folded(lowered: set[int]) -> frozenset[int]:
    """The bytes whose lower case (C's tolower) is among `lowered`."""
    return frozenset(c for c in range(256) if _LOWER[c] in lowered)


def _regex(tokens: list[frozenset[int] | None]) -> bytes:
    segments: list[list[bytes]] = [[]]
    for token in tokens:
        if token is STAR:
            segments.append([])
        else:
            segments[-1].append(_one(token))
    if len(segments) == 1:
        return b"".join(segments[0])
    head, *middle, tail = (b"".join(s) for s in segments)
    return head + b"".join(b"(?>.*?%b)" % m for m in middle) + b".*" + tail


def _one(token: frozenset[int]) -> bytes:
    if token == _ALL:
        return b"."
    if not token:
        return b"(?!)"
    if len(token) == 1:
        return re.escape(bytes(token))
    runs: list[bytes] = []
    ordered = sorted(token)
    start = prev = ordered[0]
    for c in [*ordered[1:], -2]:
        if c != prev + 1:
            runs.append(b"\\x%02x" % start if start == prev else b"\\x%02x-\\x%02x" % (start, prev))
            start = c
        prev = c
    return b"[" + b"".join(runs) + b"]"


def _slow(tokens: list[frozenset[int] | None], text: bytes) -> bool:
    """The match without a regular expression: one position per token, and on a mismatch
    back to the last star, one byte further (the segments have fixed lengths: no earlier
    star need be tried again)."""
    if not text:
        return not tokens
    t = p = 0
    star_p = star_t = -1
    while t < len(text):
        token = tokens[p] if p < len(tokens) else _NONE
        if token is STAR:
            star_p, star_t = p, t
            p += 1
        elif text[t] in token:
            p += 1
            t += 1
        elif star_p >= 0:
            star_t += 1
            p, t = star_p + 1, star_t
        else:
            return False
    return all(token is STAR for token in tokens[p:])
