"""The record log every append-only file of ours is made of (the in-flight journals, the
de-duplication keys, the TTLs beside a disk queue, resp.log): the framing, the reader that
finds every intact record of a damaged file, and the appender that writes what one pass of the
loop produced with one write().

A file starts with the 8 bytes `FILE_MAGIC`, then records:

    [2 bytes MARK][u32 length][u32 crc32 of the length's 4 bytes and the payload][payload]

(big-endian). The checksum covers the length, so a damaged length is caught like a damaged
payload. Whatever does not check out (a flipped byte anywhere in a record, garbage between
records, a torn tail) is skipped up to the next MARK that starts an intact record, with a log
line: a damaged record loses only itself. A payload that happens to hold a whole framed record
could be taken for one only while the record around it is damaged.

Files written before this framing (no FILE_MAGIC: `[u32 length][u32 crc32 of the payload]`)
are read with their old rules (a bad checksum skips the record, a bad length ends the replay)
and rewritten in this one by their owner at start, so the daemon always starts."""

from __future__ import annotations

import os
import struct
import threading
import time
import zlib
from collections.abc import Callable, Iterable
from dataclasses import dataclass, field

from ..log import log
from .atomic import rename_into, replace_file, write_all
from .child import ChildWrite, remove_leftovers

FILE_MAGIC = b"TNSQLOG\x01"
MARK = b"\xe7\x5a"
_LEN = struct.Struct(">I")
_LEN_CRC = struct.Struct(">II")
_HEAD = struct.Struct(">2sII")  # mark, length, crc32
HEAD_SIZE = _HEAD.size
MAX_RECORD = 1 << 31
_crc32 = zlib.crc32
_pack_head = _HEAD.pack
_pack_len = _LEN.pack


_SHORT = 4096  # the CRC-32 of a short record's length bytes is looked up
_CRC_OF_LEN = [_crc32(_LEN.pack(n)) for n in range(_SHORT)]


def frame(payload: bytes) -> bytes:
    n = len(payload)
    return _HEAD.pack(MARK, n, _crc32(payload, _crc32(_LEN.pack(n)))) + payload


def _noop() -> None:
    pass


def _ignore_size(size: int) -> None:
    pass


@dataclass(slots=True)
class Scan:
    """What a file holds: its intact payloads in order, where the last of them ends (appends
    go there), how many damaged stretches were skipped, and whether the file is in an older
    framing (its owner rewrites it)."""

    payloads: list[bytes] = field(default_factory=list)
    end: int = 0
    damaged: int = 0
    legacy: bool = False


LegacyReader = Callable[[bytes, str], "Scan"]


def read(data: bytes, what: str, legacy: LegacyReader | None = None) -> Scan:
    """The records of a file's bytes; `legacy` reads a file that does not start with
    FILE_MAGIC (one written before this framing)."""
    if data.startswith(FILE_MAGIC):
        return _scan(data, len(FILE_MAGIC), what, Scan())
    if not data or FILE_MAGIC.startswith(data):  # nothing yet, or a header cut by a crash
        return Scan()  # (end 0: the load cuts the half header, the next write starts anew)
    if legacy is not None:
        old = legacy(data, what)
        if not old.damaged:
            return old
    # no header (or a damaged one): the records are found by their marks all the same
    log.error("%s: no file header - looking for records anyway", what)
    found = _scan(data, 0, what, Scan(legacy=True))
    return old if legacy is not None and len(old.payloads) > len(found.payloads) else found


def _intact(data: bytes, view: memoryview, pos: int) -> int:
    """Where the record at `pos` ends if one starts there and checks out, else -1."""
    if not data.startswith(MARK, pos) or pos + HEAD_SIZE > len(data):
        return -1
    length, crc = _LEN_CRC.unpack_from(data, pos + 2)
    stop = pos + HEAD_SIZE + length
    if (
        stop > len(data)
        or _crc32(view[pos + HEAD_SIZE : stop], _crc32(view[pos + 2 : pos + 6])) != crc
    ):
        return -1
    return stop


