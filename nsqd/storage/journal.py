"""--durable-inflight: one journal file per channel, `<topic>:<channel>.inflight.journal` in
--data-path, holding the channel's in-flight and deferred messages so that a kill -9 or a
restart does not forget them (nsqd keeps them only in memory). Implements engine.ports.Journal.

The file is a log of records, each `[u32 length][u32 crc32][type][payload]` (big-endian):

    H  held:     count, then per message id(16) timestamp(i64) attempts(u16) body(u32 + bytes)
    D  deferred: due (unix ms, i64), count, then messages as in H
    R  released: count, then ids

Replaying it in order gives the live set: an id is in flight after H, deferred after D, gone
after R. A record whose checksum fails is logged and skipped; a torn tail (the crash came
during a write) ends the replay. Writes: a delivered batch (H) and a deferral (D, acknowledged
right after) are written at once, one write() each; releases (FIN runs) are gathered and
written once per scheduler pass by the store's flusher (at once with --sync-every=1). fsync
follows --sync-every (counted in writes) and --sync-timeout, through the store's syncer. The
file is rewritten from the live set at start, at a clean stop, and when it has grown to twice
its live size (past 32 MiB), so it stays bounded. go-diskqueue's files and nsqd.dat are never
touched: the Go nsqd ignores these."""

from __future__ import annotations

import os
import struct
import time
import zlib
from collections.abc import Callable, Iterator

from ..engine.message import Message
from ..log import log

SUFFIX = ".inflight.journal"
_HEAD = struct.Struct(">II")  # length of type + payload, crc32 of type + payload
_MSG = struct.Struct(">16sqHI")  # id, timestamp, attempts, body length
_COUNT = struct.Struct(">I")
_DUE = struct.Struct(">q")
_MAX_RECORD = 1 << 31
_COMPACT_FLOOR = 32 << 20


def _messages(msgs: list[Message]) -> bytes:
    pack = _MSG.pack
    parts = [_COUNT.pack(len(msgs))]
    for m in msgs:
        parts.append(pack(m.id, m.timestamp, m.attempts, len(m.body)))
        parts.append(m.body)
    return b"".join(parts)


def _record(kind: bytes, payload: bytes) -> bytes:
    body = kind + payload
    return _HEAD.pack(len(body), zlib.crc32(body)) + body


def _read_messages(buf: memoryview, pos: int) -> tuple[list[Message], int]:
    (count,) = _COUNT.unpack_from(buf, pos)
    pos += 4
    out = []
    for _ in range(count):
        msg_id, ts, attempts, size = _MSG.unpack_from(buf, pos)
        pos += _MSG.size
        body = bytes(buf[pos : pos + size])
        if len(body) != size:
            raise ValueError("message body past the record")
        pos += size
        out.append(Message(msg_id, body, ts, attempts))
    return out, pos


def _records(data: bytes, name: str) -> Iterator[tuple[bytes, memoryview]]:
    """(type, payload) of each intact record; damaged ones are logged and skipped."""
    view = memoryview(data)
    pos = 0
    while pos + _HEAD.size <= len(data):
        length, crc = _HEAD.unpack_from(data, pos)
        end = pos + _HEAD.size + length
        if length == 0 or length > _MAX_RECORD or end > len(data):
            log.error("JOURNAL(%s): torn record at byte %d - the rest is skipped", name, pos)
            return
        body = view[pos + _HEAD.size : end]
        pos = end
        if zlib.crc32(body) != crc:
            log.error("JOURNAL(%s): bad checksum at byte %d - record skipped", name, pos)
            continue
        yield bytes(body[:1]), body[1:]
    if pos != len(data):
        log.error("JOURNAL(%s): %d stray bytes at the end - skipped", name, len(data) - pos)


def replay(data: bytes, name: str) -> dict[bytes, tuple[Message, int | None]]:
    """id -> (message, due unix ms for a deferred one, None for one in flight)."""
    live: dict[bytes, tuple[Message, int | None]] = {}
    for kind, payload in _records(data, name):
        try:
            if kind == b"H":
                msgs, _ = _read_messages(payload, 0)
                for m in msgs:
                    live[m.id] = (m, None)
            elif kind == b"D":
                (due,) = _DUE.unpack_from(payload, 0)
                msgs, _ = _read_messages(payload, _DUE.size)
                for m in msgs:
                    live[m.id] = (m, due)
            elif kind == b"R":
                (count,) = _COUNT.unpack_from(payload, 0)
                for i in range(count):
                    live.pop(bytes(payload[4 + 16 * i : 20 + 16 * i]), None)
            else:
                log.error("JOURNAL(%s): unknown record type %r - skipped", name, kind)
        except (struct.error, ValueError) as exc:
            log.error("JOURNAL(%s): malformed record - skipped (%s)", name, exc)
    return live


