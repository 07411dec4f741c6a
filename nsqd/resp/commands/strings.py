"""Strings with expiry (seed 003): SET with NX/XX/GET/EX/PX/EXAT/PXAT/KEEPTTL as Redis 7.0
parses them, GET; and what list-queue apps pair with lists (issue 29): SETEX PSETEX SETNX
GETEX GETDEL GETSET, the counters INCR DECR INCRBY DECRBY INCRBYFLOAT (they keep the TTL),
MGET MSET MSETNX, APPEND STRLEN."""

from __future__ import annotations

from protocol.resp.codec import OK, ONE, ZERO, bulk, integer, raw_array, string2ll

from ..keyspace import now_ms
from .registry import (
    NOT_INTEGER,
    SYNTAX,
    ReplyError,
    Session,
    add_float,
    command,
    integer_arg,
    wrong_arity,
)

_EXCLUSIVE = {b"ex", b"px", b"exat", b"pxat", b"keepttl"}


def _options(argv: list[bytes]) -> tuple[set[bytes], bytes, bytes | None]:
    """parseExtendedStringArgumentsOrReply: the flags, the expiry unit and its argument."""
    flags: set[bytes] = set()
    unit, expire = b"", None
    j = 3
    while j < len(argv):
        opt = argv[j].lower()
        has_next = j + 1 < len(argv)
        if (
            (opt == b"nx" and b"xx" not in flags)
            or (opt == b"xx" and b"nx" not in flags)
            or opt == b"get"
            or (opt == b"keepttl" and not flags & (_EXCLUSIVE - {opt}))  # (KEEPTTL KEEPTTL is fine)
        ):
            flags.add(opt)
        elif (
            opt in (b"ex", b"px", b"exat", b"pxat")
            and not flags & (_EXCLUSIVE - {opt})
            and has_next
        ):
            flags.add(opt)
            unit, expire = opt, argv[j + 1]
            j += 1
        else:
            raise ReplyError(SYNTAX)
        j += 1
    return flags, unit, expire


