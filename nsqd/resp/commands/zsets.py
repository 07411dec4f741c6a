"""The sorted-set subset a reliable-queue reaper keeps job timestamps in (issue 29): ZADD with
NX/XX/GT/LT/CH/INCR, ZREM, ZSCORE, ZCARD, ZRANGE (by rank, BYSCORE, REV, LIMIT, WITHSCORES),
ZRANGEBYSCORE, ZREVRANGEBYSCORE, ZREVRANGE, ZRANK, ZREVRANK, ZCOUNT, ZMSCORE, ZPOPMIN/ZPOPMAX,
ZREMRANGEBYSCORE, ZREMRANGEBYRANK, ZINCRBY, ZSCAN; Redis 7.0's
replies (RESP3: scores as doubles, WITHSCORES as pairs) and errors, in its order of checks."""

from __future__ import annotations

from protocol.resp.codec import EMPTY_ARRAY, ZERO, bulk, integer

from ..zset import ZSet
from .keys import EMPTY_SCAN, scan_all, scan_key
from .registry import (
    SYNTAX,
    ReplyError,
    Session,
    command,
    float_arg,
    integer_arg,
    positive_arg,
    strtod_whole,
)

_ZADD_FLAGS = {b"nx", b"xx", b"ch", b"incr", b"gt", b"lt"}


def _zadd(s: Session, argv: list[bytes], flags: set[bytes], at: int) -> bytes:
    pairs = argv[at:]
    if not pairs or len(pairs) % 2:
        raise ReplyError(SYNTAX)
    if {b"nx", b"xx"} <= flags:
        raise ReplyError("ERR XX and NX options at the same time are not compatible")
    if (b"nx" in flags and flags & {b"gt", b"lt"}) or {b"gt", b"lt"} <= flags:
        raise ReplyError("ERR GT, LT, and/or NX options at the same time are not compatible")
    incr = b"incr" in flags
    if incr and len(pairs) > 2:
        raise ReplyError("ERR INCR option supports a single increment-element pair")
    scores = [float_arg(pairs[i]) for i in range(0, len(pairs), 2)]
    ks, key = s.ks, argv[1]
    z = ks.get_zset(key)
    if z is None and b"xx" in flags:
        return s.enc.null if incr else ZERO
    current = z.scores if z is not None else {}
    changes: dict[bytes, float] = {}
    added = updated = processed = 0  # zsetAdd's ADDED, UPDATED and not-NOP outcomes
    score = 0.0
    for score, member in zip(scores, pairs[1::2], strict=True):
        old = changes.get(member, current.get(member))
        if old is None:
            if b"xx" in flags:
                continue
            changes[member] = score
            added += 1
            processed += 1
            continue
        if b"nx" in flags:
            continue
        if incr:
            score += old
            if score != score:
                raise ReplyError("ERR resulting score is not a number (NaN)")
        if (b"lt" in flags and score >= old) or (b"gt" in flags and score <= old):
            continue
        processed += 1
        if score != old:
            changes[member] = score
            updated += 1
    if changes:
        ks.zadd(key, [(v, m) for m, v in changes.items()])
    if incr:
        return s.enc.double(score) if processed else s.enc.null
    return integer(added + updated if b"ch" in flags else added)


@command("zadd", -4)
def zadd(s: Session, argv: list[bytes]) -> bytes:
    at = 2
    flags: set[bytes] = set()
    while at < len(argv) and argv[at].lower() in _ZADD_FLAGS:
        flags.add(argv[at].lower())
        at += 1
    return _zadd(s, argv, flags, at)


@command("zincrby", 4)
def zincrby(s: Session, argv: list[bytes]) -> bytes:
    return _zadd(s, argv, {b"incr"}, 2)


@command("zrem", -3)
def zrem(s: Session, argv: list[bytes]) -> bytes:
    if s.ks.get_zset(argv[1]) is None:
        return ZERO
    return integer(s.ks.zrem(argv[1], argv[2:]))


@command("zscore", 3)
def zscore(s: Session, argv: list[bytes]) -> bytes:
    z = s.ks.get_zset(argv[1])
    score = None if z is None else z.scores.get(argv[2])
    return s.enc.null if score is None else s.enc.double(score)


@command("zcard", 2)
def zcard(s: Session, argv: list[bytes]) -> bytes:
    z = s.ks.get_zset(argv[1])
    return integer(0 if z is None else len(z))


# -- ranges ---------------------------------------------------------------------------------


