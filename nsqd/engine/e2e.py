"""End-to-end processing latency: publish to FIN, per channel, over a sliding window."""

from __future__ import annotations

import math
import time

_LOG_BASE = math.log(1.01)  # buckets 1% wide: the same order of error as nsqd's perks streams


class E2ELatency:
    """nsqd's e2e processing latency quantiles over a sliding window.

    Two generations each covering half the window (the older one is dropped every half window,
    as nsqd's two perks streams), each a histogram of 1%-wide log buckets holding a count and a
    sum, so a bucket reports the mean of its samples: exact for a lone sample, within 1%
    otherwise. Fixed memory, O(1) per FIN; the engine calls `insert(msg.timestamp)` on FIN."""

    __slots__ = ("_current", "_last_move", "_previous", "half_window_ns", "percentiles")

    def __init__(self, window_s: float, percentiles: list[float]) -> None:
        self.percentiles = list(percentiles)
        self.half_window_ns = max(1, int(window_s * 1e9 / 2))
        self._current: dict[int, list[int]] = {}
        self._previous: dict[int, list[int]] = {}
        self._last_move = time.time_ns()

    def _rotate(self, now: int) -> None:
        while now > self._last_move + self.half_window_ns:
            self._previous, self._current = self._current, {}
            self._last_move += self.half_window_ns
            if now > self._last_move + 2 * self.half_window_ns:  # long idle: skip ahead
                self._previous = {}
                self._last_move = now - self.half_window_ns

    def insert(self, timestamp_ns: int, now_ns: int | None = None) -> None:
        now = time.time_ns() if now_ns is None else now_ns
        if now > self._last_move + self.half_window_ns:
            self._rotate(now)
        value = max(0, now - timestamp_ns)
        bucket = int(math.log(value) / _LOG_BASE) if value > 1 else 0
        cell = self._current.get(bucket)
        if cell is None:
            self._current[bucket] = [1, value]
        else:
            cell[0] += 1
            cell[1] += value

    def buckets(self) -> dict[int, list[int]]:
        self._rotate(time.time_ns())
        merged: dict[int, list[int]] = {}
        for gen in (self._previous, self._current):
            for bucket, (n, total) in gen.items():
                cell = merged.setdefault(bucket, [0, 0])
                cell[0] += n
                cell[1] += total
        return merged
