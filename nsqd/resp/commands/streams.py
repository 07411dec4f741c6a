"""Streams, the part python-rq keeps job results in: XADD (auto or explicit IDs, NOMKSTREAM,
MAXLEN or MINID with = or ~ and LIMIT), XLEN, XRANGE, XREVRANGE (with COUNT and exclusive `(`
ends), XDEL, XTRIM, XSETID; Redis 7.0's replies and errors, and the ID parsing the
other stream commands share. XREAD and XREADGROUP are stream_read.py's."""

from __future__ import annotations

from protocol.resp.codec import OK, ZERO, array, bulk, integer, string2ll

from ..keyspace import now_ms
from ..stream import MAX_ID, MAX_SEQ, Stream, StreamID, format_id
from ..stream_nodes import APPROX_LIMIT
from .registry import SYNTAX, ReplyError, Session, command, integer_arg

INVALID_ID = "ERR Invalid stream ID specified as stream command argument"


def parse_id(raw: bytes, missing_seq: int) -> StreamID:
    """streamGenericParseIDOrReply, strict: <ms>[-<seq>], split at the first `-`, each part
    read by string2ull; the text is a C string of at most 127 bytes (cut at a NUL)."""
    ms_text, dash, seq_text = _c_string(raw).partition(b"-")
    ms = _u64(ms_text)
    seq = _u64(seq_text) if dash else missing_seq
    if ms is None or seq is None:
        raise ReplyError(INVALID_ID)
    return ms, seq


def _xadd_id(raw: bytes) -> tuple[StreamID, bool]:
    """XADD's explicit ID and whether its seq was given: `<ms>-*` leaves it to the stream."""
    ms_text, dash, seq_text = _c_string(raw).partition(b"-")
    if dash and seq_text == b"*":
        ms = _u64(ms_text)
        if ms is None:
            raise ReplyError(INVALID_ID)
        return (ms, 0), False
    return parse_id(raw, 0), True


def _c_string(raw: bytes) -> bytes:
    if len(raw) > 127:
        raise ReplyError(INVALID_ID)
    return raw.partition(b"\0")[0]  # memcpy'd into a char buffer: a NUL ends it


_C_SPACE = b" \t\n\v\f\r"


def _u64(text: bytes) -> int | None:
    """string2ull: string2ll's strict form (a negative one refused), else strtoull base 10,
    which skips leading spaces, takes a sign and wraps a negative value modulo 2**64
    (" -1" is 18446744073709551615, "-0" is 0) and refuses only what overflows 64 bits."""
    if string2ll(text) is not None:
        value = int(text)
        return value if value >= 0 else None
    body = text.lstrip(_C_SPACE)
    negative = body[:1] == b"-"
    digits = body[1:] if body[:1] in (b"-", b"+") else body
    if not digits.isdigit() or not digits.isascii():
        return None
    value = int(digits)
    if value > MAX_SEQ:
        return None  # ERANGE
    return (-value) % (MAX_SEQ + 1) if negative else value


def bound(raw: bytes, low: bool) -> StreamID:
    """A range end: - and +, an ID (a bare ms covers all its seqs), `(` for an open end."""
    if raw == b"-":
        return (0, 0)
    if raw == b"+":
        return (MAX_SEQ, MAX_SEQ)
    exclusive = raw[:1] == b"("
    sid = parse_id(raw[1:] if exclusive else raw, 0 if low else MAX_SEQ)
    if exclusive:
        ms, seq = sid
        if low:
            if sid == (MAX_SEQ, MAX_SEQ):
                raise ReplyError("ERR invalid start ID for the interval")
            sid = (ms, seq + 1) if seq < MAX_SEQ else (ms + 1, 0)
        else:
            if sid == (0, 0):
                raise ReplyError("ERR invalid end ID for the interval")
            sid = (ms, seq - 1) if seq > 0 else (ms - 1, MAX_SEQ)
    return sid


def _entry(st: Stream, i: int) -> bytes:
    return b"*2\r\n" + bulk(format_id(st.ids[i])) + array(st.entries[i])


def entries(st: Stream, span: range | list[int]) -> bytes:
    """The entries at these positions, as XRANGE (and XREAD) answers them."""
    return b"*%d\r\n" % len(span) + b"".join(_entry(st, i) for i in span)


