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

from bisect import bisect_left

from protocol.resp.codec import bulk
from protocol.resp.replies import Resp2

from ..blocking import Waiter
from ..keyspace import Keyspace
from ..stream import MAX_SEQ, Stream, StreamID, advance, format_id
from ..values import now_ms
from .registry import SYNTAX, Block, ReplyError, Session, command, integer_arg
from .scripting import in_script
from .streams import entries, parse_id

BLOCKED_COUNT = 1000  # XREAD_BLOCKED_DEFAULT_COUNT: a blocked read without COUNT
NOT_TIMEOUT = "ERR timeout is not an integer or out of range"


class ReadArgs:
    """What XREAD's options and STREAMS say: `timeout` in seconds (None: no BLOCK, 0: for
    ever), `count` (0: all), the keys and their IDs as given."""

    __slots__ = ("consumer", "count", "group", "ids", "keys", "noack", "timeout")

    def __init__(self) -> None:
        self.timeout: float | None = None
        self.count = 0
        self.keys: list[bytes] = []
        self.ids: list[bytes] = []
        self.group: bytes | None = None  # XREADGROUP's GROUP, and its consumer
        self.consumer = b""
        self.noack = False


def _block_ms(s: Session, name: bytes, raw: bytes) -> float:
    if in_script(s):  # (Redis checks this before the value, and names the command as sent)
        raise ReplyError(b"ERR " + name + b" command is not allowed with BLOCK option from scripts")
    ms = integer_arg(raw, NOT_TIMEOUT)
    if ms < 0:
        raise ReplyError("ERR timeout is negative")
    return ms / 1000


def read_args(s: Session, argv: list[bytes], grouped: bool = False) -> ReadArgs:
    """xreadCommand's option loop, for XREAD or XREADGROUP: an option with no value after
    it, or an unknown one, is a syntax error; STREAMS ends the options."""
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
                    # (XREADGROUP's too: Redis 7.0.15 names XREAD and `$` there)
                    "ERR Unbalanced XREAD list of streams: for each stream key an ID or '$' "
                    "must be specified."
                )
            args.keys, args.ids = rest[: len(rest) // 2], rest[len(rest) // 2 :]
            if grouped and args.group is None:
                raise ReplyError(SYNTAX)
            return args
        elif opt == b"group" and j < n - 2:
            if not grouped:
                raise ReplyError(
                    "ERR The GROUP option is only supported by XREADGROUP. You called XREAD "
                    "instead."
                )
            args.group, args.consumer = argv[j + 1], argv[j + 2]
            j += 1
        elif opt == b"noack":
            if not grouped:
                raise ReplyError(
                    "ERR The NOACK option is only supported by XREADGROUP. You called XREAD "
                    "instead."
                )
            args.noack = True
            j -= 1
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


# -- XREADGROUP ---------------------------------------------------------------------------

DOLLAR = (
    "ERR The $ ID is meaningless in the context of XREADGROUP: you want to read the history "
    "of this consumer by specifying a proper ID, or use the > ID to get new messages. The $ "
    "ID would just return an empty result set."
)
GONE_GROUP = b"-NOGROUP the consumer group this client was blocked on no longer exists\r\n"
GONE_KEY = b"-UNBLOCKED the stream key no longer exists\r\n"


def deliver(ks: Keyspace, key: bytes, args: ReadArgs, count: int) -> bytes:
    """A `>` read: the entries past the group's last delivered ID (at most `count`, 0: all),
    pending for the consumer unless NOACK; the group's last ID and entries-read move on."""
    st = ks.data[key]
    assert isinstance(st, Stream) and args.group is not None
    group = st.groups[args.group]
    span = st.span(after(group.last), (MAX_SEQ, MAX_SEQ))
    span = span[:count] if count else span
    for i in span:
        advance(st, group, st.ids[i])
    given = [] if args.noack else [(st.ids[i], 1) for i in span]
    now = now_ms()
    ks.xnack(key, args.group, args.consumer, now, now, given)
    if span:
        ks.xgroup_setid(key, args.group, group.last, group.read)
    return entries(st, span)


def _history(ks: Keyspace, enc: Resp2, key: bytes, args: ReadArgs, gt: StreamID) -> bytes:
    """A read by ID: the consumer's own pending entries past `gt`, each delivered once more
    (an entry deleted since: its ID and a null, not counted)."""
    st = ks.data[key]
    assert isinstance(st, Stream) and args.group is not None
    group = st.groups[args.group]
    held = group.consumers.get(args.consumer)
    start = after(gt)
    ids = sorted(sid for sid in held.pel if sid >= start) if held is not None else []
    out, given = [], []
    for sid in ids[: args.count] if args.count else ids:
        i = bisect_left(st.ids, sid)
        if i < len(st.ids) and st.ids[i] == sid:
            out.append(entries(st, [i])[4:])  # (one entry: its array header dropped)
            given.append((sid, group.pel[sid].count + 1))
        else:
            out.append(b"*2\r\n" + bulk(format_id(sid)) + enc.null_array)
    now = now_ms()
    ks.xnack(key, args.group, args.consumer, now, now, given)
    return b"*%d\r\n" % len(out) + b"".join(out)


@command("xreadgroup", -7)
def xreadgroup(s: Session, argv: list[bytes]) -> bytes | Block:
    args, ks = read_args(s, argv, grouped=True), s.ks
    name = args.group
    assert name is not None
    gts: list[StreamID | None] = []  # None: `>`
    for key, raw in zip(args.keys, args.ids, strict=True):
        st = ks.get_stream(key)
        if st is None or name not in st.groups:
            raise ReplyError(
                b"NOGROUP No such key '" + key + b"' or consumer group '" + name
                + b"' in XREADGROUP with GROUP option"
            )  # fmt: skip
        if raw == b"$":
            raise ReplyError(DOLLAR)
        gts.append(None if raw == b">" else parse_id(raw, 0))
    found = []
    for key, gt in zip(args.keys, gts, strict=True):
        st = ks.data[key]
        assert isinstance(st, Stream)
        if gt is not None:  # a consumer's history is always answered
            found.append((key, _history(ks, s.enc, key, args, gt)))
        elif st.ids and st.ids[-1] > st.groups[name].last:
            found.append((key, deliver(ks, key, args, args.count)))
    if found:
        return streams_reply(s.enc, found)
    if args.timeout is None:
        return s.enc.null_array
    enc, count = s.enc, args.count or BLOCKED_COUNT

    def take(key: bytes) -> bytes | None:
        st = ks.data[key]
        assert isinstance(st, Stream)
        group = st.groups.get(name)
        if group is None:
            return GONE_GROUP
        return one_stream(enc, key, deliver(ks, key, args, count)) if st.last > group.last else None

    waiter = Waiter(ks, args.keys, True, _not_a_list, take=take, kind=Stream)
    waiter.lost = GONE_KEY
    return s.fe.block(waiter, args.timeout, enc.null_array)


def _not_a_list(key: bytes, elem: bytes) -> bytes:
    """A stream waiter is served by its `take`, never with a list's element."""
    raise ReplyError("ERR a stream read was offered a list element")