def _scan(data: bytes, pos: int, what: str, out: Scan) -> Scan:
    size = len(data)
    view = memoryview(data)
    bad_from = -1  # where the stretch being skipped began
    out.end = pos
    while pos < size:
        stop = _intact(data, view, pos)
        if stop < 0:  # not a record: on to the next MARK
            if bad_from < 0:
                bad_from = pos
            nxt = data.find(MARK, pos + 1)
            pos = nxt if nxt >= 0 else size
            continue
        if bad_from >= 0:
            _skipped(out, what, "damaged record(s)", bad_from, pos)
            bad_from = -1
        out.payloads.append(data[pos + HEAD_SIZE : stop])
        pos = out.end = stop
    if bad_from >= 0:
        _skipped(out, what, "a torn or damaged tail", bad_from, size)
    return out


def _skipped(out: Scan, what: str, kind: str, start: int, stop: int) -> None:
    log.error("%s: %s at byte %d - %d bytes skipped", what, kind, start, stop - start)
    out.damaged += 1


def legacy_framing(head: struct.Struct) -> LegacyReader:
    """The reader of the framing before this one, [u32 length][u32 crc32 of the payload] in
    `head`'s byte order: a bad checksum skips the record, a bad length ends the replay."""
    return lambda data, what: _scan_legacy(data, head, what)


def _scan_legacy(data: bytes, head: struct.Struct, what: str) -> Scan:
    out = Scan(legacy=True)
    pos, size = 0, len(data)
    while pos + head.size <= size:
        length, crc = head.unpack_from(data, pos)
        stop = pos + head.size + length
        if length == 0 or length > MAX_RECORD or stop > size:
            break
        payload = data[pos + head.size : stop]
        if _crc32(payload) == crc:
            out.payloads.append(payload)
        else:
            log.error("%s: bad checksum at byte %d (old framing) - record skipped", what, pos)
            out.damaged += 1
        pos = out.end = stop
    if pos != size:
        log.error("%s: torn tail at byte %d (old framing) - the rest skipped", what, pos)
        out.damaged += 1
    return out