# (b"maxlen", n) or (b"minid", StreamID), then `~` and LIMIT (0: none); None: no trim
Trim = tuple[bytes, object, bool, int] | None


def _trim_args(argv: list[bytes], j: int, xadd: bool) -> tuple[Trim, bool, int]:
    """Redis 7.0's streamParseAddOrTrimArgsOrReply from j: MAXLEN or MINID [=|~] threshold,
    LIMIT count and (XADD) NOMKSTREAM, in any order, up to XADD's ID. The trim, NOMKSTREAM,
    and the index where the ID is (len(argv): none). `~` trims whole nodes only
    (stream_nodes.py), at most LIMIT entries (100 nodes' worth when not given, any number for
    LIMIT 0)."""
    trim: Trim = None
    approx = limit_given = nomk = False
    limit, n = 0, len(argv)
    while j < n:
        more, opt = n - 1 - j, argv[j].lower()
        if xadd and argv[j] == b"*":
            break
        if opt in (b"maxlen", b"minid") and more:
            if trim is not None:
                raise ReplyError(
                    "ERR syntax error, MAXLEN and MINID options at the same time are not compatible"
                )
            approx = more >= 2 and argv[j + 1] == b"~"
            if approx or (more >= 2 and argv[j + 1] == b"="):
                j += 1
            if opt == b"maxlen":
                maxlen = integer_arg(argv[j + 1])
                if maxlen < 0:
                    raise ReplyError("ERR The MAXLEN argument must be >= 0.")
                trim = (opt, maxlen, False, 0)
            else:
                trim = (opt, parse_id(argv[j + 1], 0), False, 0)
            j += 1
        elif opt == b"limit" and more:
            limit, limit_given = integer_arg(argv[j + 1]), True
            if limit < 0:
                raise ReplyError("ERR The LIMIT argument must be >= 0.")
            j += 1
        elif xadd and opt == b"nomkstream":
            nomk = True
        elif xadd:  # the ID: a bad one is refused before the options' checks, as Redis
            _xadd_id(argv[j])
            break
        else:
            raise ReplyError(SYNTAX)
        j += 1
    if limit and trim is None:
        raise ReplyError(
            "ERR syntax error, LIMIT cannot be used without specifying a trimming strategy"
        )
    if not xadd and trim is None:
        raise ReplyError("ERR syntax error, XTRIM must be called with a trimming strategy")
    if limit_given and not approx:
        raise ReplyError("ERR syntax error, LIMIT cannot be used without the special ~ option")
    if trim is not None and approx:
        trim = (trim[0], trim[1], True, limit if limit_given else APPROX_LIMIT)
    return trim, nomk, j


XADD_ARITY = "ERR wrong number of arguments for 'xadd' command"
ZERO_ID = "ERR The ID specified in XADD must be greater than 0-0"


@command("xadd", -5)
def xadd(s: Session, argv: list[bytes]) -> bytes:
    trim, nomk, j = _trim_args(argv, 2, xadd=True)
    if j >= len(argv):  # the options used up the arguments: no ID left
        raise ReplyError(XADD_ARITY)
    raw_id, fields = argv[j], argv[j + 1 :]
    # xaddCommand's order: the ID (read with the options), the arity, an explicit 0-0, the
    # key (WRONGTYPE, NOMKSTREAM), an exhausted stream, then the ID against the stream's top
    sid, seq_given = (None, True) if raw_id == b"*" else _xadd_id(raw_id)
    if not fields or len(fields) % 2:
        raise ReplyError(XADD_ARITY)
    if sid == (0, 0) and seq_given:
        raise ReplyError(ZERO_ID)
    ks, key = s.ks, argv[1]
    st = ks.get_stream(key)
    if st is None and nomk:
        return s.enc.null
    last = st.last if st is not None else (0, 0)
    if last == (MAX_ID, MAX_SEQ):
        raise ReplyError(
            "ERR The stream has exhausted the last possible ID, unable to add more items"
        )
    if sid is None:
        sid = (st or Stream()).next_id(now_ms())
    elif not seq_given and sid[0] == last[0]:  # the next sequence
        if last[1] == MAX_SEQ:  # (Redis's text for its overflow there)
            raise ReplyError("ERR Elements are too large to be stored")
        sid = (sid[0], last[1] + 1)
    if sid == (0, 0):
        raise ReplyError(ZERO_ID)
    if sid <= last and (st is not None):
        raise ReplyError(
            "ERR The ID specified in XADD is equal or smaller than the target stream top item"
        )
    ks.xadd(key, sid, fields, trim)
    return bulk(format_id(sid))


