"""The stream value (what XADD makes): entries in ID order, each an (ms, seq) ID with its
field/value list, the last ID ever given (a trimmed or emptied stream still refuses smaller
IDs), ranges by ID, the counters Redis 7.0 keeps for its groups' lag (entries ever added, the
largest ID deleted), and the consumer groups (their pending entries lists, their consumers)."""

from __future__ import annotations

from bisect import bisect_left, bisect_right

from . import stream_nodes
from .stream_nodes import Node

StreamID = tuple[int, int]
MAX_SEQ = 2**64 - 1
MAX_ID = MAX_SEQ  # the milliseconds' maximum too


class Stream:
    __slots__ = ("added", "entries", "groups", "ids", "last", "max_deleted", "nodes")

    def __init__(self) -> None:
        self.ids: list[StreamID] = []
        self.entries: list[list[bytes]] = []  # the field/value lists, in the order of ids
        self.last: StreamID = (0, 0)
        self.added = 0  # entries ever added (XINFO's entries-added)
        self.max_deleted: StreamID = (0, 0)  # the largest ID XDEL removed
        self.groups: dict[bytes, Group] = {}
        self.nodes: list[Node] = []  # Redis's macro nodes, as they would be (stream_nodes.py)

    def __len__(self) -> int:
        return len(self.ids)

    def next_id(self, now: int) -> StreamID:
        """XADD *'s ID: the clock's millisecond, or the last ID's next (the sequence carries
        into the milliseconds past its maximum, as Redis's streamIncrID; the caller refuses
        the last possible ID's next)."""
        ms, seq = self.last
        if now > ms:
            return (now, 0)
        return (ms, seq + 1) if seq < MAX_SEQ else (ms + 1, 0)

    def add(self, sid: StreamID, fields: list[bytes]) -> None:
        self.ids.append(sid)
        self.entries.append(fields)
        self.last = max(self.last, sid)
        self.added += 1
        stream_nodes.place(self.nodes, sid, fields)

    def trim(self, maxlen: int, approx: bool = False, limit: int = 0) -> int:
        """MAXLEN: keep the newest `maxlen` entries, or (`approx`, `~`) what whole nodes
        leave, at most `limit` entries going (0: any number); how many went."""
        return self._cut(stream_nodes.trim_length(self.nodes, len(self.ids), maxlen, approx, limit))

    def trim_before(self, minid: StreamID, approx: bool = False, limit: int = 0) -> int:
        """MINID: drop the entries whose ID is below `minid` (as `trim`, by whole nodes with
        `approx`); how many went."""
        return self._cut(stream_nodes.trim_below(self.nodes, self.ids, minid, approx, limit))

    def _cut(self, gone: int) -> int:
        del self.ids[:gone]
        del self.entries[:gone]
        return gone

    def delete(self, sids: list[StreamID]) -> int:
        gone = 0
        for sid in sids:
            i = bisect_left(self.ids, sid)
            if i < len(self.ids) and self.ids[i] == sid:
                del self.ids[i]
                del self.entries[i]
                stream_nodes.remove(self.nodes, sid)
                self.max_deleted = max(self.max_deleted, sid)
                gone += 1
        return gone

    def span(self, low: StreamID, high: StreamID) -> range:
        start = bisect_left(self.ids, low)
        return range(start, max(start, bisect_right(self.ids, high)))


def format_id(sid: StreamID) -> bytes:
    return b"%d-%d" % sid


# -- consumer groups ------------------------------------------------------------------------

INVALID_READ = -1  # SCG_INVALID_ENTRIES_READ: a group's entries-read is not known


class Nack:
    """A pending entry of a group: who holds it, when it was last delivered (unix ms), and
    how many times."""

    __slots__ = ("consumer", "count", "time")

    def __init__(self, consumer: Consumer, time: int, count: int) -> None:
        self.consumer = consumer
        self.time = time
        self.count = count


class Consumer:
    __slots__ = ("name", "pel", "seen")

    def __init__(self, name: bytes, seen: int) -> None:
        self.name = name
        self.seen = seen  # unix ms of its last read or claim (XINFO CONSUMERS' idle)
        self.pel: set[StreamID] = set()


class Group:
    """A consumer group: the last ID delivered, its entries-read counter (INVALID_READ when
    unknown), the pending entries list by ID, and its consumers by name."""

    __slots__ = ("consumers", "last", "pel", "read")

    def __init__(self, last: StreamID, read: int) -> None:
        self.last = last
        self.read = read
        self.pel: dict[StreamID, Nack] = {}
        self.consumers: dict[bytes, Consumer] = {}

    def consumer(self, name: bytes, now: int) -> Consumer:
        """The consumer `name`, made when missing."""
        c = self.consumers.get(name)
        if c is None:
            c = self.consumers[name] = Consumer(name, now)
        return c

    def assign(self, sid: StreamID, consumer: Consumer, time: int, count: int) -> None:
        """Entry `sid` pending for `consumer` (taken from another one if it had it)."""
        nack = self.pel.get(sid)
        if nack is None:
            self.pel[sid] = Nack(consumer, time, count)
        else:
            nack.consumer.pel.discard(sid)
            nack.consumer, nack.time, nack.count = consumer, time, count
        consumer.pel.add(sid)

    def ack(self, sid: StreamID) -> bool:
        nack = self.pel.pop(sid, None)
        if nack is None:
            return False
        nack.consumer.pel.discard(sid)
        return True

    def drop(self, name: bytes) -> int:
        """Delete a consumer and its pending entries; how many it had."""
        c = self.consumers.pop(name)
        for sid in c.pel:
            del self.pel[sid]
        return len(c.pel)


def has_tombstones(st: Stream, start: StreamID) -> bool:
    """streamRangeHasTombstones(start, +): a deleted entry may lie at or past `start`."""
    if not st.ids or st.max_deleted == (0, 0) or st.ids[0] > st.max_deleted:
        return False
    return start <= st.max_deleted


def distance(st: Stream, sid: StreamID) -> int:
    """streamEstimateDistanceFromFirstEverEntry: `sid`'s count of entries read from the
    stream's first ever, or INVALID_READ where deletions leave it unknown."""
    if not st.added:
        return 0
    if not st.ids and sid <= st.last:
        return st.added
    if sid == st.last:
        return st.added
    if sid > st.last:
        return INVALID_READ
    first = st.ids[0]
    if st.max_deleted == (0, 0) or st.max_deleted < first:
        if sid < first:
            return st.added - len(st.ids)
        if sid == first:
            return st.added - len(st.ids) + 1
    return INVALID_READ


def lag(st: Stream, group: Group) -> int | None:
    """XINFO GROUPS' lag: entries not yet delivered to the group, None when unknown."""
    if not st.added:
        return 0
    if group.read != INVALID_READ and not has_tombstones(st, group.last):
        return st.added - group.read
    read = distance(st, group.last)
    return None if read == INVALID_READ else st.added - read


def advance(st: Stream, group: Group, sid: StreamID) -> None:
    """The group's last delivered ID moves to `sid` (a `>` read), its entries-read with it."""
    if group.read != INVALID_READ and not has_tombstones(st, sid):
        group.read += 1
    elif st.added:
        group.read = distance(st, sid)
    group.last = sid
