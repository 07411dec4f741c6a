"""Per-message TTLs of messages in a disk queue (`/pub?ttl=`; ours). go-diskqueue's records
have nsqd's layout, with no room for an expiry, so a queue that holds such messages keeps a
file beside its data files, `<queue>.diskqueue.ttl`: records [16-byte id][int64 unix ns
expiry][uint32 crc32 of both], appended as the messages are written, fsynced when the queue is,
and removed once no message of the queue has a TTL. A damaged record ends the replay with a log
line (those messages keep only their topic's or channel's TTL)."""

from __future__ import annotations

import os
import struct
import zlib

from ..log import log

_REC = struct.Struct(">16sqI")


class ExpiryFile:
    __slots__ = ("_fd", "_unsynced", "expires", "path")

    def __init__(self, path: str) -> None:
        self.path = path
        self.expires: dict[bytes, int] = {}
        self._fd: int | None = None
        self._unsynced = False
        try:
            with open(path, "rb") as f:
                data = f.read()
        except FileNotFoundError:
            return
        for pos in range(0, len(data) - _REC.size + 1, _REC.size):
            msg_id, expires, crc = _REC.unpack_from(data, pos)
            if zlib.crc32(data[pos : pos + 24]) != crc:
                log.error("DISKQUEUE: damaged TTL record at %d of %s, the rest skipped", pos, path)
                break
            self.expires[msg_id] = expires

    def add(self, msg_id: bytes, expires: int) -> None:
        if self._fd is None:
            self._fd = os.open(self.path, os.O_WRONLY | os.O_CREAT | os.O_APPEND, 0o600)
        head = msg_id + expires.to_bytes(8, "big", signed=True)
        os.write(self._fd, head + zlib.crc32(head).to_bytes(4, "big"))
        self.expires[msg_id] = expires
        self._unsynced = True

    def pop(self, msg_id: bytes) -> int:
        """The expiry of a message leaving the queue (0 if none); the file goes when empty."""
        expires = self.expires.pop(msg_id, 0)
        if expires and not self.expires:
            self.remove()
        return expires

    def sync(self) -> None:
        if self._fd is not None and self._unsynced:
            os.fsync(self._fd)
            self._unsynced = False

    def close(self) -> None:
        if self._fd is not None:
            self.sync()
            os.close(self._fd)
            self._fd = None

    def remove(self) -> None:
        if self._fd is not None:
            os.close(self._fd)
            self._fd = None
        self.expires.clear()
        try:
            os.unlink(self.path)
        except FileNotFoundError:
            pass
