"""The keyspace's durability: an append-only log, `resp.log` under --data-path, of every change
as a replayable record (keyspace.Record), replayed on start and rewritten from a snapshot of
the keyspace when it has grown to twice its last rewritten size (at least REWRITE_MIN).

Record: u32 payload length, u32 crc32 of the payload, payload = u32 argc, then per argument
u32 length + bytes (little-endian). A record whose checksum fails is skipped with a log line; a
torn tail (a length past the end) ends the replay and is cut off.

Changes are gathered during a scheduler pass and written with one write() before their replies
are sent (`flush`), so kill -9 loses nothing acknowledged; fsync follows the disk queues'
--sync-every (writes) / --sync-timeout policy in a worker thread (`syncer`)."""

from __future__ import annotations

import os
import struct
import threading
import zlib
from collections.abc import Iterable
from pathlib import Path

import trio

from ..log import log
from .keyspace import Keyspace, Record

FILE = "resp.log"
REWRITE_MIN = 64 * 1024 * 1024
SYNC_CHECK_INTERVAL = 0.1
_HEAD = struct.Struct("<II")
_U32 = struct.Struct("<I")
MAX_RECORD = 1 << 31


def encode(rec: Record) -> bytes:
    parts = [_U32.pack(len(rec))]
    for arg in rec:
        parts.append(_U32.pack(len(arg)))
        parts.append(arg)
    payload = b"".join(parts)
    return _HEAD.pack(len(payload), zlib.crc32(payload)) + payload


def decode_payload(payload: bytes) -> Record:
    (argc,) = _U32.unpack_from(payload, 0)
    pos, out = 4, []
    for _ in range(argc):
        (n,) = _U32.unpack_from(payload, pos)
        pos += 4
        if pos + n > len(payload):
            raise ValueError("argument past the record")
        out.append(payload[pos : pos + n])
        pos += n
    if pos != len(payload) or not out:
        raise ValueError("bad argument count")
    return tuple(out)


def read_records(data: bytes) -> tuple[list[Record], int, int]:
    """(the good records, the offset where the good data ends, how many were skipped)."""
    records: list[Record] = []
    pos = skipped = 0
    while pos + _HEAD.size <= len(data):
        size, crc = _HEAD.unpack_from(data, pos)
        start = pos + _HEAD.size
        if size > MAX_RECORD or start + size > len(data):
            break  # a torn tail
        payload = data[start : start + size]
        pos = start + size
        try:
            if zlib.crc32(payload) != crc:
                raise ValueError("checksum mismatch")
            records.append(decode_payload(payload))
        except (ValueError, struct.error) as exc:
            skipped += 1
            log.error("RESP: %s: skipping a damaged record at offset %d - %s", FILE, pos, exc)
    return records, pos, skipped