class RecordLog:
    """One append-only file of records. `append` gathers a record, `flush` writes what was
    gathered with one write() (the owner calls it before the promise it backs is answered),
    `write` is both. fsync follows --sync-every (counted in writes, as go-diskqueue counts its
    writes) and --sync-timeout through the storage's syncer, which calls `needs_sync` and
    `sync` (the latter in a worker thread; a rewrite may swap the file meanwhile)."""

    def __init__(
        self,
        path: str,
        what: str,
        sync_every: int,
        sync_timeout: float,
        *,
        mode: int = 0o644,
        legacy: LegacyReader | None = None,
        sync_due: Callable[[], None] = _noop,
    ) -> None:
        self.path = path
        self.what = what
        self.sync_every = max(sync_every, 1)
        self.sync_timeout = sync_timeout
        self._mode = mode
        self._legacy = legacy
        self._sync_due = sync_due
        self._buf: list[bytes] = []
        # what a failed write() did not write, from the byte where it stopped, when its owner
        # keeps it (resp.log: the changes are in memory already): written again before
        # anything appended after it, so the file's order stays the records' order. Others
        # drop it: their caller refused what the records stood for.
        self.keep_unwritten = False
        self._unwritten = b""
        self._fd = -1
        self.size = 0
        self._writes = 0  # since the last fsync
        self._last_sync = time.monotonic()
        self._lock = threading.Lock()  # the descriptor, against the syncer's thread
        self._syncing = False  # an fsync runs in the syncer's thread
        self._retired: list[int] = []  # descriptors to close once that fsync is done
        self._child: ChildWrite | None = None  # a replace_in_child under way
        self._child_from = 0
        self._child_done: Callable[[int], None] = _ignore_size

    # -- start ---------------------------------------------------------------------------

    def load(self) -> Scan:
        """The file's records; a damaged tail is cut off, so appends follow the last intact
        record. A legacy file is left as it is: its owner rewrites it (`replace`). A
        compaction's child's file left by a crash is removed."""
        remove_leftovers(self.path)
        try:
            with open(self.path, "rb") as f:
                data = f.read()
        except FileNotFoundError:
            return Scan()
        except OSError as exc:
            # unreadable (a bad disk, a directory in its place): the daemon starts without
            # its records, as with a damaged one; raised, it refused to start at all
            log.error("%s: cannot read %s, starting without it - %s", self.what, self.path, exc)
            return Scan()
        scan = read(data, self.what, self._legacy)
        if not scan.legacy and scan.end < len(data):
            try:
                with open(self.path, "r+b") as f:
                    f.truncate(scan.end)
            except OSError as exc:  # appends follow the damage then: read back skips it
                log.error("%s: cannot cut the damaged tail of %s - %s", self.what, self.path, exc)
        return scan

    # -- writing ---------------------------------------------------------------------------

    @property
    def pending(self) -> bool:
        return bool(self._buf) or bool(self._unwritten)

    def append(self, payload: bytes) -> None:
        n = len(payload)  # frame() written out (once per record of every log), its two
        buf = self._buf  # parts joined only by the flush's one join
        start = _CRC_OF_LEN[n] if n < _SHORT else _crc32(_pack_len(n))
        buf.append(_pack_head(MARK, n, _crc32(payload, start)))
        buf.append(payload)

    def write(self, payload: bytes) -> None:
        self.append(payload)
        self.flush()

    def flush(self) -> None:
        """Write everything appended since the last flush: one write() into the page cache,
        safe from a kill -9 once it returns. (And a compaction's child that has ended is
        taken in: see `replace_in_child`.)"""
        if self._child is not None:
            self._take_child()
        if not self._buf and not self._unwritten:
            return
        data = self._unwritten + b"".join(self._buf)
        self._buf.clear()
        self._unwritten = b""
        done = 0
        try:
            if self._fd < 0:
                self._open()
                if not self.size:
                    data = FILE_MAGIC + data
            view = memoryview(data)
            with self._lock:
                while done < len(data):  # (a short write's rest again: then ENOSPC raises)
                    done += os.write(self._fd, view[done:])
        finally:
            # a failed write keeps the bytes it did not write, from where it stopped, for an
            # owner that keeps them (a record cut there is completed by the next flush)
            self.size += done
            if done < len(data) and self.keep_unwritten:
                self._unwritten = data[done:]
        self._writes += 1
        if self._writes == self.sync_every:
            self._sync_due()

    def drop_pending(self) -> None:
        self._buf.clear()

    def take_back(self, n: int) -> list[bytes]:
        """The payloads of the last `n` records appended, taken out of what the next flush
        writes, for their owner to append again as one (fewer when a flush came between:
        those are written already)."""
        buf = self._buf
        start = max(len(buf) - 2 * n, 0)  # a record is two items: its head, its payload
        payloads = buf[start + 1 :: 2]
        del buf[start:]
        return payloads

    def replace(self, payloads: Iterable[bytes]) -> int:
        """Make the file hold just these records (atomic: see atomic.py); its size."""
        self._abandon_child()
        self._buf.clear()
        chunks = _framed_chunks(payloads)
        size = replace_file(self.path, chunks, self._mode)
        self._unwritten = b""  # the records' changes are in the snapshot
        with self._lock:
            self._close_fd()
            self._writes = 0
        self._open()
        self.size = size
        return size

    # -- compaction in a child process (Redis's BGREWRITEAOF) -------------------------------

    @property
    def replacing(self) -> bool:
        """A `replace_in_child` is under way."""
        return self._child is not None

    def replace_in_child(self, payloads: Iterable[bytes], done: Callable[[int], None]) -> None:
        """Make the file hold these records, then whatever is appended meanwhile, without
        stopping the loop: `payloads` (lazy) is consumed in a forked child (child.py), which
        sees the memory of this moment; the file goes on taking appends meanwhile, and once
        the child is done a `flush` copies the records appended since the fork after the
        child's and renames its file over this one, then calls `done(size)`. Until then the
        file is what it was (a crash keeps it whole); a failed child leaves it so, logged,
        and `done` gets the file's size (its owner then waits for it to grow again)."""
        self.flush()
        self._abandon_child()
        if self._fd < 0:
            self._open()
        try:
            child = ChildWrite(self.path, _framed_chunks(payloads), self._mode)
        except OSError as exc:  # no fork (memory, process limits): compact here, as before
            log.error("%s: cannot rewrite in a child process - %s; rewriting now", self.what, exc)
            done(self.replace(payloads))
            return
        self._child = child
        self._child_from = self.size  # the appends the child does not have start here
        self._child_done = done
        log.info("%s: rewriting in a child process (pid %d)", self.what, self._child.pid)

    def _take_child(self) -> None:
        child = self._child
        assert child is not None
        if not child.finished():
            return
        self._child = None
        if not child.succeeded:
            log.error(
                "%s: the rewrite's child process failed (exit %s) - keeping the file as it is",
                self.what,
                child.status,
            )
            child.abandon()
            self._child_done(self.size)
            return
        try:
            with open(self.path, "rb") as f:  # what came after the fork, framed as it is
                f.seek(self._child_from)
                tail = f.read(self.size - self._child_from)
            fd = os.open(child.tmp, os.O_WRONLY | os.O_APPEND)
            try:
                write_all(fd, tail)
                os.fsync(fd)
                size = os.fstat(fd).st_size
            finally:
                os.close(fd)
            rename_into(child.tmp, self.path)
        except OSError as exc:
            log.error("%s: the rewrite could not be finished - %s; keeping it", self.what, exc)
            child.abandon()
            self._child_done(self.size)
            return
        before = self.size
        with self._lock:
            self._close_fd()
            self._writes = 0
        self._open()
        log.info("%s: rewritten in a child process: %d -> %d bytes", self.what, before, size)
        self._child_done(size)

    def _abandon_child(self) -> None:
        if self._child is not None:
            self._child.abandon()
            self._child = None

    def _open(self) -> None:
        fd = os.open(self.path, os.O_WRONLY | os.O_CREAT | os.O_APPEND, self._mode)
        with self._lock:
            self._fd = fd
        self.size = os.fstat(fd).st_size

    # -- the syncer ------------------------------------------------------------------------

    def needs_sync(self) -> bool:
        if self._child is not None:  # (the syncer asks every 100 ms: an idle daemon takes
            self._take_child()  # a finished compaction in here, a busy one at its flush)
        if not self._writes:
            return False
        late = time.monotonic() - self._last_sync >= self.sync_timeout
        return self._writes >= self.sync_every or late

    def sync(self) -> None:
        """fsync (in the syncer's thread, without the lock: the event loop's writes never wait
        for the disk). A descriptor that a rewrite or a close retires meanwhile is closed
        here, after its fsync, so the number is never reused under it."""
        with self._lock:
            if self._fd < 0 or not self._writes:
                return
            self._writes = 0
            self._last_sync = time.monotonic()
            fd = self._fd
            self._syncing = True
        try:
            os.fsync(fd)
        finally:
            with self._lock:
                self._syncing = False
                retired, self._retired = self._retired, []
            for old in retired:
                os.close(old)

    # -- the end ---------------------------------------------------------------------------

    def close(self) -> None:
        """Clean stop: what is gathered written, the file fsynced and closed (a rewrite's
        child still at work is stopped: the file is whole without it)."""
        self.flush()
        self._abandon_child()
        with self._lock:
            if self._fd >= 0:
                os.fsync(self._fd)
            self._close_fd()

    def remove(self) -> None:
        """Forget the file (what is gathered too)."""
        self._abandon_child()
        self._buf.clear()
        self._unwritten = b""
        with self._lock:
            self._close_fd()
        for path in (self.path, self.path + ".tmp"):
            try:
                os.unlink(path)
            except FileNotFoundError:
                pass
            except OSError as exc:  # left behind; its owner's work (a delivery, a stop) goes on
                log.error("%s: cannot remove %s - %s", self.what, path, exc)
        self.size = 0

    def _close_fd(self) -> None:
        """(The lock held.)"""
        if self._fd >= 0:
            if self._syncing:
                self._retired.append(self._fd)
            else:
                os.close(self._fd)
            self._fd = -1


def _framed_chunks(payloads: Iterable[bytes]) -> Iterable[bytes]:
    yield FILE_MAGIC
    for payload in payloads:
        yield frame(payload)