def _expire_ms(unit: bytes, raw: bytes, name: str = "set") -> int:
    """getExpireMillisecondsOrReply: the absolute unix ms the key expires at."""
    value = integer_arg(raw)
    seconds = unit in (b"ex", b"exat")
    bad = f"ERR invalid expire time in '{name}' command"
    if value <= 0 or (seconds and value > (2**63 - 1) // 1000):
        raise ReplyError(bad)
    if seconds:
        value *= 1000
    if unit in (b"ex", b"px"):
        value += now_ms()
        if value >= 2**63:
            raise ReplyError(bad)
    return value


@command("set", -3)
def set_(s: Session, argv: list[bytes]) -> bytes:
    flags, unit, raw = _options(argv)
    when = _expire_ms(unit, raw) if raw is not None else None
    ks, key = s.ks, argv[1]
    old = ks.get_string(key) if b"get" in flags else None  # WRONGTYPE before any change
    found = ks.get(key) is not None
    if (b"nx" in flags and found) or (b"xx" in flags and not found):
        return s.enc.bulk(old) if b"get" in flags else s.enc.null
    ks.set_string(key, argv[2], when, b"keepttl" in flags)
    if b"get" not in flags:
        return OK
    # it hands over the value it replaced, as GETSET (flags.HANDS_OVER): kept in a pass
    # whose log write fails, where -MISCONF would lose that value to every client
    s.handed_at = s.fe.log.appended
    return s.enc.bulk(old)


@command("get", 2)
def get(s: Session, argv: list[bytes]) -> bytes:
    return s.enc.bulk(s.ks.get_string(argv[1]))


# -- issue 29: what list-queue apps pair with lists -----------------------------------------


def _setex(s: Session, argv: list[bytes], unit: bytes, name: str) -> bytes:
    when = _expire_ms(unit, argv[2], name)
    s.ks.set_string(argv[1], argv[3], when, False)
    return OK


@command("setex", 4)
def setex(s: Session, argv: list[bytes]) -> bytes:
    return _setex(s, argv, b"ex", "setex")


@command("psetex", 4)
def psetex(s: Session, argv: list[bytes]) -> bytes:
    return _setex(s, argv, b"px", "psetex")


@command("setnx", 3)
def setnx(s: Session, argv: list[bytes]) -> bytes:
    if s.ks.get(argv[1]) is not None:
        return ZERO
    s.ks.set_string(argv[1], argv[2], None, False)
    return ONE


@command("getex", -2)
def getex(s: Session, argv: list[bytes]) -> bytes:
    unit, raw, persist = b"", None, False
    j = 2
    while j < len(argv):
        opt = argv[j].lower()
        # parseExtendedStringArgumentsOrReply: an option excludes the others, not itself
        # (EX 10 EX 20 is EX 20, PERSIST PERSIST is PERSIST)
        if (
            opt in (b"ex", b"px", b"exat", b"pxat")
            and unit in (b"", opt)
            and not persist
            and j + 1 < len(argv)
        ):
            unit, raw = opt, argv[j + 1]
            j += 1
        elif opt == b"persist" and not unit:
            persist = True
        else:
            raise ReplyError(SYNTAX)
        j += 1
    ks, key = s.ks, argv[1]
    value = ks.get_string(key)
    if value is None:
        return s.enc.null
    if raw is not None:
        ks.set_expire(key, _expire_ms(unit, raw, "getex"))  # a past EXAT/PXAT deletes it
    elif persist:
        ks.persist(key)
    return bulk(value)


@command("getdel", 2)
def getdel(s: Session, argv: list[bytes]) -> bytes:
    value = s.ks.get_string(argv[1])
    if value is not None:
        s.ks.delete([argv[1]])
    return s.enc.bulk(value)


@command("getset", 3)
def getset(s: Session, argv: list[bytes]) -> bytes:
    old = s.ks.get_string(argv[1])
    s.ks.set_string(argv[1], argv[2], None, False)
    return s.enc.bulk(old)


def _incr(s: Session, key: bytes, by: int) -> bytes:
    ks = s.ks
    raw = ks.get_string(key)
    value = 0 if raw is None else string2ll(raw)
    if value is None:
        raise ReplyError(NOT_INTEGER)
    new = value + by
    if not -(2**63) <= new < 2**63:
        raise ReplyError("ERR increment or decrement would overflow")
    ks.set_string(key, b"%d" % new, None, True)  # INCR keeps the key's TTL
    return integer(new)


@command("incr", 2)
def incr(s: Session, argv: list[bytes]) -> bytes:
    return _incr(s, argv[1], 1)


@command("decr", 2)
def decr(s: Session, argv: list[bytes]) -> bytes:
    return _incr(s, argv[1], -1)


@command("incrby", 3)
def incrby(s: Session, argv: list[bytes]) -> bytes:
    return _incr(s, argv[1], integer_arg(argv[2]))


@command("decrby", 3)
def decrby(s: Session, argv: list[bytes]) -> bytes:
    by = integer_arg(argv[2])
    if by == -(2**63):
        raise ReplyError("ERR decrement would overflow")
    return _incr(s, argv[1], -by)


@command("incrbyfloat", 3)
def incrbyfloat(s: Session, argv: list[bytes]) -> bytes:
    ks, key = s.ks, argv[1]
    raw = ks.get_string(key)
    new = add_float(raw, argv[2], "ERR value is not a valid float")
    ks.set_string(key, new, None, True)
    return bulk(new)


@command("mget", -2)
def mget(s: Session, argv: list[bytes]) -> bytes:
    ks, enc = s.ks, s.enc
    out = []
    for key in argv[1:]:
        value = ks.get(key)
        out.append(enc.bulk(value if isinstance(value, bytes) else None))
    return raw_array(out)


def _pairs(argv: list[bytes], name: str) -> list[bytes]:
    if len(argv) % 2 == 0:
        raise wrong_arity(name)
    return argv[1:]


@command("mset", -3)
def mset(s: Session, argv: list[bytes]) -> bytes:
    s.ks.mset(_pairs(argv, "mset"))
    return OK


@command("msetnx", -3)
def msetnx(s: Session, argv: list[bytes]) -> bytes:
    pairs = _pairs(argv, "msetnx")
    if any(s.ks.get(pairs[i]) is not None for i in range(0, len(pairs), 2)):
        return ZERO
    s.ks.mset(pairs)
    return ONE


@command("append", 3)
def append(s: Session, argv: list[bytes]) -> bytes:
    old = s.ks.get_string(argv[1])
    new = (old or b"") + argv[2]
    s.ks.set_string(argv[1], new, None, True)
    return integer(len(new))


@command("strlen", 2)
def strlen(s: Session, argv: list[bytes]) -> bytes:
    return integer(len(s.ks.get_string(argv[1]) or b""))
