"""File-backed FIFO queue, byte-compatible with go-diskqueue v1.1.0 (what nsqd v1.3.0 uses).

Synchronous: an append is one ``write()`` into the page cache (microseconds; it survives
``kill -9`` once it returns), or, while a ``GroupCommit`` is held, a record buffered until its
release writes all of them with one ``write()`` (storage/commit.py). Only ``sync()`` and
``close()`` fsync: the daemon polls ``needs_sync()`` and runs ``sync()`` in a worker thread,
so the methods share a lock that ``sync()`` holds only for a snapshot. Beyond go-diskqueue
(same files): a finished file read to its end is deleted, never flagged ``.bad``; a write file
whose size differs from the metadata is never appended to; records past a stale or missing
metadata write position are counted into the depth.
"""

from __future__ import annotations

import logging
import os
import random
import threading
import time
from collections.abc import Callable
from dataclasses import dataclass
from typing import IO, Final

from ..engine.ports import StoreError
from .commit import GroupCommit
from .diskqueue_files import HEADER, READ_BUFFER, meta_text, recover

__all__ = ["DiskQueue", "DiskQueueError", "MessageSizeError", "QueueClosedError"]

# what a run of records is read with at most (below glibc's mmap threshold: no mmap per read)
_RUN_CHUNK: Final = 64 * 1024
_DATA_FLAGS: Final = os.O_WRONLY | os.O_APPEND | os.O_CREAT | os.O_CLOEXEC
_META_FLAGS: Final = os.O_WRONLY | os.O_CREAT | os.O_EXCL | os.O_CLOEXEC


class DiskQueueError(StoreError):
    """An operation on the disk queue failed (I/O error, bad argument, closed queue)."""


class MessageSizeError(DiskQueueError, ValueError):
    """``put()`` got a payload whose length is outside ``[min_msg_size, max_msg_size]``."""


class QueueClosedError(DiskQueueError):
    """The queue was closed or deleted."""


class _Corrupt(Exception):  # the read file cannot be trusted from the read position on
    pass


def _none_lost(n: int, reason: str) -> None:
    pass  # no owner to tell (a queue built without one, or closed)


@dataclass(slots=True)
class _SyncJob:
    fds: list[int]  # private fds: fsynced then closed by whoever runs the job
    meta: str
    seq: int