@command("xlen", 2)
def xlen(s: Session, argv: list[bytes]) -> bytes:
    return integer(len(s.ks.get_stream(argv[1]) or ()))


def _range(s: Session, argv: list[bytes], rev: bool) -> bytes:
    low, high = (argv[3], argv[2]) if rev else (argv[2], argv[3])
    lo, hi = bound(low, True), bound(high, False)
    count, j = None, 4
    while j < len(argv):  # COUNT n, again and again (the last one counts), as Redis reads it
        if argv[j].lower() != b"count" or j + 1 == len(argv):
            raise ReplyError(SYNTAX)
        count = max(0, integer_arg(argv[j + 1]))
        j += 2
    st = s.ks.get_stream(argv[1])
    if st is None:
        return array([])
    if count == 0:
        return s.enc.null_array  # as Redis 7.0 answers COUNT 0 (or below) of a stream
    if lo > hi:
        return array([])
    span = list(st.span(lo, hi))
    if rev:
        span.reverse()
    if count is not None and count > 0:
        span = span[:count]
    return entries(st, span)


@command("xrange", -4)
def xrange(s: Session, argv: list[bytes]) -> bytes:
    return _range(s, argv, False)


@command("xrevrange", -4)
def xrevrange(s: Session, argv: list[bytes]) -> bytes:
    return _range(s, argv, True)


@command("xdel", -3)
def xdel(s: Session, argv: list[bytes]) -> bytes:
    # xdelCommand looks the key up (missing: 0, WRONGTYPE) before it parses any id
    if s.ks.get_stream(argv[1]) is None:
        return ZERO
    sids = [parse_id(raw, 0) for raw in argv[2:]]
    return integer(s.ks.xdel(argv[1], sids))


@command("xtrim", -4)
def xtrim(s: Session, argv: list[bytes]) -> bytes:
    trim, _, _ = _trim_args(argv, 2, xadd=False)
    if s.ks.get_stream(argv[1]) is None:
        return ZERO
    return integer(s.ks.trim_stream(argv[1], trim))


SETID_BELOW = "ERR The ID specified in XSETID is smaller than"
ADDED_BELOW = "ERR The entries_added specified in XSETID is smaller than the target stream length"


@command("xsetid", -3)
def xsetid(s: Session, argv: list[bytes]) -> bytes:
    """xsetidCommand: the ID and the options read first (ENTRIESADDED, MAXDELETEDID: not
    below the ID), then the key (-ERR no such key, WRONGTYPE); a stream with entries takes no
    ID below its last entry's (its last ID may go down to it, past deleted ones) and no
    entries-added below its length. One XMETA record, as a rewrite writes the counters."""
    sid, added, max_deleted, j = parse_id(argv[2], 0), -1, (0, 0), 3
    while j < len(argv):
        opt, more = argv[j].lower(), j < len(argv) - 1
        if opt == b"entriesadded" and more:
            added = integer_arg(argv[j + 1])
            if added < 0:
                raise ReplyError("ERR entries_added must be positive")
        elif opt == b"maxdeletedid" and more:
            max_deleted = parse_id(argv[j + 1], 0)
            if sid < max_deleted:
                raise ReplyError(f"{SETID_BELOW} the provided max_deleted_entry_id")
        else:
            raise ReplyError(SYNTAX)
        j += 2
    st = s.ks.get_stream(argv[1])
    if st is None:
        raise ReplyError("ERR no such key")
    if st.ids:
        if sid < st.ids[-1]:
            raise ReplyError(f"{SETID_BELOW} the target stream top item")
        if added != -1 and len(st) > added:
            raise ReplyError(ADDED_BELOW)
    s.ks.xmeta(
        argv[1], sid, st.added if added == -1 else added,
        st.max_deleted if max_deleted == (0, 0) else max_deleted,
    )  # fmt: skip
    return OK
