"""The list commands of seed 001 (queues on lists), with Redis 7.0's replies and errors and its
order of checks (argument parsing before the key lookup where Redis does it, and after it where
Redis does that): pushes, pops with COUNT, blocking pops over several keys, LMOVE/BLMOVE and
their deprecated forms, LLEN, LREM, LTRIM, LRANGE, LINDEX, LSET; and (issue 29) LPOS,
LINSERT (LMPOP and BLMPOP are in mpop.py).

Keys `topic:<name>` and `channel:<topic>:<channel>` are the NSQ bridge (bridge.py)."""

from __future__ import annotations

import functools
from itertools import islice

from protocol.resp.codec import EMPTY_ARRAY, OK, array, bulk, integer

from ..blocking import Waiter, put_back
from ..bridge import BRIDGED, is_bridged
from .registry import (
    SYNTAX,
    Block,
    Deferred,
    ReplyError,
    Session,
    command,
    integer_arg,
    positive_arg,
    timeout_arg,
    wrong_arity,
)

MUST_BE_POSITIVE = "ERR value is out of range, must be positive"


# -- pushes -------------------------------------------------------------------------------


def _push(left: bool, create: bool, s: Session, argv: list[bytes]) -> bytes:
    key = argv[1]
    if key.startswith(BRIDGED):
        return integer(s.fe.bridge.push(key, argv[2:]))
    return integer(s.ks.push(key, argv[2:], left, create))


# LPUSH and RPUSH are a queue's every enqueue: registered as _push itself, its end bound
# (a partial adds no Python call)
lpush = command("lpush", -3)(functools.partial(_push, True, True))
rpush = command("rpush", -3)(functools.partial(_push, False, True))


@command("lpushx", -3)
def lpushx(s: Session, argv: list[bytes]) -> bytes:
    return _push(True, False, s, argv)


@command("rpushx", -3)
def rpushx(s: Session, argv: list[bytes]) -> bytes:
    return _push(False, False, s, argv)


# -- pops ---------------------------------------------------------------------------------


def _pop(left: bool, s: Session, argv: list[bytes]) -> bytes | Block:
    if len(argv) == 2 and not argv[1].startswith(BRIDGED):
        # a queue's every dequeue: LPOP/RPOP key, one element, in one call to the keyspace
        elem = s.ks.pop_one(argv[1], left)
        return s.enc.null if elem is None else bulk(elem)
    if len(argv) > 3:
        raise wrong_arity("lpop" if left else "rpop")
    count = positive_arg(argv[2], MUST_BE_POSITIVE) if len(argv) == 3 else None
    key = argv[1]

    def answer(items: list[bytes]) -> bytes:
        if count is None:
            return bulk(items[0]) if items else s.enc.null
        return array(items) if items or count == 0 else s.enc.null_array

    if is_bridged(key):
        wanted = 1 if count is None else count
        items = s.fe.bridge.pop(key, wanted)
        more = s.fe.bridge.more(key, wanted - len(items))
        if more is not None:  # a group's other workers may hold the rest

            async def ask() -> bytes:
                return answer(items + await more())

            return Deferred(s.ks, ask, lambda: answer(items))
        return answer(items)
    lst = s.ks.get_list(key)
    if lst is None:
        return s.enc.null if count is None else s.enc.null_array
    return answer([] if count == 0 else s.ks.pop(key, count or 1, left))


lpop = command("lpop", -2)(functools.partial(_pop, True))
rpop = command("rpop", -2)(functools.partial(_pop, False))


def _take_one(s: Session, key: bytes, left: bool) -> bytes | None:
    """One element from the end `left` says, or None when the list is empty or missing."""
    if is_bridged(key):
        items = s.fe.bridge.pop(key, 1)
        return items[0] if items else None
    if not s.ks.get_list(key):
        return None
    return s.ks.pop(key, 1, left)[0]


