"""The changes of a stream's consumer groups, each written to the log as one replayable record
(`_log`, records.py redoes them): a group made (with the stream, for MKSTREAM), its last ID
and entries-read set, a group or a consumer deleted, a consumer made, entries delivered or
claimed (XNACK: each ID's holder, delivery time and count, as they now are) and acknowledged.
A base of keyspace.Keyspace, beside values.TypedValues. A record's times are absolute unix
ms: after a restart XPENDING's idle times go on from where they were. And a stream's own
counters (XMETA) and node layout (XNODES), which the records that rebuild it carry."""

from __future__ import annotations

from typing import TYPE_CHECKING

from . import stream_nodes
from .stream import Group, Stream, StreamID, format_id

if TYPE_CHECKING:
    from .keyspace import Keyspace
    from .values import Record, Value


def _stream(data: dict[bytes, Value], key: bytes) -> Stream:
    st = data[key]
    assert isinstance(st, Stream)
    return st


class GroupValues:
    """What a keyspace does to its streams' groups; the state is Keyspace's."""

    data: dict[bytes, Value]
    watched: dict[bytes, object]
    ready: list[tuple[Keyspace, bytes]]

    if TYPE_CHECKING:

        def _log(self, rec: Record) -> None: ...

    def xgroup_create(self, key: bytes, name: bytes, last: StreamID, read: int) -> None:
        """A new group (the caller checked it is new); a missing key becomes an empty
        stream (MKSTREAM)."""
        st = self.data.get(key)
        if st is None:
            st = self.data[key] = Stream()
            self.order.add(key)  # type: ignore[attr-defined]
        assert isinstance(st, Stream)
        st.groups[name] = Group(last, read)
        self._log((b"XGCREATE", key, name, format_id(last), b"%d" % read))

    def xgroup_setid(self, key: bytes, name: bytes, last: StreamID, read: int) -> None:
        group = _stream(self.data, key).groups[name]
        group.last, group.read = last, read
        self._log((b"XGSETID", key, name, format_id(last), b"%d" % read))

    def xgroup_destroy(self, key: bytes, name: bytes) -> None:
        del _stream(self.data, key).groups[name]
        self._log((b"XGDESTROY", key, name))
        if key in self.watched:  # its blocked consumers get -NOGROUP (stream_read.py)
            self.ready.append((self, key))  # type: ignore[arg-type]

    def xconsumer(self, key: bytes, name: bytes, consumer: bytes, now: int) -> None:
        """A consumer made (the caller checked it is new), or its last read's time."""
        _stream(self.data, key).groups[name].consumer(consumer, now).seen = now
        self._log((b"XCONSUMER", key, name, consumer, b"%d" % now))

    def xdelconsumer(self, key: bytes, name: bytes, consumer: bytes) -> int:
        group = _stream(self.data, key).groups[name]
        if consumer not in group.consumers:
            return 0
        pending = group.drop(consumer)
        self._log((b"XDELCONSUMER", key, name, consumer))
        return pending

    def xnack(
        self, key: bytes, name: bytes, consumer: bytes, seen: int, time: int,
        given: list[tuple[StreamID, int]],
    ) -> None:  # fmt: skip
        """Entries pending for `consumer` (made when missing, its last read at `seen`),
        delivered at `time` (unix ms; a claim's IDLE or TIME sets it in the past), each with
        its delivery count: a read, a re-read of its history, a claim."""
        group = _stream(self.data, key).groups[name]
        c = group.consumer(consumer, seen)
        c.seen = seen
        for sid, count in given:
            group.assign(sid, c, time, count)
        items = [x for sid, count in given for x in (format_id(sid), b"%d" % count)]
        self._log((b"XNACK", key, name, consumer, b"%d" % seen, b"%d" % time, *items))

    def xack(self, key: bytes, name: bytes, sids: list[StreamID]) -> int:
        group = _stream(self.data, key).groups[name]
        acked = [sid for sid in sids if group.ack(sid)]
        if acked:
            self._log((b"XACK", key, name, *[format_id(sid) for sid in acked]))
        return len(acked)

    def xmeta(self, key: bytes, last: StreamID, added: int, max_deleted: StreamID) -> None:
        """A stream's last ID and counters: XSETID's, and the log's compaction (as they
        were; an empty stream, as MKSTREAM makes, comes back with it)."""
        st = self.data.get(key)
        if st is None:
            st = self.data[key] = Stream()
            self.order.add(key)  # type: ignore[attr-defined]
        assert isinstance(st, Stream)
        st.last, st.added, st.max_deleted = last, added, max_deleted
        self._log((b"XMETA", key, format_id(last), b"%d" % added, format_id(max_deleted)))

    def xnodes(self, key: bytes, layout: list[bytes]) -> None:
        """An existing stream's node layout (stream_nodes.encode's arguments) as it was, where
        its live entries alone would be packed afresh: the log's compaction, COPY."""
        st = _stream(self.data, key)
        st.nodes = stream_nodes.decode(layout)
        self._log((b"XNODES", key, *layout))