def _bound(raw: bytes) -> tuple[float, bool]:
    """zslParseRange's one end: a score, `(score` for an open end, +inf/-inf."""
    is_open = raw[:1] == b"("
    # strtod itself, not getDoubleFromObject: " 1" and 1e400 (inf) are bounds, "" is 0
    value = strtod_whole(raw[1:] if is_open else raw)
    if value is None:
        raise ReplyError("ERR min or max is not a float")
    return value, is_open


def _reply(s: Session, z: ZSet, picked: list[tuple[float, bytes]], scores: bool) -> bytes:
    if not scores:
        return b"*%d\r\n" % len(picked) + b"".join(bulk(m) for _, m in picked)
    enc = s.enc
    if enc.version == 3:  # pairs: [member, score] each
        return b"*%d\r\n" % len(picked) + b"".join(
            b"*2\r\n" + bulk(m) + enc.double(v) for v, m in picked
        )
    return b"*%d\r\n" % (2 * len(picked)) + b"".join(bulk(m) + enc.double(v) for v, m in picked)


def _zrange(
    s: Session,
    key: bytes,
    low: bytes,
    high: bytes,
    by_score: bool,
    rev: bool,
    limit: tuple[int, int] | None,
    scores: bool,
) -> bytes:
    if rev and by_score:
        low, high = high, low  # given as max, min
    if by_score:
        lo, lo_open = _bound(low)
        hi, hi_open = _bound(high)
    else:
        start, stop = integer_arg(low), integer_arg(high)
    z = s.ks.get_zset(key)
    if z is None:
        return EMPTY_ARRAY
    order = z.order
    n = len(order)
    if by_score:
        span = z.score_span(lo, lo_open, hi, hi_open)
        picked = order[span.start : span.stop]
        if rev:
            picked.reverse()
        if limit is not None:
            offset, count = limit
            if offset < 0:
                picked = []
            else:
                picked = picked[offset:] if count < 0 else picked[offset : offset + count]
        return _reply(s, z, picked, scores)
    if start < 0:
        start += n
    if stop < 0:
        stop += n
    start = max(start, 0)
    if start > stop or start >= n:
        return EMPTY_ARRAY
    stop = min(stop, n - 1)
    picked = order[n - 1 - stop : n - start][::-1] if rev else order[start : stop + 1]
    return _reply(s, z, picked, scores)


def _range_options(
    argv: list[bytes], at: int, fixed: bytes | None
) -> tuple[bool, bool, tuple[int, int] | None, bool]:
    """zrangeGenericCommand's option loop: (by score, rev, limit, withscores); `fixed` is
    the range type of the older commands (b"score", b"rank"), which take no REV/BY* word."""
    scores = False
    rev: bool | None = None if fixed is None else False
    by: bytes | None = fixed
    limit = None
    j = at
    while j < len(argv):
        opt = argv[j].lower()
        if opt == b"withscores":
            scores = True
        elif opt == b"limit" and len(argv) - j - 1 >= 2:
            limit = (integer_arg(argv[j + 1]), integer_arg(argv[j + 2]))
            j += 2
        elif rev is None and opt == b"rev":
            rev = True
        elif by is None and opt in (b"byscore", b"bylex"):
            by = opt[2:]
        else:
            raise ReplyError(SYNTAX)
        j += 1
    # Redis looks at the count alone: LIMIT <any offset> -1 on a rank range is no limit
    if limit is not None and limit[1] != -1 and by in (None, b"rank"):
        raise ReplyError(
            "ERR syntax error, LIMIT is only supported in combination with either BYSCORE or BYLEX"
        )
    if by == b"lex":
        if scores:
            raise ReplyError("ERR syntax error, WITHSCORES not supported in combination with BYLEX")
        raise ReplyError("ERR BYLEX is not supported here")
    return by == b"score", bool(rev), limit, scores


@command("zrange", -4)
def zrange(s: Session, argv: list[bytes]) -> bytes:
    by_score, rev, limit, scores = _range_options(argv, 4, None)
    return _zrange(s, argv[1], argv[2], argv[3], by_score, rev, limit, scores)


@command("zrangebyscore", -4)
def zrangebyscore(s: Session, argv: list[bytes]) -> bytes:
    _, _, limit, scores = _range_options(argv, 4, b"score")
    return _zrange(s, argv[1], argv[2], argv[3], True, False, limit, scores)