def _bpop(s: Session, argv: list[bytes], left: bool) -> bytes | Block:
    timeout = timeout_arg(argv[-1])
    keys = argv[1:-1]
    for key in keys:
        elem = _take_one(s, key, left)
        if elem is not None:
            return array([key, elem])
    waiter = Waiter(s.ks, keys, left, lambda key, elem: array([key, elem]))
    return s.fe.block(waiter, timeout, s.enc.null_array)


@command("blpop", -3)
def blpop(s: Session, argv: list[bytes]) -> bytes | Block:
    return _bpop(s, argv, True)


@command("brpop", -3)
def brpop(s: Session, argv: list[bytes]) -> bytes | Block:
    return _bpop(s, argv, False)


# -- moves --------------------------------------------------------------------------------


def where_arg(raw: bytes) -> bool:
    side = raw.lower()
    if side == b"left":
        return True
    if side == b"right":
        return False
    raise ReplyError(SYNTAX)


def _put(s: Session, dst: bytes, elem: bytes, left: bool) -> None:
    if is_bridged(dst):
        s.fe.bridge.push(dst, [elem])
    else:
        s.ks.push(dst, [elem], left)


def _check_dst(s: Session, dst: bytes) -> None:
    """WRONGTYPE, or a bridge key that takes no push, before anything is popped (a message
    popped from a channel key is finished: a move that failed after it lost it)."""
    if is_bridged(dst):
        s.fe.bridge.check_push(dst)
    else:
        s.ks.get_list(dst)


def _move(s: Session, src: bytes, dst: bytes, wherefrom: bool, whereto: bool) -> bytes | None:
    if is_bridged(src):  # in flight while it is put: a refused move leaves it in the channel
        _check_dst(s, dst)
        return s.fe.bridge.move(src, lambda elem: _put(s, dst, elem, whereto))
    if not s.ks.get_list(src):
        return None
    if not is_bridged(dst):
        s.ks.get_list(dst)  # WRONGTYPE before anything moves
        return s.ks.move(src, dst, wherefrom, whereto)  # one record: never the pop alone
    return _move_to_bridge(s, src, dst, wherefrom)


def _move_to_bridge(s: Session, src: bytes, dst: bytes, wherefrom: bool) -> bytes:
    """An element of list `src` published to a bridge key (bridge.py), or left in `src`."""
    s.fe.bridge.check_push(dst)
    when = s.ks.expires.get(src)
    elem = s.ks.pop(src, 1, wherefrom)[0]
    try:
        s.fe.bridge.push(dst, [elem])
    except ReplyError:
        # the bridge refused this element (empty, over --max-msg-size, a full queue): the
        # error is answered and the element stays in the source, as a blocked move's does
        put_back(s.ks, src, elem, wherefrom, when)
        raise
    return elem


def _blmove(
    s: Session, src: bytes, dst: bytes, wherefrom: bool, whereto: bool, raw_timeout: bytes
) -> bytes | Block:
    timeout = timeout_arg(raw_timeout)
    elem = _move(s, src, dst, wherefrom, whereto)
    if elem is not None:
        return bulk(elem)

    def deliver(key: bytes, elem: bytes) -> bytes:
        # The destination may have become another type while this client waited, or the
        # bridge may refuse this element (empty, over --max-msg-size, a full queue): raised,
        # before anything is pushed, so that this waiter alone gets the error and the element
        # goes back where it was, for the next waiter (Waiter.attempt; the pusher's reply and
        # the other ready keys are not concerned).
        _check_dst(s, dst)
        _put(s, dst, elem, whereto)
        return bulk(elem)

    def take(key: bytes) -> bytes:
        s.ks.get_list(dst)  # WRONGTYPE before anything moves
        return bulk(s.ks.move(key, dst, wherefrom, whereto))

    # a destination that never takes a push (channel:<t>:<c>) is refused before the client
    # waits (bridge.watch), with the error LMOVE gives
    onto_list = None if is_bridged(dst) else take
    waiter = Waiter(s.ks, [src], wherefrom, deliver, moves_to=dst, take=onto_list)
    # inside EXEC Redis answers blmoveGenericCommand's addReplyNull, on a timeout the
    # null array (replyToBlockedClientTimedOut): they differ in RESP2
    return s.fe.block(waiter, timeout, s.enc.null_array, s.enc.null)