class DiskQueue:
    """One queue's files in ``data_path``; channel queues are named ``topic:channel``.

    ``read()`` returns None only when the reader has caught up with the writer; ``depth()``
    can be off (even negative) after a crash until then, as in go-diskqueue.
    """

    def __init__(
        self,
        name: str,
        data_path: str | os.PathLike[str],
        max_bytes_per_file: int,
        min_msg_size: int,
        max_msg_size: int,
        sync_every: int,
        sync_timeout: float,
        logger: logging.Logger | None = None,
        commit: GroupCommit | None = None,
        on_lost: Callable[[int, str], None] = _none_lost,
    ) -> None:
        self.name = name
        self._dir = os.fspath(data_path)
        self._max_bytes_per_file = max_bytes_per_file
        self._min_msg_size = min_msg_size
        self._max_msg_size = max_msg_size
        self._sync_every = sync_every
        self._sync_timeout = sync_timeout
        self._log = logger or logging.getLogger(__name__)
        self._meta_path = os.path.join(self._dir, f"{name}.diskqueue.meta.dat")
        self._lock = threading.Lock()
        self._meta_lock = threading.Lock()  # orders metadata renames of concurrent syncs
        self._depth = 0
        self._read_file_num = self._read_pos = 0
        self._write_file_num = self._write_pos = 0
        self._reader: IO[bytes] | None = None
        self._read_end: int | None = None  # size of the read file once the writer has left it
        self._write_fd: int | None = None
        self._unsynced_fds: list[int] = []  # write files rolled away from, fsynced by sync()
        self._count = 0  # reads + writes since the last sync, as go-diskqueue counts them
        self._last_sync = time.monotonic()
        self._dirty = False  # a state change that should be persisted soon (roll, skip, ...)
        self._meta_seq = self._meta_written = 0
        self._closed = False
        self._commit = commit or GroupCommit()  # never held: each put written at once
        self._on_lost = on_lost  # (records, reason): buffered records a failed write dropped
        # records buffered for the held commit, all in the write file, after _write_pos
        # minus _pending_bytes (the positions and depth count them already)
        self._pending: list[bytes] = []
        self._pending_bytes = 0
        self._pending_count = 0  # the records in them (a framed run holds many)
        self._record_guess = 256  # the last record read's framed size: a run's read size
        self._position_due = False  # --sync-every=1: a read's position waits for its pass
        self._recover()

    def put(self, data: bytes) -> None:
        size = len(data)
        if not self._min_msg_size <= size <= self._max_msg_size:
            raise MessageSizeError(
                f"invalid message write size ({size}) minMsgSize={self._min_msg_size} "
                f"maxMsgSize={self._max_msg_size}"
            )
        with self._lock:
            self._append(HEADER.pack(size) + data, 1)

    def put_framed(self, blob: bytes, count: int) -> None:
        """`count` records framed as the files hold them ([4-byte size][data] each, every
        size within the queue's limits: the caller's to check), appended as one: the
        messages of one publish with one copy each, not one put() per message."""
        with self._lock:
            if count > 1 and self._write_pos + len(blob) > self._max_bytes_per_file:
                # the run crosses a file's end: record by record, each rolling as put()'s
                for p, q in _spans(blob):
                    self._append(blob[p:q], 1)
            else:
                self._append(blob, count)

    def _append(self, record: bytes, count: int) -> None:
        """Append framed records (the lock held): written now, or buffered for the held
        commit's write."""
        total = len(record)
        commit = self._commit
        self._check_open()
        # Roll before writing so a file only exceeds the limit when one record alone does.
        if self._write_pos > 0 and self._write_pos + total > self._max_bytes_per_file:
            self._flush()  # what is buffered belongs to the file being left
            self._roll_write_file()
        try:
            fd = self._write_fd if self._write_fd is not None else self._open_write_file()
            if commit.depth and not commit.through:
                if not self._pending:
                    commit.enlist(self)
                self._pending.append(record)
                self._pending_bytes += total
                self._pending_count += count
                commit.appended += count
            else:
                _write_all(fd, record)
        except OSError as exc:
            self._undo_partial_write()
            raise DiskQueueError(f"DISKQUEUE({self.name}) write failed: {exc}") from exc
        self._write_pos += total
        self._depth += count
        self._count += count

    def flush(self) -> None:
        """Write the buffered records (one write); on failure they are dropped, the file
        truncated to its last whole record, and the commit and on_lost told."""
        with self._lock:
            self._flush()

    def _flush(self) -> None:
        pending = self._pending
        if not pending:
            return
        n, nbytes = self._pending_count, self._pending_bytes
        data = pending[0] if len(pending) == 1 else b"".join(pending)
        self._pending = []
        self._pending_bytes = self._pending_count = 0
        try:
            if self._write_fd is None:  # closed since: the records have no file any more
                raise OSError("write file closed")
            _write_all(self._write_fd, data)
        except OSError as exc:
            self._write_pos -= nbytes
            self._depth -= n
            self._undo_partial_write()
            reason = f"DISKQUEUE({self.name}) write failed: {exc}"
            self._logf(logging.ERROR, "write of %d records failed - %s", n, exc)
            self._commit.failed(reason)
            self._on_lost(n, reason)
            raise DiskQueueError(reason) from exc

    def read(self) -> bytes | None:
        """Next record, or None when the reader has caught up with the writer."""
        with self._lock:
            self._check_open()
            data = self._read()
            if data is not None and self._sync_every <= 1:
                self._position_read()
            return data

    def read_many(self, n: int, max_bytes: int) -> list[bytes]:
        """Up to n records, and no more once they hold `max_bytes` (at least one); fewer
        only then or when the reader has caught up with the writer."""
        return [b[p + 4 : q] for b in self.read_framed(n, max_bytes) for p, q in _spans(b)]

    def read_framed(self, n: int, max_bytes: int) -> list[bytes]:
        """read_many's records as the files hold them: blobs of whole framed records
        ([4-byte size][data] each, sizes checked), read a run at a time rather than a
        record at a time; the caller cuts out what it needs (storage/overflow.py)."""
        out: list[bytes] = []
        k, left = 0, max_bytes
        with self._lock:
            self._check_open()
            while k < n and left > 0:
                got, nbytes = self._read_run(out, n - k, left)
                k += got
                left -= nbytes
                if k >= n or left <= 0 or (data := self._read()) is None:
                    break
                # read() took the file's end, a damaged record, the tail
                out.append(HEADER.pack(len(data)) + data)
                k += 1
                left -= len(data)
            if k and self._sync_every <= 1:
                self._position_read()
        return out

    def _read_run(self, out: list[bytes], n: int, max_bytes: int) -> tuple[int, int]:
        """The whole, valid records of the open read file from the read position on, up to
        n, appended to `out` as framed blobs read a chunk at a time; it stops before
        anything read() must judge (the file's end, a damaged record, a record longer than
        a chunk), leaving the file at the read position, or once the records hold
        `max_bytes`. Returns how many records it read and their bytes."""
        self._settle_reader()
        reader = self._reader
        if reader is None:
            return 0, 0
        limit = self._write_pos if self._read_end is None else self._read_end
        pos = self._read_pos
        lo, hi = self._min_msg_size, self._max_msg_size
        unpack = HEADER.unpack_from
        k, left = 0, max_bytes
        while k < n and left > 0 and pos < limit:
            # what the records still wanted need, going by the last one's size: a consumer
            # with little credit must not read a whole chunk per message
            want = min(limit - pos, _RUN_CHUNK, (n - k) * self._record_guess + 4)
            buf = reader.read(want)
            end, p, size, last = len(buf), 0, 0, 0
            while k < n and left > 0 and p + 4 <= end:
                size = unpack(buf, p)[0]
                q = p + 4 + size
                if not lo <= size <= hi or q > end:
                    break
                last = size
                p = q
                k += 1
                left -= size
            reached = pos + end  # where this chunk's read ended
            if p:
                out.append(buf if p == end else buf[:p])
                pos += p
                self._record_guess = last + 4
            if p < end:
                reader.seek(pos)  # back to the first record not taken
                # a record cut by the chunk's end is read by the next chunk; one longer than
                # a chunk, a bad size or the data's end (torn) is read()'s to judge
                cut = lo <= size <= hi and reached < limit
                if not cut:
                    break
            if p == 0:
                break
        if pos == self._read_pos:
            return 0, 0
        self._read_pos = pos
        self._depth -= k
        self._count += k
        if self._read_end is not None and pos >= self._read_end:
            self._finish_read_file()
        if (self._read_file_num, self._read_pos) >= (self._write_file_num, self._write_pos):
            self._check_tail()
        return k, max_bytes - left

    def _read(self) -> bytes | None:
        """The next record (the lock held), judging file ends and damage."""
        while True:
            self._settle_reader()
            if (self._read_file_num, self._read_pos) >= (self._write_file_num, self._write_pos):
                return None
            try:
                data = self._read_one()
            except (OSError, _Corrupt) as exc:
                self._handle_read_error(exc)
                continue
            if data is None:
                self._finish_read_file()
                continue
            self._depth -= 1
            self._count += 1
            if self._read_end is not None and self._read_pos >= self._read_end:
                self._finish_read_file()  # delete the file as soon as its last record is out
            self._check_tail()
            return data

    def peek(self, n: int) -> list[bytes]:
        """Up to n records from the read position on, leaving every position and file as it
        is (a separate read; stops quietly at a damaged record, which read() will handle)."""
        return self.peek_at(n, None)[0]

    def peek_at(self, n: int, at: tuple[int, int] | None) -> tuple[list[bytes], tuple[int, int]]:
        """peek() from `at` (what an earlier peek_at returned; None: the read position), and
        the position after what it gave: a long peek in parts. A position that reads have
        passed since counts as the read position (those records are not queued any more)."""
        out: list[bytes] = []
        with self._lock:
            self._check_open()
            self._flush_quietly()
            read = (self._read_file_num, self._read_pos)
            num, pos = read if at is None or at < read else at
            end_num, end_pos = self._write_file_num, self._write_pos
            while len(out) < n and (num, pos) < (end_num, end_pos):
                try:
                    with open(self._file_name(num), "rb") as f:
                        f.seek(pos)
                        limit = end_pos if num == end_num else os.fstat(f.fileno()).st_size
                        while len(out) < n and pos < limit:
                            head = f.read(4)
                            size = HEADER.unpack(head)[0] if len(head) == 4 else -1
                            if not self._min_msg_size <= size <= self._max_msg_size:
                                return out, (end_num, end_pos)
                            data = f.read(size)
                            if len(data) < size:
                                return out, (end_num, end_pos)
                            out.append(data)
                            pos += 4 + size
                except OSError:
                    return out, (end_num, end_pos)
                if pos < limit:  # n reached inside this file
                    break
                num, pos = num + 1, 0
        return out, (num, pos)

    def depth(self) -> int:
        return self._depth

    def needs_sync(self) -> bool:
        if self._closed:
            return False
        if self._dirty or self._unsynced_fds or self._count >= self._sync_every:
            return True
        return self._count > 0 and time.monotonic() - self._last_sync >= self._sync_timeout

    def sync(self) -> None:
        """fsync written data and persist metadata; safe to run in a thread beside put/read."""
        with self._lock:
            if self._closed:
                return
            job = self._snapshot()
        self._run_sync(job)

    def close(self) -> None:
        with self._lock:
            if self._closed:
                return
            self._logf(logging.INFO, "closing")
            self._flush_quietly()
            job = self._snapshot()
            self._closed = True
            self._close_files()
            self._let_owner_go()
        self._run_sync(job)

    def empty(self) -> None:
        """Drop every record: delete the data files and the metadata, start a new file."""
        with self._lock:
            self._check_open()
            self._logf(logging.INFO, "emptying")
            self._drop_pending()  # written and emptied at once, as far as anyone can tell
            self._skip_to_next_rw_file()
            with self._meta_lock:
                self._meta_written = self._meta_seq  # a sync already under way must not win
                _remove(self._meta_path, self._log)
            self._count = 0
            self._dirty = True  # write the new positions soon: no metadata means start at 0

    def delete(self) -> None:
        """Close without persisting and remove the data files and the metadata."""
        with self._lock:
            self._logf(logging.INFO, "deleting")
            self._drop_pending()
            self._closed = True
            self._skip_to_next_rw_file()  # closes and removes the data files
            for fd in self._unsynced_fds:
                os.close(fd)
            self._unsynced_fds.clear()
            with self._meta_lock:
                self._meta_written = 1 << 62  # later snapshots of a running sync are dropped
                _remove(self._meta_path, self._log)
            self._let_owner_go()

    def _let_owner_go(self) -> None:
        """A closed queue writes nothing, so loses nothing: forget `on_lost`. Its owner's bound
        method (storage/overflow.py's) is a reference cycle that refcounting cannot free: every
        deleted topic or channel's queue stayed in memory until a full collection, which the
        daemon's thresholds (cli.py) make rare."""
        self._on_lost = _none_lost

    def _settle_reader(self) -> None:
        """Buffered records are written before the reader, in their file, may reach them
        (or a damaged record there moves the write file on)."""
        if self._pending and self._read_file_num == self._write_file_num:
            self._flush_quietly()

    def _flush_quietly(self) -> None:
        try:
            self._flush()
        except DiskQueueError:
            pass  # told to the commit, whose holder refuses the publishers

    def _drop_pending(self) -> None:
        self._write_pos -= self._pending_bytes
        self._depth -= self._pending_count
        self._pending = []
        self._pending_bytes = self._pending_count = 0

    def _open_write_file(self) -> int:
        while True:
            path = self._file_name(self._write_file_num)
            fd = os.open(path, _DATA_FLAGS, 0o600)
            size = os.fstat(fd).st_size
            if size == self._write_pos:
                self._write_fd = fd
                return fd
            # O_APPEND writes at the real end: appending after unknown bytes would corrupt
            # the positions, so leave the file to the reader and start the next one.
            os.close(fd)
            msg = "%s size %d != writePos %d, skipping to new file"
            self._logf(logging.WARNING, msg, path, size, self._write_pos)
            self._roll_write_file(size)

    def _roll_write_file(self, size: int | None = None) -> None:
        if self._read_file_num == self._write_file_num:  # the reader now knows where it ends
            self._read_end = self._write_pos if size is None else size
        if self._write_fd is not None:
            self._unsynced_fds.append(self._write_fd)
            self._write_fd = None
        self._write_file_num += 1
        self._write_pos = 0
        self._dirty = True

    def _undo_partial_write(self) -> None:
        try:
            if self._write_fd is not None:
                os.ftruncate(self._write_fd, self._write_pos)  # drop a torn record, if any
        except OSError:
            self._roll_write_file()  # cannot repair: never write after the torn bytes

    def _read_one(self) -> bytes | None:
        """One record at the read position, or None at the clean end of a finished file."""
        reader = self._reader or self._open_reader()
        if self._read_end is not None and self._read_pos >= self._read_end:
            if self._read_pos > self._read_end:
                raise _Corrupt(f"read position beyond the end of the file ({self._read_end})")
            return None
        header = reader.read(4)
        if len(header) < 4:
            raise _Corrupt("unexpected end of file")
        (size,) = HEADER.unpack(header)
        if not self._min_msg_size <= size <= self._max_msg_size:
            raise _Corrupt(f"invalid message read size ({size})")
        data = reader.read(size)
        if len(data) < size:
            raise _Corrupt("unexpected end of file")
        end = self._read_pos + 4 + size
        limit = self._write_pos if self._read_end is None else self._read_end
        if end > limit:  # misaligned position: the "length" was read from inside a record
            raise _Corrupt(f"record ends at {end}, past the end of the data at {limit}")
        self._read_pos = end
        return data

    def _open_reader(self) -> IO[bytes]:
        path = self._file_name(self._read_file_num)
        reader = open(path, "rb", buffering=READ_BUFFER)  # noqa: SIM115 (kept open)
        if self._read_pos:
            reader.seek(self._read_pos)
        if self._read_end is None and self._read_file_num < self._write_file_num:
            self._read_end = os.fstat(reader.fileno()).st_size  # the writer is done with it
        self._logf(logging.DEBUG, "opened %s for reading", path)
        self._reader = reader
        return reader

    def _close_reader(self) -> None:
        if self._reader is not None:
            self._reader.close()
            self._reader = None
        self._read_end = None

    def _finish_read_file(self) -> None:
        _remove(self._file_name(self._read_file_num), self._log)
        self._next_read_file()

    def _next_read_file(self) -> None:
        self._close_reader()
        self._read_file_num += 1
        self._read_pos = 0
        self._dirty = True

    def _handle_read_error(self, exc: BaseException) -> None:
        path = self._file_name(self._read_file_num)
        self._logf(logging.ERROR, "reading at %d of %s - %s", self._read_pos, path, exc)
        if self._read_file_num == self._write_file_num:
            # The file being written is unreadable: do not add to it either.
            self._close_write_fd()
            self._write_file_num += 1
            self._write_pos = 0
        self._logf(logging.WARNING, "jump to next file and saving bad file as %s.bad", path)
        try:
            os.replace(path, path + ".bad")
        except OSError as err:
            self._logf(logging.ERROR, "failed to rename %s to .bad - %s", path, err)
        self._next_read_file()
        self._check_tail()

    def _check_tail(self) -> None:
        """Once the reader reaches the writer, depth must be 0 and the positions equal."""
        read_at = (self._read_file_num, self._read_pos)
        write_at = (self._write_file_num, self._write_pos)
        if read_at < write_at:
            return
        if self._depth != 0:
            kind = "negative" if self._depth < 0 else "positive"
            self._logf(logging.ERROR, "%s depth at tail (%d), resetting 0", kind, self._depth)
            self._depth = 0
            self._dirty = True
        if read_at != write_at:
            msg = "read position %s past write position %s, corruption, skipping to next file"
            self._logf(logging.ERROR, msg, read_at, write_at)
            self._skip_to_next_rw_file()
            self._dirty = True

    def _skip_to_next_rw_file(self) -> None:
        self._close_files()
        for num in range(self._read_file_num, self._write_file_num + 1):
            _remove(self._file_name(num), self._log)
        self._write_file_num += 1
        self._write_pos = 0
        self._read_file_num = self._write_file_num
        self._read_pos = 0
        self._depth = 0

    def _position_read(self) -> None:
        """--sync-every=1, a read in a held pass: the metadata is written once the pass's
        write is on file and before what was read leaves (a callback after the release, ahead
        of the deliveries'), as go-diskqueue syncs right after each read; in the syncer's
        thread it came after them, and a kill -9 right after their FINs handed them all out
        again. Not sooner: what was read may be on its way into another file of the pass (a
        channel's queue, a journal's delivered batch), and a kill -9 before that write would
        find it in none. Outside a hold (every read the engine makes is held: a pass, a
        refill, an HTTP take, REQ or unpause, the scanner's hand-out, the topic's pump,
        docs/durability.md) the syncer writes it, as before."""
        if self._position_due or not self._commit.depth:
            return
        self._position_due = True
        self._commit.later(self._position_written)

    def _position_written(self, error: str | None) -> None:
        self._position_due = False
        if error is not None:
            return  # the pass's write failed: the syncer's, as before
        with self._lock:
            if not self._closed:
                self._write_read_position()

    def _write_read_position(self) -> None:
        """The metadata written now (the lock held), into the page cache only, which a kill
        -9 keeps: the count is left standing, so the syncer still fsyncs it soon. A failure
        is left to that sync to report."""
        self._meta_seq += 1
        try:
            self._persist_meta(_SyncJob([], self._meta_now(), self._meta_seq), fsync=False)
        except OSError:
            self._dirty = True

    def _snapshot(self) -> _SyncJob:
        fds = self._unsynced_fds
        self._unsynced_fds = []
        if self._write_fd is not None:
            fds.append(os.dup(self._write_fd))  # our own fd: put() may close or roll the other
        self._meta_seq += 1
        self._count = 0
        self._dirty = False
        self._last_sync = time.monotonic()
        return _SyncJob(fds, self._meta_now(), self._meta_seq)

    def _meta_now(self) -> str:
        """The metadata of the queue as it stands (the lock held); buffered records are not in
        the file yet, so it does not claim them."""
        return meta_text(
            self._depth - self._pending_count,
            (self._read_file_num, self._read_pos),
            (self._write_file_num, self._write_pos - self._pending_bytes),
        )

    def _run_sync(self, job: _SyncJob) -> None:
        error: OSError | None = None
        for fd in job.fds:
            try:
                os.fsync(fd)
            except OSError as exc:
                error = error or exc
            finally:
                os.close(fd)
        if error is None:
            try:
                self._persist_meta(job)
            except OSError as exc:
                error = exc
        if error is not None:
            with self._lock:
                self._dirty = True  # try again on the next sync
            raise DiskQueueError(f"DISKQUEUE({self.name}) failed to sync - {error}") from error

    def _persist_meta(self, job: _SyncJob, *, fsync: bool = True) -> None:
        with self._meta_lock:
            if job.seq <= self._meta_written:
                return  # a newer state is already on disk (or the queue was emptied/deleted)
            tmp = f"{self._meta_path}.{random.getrandbits(63)}.tmp"
            fd = os.open(tmp, _META_FLAGS, 0o600)
            try:
                try:
                    _write_all(fd, job.meta.encode())
                    if fsync:
                        os.fsync(fd)
                finally:
                    os.close(fd)
                os.replace(tmp, self._meta_path)
            except OSError:
                _remove(tmp, self._log)
                raise
            self._meta_written = job.seq

    def _recover(self) -> None:
        found = recover(
            self._meta_path,
            self._dir,
            self.name,
            self._file_name,
            (self._min_msg_size, self._max_msg_size),
            self._logf,
        )
        self._depth = found.depth
        self._read_file_num, self._read_pos = found.read_file_num, found.read_pos
        self._write_file_num, self._write_pos = found.write_file_num, found.write_pos
        self._dirty = self._dirty or found.moved
        self._check_tail()

    def _logf(self, level: int, msg: str, *args: object) -> None:
        self._log.log(level, "DISKQUEUE(%s) " + msg, self.name, *args)

    def name_path(self, suffix: str) -> str:
        """A file of ours beside the queue's: `<name>.diskqueue.<suffix>`."""
        return os.path.join(self._dir, f"{self.name}.diskqueue.{suffix}")

    def _file_name(self, num: int) -> str:
        return os.path.join(self._dir, f"{self.name}.diskqueue.{num:06d}.dat")

    def _check_open(self) -> None:
        if self._closed:
            raise QueueClosedError(f"DISKQUEUE({self.name}) exiting")

    def _close_write_fd(self) -> None:
        if self._write_fd is not None:
            os.close(self._write_fd)
            self._write_fd = None

    def _close_files(self) -> None:
        self._close_reader()
        self._close_write_fd()


def _spans(blob: bytes) -> list[tuple[int, int]]:
    """Where each record of a blob of whole framed records starts and ends (its frame)."""
    spans, p, end = [], 0, len(blob)
    while p < end:
        q = p + 4 + HEADER.unpack_from(blob, p)[0]
        spans.append((p, q))
        p = q
    return spans


def _write_all(fd: int, buf: bytes) -> None:
    view = memoryview(buf)
    while view:  # one write() unless the disk is nearly full: then finish the record
        view = view[os.write(fd, view) :]


def _remove(path: str, log: logging.Logger) -> None:
    try:
        os.remove(path)
    except FileNotFoundError:
        pass
    except OSError as exc:
        log.error("failed to remove %s - %s", path, exc)
