"""Key commands the queue and expiry models need: DEL/UNLINK, EXISTS, TYPE, KEYS, DBSIZE,
FLUSHALL/FLUSHDB, EXPIRE/PEXPIRE/EXPIREAT/PEXPIREAT with NX/XX/GT/LT, TTL/PTTL, PERSIST;
and (issue 29) RENAME RENAMENX EXPIRETIME PEXPIRETIME SCAN RANDOMKEY, the SCAN family's
options; COPY."""

from __future__ import annotations

import random
from collections.abc import Callable
from typing import TypeVar

from protocol.resp.codec import OK, ONE, ZERO, array, bulk, integer, raw_array, simple

from .. import glob
from ..bridge import is_bridged
from ..keyspace import now_ms, type_name
from .registry import SYNTAX, ReplyError, Session, command, int_arg, integer_arg


@command("del", -2)
def del_(s: Session, argv: list[bytes]) -> bytes:
    return integer(s.ks.delete(dict.fromkeys(argv[1:])))


@command("unlink", -2)
def unlink(s: Session, argv: list[bytes]) -> bytes:
    return del_(s, argv)


@command("exists", -2)
def exists(s: Session, argv: list[bytes]) -> bytes:
    ks = s.ks
    return integer(sum(1 for key in argv[1:] if ks.get(key) is not None))


@command("type", 2)
def type_(s: Session, argv: list[bytes]) -> bytes:
    if is_bridged(argv[1]) and s.fe.bridge.exists(argv[1]):
        return simple("list")
    return simple(type_name(s.ks.get(argv[1])))


@command("keys", 2)
def keys(s: Session, argv: list[bytes]) -> bytes:
    ks = s.ks
    if argv[1] == b"*":  # every key, the empty one too (Redis's allkeys: its glob matches
        # no empty text)
        found = list(ks.data)
    else:
        matches = glob.matcher(argv[1])
        found = [k for k in list(ks.data) if matches(k)]
    return array([k for k in found if ks.get(k) is not None])


@command("dbsize", 1)
def dbsize(s: Session, argv: list[bytes]) -> bytes:
    return integer(len(s.ks.data))


def _flush_mode(argv: list[bytes]) -> None:
    if len(argv) > 2 or (len(argv) == 2 and argv[1].lower() not in (b"sync", b"async")):
        raise ReplyError(SYNTAX)


@command("flushall", -1)
def flushall(s: Session, argv: list[bytes]) -> bytes:
    _flush_mode(argv)
    s.fe.ks.flush_all()
    return OK


@command("flushdb", -1)
def flushdb(s: Session, argv: list[bytes]) -> bytes:
    _flush_mode(argv)
    s.ks.flush()
    return OK


def _expire_flags(argv: list[bytes]) -> set[bytes]:
    flags: set[bytes] = set()
    for raw in argv[3:]:
        opt = raw.lower()
        if opt not in (b"nx", b"xx", b"gt", b"lt"):
            text = raw.split(b"\0", 1)[0].decode("utf-8", "surrogateescape")
            raise ReplyError(f"ERR Unsupported option {text}")
        flags.add(opt)
    if b"nx" in flags and flags & {b"xx", b"gt", b"lt"}:
        raise ReplyError("ERR NX and XX, GT or LT options at the same time are not compatible")
    if {b"gt", b"lt"} <= flags:
        raise ReplyError("ERR GT and LT options at the same time are not compatible")
    return flags