def _move_now(s: Session, src: bytes, dst: bytes, wherefrom: bool, whereto: bool) -> bytes | Block:
    """LMOVE's reply; from a bridge key that this partition has nothing of, in a group, one
    message taken from a peer: held there until it is in `dst`, then finished (given back
    when `dst` became another type meanwhile: WRONGTYPE, as a blocked move gets)."""
    elem = _move(s, src, dst, wherefrom, whereto)
    more = None if elem is not None or not is_bridged(src) else s.fe.bridge.one_more(src)
    if more is None:
        return s.enc.bulk(elem)

    async def ask() -> bytes:
        taken = await more()
        if taken is None:
            return s.enc.null
        try:
            _check_dst(s, dst)
            _put(s, dst, taken.body, whereto)
            s.fe.log.flush()  # the move is kept before its peer lets the message go
        except BaseException:
            await taken.settle(False)
            raise
        await taken.settle(True)
        return bulk(taken.body)

    return Deferred(s.ks, ask, lambda: s.enc.null)


@command("lmove", 5)
def lmove(s: Session, argv: list[bytes]) -> bytes | Block:
    wherefrom, whereto = where_arg(argv[3]), where_arg(argv[4])
    return _move_now(s, argv[1], argv[2], wherefrom, whereto)


@command("rpoplpush", 3)
def rpoplpush(s: Session, argv: list[bytes]) -> bytes | Block:
    return _move_now(s, argv[1], argv[2], False, True)


@command("blmove", 6)
def blmove(s: Session, argv: list[bytes]) -> bytes | Block:
    wherefrom, whereto = where_arg(argv[3]), where_arg(argv[4])
    return _blmove(s, argv[1], argv[2], wherefrom, whereto, argv[5])


@command("brpoplpush", 4)
def brpoplpush(s: Session, argv: list[bytes]) -> bytes | Block:
    return _blmove(s, argv[1], argv[2], False, True, argv[3])


# -- reading and editing ------------------------------------------------------------------


@command("llen", 2)
def llen(s: Session, argv: list[bytes]) -> bytes | Block:
    key = argv[1]
    if is_bridged(key):
        here = s.fe.bridge.length(key)
        more = s.fe.bridge.more_depth(key)
        if more is not None:  # a group's other workers' partitions too

            async def ask() -> bytes:
                return integer(here + await more())

            return Deferred(s.ks, ask, lambda: integer(here))
        return integer(here)
    lst = s.ks.get_list(key)
    return integer(len(lst) if lst is not None else 0)


def _range(start: int, end: int, n: int) -> tuple[int, int] | None:
    """Redis's index rules for LRANGE/LTRIM: (start, end) inclusive, or None when empty."""
    if start < 0:
        start += n
    if end < 0:
        end += n
    start = max(start, 0)
    if start > end or start >= n:
        return None
    return start, min(end, n - 1)


@command("lrange", 4)
def lrange(s: Session, argv: list[bytes]) -> bytes:
    start, end = integer_arg(argv[2]), integer_arg(argv[3])
    lst = s.ks.get_list(argv[1])
    if lst is None:
        return EMPTY_ARRAY
    span = _range(start, end, len(lst))
    if span is None:
        return EMPTY_ARRAY
    return array(list(islice(lst, span[0], span[1] + 1)))