@command("zrevrangebyscore", -4)
def zrevrangebyscore(s: Session, argv: list[bytes]) -> bytes:
    _, _, limit, scores = _range_options(argv, 4, b"score")
    return _zrange(s, argv[1], argv[2], argv[3], True, True, limit, scores)


@command("zrevrange", -4)
def zrevrange(s: Session, argv: list[bytes]) -> bytes:
    _, _, _, scores = _range_options(argv, 4, b"rank")
    return _zrange(s, argv[1], argv[2], argv[3], False, True, None, scores)


def _rank(s: Session, argv: list[bytes], rev: bool) -> bytes:
    z = s.ks.get_zset(argv[1])
    score = None if z is None else z.scores.get(argv[2])
    if score is None:
        return s.enc.null
    assert z is not None
    rank = z.order.index((score, argv[2]))
    return integer(len(z) - 1 - rank if rev else rank)


@command("zrank", 3)
def zrank(s: Session, argv: list[bytes]) -> bytes:
    return _rank(s, argv, False)


@command("zrevrank", 3)
def zrevrank(s: Session, argv: list[bytes]) -> bytes:
    return _rank(s, argv, True)


@command("zcount", 4)
def zcount(s: Session, argv: list[bytes]) -> bytes:
    lo, lo_open = _bound(argv[2])
    hi, hi_open = _bound(argv[3])
    z = s.ks.get_zset(argv[1])
    return integer(0 if z is None else len(z.score_span(lo, lo_open, hi, hi_open)))


@command("zmscore", -3)
def zmscore(s: Session, argv: list[bytes]) -> bytes:
    z = s.ks.get_zset(argv[1])
    scores = z.scores if z is not None else {}
    enc = s.enc
    return b"*%d\r\n" % (len(argv) - 2) + b"".join(
        enc.null if scores.get(m) is None else enc.double(scores[m]) for m in argv[2:]
    )


@command("zremrangebyrank", 4)
def zremrangebyrank(s: Session, argv: list[bytes]) -> bytes:
    start, stop = integer_arg(argv[2]), integer_arg(argv[3])
    z = s.ks.get_zset(argv[1])
    if z is None:
        return ZERO
    n = len(z)
    start, stop = start + n if start < 0 else start, stop + n if stop < 0 else stop
    start = max(start, 0)
    if start > stop or start >= n:
        return ZERO
    members = [m for _, m in z.order[start : min(stop, n - 1) + 1]]
    return integer(s.ks.zrem(argv[1], members))


@command("zremrangebyscore", 4)
def zremrangebyscore(s: Session, argv: list[bytes]) -> bytes:
    lo, lo_open = _bound(argv[2])
    hi, hi_open = _bound(argv[3])
    z = s.ks.get_zset(argv[1])
    if z is None:
        return ZERO
    span = z.score_span(lo, lo_open, hi, hi_open)
    members = [m for _, m in z.order[span.start : span.stop]]
    return integer(s.ks.zrem(argv[1], members) if members else 0)


def _zpop(s: Session, argv: list[bytes], highest: bool) -> bytes:
    if len(argv) > 3:
        raise ReplyError(SYNTAX)
    count = (
        positive_arg(argv[2], "ERR value is out of range, must be positive")
        if len(argv) == 3
        else None
    )
    z = s.ks.get_zset(argv[1])
    if z is None or count == 0:
        return EMPTY_ARRAY
    take = count or 1
    picked = z.order[-take:][::-1] if highest else z.order[:take]
    s.ks.zrem(argv[1], [m for _, m in picked])
    # RESP3 nests [member, score] pairs when COUNT was given; one pop stays flat
    return _reply(s, z, picked, True) if count is not None else _flat(s, picked)


def _flat(s: Session, picked: list[tuple[float, bytes]]) -> bytes:
    return b"*%d\r\n" % (2 * len(picked)) + b"".join(bulk(m) + s.enc.double(v) for v, m in picked)


@command("zpopmin", -2)
def zpopmin(s: Session, argv: list[bytes]) -> bytes:
    return _zpop(s, argv, False)


@command("zpopmax", -2)
def zpopmax(s: Session, argv: list[bytes]) -> bytes:
    return _zpop(s, argv, True)


@command("zscan", -3)
def zscan(s: Session, argv: list[bytes]) -> bytes:
    z = scan_key(argv, s.ks.get_zset)
    if z is None:
        return EMPTY_SCAN
    return scan_all(argv, [(m, [m, b"%.17g" % v]) for v, m in z.order])