def _expire(s: Session, argv: list[bytes], name: str, seconds: bool, absolute: bool) -> bytes:
    flags = _expire_flags(argv)
    when = integer_arg(argv[2])
    bad = f"ERR invalid expire time in '{name}' command"
    if seconds:
        if not -(2**63 // 1000) <= when <= (2**63 - 1) // 1000:  # C's LLONG_MIN / 1000 truncates
            raise ReplyError(bad)
        when *= 1000
    base = 0 if absolute else now_ms()
    if when > 2**63 - 1 - base:
        raise ReplyError(bad)
    when += base
    ks, key = s.ks, argv[1]
    if ks.get(key) is None:
        return ZERO
    current = ks.expires.get(key, -1)
    if (
        (b"nx" in flags and current != -1)
        or (b"xx" in flags and current == -1)
        or (b"gt" in flags and (current == -1 or when <= current))
        or (b"lt" in flags and current != -1 and when >= current)
    ):
        return ZERO
    ks.set_expire(key, when)
    return ONE


@command("expire", -3)
def expire(s: Session, argv: list[bytes]) -> bytes:
    return _expire(s, argv, "expire", True, False)


@command("pexpire", -3)
def pexpire(s: Session, argv: list[bytes]) -> bytes:
    return _expire(s, argv, "pexpire", False, False)


@command("expireat", -3)
def expireat(s: Session, argv: list[bytes]) -> bytes:
    return _expire(s, argv, "expireat", True, True)


@command("pexpireat", -3)
def pexpireat(s: Session, argv: list[bytes]) -> bytes:
    return _expire(s, argv, "pexpireat", False, True)


def _ttl(s: Session, key: bytes, ms: bool, absolute: bool = False) -> bytes:
    """TTL/PTTL, and EXPIRETIME/PEXPIRETIME with `absolute` (Redis's ttlGenericCommand)."""
    ks = s.ks
    if ks.get(key) is None:
        return integer(-2)
    when = ks.expires.get(key)
    if when is None:
        return integer(-1)
    left = when if absolute else max(0, when - now_ms())
    return integer(left if ms else (left + 500) // 1000)


@command("ttl", 2)
def ttl(s: Session, argv: list[bytes]) -> bytes:
    return _ttl(s, argv[1], False)


@command("pttl", 2)
def pttl(s: Session, argv: list[bytes]) -> bytes:
    return _ttl(s, argv[1], True)


@command("persist", 2)
def persist(s: Session, argv: list[bytes]) -> bytes:
    ks = s.ks
    if ks.get(argv[1]) is None:
        return ZERO
    return ONE if ks.persist(argv[1]) else ZERO


# -- issue 29: RENAME, EXPIRETIME, SCAN --------------------------------------------------------


def _rename(s: Session, argv: list[bytes], nx: bool) -> bytes | None:
    ks, src, dst = s.ks, argv[1], argv[2]
    if ks.get(src) is None:
        raise ReplyError("ERR no such key")
    if src == dst:
        return ZERO if nx else OK
    if nx and ks.get(dst) is not None:
        return ZERO
    ks.get(dst)  # an expired destination goes first, with its event
    ks.rename(src, dst)
    return None


@command("rename", 3)
def rename(s: Session, argv: list[bytes]) -> bytes:
    return _rename(s, argv, False) or OK


@command("renamenx", 3)
def renamenx(s: Session, argv: list[bytes]) -> bytes:
    return _rename(s, argv, True) or ONE


@command("copy", -3)
def copy(s: Session, argv: list[bytes]) -> bytes:
    """copyCommand's order: the options (DB, REPLACE), the same key in the same database,
    the source (expired: missing), the destination (there: 0, or deleted with REPLACE);
    every type, a stream with its consumer groups, the expiry with it (Keyspace.copy)."""
    ks, dst_ks, replace, j = s.ks, s.ks, False, 3
    while j < len(argv):
        opt = argv[j].lower()
        if opt == b"replace":
            replace = True
        elif opt == b"db" and j + 1 < len(argv):
            db, dbs = int_arg(argv[j + 1]), s.fe.ks.dbs
            if not 0 <= db < len(dbs):
                raise ReplyError("ERR DB index is out of range")
            dst_ks, j = dbs[db], j + 1
        else:
            raise ReplyError(SYNTAX)
        j += 1
    src, dst = argv[1], argv[2]
    if dst_ks is ks and src == dst:
        raise ReplyError("ERR source and destination objects are the same")
    value = ks.get(src)
    if value is None:
        return ZERO
    if dst_ks.get(dst) is not None:
        if not replace:
            return ZERO
        dst_ks.delete([dst])
    dst_ks.copy(dst, value, ks.expires.get(src))
    return ONE


@command("expiretime", 2)
def expiretime(s: Session, argv: list[bytes]) -> bytes:
    return _ttl(s, argv[1], False, absolute=True)


@command("pexpiretime", 2)
def pexpiretime(s: Session, argv: list[bytes]) -> bytes:
    return _ttl(s, argv[1], True, absolute=True)


def _cursor(text: bytes) -> int:
    """A cursor as Redis reads it (C's strtoul: an optional sign, digits, up to 2**64 - 1; a
    negative one wraps, so -1 is the largest). Ours are below 2**32 + 1: a larger one ends the
    scan at once, as a cursor past Redis's table does."""
    if not text:
        return 0  # strtoul of nothing: 0, its end at the string's end, which Redis takes
    sign, digits = (text[:1], text[1:]) if text[:1] in (b"-", b"+") else (b"", text)
    # (leading zeros first: int() of 4,300 digits or more raises, which closed the connection)
    significant = digits.lstrip(b"0")
    if not digits.isdigit() or not digits.isascii() or len(significant) > 20:
        raise ReplyError("ERR invalid cursor")
    digits = significant or b"0"
    if int(digits) > 2**64 - 1:
        raise ReplyError("ERR invalid cursor")
    return -int(digits) % 2**64 if sign == b"-" else int(digits)


def scan_options(
    argv: list[bytes], at: int, typed: bool
) -> tuple[int, Callable[[bytes], bool] | None, int, str | None]:
    """The cursor at `at`, then MATCH (its test: None for every element, as a lone *),
    COUNT and (SCAN only) TYPE."""
    cursor = _cursor(argv[at])
    pattern, count, kind = None, 10, None
    j = at + 1
    while j < len(argv):
        opt, more = argv[j].lower(), j + 1 < len(argv)
        if opt == b"count" and more:
            count = integer_arg(argv[j + 1])
            if count < 1:
                raise ReplyError(SYNTAX)
        elif opt == b"match" and more:
            pattern = None if argv[j + 1] == b"*" else glob.matcher(argv[j + 1])
        elif opt == b"type" and more and typed:
            kind = argv[j + 1].decode("latin-1").lower()
        else:
            raise ReplyError(SYNTAX)
        j += 2
    return cursor, pattern, count, kind


T = TypeVar("T")
EMPTY_SCAN = b"*2\r\n$1\r\n0\r\n*0\r\n"


def scan_key(argv: list[bytes], get: Callable[[bytes], T | None]) -> T | None:
    """SSCAN/HSCAN/ZSCAN's first checks, in their order: the cursor, then the key (`get`
    raises WRONGTYPE); None: no such key, answered EMPTY_SCAN with the options unread."""
    _cursor(argv[2])
    return get(argv[1])


def scan_all(argv: list[bytes], items: list[tuple[bytes, list[bytes]]]) -> bytes:
    """SSCAN/HSCAN/ZSCAN of a collection: everything at once and cursor 0, as Redis does for
    a small (listpack or intset) one; `items` are (the element MATCH looks at, what is
    replied for it)."""
    _, pattern, _, _ = scan_options(argv, 2, False)
    out = [x for element, reply in items if pattern is None or pattern(element) for x in reply]
    return raw_array([bulk(b"0"), array(out)])


@command("scan", -2)
def scan(s: Session, argv: list[bytes]) -> bytes:
    """A cursor is the crc32 to go on from (+1; 0: done): a key present for the whole scan is
    returned at least once, as Redis promises, whatever else is added or deleted meanwhile
    (nsqd/resp/scan_order.py: a call costs O(log N + COUNT))."""
    cursor, pattern, count, kind = scan_options(argv, 1, True)
    ks = s.ks
    batch, nxt = ks.scan_order().batch(ks.data, cursor, count)
    found = []
    for key in batch:
        value = ks.get(key)
        if value is None:
            continue
        if pattern is not None and not pattern(key):
            continue
        if kind is not None and type_name(value) != kind:
            continue
        found.append(key)
    return raw_array([bulk(b"%d" % nxt), array(found)])


@command("randomkey", 1)
def randomkey(s: Session, argv: list[bytes]) -> bytes:
    ks = s.ks
    keys = list(ks.data)
    while keys:
        i = random.randrange(len(keys))
        key = keys[i]
        keys[i] = keys[-1]  # (not pop(i): a database of expired keys made that quadratic)
        keys.pop()
        if ks.get(key) is not None:  # an expired one goes, as Redis's lookup does
            return bulk(key)
    return s.enc.null
