"""Hashes (seed 003): HSET/HMSET, HGET, HGETALL, HDEL, HLEN, HEXISTS; and (issue 29) HSETNX
HMGET HKEYS HVALS HSTRLEN HINCRBY HINCRBYFLOAT; HRANDFIELD (Redis's own hash suite uses it)."""

from __future__ import annotations

import random

from protocol.resp.codec import (
    EMPTY_ARRAY,
    OK,
    ONE,
    ZERO,
    array,
    bulk,
    integer,
    raw_array,
    string2ll,
)

from .keys import EMPTY_SCAN, scan_all, scan_key
from .registry import (
    NOT_FLOAT,
    SYNTAX,
    ReplyError,
    Session,
    add_float,
    command,
    integer_arg,
    wrong_arity,
)


@command("hset", -4)
def hset(s: Session, argv: list[bytes]) -> bytes:
    if len(argv) % 2:
        raise wrong_arity("hset")
    return integer(s.ks.hset(argv[1], argv[2:]))


@command("hmset", -4)
def hmset(s: Session, argv: list[bytes]) -> bytes:
    if len(argv) % 2:
        raise wrong_arity("hmset")
    s.ks.hset(argv[1], argv[2:])
    return OK


@command("hget", 3)
def hget(s: Session, argv: list[bytes]) -> bytes:
    h = s.ks.get_hash(argv[1])
    return s.enc.bulk(None if h is None else h.get(argv[2]))


@command("hgetall", 2)
def hgetall(s: Session, argv: list[bytes]) -> bytes:
    h = s.ks.get_hash(argv[1])
    if h is None:
        return s.enc.map([])
    return s.enc.map([bulk(x) for kv in h.items() for x in kv])


@command("hdel", -3)
def hdel(s: Session, argv: list[bytes]) -> bytes:
    if s.ks.get_hash(argv[1]) is None:
        return ZERO
    return integer(s.ks.hdel(argv[1], argv[2:]))


@command("hlen", 2)
def hlen(s: Session, argv: list[bytes]) -> bytes:
    h = s.ks.get_hash(argv[1])
    return integer(0 if h is None else len(h))


@command("hexists", 3)
def hexists(s: Session, argv: list[bytes]) -> bytes:
    h = s.ks.get_hash(argv[1])
    return integer(int(h is not None and argv[2] in h))


@command("hsetnx", 4)
def hsetnx(s: Session, argv: list[bytes]) -> bytes:
    h = s.ks.get_hash(argv[1])
    if h is not None and argv[2] in h:
        return ZERO
    s.ks.hset(argv[1], argv[2:4])
    return ONE


@command("hmget", -3)
def hmget(s: Session, argv: list[bytes]) -> bytes:
    h = s.ks.get_hash(argv[1]) or {}
    return raw_array([s.enc.bulk(h.get(f)) for f in argv[2:]])


@command("hkeys", 2)
def hkeys(s: Session, argv: list[bytes]) -> bytes:
    return array(list(s.ks.get_hash(argv[1]) or ()))


@command("hvals", 2)
def hvals(s: Session, argv: list[bytes]) -> bytes:
    return array(list((s.ks.get_hash(argv[1]) or {}).values()))


@command("hstrlen", 3)
def hstrlen(s: Session, argv: list[bytes]) -> bytes:
    return integer(len((s.ks.get_hash(argv[1]) or {}).get(argv[2], b"")))


@command("hincrby", 4)
def hincrby(s: Session, argv: list[bytes]) -> bytes:
    by = integer_arg(argv[3])
    h = s.ks.get_hash(argv[1]) or {}
    raw = h.get(argv[2])
    value = 0 if raw is None else string2ll(raw)
    if value is None:
        raise ReplyError("ERR hash value is not an integer")
    new = value + by
    if not -(2**63) <= new < 2**63:
        raise ReplyError("ERR increment or decrement would overflow")
    s.ks.hset(argv[1], [argv[2], b"%d" % new])
    return integer(new)


@command("hincrbyfloat", 4)
def hincrbyfloat(s: Session, argv: list[bytes]) -> bytes:
    try:  # the increment is checked first, as Redis does
        add_float(None, argv[3], NOT_FLOAT)
    except ReplyError as exc:
        if b"NaN or Infinity" in exc.reply:
            raise ReplyError("ERR value is NaN or Infinity") from None
        raise
    h = s.ks.get_hash(argv[1]) or {}
    new = add_float(h.get(argv[2]), argv[3], "ERR hash value is not a float")
    s.ks.hset(argv[1], [argv[2], new])
    return bulk(new)


@command("hscan", -3)
def hscan(s: Session, argv: list[bytes]) -> bytes:
    h = scan_key(argv, s.ks.get_hash)
    if h is None:
        return EMPTY_SCAN
    return scan_all(argv, [(f, [f, v]) for f, v in h.items()])


_LONG_MAX = 2**63 - 1


@command("hrandfield", -2)
def hrandfield(s: Session, argv: list[bytes]) -> bytes:
    """Redis 7.0's: one field (or null); with a count, that many distinct fields (the whole
    hash when it has no more), or with a negative count that many drawn with repeats."""
    if len(argv) == 2:
        h = s.ks.get_hash(argv[1])
        return s.enc.bulk(None if h is None else random.choice(list(h)))
    count = integer_arg(argv[2])
    if count < -_LONG_MAX:
        raise ReplyError(  # sic: Redis 7.0's wording
            f"ERR value is out of range, value must between {-_LONG_MAX} and {_LONG_MAX}"
        )
    if len(argv) > 4 or (len(argv) == 4 and argv[3].lower() != b"withvalues"):
        raise ReplyError(SYNTAX)
    withvalues = len(argv) == 4
    if withvalues and not -_LONG_MAX // 2 <= count <= _LONG_MAX // 2:
        raise ReplyError("ERR value is out of range")
    h = s.ks.get_hash(argv[1])
    if h is None or count == 0:
        return EMPTY_ARRAY
    fields = list(h)
    if count < 0:
        picked = random.choices(fields, k=-count)
    else:
        picked = fields if count >= len(fields) else random.sample(fields, count)
    if not withvalues:
        return array(picked)
    if s.enc.version == 3:  # RESP3: a [field, value] pair each
        return raw_array([array([f, h[f]]) for f in picked])
    return array([x for f in picked for x in (f, h[f])])
