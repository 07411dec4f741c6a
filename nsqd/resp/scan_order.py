"""SCAN's order of a database's keys: by crc32, a cursor being the crc32 to go on from (+1;
0: done), so a key present for the whole scan is returned at least once, whatever is added or
deleted meanwhile (Redis's promise).

The order is kept only once a SCAN has asked for it (`NO_ORDER` until then: creating a key
costs one empty call), in a sorted list: a SCAN call costs O(log N + COUNT). (Sorting every
key at every call made one SCAN of 500,000 keys hold every client for 0.5 s, and a full
scan_iter hours.) A key is added when it is created; a deleted one stays until a SCAN meets
it, and the list is built again once such keys could outnumber the live ones."""

from __future__ import annotations

from collections.abc import Iterable
from zlib import crc32

from sortedcontainers import SortedList


class NoOrder:
    """Before the first SCAN: nothing is kept."""

    __slots__ = ()

    def add(self, key: bytes) -> None:
        pass


NO_ORDER = NoOrder()


class ScanOrder:
    __slots__ = ("index",)

    def __init__(self, keys: Iterable[bytes]) -> None:
        self.index = SortedList((crc32(k), k) for k in keys)

    def __len__(self) -> int:
        return len(self.index)

    def add(self, key: bytes) -> None:
        """A key was created (or written: kept once)."""
        item = (crc32(key), key)
        if item not in self.index:
            self.index.add(item)

    def batch(self, live: dict[bytes, object], cursor: int, count: int) -> tuple[list[bytes], int]:
        """Up to `count` keys from `cursor` on (more where several share a crc32: a crc32 is
        never split between two calls), those still in `live`, and the next cursor."""
        index = self.index
        start = index.bisect_left((cursor - 1 if cursor else 0, b""))
        batch = list(index.islice(start, start + count))
        end, size = start + len(batch), len(index)
        while end < size and batch and index[end][0] == batch[-1][0]:
            batch.append(index[end])
            end += 1
        nxt = 0 if end >= size else index[end][0] + 1
        keys = []
        for item in batch:
            if item[1] in live:
                keys.append(item[1])
            else:  # deleted since: forgotten now
                index.remove(item)
        return keys, nxt
