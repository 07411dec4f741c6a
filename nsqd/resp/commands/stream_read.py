"""XREAD, with BLOCK (what BullMQ's QueueEvents waits on), as Redis 7.0's xreadCommand answers
it: the options in order (BLOCK is refused from a script, COUNT below 0 is 0), each key's type
and ID in order (`$`: the stream's last ID now, 0-0 for a missing key), then every stream that
has an entry newer than its ID answers at once (RESP2 [[key, entries]...], RESP3 a map); none:
with BLOCK the client waits in the blocking engine (blocking.py, the lists' and sorted sets'
queues) until an XADD (or a RENAME) gives one of its keys an ID past the one it waits for,
and is answered with that one stream's entries (COUNT, or 1000 where none was given, as
Redis's XREAD_BLOCKED_DEFAULT_COUNT); inside MULTI it answers the null array at once. A key
deleted or made another type while waited on leaves the client waiting, as Redis does."""

from __future__ import annotations

from protocol.resp.codec import bulk
from protocol.resp.replies import Resp2

from ..blocking import Waiter
from ..stream import MAX_SEQ, Stream, StreamID
from .registry import SYNTAX, Block, ReplyError, Session, command, integer_arg
from .scripting import in_script
from .streams import entries, parse_id

BLOCKED_COUNT = 1000  # XREAD_BLOCKED_DEFAULT_COUNT: a blocked read without COUNT
NOT_TIMEOUT = "ERR timeout is not an integer or out of range"


class ReadArgs:
    """What XREAD's options and STREAMS say: `timeout` in seconds (None: no BLOCK, 0: for
    ever), `count` (0: all), the keys and their IDs as given."""

    __slots__ = ("count", "ids", "keys", "timeout")

    def __init__(self) -> None:
        self.timeout: float | None = None
        self.count = 0
        self.keys: list[bytes] = []
        self.ids: list[bytes] = []


def _block_ms(s: Session, name: bytes, raw: bytes) -> float:
    if in_script(s):  # (Redis checks this before the value, and names the command as sent)
        raise ReplyError(b"ERR " + name + b" command is not allowed with BLOCK option from scripts")
    ms = integer_arg(raw, NOT_TIMEOUT)
    if ms < 0:
        raise ReplyError("ERR timeout is negative")
    return ms / 1000


def read_args(s: Session, argv: list[bytes]) -> ReadArgs:
    """xreadCommand's option loop, for XREAD: an option with no value after it, or an
    unknown one, is a syntax error; STREAMS ends the options."""
    args, j, n = ReadArgs(), 1, len(argv)
    while j < n:
        opt, more = argv[j].lower(), j < n - 1
        if opt == b"block" and more:
            args.timeout = _block_ms(s, argv[0], argv[j + 1])
        elif opt == b"count" and more:
            args.count = max(0, integer_arg(argv[j + 1]))
        elif opt == b"streams" and more:
            rest = argv[j + 1 :]
            if len(rest) % 2:
                raise ReplyError(
                    "ERR Unbalanced XREAD list of streams: for each stream key an ID or '$' "
                    "must be specified."
                )
            args.keys, args.ids = rest[: len(rest) // 2], rest[len(rest) // 2 :]
            return args
        elif opt == b"group" and j < n - 2:
            raise ReplyError(
                "ERR The GROUP option is only supported by XREADGROUP. You called XREAD instead."
            )
        elif opt == b"noack":
            raise ReplyError(
                "ERR The NOACK option is only supported by XREADGROUP. You called XREAD instead."
            )
        else:
            raise ReplyError(SYNTAX)
        j += 2
    raise ReplyError(SYNTAX)  # no STREAMS


def after(sid: StreamID) -> StreamID:
    """The ID just past `sid` (streamIncrID): where a read 'newer than sid' starts."""
    ms, seq = sid
    return (ms, seq + 1) if seq < MAX_SEQ else (ms + 1, 0)


def newer(st: Stream, gt: StreamID, count: int) -> bytes:
    """The entries of `st` past `gt`, at most `count` (0: all)."""
    span = st.span(after(gt), (MAX_SEQ, MAX_SEQ))
    return entries(st, span[:count] if count else span)


def one_stream(enc: Resp2, key: bytes, answer: bytes) -> bytes:
    """A blocked read's answer: its one stream, wrapped as the whole reply is."""
    head = b"*1\r\n*2\r\n" if enc.version == 2 else b"%1\r\n"
    return head + bulk(key) + answer


def streams_reply(enc: Resp2, found: list[tuple[bytes, bytes]]) -> bytes:
    if enc.version == 3:
        return enc.map([x for key, answer in found for x in (bulk(key), answer)])
    return b"*%d\r\n" % len(found) + b"".join(b"*2\r\n" + bulk(k) + a for k, a in found)


@command("xread", -4)
def xread(s: Session, argv: list[bytes]) -> bytes | Block:
    args, ks = read_args(s, argv), s.ks
    gts: list[StreamID] = []
    for key, raw in zip(args.keys, args.ids, strict=True):
        st = ks.get_stream(key)  # WRONGTYPE, key by key with the IDs, as Redis
        if raw == b"$":
            gts.append(st.last if st is not None else (0, 0))
        elif raw == b">":
            raise ReplyError(
                "ERR The > ID can be specified only when calling XREADGROUP using the GROUP "
                "<group> <consumer> option."
            )
        else:
            gts.append(parse_id(raw, 0))
    found = []
    for key, gt in zip(args.keys, gts, strict=True):
        st = ks.get_stream(key)
        if st is not None and st.ids and st.ids[-1] > gt:  # an entry newer than its ID
            found.append((key, newer(st, gt, args.count)))
    if found:
        return streams_reply(s.enc, found)
    if args.timeout is None:
        return s.enc.null_array
    waiting: dict[bytes, StreamID] = {}
    for key, gt in zip(args.keys, gts, strict=True):
        waiting.setdefault(key, gt)  # a key named twice waits for its first ID, as Redis
    enc, count = s.enc, args.count or BLOCKED_COUNT

    def take(key: bytes) -> bytes | None:
        st = ks.data[key]
        assert isinstance(st, Stream)
        gt = waiting[key]
        # the stream's last ID, not its last entry's: an entry added and deleted in one
        # EXEC serves the waiter with what is left (nothing), as Redis
        return one_stream(enc, key, newer(st, gt, count)) if st.last > gt else None

    waiter = Waiter(ks, args.keys, True, _not_a_list, take=take, kind=Stream)
    return s.fe.block(waiter, args.timeout, enc.null_array)


def _not_a_list(key: bytes, elem: bytes) -> bytes:
    """A stream waiter is served by its `take`, never with a list's element."""
    raise ReplyError("ERR a stream read was offered a list element")
