"""The sorted-set value (what ZADD makes): member -> score, and the members in Redis's order
(by score, then by member bytes) kept sorted with bisect, so ranges by rank or by score are
slices. Sized for the reaper pattern (job timestamps), not for millions of members: an insert
or a removal moves the tail of a list."""

from __future__ import annotations

from bisect import bisect_left, bisect_right, insort


class ZSet:
    __slots__ = ("order", "scores")

    def __init__(self) -> None:
        self.scores: dict[bytes, float] = {}
        self.order: list[tuple[float, bytes]] = []

    def __len__(self) -> int:
        return len(self.scores)

    def add(self, member: bytes, score: float) -> None:
        old = self.scores.get(member)
        if old is not None:
            del self.order[bisect_left(self.order, (old, member))]
        self.scores[member] = score
        insort(self.order, (score, member))

    def remove(self, member: bytes) -> bool:
        old = self.scores.pop(member, None)
        if old is None:
            return False
        del self.order[bisect_left(self.order, (old, member))]
        return True

    def score_span(self, low: float, low_open: bool, high: float, high_open: bool) -> range:
        """The ranks whose scores lie between low and high (each end open or closed)."""
        order = self.order
        start = (bisect_right if low_open else bisect_left)(order, low, key=_score)
        stop = (bisect_left if high_open else bisect_right)(order, high, key=_score)
        return range(start, max(start, stop))


def _score(item: tuple[float, bytes]) -> float:
    return item[0]