class RespLog:
    def __init__(self, data_path: str, sync_every: int, sync_timeout: float) -> None:
        self.path = Path(data_path) / FILE
        self.sync_every = max(1, sync_every)
        self.sync_timeout = sync_timeout
        self.rewrite_min = REWRITE_MIN
        self._buf: list[bytes] = []
        self._fd = -1
        self._size = 0
        self._base = 0  # size after the last rewrite
        self._unsynced = 0  # writes since the last fsync
        self._lock = threading.Lock()  # the fd against the syncer thread
        self._wakeup = trio.Event()
        self.keyspace: Keyspace | None = None

    # -- start ---------------------------------------------------------------------------

    def load(self, keyspace: Keyspace) -> int:
        """Replay the log into `keyspace`, cut a torn tail, open for appending; how many
        records were applied."""
        self.keyspace = keyspace
        data = self.path.read_bytes() if self.path.exists() else b""
        records, end, _ = read_records(data)
        keyspace.loading = True
        try:
            for rec in records:
                try:
                    keyspace.apply(rec)
                except (ValueError, IndexError, KeyError, TypeError) as exc:
                    log.error("RESP: %s: skipping a record that does not apply - %s", FILE, exc)
        finally:
            keyspace.loading = False
        if end < len(data):
            log.error("RESP: %s: cutting a torn tail of %d bytes", FILE, len(data) - end)
        self._fd = os.open(self.path, os.O_WRONLY | os.O_CREAT, 0o644)
        os.ftruncate(self._fd, end)
        os.lseek(self._fd, end, os.SEEK_SET)
        self._size = self._base = end
        keyspace.record = self.record
        return len(records)

    # -- writing -------------------------------------------------------------------------

    def record(self, rec: Record) -> None:
        self._buf.append(encode(rec))

    def flush(self) -> None:
        """Write what the last commands changed (one write()); rewrite when grown."""
        if not self._buf:
            return
        data = b"".join(self._buf)
        self._buf.clear()
        with self._lock:
            _write(self._fd, data)
        self._size += len(data)
        self._unsynced += 1
        if self._unsynced >= self.sync_every:
            self._wakeup.set()
        if self._size > max(self.rewrite_min, 2 * self._base):
            self.rewrite()

    def rewrite(self) -> None:
        """Replace the log with the records that rebuild the keyspace as it is now."""
        assert self.keyspace is not None
        self._buf.clear()  # already applied to the keyspace: the snapshot covers them
        tmp = self.path.with_suffix(".log.tmp")
        fd = os.open(tmp, os.O_WRONLY | os.O_CREAT | os.O_TRUNC, 0o644)
        try:
            size = _write_all(fd, self.keyspace.snapshot())
            os.fsync(fd)
        except BaseException:
            os.close(fd)
            raise
        with self._lock:
            os.replace(tmp, self.path)
            os.close(self._fd)
            self._fd = fd
            self._unsynced = 0
        _fsync_dir(self.path.parent)
        log.info("RESP: %s rewritten: %d -> %d bytes", FILE, self._size, size)
        self._size = self._base = size

    def needs_sync(self) -> bool:
        return self._unsynced > 0

    def sync(self) -> None:
        """fsync (in the syncer's thread). The lock only guards taking a duplicate of the fd:
        the event loop's writes must never wait for the disk."""
        with self._lock:
            if self._fd < 0 or not self._unsynced:
                return
            self._unsynced = 0
            fd = os.dup(self._fd)  # a rewrite may close and replace the original meanwhile
        try:
            os.fsync(fd)
        finally:
            os.close(fd)

    async def syncer(self) -> None:
        """fsync after --sync-every writes (woken at once) or --sync-timeout."""
        since = trio.current_time()
        while True:
            with trio.move_on_after(SYNC_CHECK_INTERVAL):
                await self._wakeup.wait()
            self._wakeup = trio.Event()
            now = trio.current_time()
            due = self._unsynced >= self.sync_every or now - since >= self.sync_timeout
            if self._unsynced and due:
                since = now
                try:
                    await trio.to_thread.run_sync(self.sync)
                except OSError as exc:
                    log.error("RESP: %s: fsync failed - %s", FILE, exc)
            elif not self._unsynced:
                since = now

    def close(self) -> None:
        """Clean stop: everything written and fsynced."""
        if self._fd < 0:
            return
        self.flush()
        with self._lock:
            os.fsync(self._fd)
            os.close(self._fd)
            self._fd = -1


def _write_all(fd: int, records: Iterable[Record]) -> int:
    size, chunk = 0, []
    pending = 0
    for rec in records:
        data = encode(rec)
        chunk.append(data)
        pending += len(data)
        if pending >= 1 << 20:
            size += _write(fd, b"".join(chunk))
            chunk, pending = [], 0
    if chunk:
        size += _write(fd, b"".join(chunk))
    return size


def _write(fd: int, data: bytes) -> int:
    view = memoryview(data)
    while view:
        view = view[os.write(fd, view) :]
    return len(data)


def _fsync_dir(path: Path) -> None:
    fd = os.open(path, os.O_RDONLY)
    try:
        os.fsync(fd)
    finally:
        os.close(fd)
