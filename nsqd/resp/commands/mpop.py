"""LMPOP and BLMPOP (issue 29) as Redis 7.0 parses and answers them: numkeys, the keys, LEFT or
RIGHT, COUNT; the first non-empty key gives up to COUNT elements, and a blocked BLMPOP served
by a push takes the rest of its COUNT off that list in the same step."""

from __future__ import annotations

from collections.abc import Awaitable, Callable
from typing import TypeVar

from protocol.resp.codec import array, bulk, string2ll

from ..blocking import Waiter
from ..bridge import is_bridged
from .lists import where_arg
from .registry import SYNTAX, Block, Deferred, ReplyError, Session, command, timeout_arg

W = TypeVar("W")


def mpop_args(
    argv: list[bytes], first: int, where: Callable[[bytes], W] = where_arg
) -> tuple[list[bytes], W, int]:
    """lmpopGenericCommand's parse: numkeys, the keys, LEFT|RIGHT, COUNT (zmpopGenericCommand's
    is the same with MIN|MAX: `where`)."""
    numkeys = string2ll(argv[first])
    if numkeys is None or numkeys < 1:
        raise ReplyError("ERR numkeys should be greater than 0")
    where_at = first + 1 + numkeys
    if where_at >= len(argv):
        raise ReplyError(SYNTAX)
    side = where(argv[where_at])
    count = None
    j = where_at + 1
    while j < len(argv):
        if count is None and argv[j].lower() == b"count" and j + 1 < len(argv):
            count = string2ll(argv[j + 1])
            if count is None or count < 1:
                raise ReplyError("ERR count should be greater than 0")
            j += 2
        else:
            raise ReplyError(SYNTAX)
    return argv[first + 1 : where_at], side, count or 1


def _mpop_reply(key: bytes, elems: list[bytes]) -> bytes:
    return b"*2\r\n" + bulk(key) + array(elems)


def _mpop_now(
    s: Session, keys: list[bytes], left: bool, count: int, peers: bool = False
) -> bytes | Block | None:
    """The first key with elements gives up to `count`; None when every key is empty. With
    `peers` (LMPOP, not BLMPOP's first look), a bridge key that this partition has nothing of
    asks a group's other workers before the keys after it are looked at."""
    for i, key in enumerate(keys):
        if is_bridged(key):
            items = s.fe.bridge.pop(key, count)
            more = None if items or not peers else s.fe.bridge.more(key, count)
            if more is not None:
                return _mpop_later(s, key, more, keys[i + 1 :], left, count)
        elif s.ks.get_list(key):
            items = s.ks.pop(key, count, left)
        else:
            continue
        if items:
            return _mpop_reply(key, items)
    return None


def _mpop_later(
    s: Session,
    key: bytes,
    more: Callable[[], Awaitable[list[bytes]]],
    rest: list[bytes],
    left: bool,
    count: int,
) -> Deferred:
    """LMPOP's reply once the peers were asked for `key`'s messages: theirs, or else the keys
    after it, as LMPOP looks at them."""

    async def ask() -> bytes:
        items = await more()
        if items:
            return _mpop_reply(key, items)
        after = _mpop_now(s, rest, left, count, peers=True)
        if isinstance(after, Deferred):
            return await after.ask()
        return after or s.enc.null_array

    def local() -> bytes:
        after = _mpop_now(s, rest, left, count, peers=True)
        return after.now() if isinstance(after, Block) else after or s.enc.null_array

    return Deferred(s.ks, ask, local)


@command("lmpop", -4)
def lmpop(s: Session, argv: list[bytes]) -> bytes | Block:
    keys, left, count = mpop_args(argv, 1)
    return _mpop_now(s, keys, left, count, peers=True) or s.enc.null_array


@command("blmpop", -5)
def blmpop(s: Session, argv: list[bytes]) -> bytes | Block:
    keys, left, count = mpop_args(argv, 2)
    timeout = timeout_arg(argv[1])  # read after the rest, in blockingPopGenericCommand
    found = _mpop_now(s, keys, left, count)
    if found is not None:
        return found
    ks = s.ks

    def deliver(key: bytes, elem: bytes) -> bytes:
        # the blocking engine took one; the rest of COUNT comes off the same list at once
        more = count - 1 if not is_bridged(key) and ks.get_list(key) else 0
        return _mpop_reply(key, [elem, *(ks.pop(key, more, left) if more else [])])

    return s.fe.block(Waiter(ks, keys, left, deliver), timeout, s.enc.null_array)
