"""The de-duplication keys on disk (--dedupe-window): `trio-nsqd.dedupe` in --data-path, a
record log (records.py). A key's payload is [int64 unix ns][uint16 topic length][topic][key]; an
/mpub's keys `<prefix>/<first + i>`, kept at once, are one range record: the topic length with
its top bit set (topic names are at most 64 bytes), then [topic][uint64 first][uint32
count][prefix]. Written before the publish is acknowledged: inside a reactor's pass with the
pass's group commit (one write for every publish of the pass, storage/commit.py), else one write
per publish; fsynced with the disk queues' policy (--sync-every writes or --sync-timeout);
rewritten whole (atomic.py) at start and when mostly stale. A damaged record is skipped alone
with a log line: the daemon always starts.

Where a publish's messages wait in disk queues' buffers, its keys' record is written first,
and names where they will end: the topic length's second bit set, then after the topic
[uint8 n] and n times [uint8 name length][queue name][uint32 file number][uint64 position].
The start keeps such a key only where every named queue's files reach that far
(diskqueue_files.extents), before any queue opens: a kill -9 between the two writes leaves a key
whose messages were never stored, and it is forgotten, so the publisher's retry stores them
once. (Written after the messages, the key was lost instead, and the retry stored them twice.)
Where the publish put records in a journal (a message handed straight to a consumer under
--durable-inflight: that record is its copy on disk, and a journal's positions move with its
compactions) its keys are written after every file instead; another connection's journal
records in the same pass change nothing here."""

from __future__ import annotations

import os
import struct
from collections.abc import Callable, Iterable, Iterator, Sequence
from typing import TYPE_CHECKING

from ..engine.dedupe import KeyRange
from ..engine.ports import StoreError
from ..log import log
from .commit import GroupCommit
from .diskqueue_files import extents
from .health import wrote
from .records import RecordLog, legacy_framing

if TYPE_CHECKING:
    from .health import Health

FILENAME = "trio-nsqd.dedupe"
_LEGACY_HEAD = struct.Struct(">II")  # the framing before records.py
_BODY = struct.Struct(">qH")
_RANGE = struct.Struct(">QI")
_RANGE_FLAG = 0x8000
_ENDS_FLAG = 0x4000
_TOPIC_LEN = 0x3FFF
_END = struct.Struct(">IQ")

End = tuple[str, int, int]  # a queue's name, file number and position (GroupCommit.write_ends)


def _head(topic: str, seen_at: int, flags: int, ends: Sequence[End]) -> bytes:
    t = topic.encode()
    if not ends:
        return _BODY.pack(seen_at, len(t) | flags) + t
    parts = [_BODY.pack(seen_at, len(t) | flags | _ENDS_FLAG), t, bytes((len(ends),))]
    for name, num, pos in ends:
        n = name.encode()
        parts += (bytes((len(n),)), n, _END.pack(num, pos))
    return b"".join(parts)


def _record(topic: str, key: str, seen_at: int, ends: Sequence[End] = ()) -> bytes:
    return _head(topic, seen_at, 0, ends) + key.encode("utf-8", "surrogateescape")


def _range_record(topic: str, keys: KeyRange, seen_at: int, ends: Sequence[End]) -> bytes:
    head = _head(topic, seen_at, _RANGE_FLAG, ends) + _RANGE.pack(keys.first, keys.count)
    return head + keys.prefix.encode("utf-8", "surrogateescape")


def _keys(payload: bytes) -> tuple[str, Iterable[str], int, list[End]]:
    """A record's topic, keys, time and the queue positions its messages end at."""
    seen_at, tlen = _BODY.unpack_from(payload)
    start = _BODY.size + (tlen & _TOPIC_LEN)
    topic = payload[_BODY.size : start].decode()
    ends: list[End] = []
    if tlen & _ENDS_FLAG:
        n, start = payload[start], start + 1
        for _ in range(n):
            size = payload[start]
            name = payload[start + 1 : start + 1 + size].decode()
            num, pos = _END.unpack_from(payload, start + 1 + size)
            ends.append((name, num, pos))
            start += 1 + size + _END.size
    if not tlen & _RANGE_FLAG:
        return topic, (payload[start:].decode("utf-8", "surrogateescape"),), seen_at, ends
    first, count = _RANGE.unpack_from(payload, start)
    prefix = payload[start + _RANGE.size :].decode("utf-8", "surrogateescape")
    return topic, KeyRange(prefix, first, count), seen_at, ends


def _queue_log(level: int, msg: str, *args: object) -> None:
    log.log(level, "DEDUPE: a disk queue's metadata: " + msg, *args)


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
        self._found: list[tuple[str, str, int]] | None = None  # what `scan` kept

    def scan(self) -> None:
        """Read the kept keys, before any disk queue opens: a key whose record names queue
        positions that its queue's files do not reach is forgotten (its messages were never
        written), with a log line."""
        records = []
        for payload in self._log.load().payloads:
            try:
                records.append(_keys(payload))
            except (struct.error, UnicodeDecodeError, IndexError) as exc:
                log.error("DEDUPE: malformed record in %s skipped - %s", self.path, exc)
        names = {name for *_, ends in records for name, _, _ in ends}
        reach = extents(os.path.dirname(self.path), names, _queue_log)
        found: list[tuple[str, str, int]] = []
        for topic, keys, seen_at, ends in records:
            short = [(name, at) for name, *at in ends if tuple(at) > reach[name]]
            if short:
                (name, (num, pos)), n = short[0], len(keys)
                log.info(
                    "DEDUPE: %d key(s) of topic %s forgotten: their messages are not in "
                    "%s.diskqueue up to %d,%d (a kill -9 before they were written, or the "
                    "queue was deleted)",
                    *(n, topic, name, num, pos),
                )
                continue
            found += ((topic, key, seen_at) for key in keys)
        self._found = found

    def load(self) -> Iterator[tuple[str, str, int]]:
        """Every kept key (`scan` first); the owner rewrites the file next (Deduper.attach
        compacts)."""
        if self._found is None:
            self.scan()
        found, self._found = self._found or [], []
        return iter(found)

    def remembered(self, topic: str, keys: Sequence[str], seen_at: int, after: bool) -> None:
        commit = self._commit
        if not commit.depth:  # the messages are on file already: one write(), before the answer
            self._append(topic, keys, seen_at, ())
            self.flush()
            return
        if after:  # a journal's records too: written after every file
            self._append(topic, keys, seen_at, ())
            commit.add_after(self, answered=True)
        elif ends := commit.write_ends():  # in queue buffers: the key first, naming their ends
            self._append(topic, keys, seen_at, ends)
            commit.add_first(self, answered=True)
        else:  # in memory only: no order to keep
            self._append(topic, keys, seen_at, ())
            commit.add(self, answered=True)

    def _append(self, topic: str, keys: Sequence[str], seen_at: int, ends: Sequence[End]) -> None:
        if isinstance(keys, KeyRange):
            self._log.append(_range_record(topic, keys, seen_at, ends))
        else:
            for k in keys:
                self._log.append(_record(topic, k, seen_at, ends))

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
