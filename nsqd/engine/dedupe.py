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
from collections.abc import Iterable
from typing import Protocol


class KeyLog(Protocol):
    """Where remembered keys are kept (a file in --data-path)."""

    def remembered(self, entries: list[tuple[str, str, int]]) -> None:
        """(topic, key, unix ns seen) records, written before the publish is acknowledged."""
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

    def fresh(self, topic: str, keys: list[str]) -> list[int]:
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
        self.duplicates += len(keys) - len(out)
        return out

    def remember(self, topic: str, keys: list[str]) -> None:
        now = time.time_ns()
        entries = [(topic, k, now) for k in keys if k]
        for t, k, at in entries:
            self._seen[(t, k)] = at
            self._seen.move_to_end((t, k))
        if self._log is not None and entries:
            self._log.remembered(entries)
            self._logged += len(entries)
            if self._logged > 4 * len(self._seen) + 100_000:
                self._compact()

    def _compact(self) -> None:
        if self._log is not None:
            self._log.rewrite((t, k, at) for (t, k), at in self._seen.items())
            self._logged = len(self._seen)
