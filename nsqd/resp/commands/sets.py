"""Sets, as queue libraries keep their registries in them (python-rq's workers and queues,
Celery's bindings): SADD SREM SCARD SMEMBERS SISMEMBER SMISMEMBER SPOP SRANDMEMBER SMOVE,
SINTER SUNION SDIFF and their STORE forms, SINTERCARD, SSCAN; Redis 7.0's replies (RESP3:
sets as `~`) and errors. Members of a set of small integers come in Redis's intset order
(ascending); other sets in no promised order, as in Redis."""

from __future__ import annotations

import random

from protocol.resp.codec import ONE, ZERO, array, bulk, integer, string2ll

from .keys import EMPTY_SCAN, scan_all, scan_key
from .registry import (
    SYNTAX,
    ReplyError,
    Session,
    command,
    integer_arg,
    positive_arg,
)

MUST_BE_POSITIVE = "ERR value is out of range, must be positive"


def member_order(members: set[bytes] | list[bytes]) -> list[bytes]:
    """An intset (every member an integer, at most 512 of them) in Redis's ascending order."""
    if len(members) <= 512:
        numbers = [string2ll(m) for m in members]
        if None not in numbers:
            return [m for _, m in sorted(zip(numbers, members, strict=True))]  # type: ignore[type-var]
    return list(members)


@command("sadd", -3)
def sadd(s: Session, argv: list[bytes]) -> bytes:
    s.ks.get_set(argv[1])  # WRONGTYPE first
    return integer(s.ks.sadd(argv[1], argv[2:]))


@command("srem", -3)
def srem(s: Session, argv: list[bytes]) -> bytes:
    if s.ks.get_set(argv[1]) is None:
        return ZERO
    return integer(s.ks.srem(argv[1], argv[2:]))


@command("scard", 2)
def scard(s: Session, argv: list[bytes]) -> bytes:
    return integer(len(s.ks.get_set(argv[1]) or ()))


@command("smembers", 2)
def smembers(s: Session, argv: list[bytes]) -> bytes:
    return s.enc.set(member_order(s.ks.get_set(argv[1]) or set()))


@command("sismember", 3)
def sismember(s: Session, argv: list[bytes]) -> bytes:
    return ONE if argv[2] in (s.ks.get_set(argv[1]) or ()) else ZERO


@command("smismember", -3)
def smismember(s: Session, argv: list[bytes]) -> bytes:
    members = s.ks.get_set(argv[1]) or set()
    return b"*%d\r\n" % (len(argv) - 2) + b"".join(ONE if m in members else ZERO for m in argv[2:])


@command("spop", -2)
def spop(s: Session, argv: list[bytes]) -> bytes:
    if len(argv) > 3:
        raise ReplyError(SYNTAX)
    count = positive_arg(argv[2], MUST_BE_POSITIVE) if len(argv) == 3 else None
    members = s.ks.get_set(argv[1])
    if members is None:
        return s.enc.null if count is None else s.enc.set([])
    if count == 0:  # after the type check, as spopWithCountCommand: nothing popped
        return s.enc.set([])
    picked = random.sample(sorted(members), min(count or 1, len(members)))
    s.ks.srem(argv[1], picked)
    return bulk(picked[0]) if count is None else s.enc.set(picked)


@command("srandmember", -2)
def srandmember(s: Session, argv: list[bytes]) -> bytes:
    if len(argv) > 3:
        raise ReplyError(SYNTAX)
    count = integer_arg(argv[2]) if len(argv) == 3 else None
    if count is not None and not -(2**62) <= count <= 2**62:
        raise ReplyError("ERR value is out of range")
    members = sorted(s.ks.get_set(argv[1]) or ())
    if count is None:
        return s.enc.bulk(random.choice(members) if members else None)
    if not members or count == 0:
        return array([])
    if count < 0:  # repeats allowed
        return array([random.choice(members) for _ in range(-count)])
    return array(random.sample(members, min(count, len(members))))


@command("smove", 4)
def smove(s: Session, argv: list[bytes]) -> bytes:
    ks, src, dst, member = s.ks, argv[1], argv[2], argv[3]
    source = ks.get_set(src)
    if source is None:  # smoveCommand answers 0 before it looks at the destination's type
        return ZERO
    ks.get_set(dst)  # WRONGTYPE of either before anything moves
    if member not in source:
        return ZERO
    if src != dst:
        ks.smove(src, dst, member)  # one record: never the removal alone
    return ONE


def _combine(s: Session, keys: list[bytes], op: str) -> set[bytes]:
    sets = [s.ks.get_set(k) for k in keys]  # WRONGTYPE for any of them
    if op == "inter":
        if any(x is None for x in sets):
            return set()
        return set.intersection(*sets)  # type: ignore[arg-type]
    if op == "union":
        return set().union(*(x for x in sets if x is not None))
    first = set(sets[0] or ())
    return first.difference(*(x for x in sets[1:] if x is not None))


def _read(op: str):  # type: ignore[no-untyped-def]
    def handler(s: Session, argv: list[bytes]) -> bytes:
        return s.enc.set(member_order(_combine(s, argv[1:], op)))

    return handler


def _store(op: str):  # type: ignore[no-untyped-def]
    def handler(s: Session, argv: list[bytes]) -> bytes:
        result = _combine(s, argv[2:], op)
        s.ks.delete([argv[1]])
        if result:
            s.ks.sadd(argv[1], member_order(result))
        return integer(len(result))

    return handler


for _op in ("inter", "union", "diff"):
    command(f"s{_op}", -2)(_read(_op))
    command(f"s{_op}store", -3)(_store(_op))


@command("sintercard", -3)
def sintercard(s: Session, argv: list[bytes]) -> bytes:
    numkeys = string2ll(argv[1])
    if numkeys is None or numkeys < 1:
        raise ReplyError("ERR numkeys should be greater than 0")
    if numkeys > len(argv) - 2:
        raise ReplyError("ERR Number of keys can't be greater than number of args")
    limit = 0
    rest = argv[2 + numkeys :]
    for j in range(0, len(rest), 2):  # each LIMIT read in turn, the last one counts
        if rest[j].lower() != b"limit" or j + 1 == len(rest):
            raise ReplyError(SYNTAX)
        limit = positive_arg(rest[j + 1], "ERR LIMIT can't be negative")
    n = len(_combine(s, argv[2 : 2 + numkeys], "inter"))
    return integer(min(n, limit) if limit else n)


@command("sscan", -3)
def sscan(s: Session, argv: list[bytes]) -> bytes:
    members = scan_key(argv, s.ks.get_set)
    if members is None:
        return EMPTY_SCAN
    return scan_all(argv, [(m, [m]) for m in member_order(members)])
