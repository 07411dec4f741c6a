"""The de-duplication keys on disk (--dedupe-window): `trio-nsqd.dedupe` in --data-path, a
record log (records.py). A key's payload is [int64 unix ns][uint16 topic length][topic][key]; an
/mpub's keys `<prefix>/<first + i>`, kept at once, are one range record: the topic length with
its top bit set (topic names are at most 64 bytes), then [topic][uint64 first][uint32
count][prefix]. Written before the publish is acknowledged: inside a reactor's pass with the
pass's group commit (one write for every publish of the pass, storage/commit.py), else one write
per publish; fsynced
with the disk queues' policy (--sync-every writes or --sync-timeout); rewritten whole (atomic.py)
at start and when mostly stale. A damaged record is skipped alone with a log line: the daemon
always starts."""

from __future__ import annotations

import os
import struct
from collections.abc import Callable, Iterable, Iterator, Sequence
from typing import TYPE_CHECKING

from ..engine.dedupe import KeyRange
from ..engine.ports import StoreError
from ..log import log
from .commit import GroupCommit
from .health import wrote
from .records import RecordLog, legacy_framing

if TYPE_CHECKING:
    from .health import Health

FILENAME = "trio-nsqd.dedupe"
_LEGACY_HEAD = struct.Struct(">II")  # the framing before records.py
_BODY = struct.Struct(">qH")
_RANGE = struct.Struct(">QI")
_RANGE_FLAG = 0x8000


def _record(topic: str, key: str, seen_at: int) -> bytes:
    t = topic.encode()
    return _BODY.pack(seen_at, len(t)) + t + key.encode("utf-8", "surrogateescape")


def _range_record(topic: str, keys: KeyRange, seen_at: int) -> bytes:
    t = topic.encode()
    head = _BODY.pack(seen_at, len(t) | _RANGE_FLAG) + t + _RANGE.pack(keys.first, keys.count)
    return head + keys.prefix.encode("utf-8", "surrogateescape")


def _keys(payload: bytes) -> tuple[str, Iterable[str], int]:
    """A record's topic, keys and time."""
    seen_at, tlen = _BODY.unpack_from(payload)
    start = _BODY.size + (tlen & ~_RANGE_FLAG)
    topic = payload[_BODY.size : start].decode()
    if not tlen & _RANGE_FLAG:
        return topic, (payload[start:].decode("utf-8", "surrogateescape"),), seen_at
    first, count = _RANGE.unpack_from(payload, start)
    prefix = payload[start + _RANGE.size :].decode("utf-8", "surrogateescape")
    return topic, KeyRange(prefix, first, count), seen_at


class KeyFile:
    def __init__(
        self,
        data_path: str,
        sync_every: int,
        sync_timeout: float,
        sync_due: Callable[[], None],
        commit: GroupCommit,
        health: Health,
    ) -> None:
        self.path = os.path.join(data_path, FILENAME)
        self._commit = commit
        self._health = health  # a good write turns /ping OK again, as a disk queue's does
        self._log = RecordLog(
            self.path,
            "DEDUPE",
            sync_every,
            sync_timeout,
            mode=0o600,
            legacy=legacy_framing(_LEGACY_HEAD),
            sync_due=sync_due,
        )

    def load(self) -> Iterator[tuple[str, str, int]]:
        """Every kept key; the owner rewrites the file next (Deduper.attach compacts)."""
        for payload in self._log.load().payloads:
            try:
                topic, keys, seen_at = _keys(payload)
                for key in keys:
                    yield topic, key, seen_at
            except (struct.error, UnicodeDecodeError) as exc:
                log.error("DEDUPE: malformed record in %s skipped - %s", self.path, exc)

    def remembered(self, topic: str, keys: Sequence[str], seen_at: int) -> None:
        if isinstance(keys, KeyRange):
            self._log.append(_range_record(topic, keys, seen_at))
        else:
            for k in keys:
                self._log.append(_record(topic, k, seen_at))
        commit = self._commit
        if not commit.depth:
            self.flush()  # one write(), before the publish is acknowledged
            return
        commit.add(self, answered=True)  # its publisher is answered after the release's write

    def flush(self) -> None:
        """The group commit's release: the pass's keys in one write; StoreError when it
        fails (the release refuses the pass's publishers)."""
        pending = self._log.pending
        try:
            self._log.flush()
        except OSError as exc:
            raise StoreError(f"dedupe keys write failed - {exc}") from exc
        if pending:
            wrote(self._health)

    def rewrite(self, entries: Iterable[tuple[str, str, int]]) -> None:
        """Compacted to `entries`; when that cannot be written the file stays as it is (its
        stale keys too): logged, as the start (or the publish that compacts) goes on."""
        try:
            self._log.replace(_record(*e) for e in entries)
        except OSError as exc:
            log.error("DEDUPE: cannot rewrite %s, kept as it is - %s", self.path, exc)

    def needs_sync(self) -> bool:
        return self._log.needs_sync()

    def sync(self) -> None:
        self._log.sync()

    def synced(self, error: OSError | None) -> None:
        """The syncer's word on an fsync: nothing to do here (it told /ping of a failure)."""

    def close(self) -> None:
        self._log.close()
