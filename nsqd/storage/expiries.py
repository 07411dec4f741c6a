"""Per-message TTLs of messages in a disk queue (`/pub?ttl=`; ours). go-diskqueue's records
have nsqd's layout, with no room for an expiry, so a queue that holds such messages keeps a
file beside its data files, `<queue>.diskqueue.ttl`: a record log (records.py) of [16-byte
id][int64 unix ns expiry], appended as the messages are written, fsynced when the queue is, and
removed once no message of the queue has a TTL. A damaged record is skipped alone with a log
line (that message keeps only its topic's or channel's TTL). A file of the fixed 28-byte
records written before records.py is read once and rewritten."""

from __future__ import annotations

import struct
import zlib

from ..log import log
from .records import RecordLog, Scan

_REC = struct.Struct(">16sq")
_LEGACY_REC = struct.Struct(">16sqI")  # id, expiry, crc32 of both


def _legacy(data: bytes, what: str) -> Scan:
    out = Scan(legacy=True)
    for pos in range(0, len(data) - _LEGACY_REC.size + 1, _LEGACY_REC.size):
        if zlib.crc32(data[pos : pos + _REC.size]) != _LEGACY_REC.unpack_from(data, pos)[2]:
            log.error("%s: damaged TTL record at %d (old layout), the rest skipped", what, pos)
            out.damaged += 1
            break
        out.payloads.append(data[pos : pos + _REC.size])
    return out


class ExpiryFile:
    __slots__ = ("_log", "expires", "path")

    def __init__(self, path: str) -> None:
        self.path = path
        self.expires: dict[bytes, int] = {}
        # fsynced by sync() when the queue syncs, so no count or timer of its own
        self._log = RecordLog(path, f"DISKQUEUE({path})", 1, 0.0, mode=0o600, legacy=_legacy)
        scan = self._log.load()
        for payload in scan.payloads:
            if len(payload) != _REC.size:
                log.error("DISKQUEUE: malformed TTL record in %s skipped", path)
                continue
            msg_id, expires = _REC.unpack(payload)
            self.expires[msg_id] = expires
        if scan.legacy:
            self._log.replace(_REC.pack(*item) for item in self.expires.items())

    def add(self, msg_id: bytes, expires: int) -> None:
        """Kept in memory, then written (OSError when that fails: kept for this run only)."""
        self.expires[msg_id] = expires
        self._log.write(_REC.pack(msg_id, expires))

    def pop(self, msg_id: bytes) -> int:
        """The expiry of a message leaving the queue (0 if none); the file goes when empty."""
        expires = self.expires.pop(msg_id, 0)
        if expires and not self.expires:
            self.remove()
        return expires

    def sync(self) -> None:
        self._log.sync()

    def close(self) -> None:
        self._log.close()

    def remove(self) -> None:
        self._log.remove()
        self.expires.clear()
