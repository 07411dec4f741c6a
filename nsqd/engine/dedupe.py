"""Publish de-duplication (ours, --dedupe-window; as JetStream's Msg-Id window): a message
published with a key already seen on its topic within the window is acknowledged and not
stored again, so a producer that retries (a Spark task or batch run again) publishes nothing
twice.

Keys are per topic. A key is remembered once its message was stored (a publish the store
refused remembers nothing, so its retry is not mistaken for a duplicate), and forgotten
`window` seconds later. The `KeyLog` port (storage/dedupe.py) keeps them across restarts."""

from __future__ import annotations

import time
from collections import OrderedDict
from collections.abc import Iterable, Iterator, Sequence
from itertools import repeat
from typing import Protocol, overload


class KeyRange(Sequence[str]):
    """The keys `<prefix>/<first>` .. `<prefix>/<first + count - 1>` (an /mpub's keys), kept as
    a range so that a batch whose keys are all fresh is logged as one record, not one per key."""

    __slots__ = ("count", "first", "prefix")

    def __init__(self, prefix: str, first: int, count: int) -> None:
        self.prefix, self.first, self.count = prefix, first, count

    def __len__(self) -> int:
        return self.count

    @overload
    def __getitem__(self, i: int) -> str: ...
    @overload
    def __getitem__(self, i: slice) -> list[str]: ...
    def __getitem__(self, i: int | slice) -> str | list[str]:
        if isinstance(i, slice):
            return list(self)[i]
        if not -self.count <= i < self.count:
            raise IndexError(i)
        return f"{self.prefix}/{self.first + (i % self.count)}"

    def __iter__(self) -> Iterator[str]:
        prefix = self.prefix + "/"
        return (prefix + str(n) for n in range(self.first, self.first + self.count))


class KeyLog(Protocol):
    """Where remembered keys are kept (a file in --data-path)."""

    def remembered(self, topic: str, keys: Sequence[str], seen_at: int, after: bool) -> None:
        """Keys of `topic` seen at `seen_at` (unix ns; a KeyRange may be kept as one record),
        written before the publish is acknowledged; `after`: the publish put records in a
        file written after the queues' (a journal), so its keys go after them too."""
        ...

    def load(self) -> Iterable[tuple[str, str, int]]: ...

    def rewrite(self, entries: Iterable[tuple[str, str, int]]) -> None:
        """Replace the log with the live entries (compaction)."""
        ...


class Deduper:
    def __init__(self, window: float) -> None:
        self.window_ns = round(window * 1e9)
        self._seen: OrderedDict[tuple[str, str], int] = OrderedDict()  # oldest first
        self._log: KeyLog | None = None
        self._logged = 0  # records in the log since its last rewrite
        self.duplicates = 0  # publishes acknowledged and not stored
        self.duplicates_by_topic: dict[str, int] = {}  # the same per topic (GET /metrics)

    def attach(self, log: KeyLog) -> None:
        """Keep keys in `log` from now on, after taking back what it kept in the window."""
        now = time.time_ns()
        for topic, key, seen_at in log.load():
            if now - seen_at < self.window_ns:
                self._seen[(topic, key)] = seen_at
                self._seen.move_to_end((topic, key))
        self._log = log
        self._compact()

    def _expire(self, now: int) -> None:
        seen, horizon = self._seen, now - self.window_ns
        while seen:
            _, seen_at = next(iter(seen.items()))
            if seen_at > horizon:
                break
            seen.popitem(last=False)

    def fresh(self, topic: str, keys: Sequence[str]) -> list[int]:
        """Indexes of the keys not seen on `topic` within the window (an empty key is
        never a duplicate), in order; repeats inside one batch count once."""
        now = time.time_ns()
        self._expire(now)
        seen = self._seen
        out, batch = [], set()
        for i, key in enumerate(keys):
            if key and ((topic, key) in seen or key in batch):
                continue
            batch.add(key)
            out.append(i)
        skipped = len(keys) - len(out)
        if skipped:
            self.duplicates += skipped
            by_topic = self.duplicates_by_topic
            by_topic[topic] = by_topic.get(topic, 0) + skipped
        return out

    def topic_deleted(self, topic: str) -> None:
        """A deleted topic's duplicates are forgotten with its other counters: made again, it
        counts from 0, and a daemon that makes and deletes topics (ephemeral ones, one per
        job) keeps no count for every topic it ever had. Its keys stay to the window's end."""
        self.duplicates_by_topic.pop(topic, None)

    def remember(self, topic: str, keys: Sequence[str], after: bool = False) -> None:
        """Keys `fresh` let through and the store took (so none is in the window: each goes
        to the end of the oldest-first order by insertion alone)."""
        if not isinstance(keys, KeyRange):
            keys = [k for k in keys if k]
        if not keys:
            return
        now = time.time_ns()
        self._seen.update(zip(zip(repeat(topic), keys), repeat(now)))
        if self._log is not None:
            self._log.remembered(topic, keys, now, after)
            self._logged += 1 if isinstance(keys, KeyRange) else len(keys)

    def written(self, topic: str, keys: Sequence[str], error: str | None) -> None:
        """After the write that held a publish's keys and messages (`error`: why it failed).
        A mostly stale log is compacted here, where none of its records waits for a write (a
        rewrite from memory holds no position: one made while a pass's keys waited would put
        them on file before their messages, unchecked)."""
        if error is not None:
            self.forget(topic, keys)
        elif self._logged > 4 * len(self._seen) + 100_000:
            self._compact()

    def forget(self, topic: str, keys: Sequence[str]) -> None:
        """Keys `remember`ed for a publish that was then refused (its retry is stored): out
        of the window, and out of the log, whose record of them may be on file already and
        would name positions that later messages fill."""
        seen = self._seen
        gone = [k for k in keys if seen.pop((topic, k), None) is not None]
        if gone:
            self._compact()

    def _compact(self) -> None:
        if self._log is not None:
            self._log.rewrite((t, k, at) for (t, k), at in self._seen.items())
            self._logged = len(self._seen)
