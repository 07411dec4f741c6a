"""The de-duplication keys on disk (--dedupe-window): `trio-nsqd.dedupe` in --data-path, one
record per remembered key: [uint32 length][uint32 crc32][payload], the payload being
[int64 unix ns][uint16 topic length][topic][key]. Appended (one write per publish) before the
publish is acknowledged, fsynced with the disk queues' policy (--sync-every writes or
--sync-timeout); rewritten whole (temporary file, fsync, rename) when mostly stale. A damaged
record ends the replay with a log line (a torn tail after a crash): the daemon always starts."""

from __future__ import annotations

import os
import struct
import time
import zlib
from collections.abc import Iterable, Iterator

from ..log import log

FILENAME = "trio-nsqd.dedupe"
_HEAD = struct.Struct(">II")
_BODY = struct.Struct(">qH")


def _record(topic: str, key: str, seen_at: int) -> bytes:
    t = topic.encode()
    payload = _BODY.pack(seen_at, len(t)) + t + key.encode("utf-8", "surrogateescape")
    return _HEAD.pack(len(payload), zlib.crc32(payload)) + payload


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
            seen_at, tlen = _BODY.unpack_from(payload)
            topic = payload[_BODY.size : _BODY.size + tlen].decode()
            key = payload[_BODY.size + tlen :].decode("utf-8", "surrogateescape")
            yield topic, key, seen_at
            pos += _HEAD.size + size
        if pos != len(data):
            log.error("DEDUPE: torn record at the end of %s skipped", self.path)

    def remembered(self, entries: list[tuple[str, str, int]]) -> None:
        if self._fd is None:
            self._fd = os.open(self.path, os.O_WRONLY | os.O_CREAT | os.O_APPEND, 0o600)
        os.write(self._fd, b"".join(_record(*e) for e in entries))
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
