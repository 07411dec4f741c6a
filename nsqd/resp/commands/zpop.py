"""BZPOPMIN, BZPOPMAX, ZMPOP and BZMPOP (what BullMQ's workers block on) as Redis 7.0 answers
them (t_zset.c's blockingGenericZpopCommand and genericZpopCommand): the first key that holds a
sorted set gives its lowest (MIN) or highest (MAX) members, a key of another type before it
is WRONGTYPE; BZPOP* answers [key, member, score], Z(M)POP [key, [[member, score], ...]] (a
score a double under RESP3), nothing found the null array. A blocking one that finds nothing
waits on the keys in the blocking engine's FIFO queues (blocking.py, the lists' own), served
when ZADD/ZINCRBY (or a RENAME) gives one of them members; inside MULTI or a script it answers
the null array at once, as Redis does."""

from __future__ import annotations

from protocol.resp.codec import bulk
from protocol.resp.replies import Resp2

from ..blocking import Waiter
from ..keyspace import Keyspace
from ..zset import ZSet
from .mpop import mpop_args
from .registry import SYNTAX, Block, ReplyError, Session, command, timeout_arg

_HIGHEST = {b"min": False, b"max": True}


def _min_max(raw: bytes) -> bool:
    highest = _HIGHEST.get(raw.lower())
    if highest is None:
        raise ReplyError(SYNTAX)
    return highest


def _first(ks: Keyspace, keys: list[bytes]) -> bytes | None:
    """The first key holding a sorted set (never empty: the last member takes the key)."""
    for key in keys:
        if ks.get_zset(key) is not None:
            return key
    return None


def _pop(ks: Keyspace, enc: Resp2, key: bytes, count: int, highest: bool, nested: bool) -> bytes:
    """Up to `count` members off one end of the sorted set at `key`, with their key:
    BZPOP*'s flat [key, member, score, ...] or Z(M)POP's [key, [[member, score], ...]]."""
    z = ks.data[key]
    assert isinstance(z, ZSet)
    picked = z.order[-count:][::-1] if highest else z.order[:count]
    ks.zrem(key, [m for _, m in picked])
    if nested:
        return (
            b"*2\r\n" + bulk(key) + b"*%d\r\n" % len(picked)
            + b"".join(b"*2\r\n" + bulk(m) + enc.double(v) for v, m in picked)
        )  # fmt: skip
    pairs = b"".join(bulk(m) + enc.double(v) for v, m in picked)
    return b"*%d\r\n" % (2 * len(picked) + 1) + bulk(key) + pairs


def _not_a_list(key: bytes, elem: bytes) -> bytes:
    """A sorted-set waiter is served by its `take`, never with a list's element."""
    raise ReplyError("ERR a sorted-set pop was offered a list element")


def _pop_or_wait(
    s: Session, keys: list[bytes], highest: bool, count: int, nested: bool, timeout: float
) -> bytes | Block:
    ks, enc = s.ks, s.enc
    key = _first(ks, keys)
    if key is not None:
        return _pop(ks, enc, key, count, highest, nested)

    def take(ready: bytes) -> bytes:
        return _pop(ks, enc, ready, count, highest, nested)

    waiter = Waiter(ks, keys, highest, _not_a_list, take=take, kind=ZSet)
    return s.fe.block(waiter, timeout, enc.null_array)


@command("bzpopmin", -3)
def bzpopmin(s: Session, argv: list[bytes]) -> bytes | Block:
    return _pop_or_wait(s, argv[1:-1], False, 1, False, timeout_arg(argv[-1]))


@command("bzpopmax", -3)
def bzpopmax(s: Session, argv: list[bytes]) -> bytes | Block:
    return _pop_or_wait(s, argv[1:-1], True, 1, False, timeout_arg(argv[-1]))


@command("zmpop", -4)
def zmpop(s: Session, argv: list[bytes]) -> bytes:
    keys, highest, count = mpop_args(argv, 1, _min_max)
    key = _first(s.ks, keys)
    return s.enc.null_array if key is None else _pop(s.ks, s.enc, key, count, highest, True)


@command("bzmpop", -5)
def bzmpop(s: Session, argv: list[bytes]) -> bytes | Block:
    keys, highest, count = mpop_args(argv, 2, _min_max)
    timeout = timeout_arg(argv[1])  # read after the rest, as zmpopGenericCommand does
    return _pop_or_wait(s, keys, highest, count, True, timeout)
