"""The stream value (what XADD makes), as far as python-rq keeps job results in one: entries
in ID order, each an (ms, seq) ID with its field/value list, the last ID ever given (a trimmed
or emptied stream still refuses smaller IDs), ranges by ID."""

from __future__ import annotations

from bisect import bisect_left, bisect_right

StreamID = tuple[int, int]
MAX_SEQ = 2**64 - 1
MAX_ID = MAX_SEQ  # the milliseconds' maximum too


class Stream:
    __slots__ = ("entries", "ids", "last")

    def __init__(self) -> None:
        self.ids: list[StreamID] = []
        self.entries: list[list[bytes]] = []  # the field/value lists, in the order of ids
        self.last: StreamID = (0, 0)

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

    def trim(self, maxlen: int) -> int:
        """Keep the newest `maxlen` entries; how many went."""
        extra = max(0, len(self.ids) - maxlen)
        del self.ids[:extra]
        del self.entries[:extra]
        return extra

    def trim_before(self, minid: StreamID) -> int:
        """Drop the entries whose ID is below `minid` (MINID); how many went."""
        cut = bisect_left(self.ids, minid)
        del self.ids[:cut]
        del self.entries[:cut]
        return cut

    def delete(self, sids: list[StreamID]) -> int:
        gone = 0
        for sid in sids:
            i = bisect_left(self.ids, sid)
            if i < len(self.ids) and self.ids[i] == sid:
                del self.ids[i]
                del self.entries[i]
                gone += 1
        return gone

    def span(self, low: StreamID, high: StreamID) -> range:
        start = bisect_left(self.ids, low)
        return range(start, max(start, bisect_right(self.ids, high)))


def format_id(sid: StreamID) -> bytes:
    return b"%d-%d" % sid
