"""Strings with expiry (seed 003): SET with NX/XX/GET/EX/PX/EXAT/PXAT/KEEPTTL as Redis 7.0
parses them, GET."""

from __future__ import annotations

from protocol.resp.codec import OK

from ..keyspace import now_ms
from .registry import SYNTAX, ReplyError, Session, command, integer_arg

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
            or (opt == b"keepttl" and not flags & _EXCLUSIVE)
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


def _expire_ms(unit: bytes, raw: bytes) -> int:
    """getExpireMillisecondsOrReply: the absolute unix ms the key expires at."""
    value = integer_arg(raw)
    seconds = unit in (b"ex", b"exat")
    if value <= 0 or (seconds and value > (2**63 - 1) // 1000):
        raise ReplyError("ERR invalid expire time in 'set' command")
    if seconds:
        value *= 1000
    if unit in (b"ex", b"px"):
        value += now_ms()
        if value >= 2**63:
            raise ReplyError("ERR invalid expire time in 'set' command")
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
    return s.enc.bulk(old) if b"get" in flags else OK


@command("get", 2)
def get(s: Session, argv: list[bytes]) -> bytes:
    return s.enc.bulk(s.ks.get_string(argv[1]))