class ChannelJournal:
    """One channel's journal file."""

    durable = True  # engine.ports.Journal: deferred messages stay here across a clean stop

    def __init__(
        self,
        path: str,
        sync_every: int,
        sync_timeout: float,
        want_flush: Callable[[ChannelJournal], None],
        want_sync: Callable[[], None],
    ) -> None:
        self.path = path
        self.name = os.path.basename(path)[: -len(SUFFIX)]
        self._sync_every = max(sync_every, 1)
        self._sync_timeout = sync_timeout
        self._want_flush = want_flush
        self._want_sync = want_sync
        self._fd: int | None = None
        self._pending = bytearray()  # releases waiting for the flusher
        self._writes = 0  # since the last fsync
        self._last_sync = time.monotonic()
        self._size = 0
        self._compact_at = _COMPACT_FLOOR
        self._live_source: Callable[[], tuple[list[Message], list[tuple[Message, int]]]] | None
        self._live_source = None
        self.closed = False

    # -- engine.ports.Journal ----------------------------------------------------------------

    def held(self, msgs: list[Message]) -> None:
        self._write(_record(b"H", _messages(msgs)))

    def deferred(self, msgs: list[Message], due_ms: int) -> None:
        self._write(_record(b"D", _DUE.pack(due_ms) + _messages(msgs)))

    def released(self, ids: list[bytes]) -> None:
        if self.closed:
            return
        record = _record(b"R", _COUNT.pack(len(ids)) + b"".join(ids))
        if self._sync_every == 1:  # every op synced: a FIN is written before the next command
            self._write(record)
            return
        was_empty = not self._pending
        self._pending += record
        if was_empty:
            self._want_flush(self)

    def attach(self, live: Callable[[], tuple[list[Message], list[tuple[Message, int]]]]) -> None:
        self._live_source = live

    def recover(self) -> tuple[list[Message], list[tuple[Message, int]]]:
        try:
            with open(self.path, "rb") as f:
                data = f.read()
        except FileNotFoundError:
            data = b""
        live = replay(data, self.name)
        in_flight = [m for m, due in live.values() if due is None]
        deferred = [(m, due) for m, due in live.values() if due is not None]
        if data:
            log.info(
                "JOURNAL(%s): recovered %d in flight, %d deferred",
                self.name,
                len(in_flight),
                len(deferred),
            )
            self._rewrite(in_flight, deferred)  # compacted: only the live set from here on
        return in_flight, deferred

    def clear(self) -> None:
        self._pending.clear()
        self._rewrite([], [])

    def close(self, deferred: list[tuple[Message, int]]) -> None:
        self._pending.clear()
        if deferred:
            self._rewrite([], deferred)
        else:
            self._remove()
        self._close_fd()
        self.closed = True

    def delete(self) -> None:
        self._pending.clear()
        self._remove()
        self._close_fd()
        self.closed = True

    # -- the store's flusher and syncer ------------------------------------------------------

    def flush(self) -> None:
        if self._pending and not self.closed:
            data = bytes(self._pending)
            self._pending.clear()
            self._write(data)

    def needs_sync(self) -> bool:
        if not self._writes or self._fd is None:
            return False
        return (
            self._writes >= self._sync_every
            or time.monotonic() - self._last_sync >= self._sync_timeout
        )

    def sync(self) -> None:
        fd = self._fd
        self._writes = 0
        self._last_sync = time.monotonic()
        if fd is not None:
            try:
                os.fsync(fd)
            except OSError as exc:  # closed meanwhile (a delete): nothing left to keep
                log.debug("JOURNAL(%s): fsync - %s", self.name, exc)

    # -- the file -----------------------------------------------------------------------------

    def _write(self, data: bytes) -> None:
        if self.closed:
            return
        if self._pending:  # keep the file in call order: gathered releases go first
            data = bytes(self._pending) + data
            self._pending.clear()
        if self._fd is None:
            self._fd = os.open(self.path, os.O_WRONLY | os.O_CREAT | os.O_APPEND, 0o644)
            self._size = os.fstat(self._fd).st_size
        os.write(self._fd, data)  # one write() per call: in the page cache, safe from kill -9
        self._size += len(data)
        self._writes += 1
        if self._writes >= self._sync_every:
            self._want_sync()
        if self._size >= self._compact_at and self._live_source is not None:
            self._rewrite(*self._live_source())

    def _rewrite(self, in_flight: list[Message], deferred: list[tuple[Message, int]]) -> None:
        """Replace the file by one holding just this live set (temp file, fsync, rename)."""
        parts = []
        if in_flight:
            parts.append(_record(b"H", _messages(in_flight)))
        parts.extend(_record(b"D", _DUE.pack(due) + _messages([m])) for m, due in deferred)
        data = b"".join(parts)
        tmp = self.path + ".tmp"
        fd = os.open(tmp, os.O_WRONLY | os.O_CREAT | os.O_TRUNC, 0o644)
        try:
            os.write(fd, data)
            os.fsync(fd)
        finally:
            os.close(fd)
        os.replace(tmp, self.path)
        self._close_fd()
        self._fd = os.open(self.path, os.O_WRONLY | os.O_APPEND)
        self._size = len(data)
        self._compact_at = max(_COMPACT_FLOOR, 2 * len(data))
        self._writes = 0

    def _remove(self) -> None:
        for path in (self.path, self.path + ".tmp"):
            try:
                os.unlink(path)
            except FileNotFoundError:
                pass

    def _close_fd(self) -> None:
        if self._fd is not None:
            os.close(self._fd)
            self._fd = None
