"""The de-duplication keys on disk (--dedupe-window): `trio-nsqd.dedupe` in --data-path,
records of [uint32 length][uint32 crc32][payload]. A key's payload is [int64 unix ns][uint16 topic
length][topic][key]; an /mpub's keys `<prefix>/<first + i>`, kept at once, are one range record:
the topic length with its top bit set (topic names are at most 64 bytes), then [topic][uint64
first][uint32 count][prefix]. Appended (one write per publish) before the publish is
acknowledged, fsynced with the disk queues' policy (--sync-every writes or --sync-timeout);
rewritten whole (temporary file, fsync, rename) when mostly stale. A damaged record ends the
replay with a log line (a torn tail after a crash): the daemon always starts."""

from __future__ import annotations

import os
import struct
import time
import zlib
from collections.abc import Iterable, Iterator, Sequence

from ..engine.dedupe import KeyRange
from ..log import log

FILENAME = "trio-nsqd.dedupe"
_HEAD = struct.Struct(">II")
_BODY = struct.Struct(">qH")
_RANGE = struct.Struct(">QI")
_RANGE_FLAG = 0x8000


def _framed(payload: bytes) -> bytes:
    return _HEAD.pack(len(payload), zlib.crc32(payload)) + payload


def _record(topic: str, key: str, seen_at: int) -> bytes:
    t = topic.encode()
    return _framed(_BODY.pack(seen_at, len(t)) + t + key.encode("utf-8", "surrogateescape"))


def _range_record(topic: str, keys: KeyRange, seen_at: int) -> bytes:
    t = topic.encode()
    head = _BODY.pack(seen_at, len(t) | _RANGE_FLAG) + t + _RANGE.pack(keys.first, keys.count)
    return _framed(head + keys.prefix.encode("utf-8", "surrogateescape"))


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
    def __init__(self, data_path: str, sync_every: int, sync_timeout: float) -> None:
        self.path = os.path.join(data_path, FILENAME)
        self._sync_every = sync_every
        self._sync_timeout = sync_timeout
        self._fd: int | None = None
        self._unsynced = 0
        self._last_sync = time.monotonic()

    def load(self) -> Iterator[tuple[str, str, int]]:
        try:
            with open(self.path, "rb") as f:
                data = f.read()
        except FileNotFoundError:
            return
        pos = 0
        while pos + _HEAD.size <= len(data):
            size, crc = _HEAD.unpack_from(data, pos)
            payload = data[pos + _HEAD.size : pos + _HEAD.size + size]
            if len(payload) < size or zlib.crc32(payload) != crc or size < _BODY.size:
                log.error("DEDUPE: damaged record at %d of %s, the rest skipped", pos, self.path)
                return
            try:
                topic, keys, seen_at = _keys(payload)
            except (struct.error, UnicodeDecodeError):
                log.error("DEDUPE: malformed record at %d of %s, the rest skipped", pos, self.path)
                return
            for key in keys:
                yield topic, key, seen_at
            pos += _HEAD.size + size
        if pos != len(data):
            log.error("DEDUPE: torn record at the end of %s skipped", self.path)

    def remembered(self, topic: str, keys: Sequence[str], seen_at: int) -> None:
        if self._fd is None:
            self._fd = os.open(self.path, os.O_WRONLY | os.O_CREAT | os.O_APPEND, 0o600)
        if isinstance(keys, KeyRange):
            os.write(self._fd, _range_record(topic, keys, seen_at))
        else:
            os.write(self._fd, b"".join(_record(topic, k, seen_at) for k in keys))
        self._unsynced += 1

    def rewrite(self, entries: Iterable[tuple[str, str, int]]) -> None:
        tmp = self.path + ".tmp"
        with open(tmp, "wb") as f:
            f.write(b"".join(_record(*e) for e in entries))
            f.flush()
            os.fsync(f.fileno())
        self.close()
        os.replace(tmp, self.path)

    def needs_sync(self) -> bool:
        if not self._unsynced:
            return False
        late = time.monotonic() - self._last_sync >= self._sync_timeout
        return self._unsynced >= self._sync_every or late

    def sync(self) -> None:
        if self._fd is not None:
            os.fsync(self._fd)
        self._unsynced = 0
        self._last_sync = time.monotonic()

    def close(self) -> None:
        if self._fd is not None:
            os.fsync(self._fd)
            os.close(self._fd)
            self._fd = None