@command("lindex", 3)
def lindex(s: Session, argv: list[bytes]) -> bytes:
    lst = s.ks.get_list(argv[1])
    if lst is None:
        return s.enc.null
    index = integer_arg(argv[2])
    if index < 0:
        index += len(lst)
    return s.enc.bulk(lst[index] if 0 <= index < len(lst) else None)


@command("lset", 4)
def lset(s: Session, argv: list[bytes]) -> bytes:
    lst = s.ks.get_list(argv[1])
    if lst is None:
        raise ReplyError("ERR no such key")
    index = integer_arg(argv[2])
    if index < 0:
        index += len(lst)
    if not 0 <= index < len(lst):
        raise ReplyError("ERR index out of range")
    s.ks.lset(argv[1], index, argv[3])
    return OK


@command("lrem", 4)
def lrem(s: Session, argv: list[bytes]) -> bytes:
    count = integer_arg(argv[2])
    if s.ks.get_list(argv[1]) is None:
        return integer(0)
    return integer(s.ks.lrem(argv[1], count, argv[3]))


@command("ltrim", 4)
def ltrim(s: Session, argv: list[bytes]) -> bytes:
    start, end = integer_arg(argv[2]), integer_arg(argv[3])
    lst = s.ks.get_list(argv[1])
    if lst is None:
        return OK
    span = _range(start, end, len(lst))
    if span is None:
        s.ks.ltrim(argv[1], 1, 0)
    elif span != (0, len(lst) - 1):
        s.ks.ltrim(argv[1], *span)
    else:
        s.ks.touched(argv[1])  # nothing to log, but ltrimCommand signals the key all the same
    return OK


# -- issue 29: LPOS, LINSERT ----------------------------------------------------


def _lpos_options(argv: list[bytes]) -> tuple[int, int | None, int]:
    rank, count, maxlen = 1, None, 0
    j = 3
    while j < len(argv):
        opt, more = argv[j].lower(), j + 1 < len(argv)
        if opt == b"rank" and more:
            rank = integer_arg(argv[j + 1])
            if rank == -(2**63):
                rank = -1  # Redis 7.0 negates it and overflows: the first match from the tail
            if rank == 0:
                raise ReplyError(
                    "ERR RANK can't be zero: use 1 to start from the first match, 2 from the "
                    "second ... or use negative to start from the end of the list"
                )
        elif opt == b"count" and more:
            count = positive_arg(argv[j + 1], "ERR COUNT can't be negative")
        elif opt == b"maxlen" and more:
            maxlen = positive_arg(argv[j + 1], "ERR MAXLEN can't be negative")
        else:
            raise ReplyError(SYNTAX)
        j += 2
    return rank, count, maxlen


@command("lpos", -3)
def lpos(s: Session, argv: list[bytes]) -> bytes:
    rank, count, maxlen = _lpos_options(argv)
    lst = s.ks.get_list(argv[1])
    if lst is None:
        return EMPTY_ARRAY if count is not None else s.enc.null
    n = len(lst)
    indexes = range(n) if rank > 0 else range(n - 1, -1, -1)
    if maxlen:
        indexes = indexes[:maxlen]
    want, skip, found = argv[2], abs(rank) - 1, []
    for i in indexes:
        if lst[i] == want:
            if skip:
                skip -= 1
                continue
            found.append(i)
            if count is None or len(found) == count:
                break
    if count is None:
        return integer(found[0]) if found else s.enc.null
    return b"*%d\r\n" % len(found) + b"".join(integer(i) for i in found)


@command("linsert", 5)
def linsert(s: Session, argv: list[bytes]) -> bytes:
    where = argv[2].lower()
    if where not in (b"before", b"after"):
        raise ReplyError(SYNTAX)
    lst = s.ks.get_list(argv[1])
    if lst is None:
        return integer(0)
    try:
        index = lst.index(argv[3])
    except ValueError:
        return integer(-1)
    s.ks.linsert(argv[1], index + (where == b"after"), argv[4])
    return integer(len(lst))
