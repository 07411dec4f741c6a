"""A disk queue's writer: records appended to the write file (`put`, `put_framed`), each one
``write()`` into the page cache (it survives ``kill -9`` once it returns), or, while a
``GroupCommit`` is held, buffered until its release writes all of them with one ``write()``
(`flush`, storage/commit.py). The write file rolls before a record would take it past
--max-bytes-per-file; a write file whose size differs from the positions is never appended to;
a failed write is truncated back to the last whole record.

A base of storage/diskqueue.py's DiskQueue (its own methods: no extra call level)."""

from __future__ import annotations

import logging
import os
from typing import Final

from .diskqueue_files import HEADER, spans, write_all
from .diskqueue_state import DiskQueueError, MessageSizeError, QueueState

_DATA_FLAGS: Final = os.O_WRONLY | os.O_APPEND | os.O_CREAT | os.O_CLOEXEC


class QueueWriter(QueueState):
    """The write file, its position and the records buffered for a held commit."""

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
                for p, q in spans(blob):
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
                write_all(fd, record)
        except OSError as exc:
            self._undo_partial_write()
            raise DiskQueueError(f"DISKQUEUE({self.name}) write failed: {exc}") from exc
        self._write_pos += total
        self._depth += count
        self._count += count

    def write_end(self) -> tuple[str, int, int]:
        """Where the last record ends, buffered ones included: (name, file number, position)."""
        return self.name, self._write_file_num, self._write_pos

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
            write_all(self._write_fd, data)
        except OSError as exc:
            self._write_pos -= nbytes
            self._depth -= n
            self._undo_partial_write()
            reason = f"DISKQUEUE({self.name}) write failed: {exc}"
            self._logf(logging.ERROR, "write of %d records failed - %s", n, exc)
            self._commit.failed(reason)
            self._on_lost(n, reason)
            raise DiskQueueError(reason) from exc

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
