"""XCLAIM and XAUTOCLAIM, as Redis 7.0 answers them (t_stream.c): a claim moves pending
entries to a consumer (made when missing) with a delivery time and count, and drops from the
pending entries list those whose entry was deleted from the stream (one XNACK and one XACK
record: group_values.py). XINFO is stream_info.py's."""

from __future__ import annotations

from bisect import bisect_left

from protocol.resp.codec import bulk

from ..stream import Group, Stream, StreamID, format_id
from ..values import now_ms
from .registry import SYNTAX, ReplyError, Session, command, integer_arg
from .stream_groups import _group_of
from .streams import bound, entries, parse_id


def _at(st: Stream, sid: StreamID) -> int:
    """The entry's position in the stream, or -1 (deleted, or never there)."""
    i = bisect_left(st.ids, sid)
    return i if i < len(st.ids) and st.ids[i] == sid else -1


def _one(st: Stream, i: int) -> bytes:
    return entries(st, [i])[4:]  # one entry, without its array's header


class Claim:
    """A claim's options: the delivery time (unix ms), RETRYCOUNT (-1: none), FORCE, JUSTID."""

    __slots__ = ("force", "justid", "retry", "time")

    def __init__(self, now: int) -> None:
        self.time, self.retry, self.force, self.justid = now, -1, False, False


def _claim(
    s: Session, st: Stream, group: Group, argv: list[bytes], ids: list[StreamID], how: Claim,
    min_idle: int, now: int,
) -> tuple[list[bytes], list[StreamID]]:  # fmt: skip
    """Claim `ids` for consumer argv[3]: the replies of those claimed, the IDs dropped from
    the pending entries list because their entry is gone. The records: one XNACK, one XACK."""
    out, given, gone = [], [], []
    for sid in ids:
        nack = group.pel.get(sid)
        i = _at(st, sid)
        if i < 0:
            if nack is not None:
                gone.append(sid)
            continue
        if nack is None and not how.force:
            continue
        if nack is not None and min_idle and now - nack.time < min_idle:
            continue
        count = 1 if nack is None else nack.count  # (FORCE: a new entry, as delivered once)
        if how.retry >= 0:
            count = how.retry
        elif not how.justid:
            count += 1
        given.append((sid, count))
        out.append(bulk(format_id(sid)) if how.justid else _one(st, i))
    if given:
        s.ks.xnack(argv[1], argv[2], argv[3], now, how.time, given)
    if gone:
        s.ks.xack(argv[1], argv[2], gone)
    return out, gone


def _xclaim_options(argv: list[bytes], j: int, now: int) -> tuple[Claim, StreamID]:
    how, last = Claim(now), (0, 0)
    while j < len(argv):
        opt, more = argv[j].lower(), j < len(argv) - 1
        if opt == b"force":
            how.force = True
        elif opt == b"justid":
            how.justid = True
        elif opt in (b"idle", b"time", b"retrycount") and more:
            j += 1
            name = opt.decode().upper()
            value = integer_arg(argv[j], f"ERR Invalid {name} option argument for XCLAIM")
            if opt == b"retrycount":
                how.retry = value
            else:
                how.time = now - value if opt == b"idle" else value
        elif opt == b"lastid" and more:
            j += 1
            last = parse_id(argv[j], 0)
        else:
            raise ReplyError(b"ERR Unrecognized XCLAIM option '" + argv[j] + b"'")
        j += 1
    if how.time < 0 or how.time > now:  # a bogus time is now, as Redis
        how.time = now
    return how, last


@command("xclaim", -6)
def xclaim(s: Session, argv: list[bytes]) -> bytes:
    st, group = _group_of(s.ks, argv[1], argv[2])
    min_idle = max(0, integer_arg(argv[4], "ERR Invalid min-idle-time argument for XCLAIM"))
    ids, j = [], 5
    while j < len(argv):  # the IDs, up to the first word that is none: the options
        try:
            ids.append(parse_id(argv[j], 0))
        except ReplyError:
            break
        j += 1
    now = now_ms()
    how, last = _xclaim_options(argv, j, now)
    if last > group.last:
        s.ks.xgroup_setid(argv[1], argv[2], last, group.read)
    out, _ = _claim(s, st, group, argv, ids, how, min_idle, now)
    return b"*%d\r\n" % len(out) + b"".join(out)


@command("xautoclaim", -6)
def xautoclaim(s: Session, argv: list[bytes]) -> bytes:
    min_idle = max(0, integer_arg(argv[4], "ERR Invalid min-idle-time argument for XAUTOCLAIM"))
    start = bound(argv[5], True)
    count, justid, j = 100, False, 6
    while j < len(argv):
        opt = argv[j].lower()
        if opt == b"count" and j < len(argv) - 1:
            count = integer_arg(argv[j + 1], "ERR COUNT must be > 0")
            if not 1 <= count <= 2**63 // 16:
                raise ReplyError("ERR COUNT must be > 0")
            j += 1
        elif opt == b"justid":
            justid = True
        else:
            raise ReplyError(SYNTAX)
        j += 1
    st, group = _group_of(s.ks, argv[1], argv[2])
    ids = sorted(sid for sid in group.pel if sid >= start)
    now, how = now_ms(), Claim(now_ms())
    how.justid = justid
    attempts, taken, k = count * 10, [], 0
    while attempts and count and k < len(ids):
        attempts -= 1
        sid = ids[k]
        k += 1
        if _at(st, sid) >= 0 and min_idle and now - group.pel[sid].time < min_idle:
            continue
        taken.append(sid)
        count -= 1  # (a deleted entry counts too)
    out, gone = _claim(s, st, group, argv, taken, how, 0, now)
    cursor = ids[k] if k < len(ids) else (0, 0)
    return (
        b"*3\r\n" + bulk(format_id(cursor)) + b"*%d\r\n" % len(out) + b"".join(out)
        + b"*%d\r\n" % len(gone) + b"".join(bulk(format_id(sid)) for sid in gone)
    )  # fmt: skip
