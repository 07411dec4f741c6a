"""What a disk queue's parts share: its state (depth, read and write positions, open files,
records buffered for a held commit, what the syncer counts), set from what the files say when it
opens, the check that holds once the reader reaches the writer, and its errors.

The base of storage/diskqueue.py's DiskQueue and of its reader (diskqueue_reader.py), writer
(diskqueue_writer.py) and syncer (diskqueue_sync.py): they are one object, so the per-message
paths pay no extra call level."""

from __future__ import annotations

import logging
import os
import threading
import time
from collections.abc import Callable
from typing import IO, TYPE_CHECKING

from ..engine.ports import StoreError
from .commit import GroupCommit
from .diskqueue_files import data_file, meta_file, recover, remove


class DiskQueueError(StoreError):
    """An operation on the disk queue failed (I/O error, bad argument, closed queue)."""


class MessageSizeError(DiskQueueError, ValueError):
    """``put()`` got a payload whose length is outside ``[min_msg_size, max_msg_size]``."""


class QueueClosedError(DiskQueueError):
    """The queue was closed or deleted."""


LOGGER = "nsqd.storage.diskqueue"  # the queue's, whichever of its parts logs


def none_lost(n: int, reason: str) -> None:
    pass  # no owner to tell (a queue built without one, or closed)


class QueueState:
    """One queue's files in ``data_path`` and where it stands in them."""

    if TYPE_CHECKING:  # the parts' methods that the others call

        def _flush_quietly(self) -> None: ...  # diskqueue_writer.py
        def _position_read(self) -> None: ...  # diskqueue_sync.py

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
        on_lost: Callable[[int, str], None] = none_lost,
    ) -> None:
        self.name = name
        self._dir = os.fspath(data_path)
        self._max_bytes_per_file = max_bytes_per_file
        self._min_msg_size = min_msg_size
        self._max_msg_size = max_msg_size
        self._sync_every = sync_every
        self._sync_timeout = sync_timeout
        self._log = logger or logging.getLogger(LOGGER)
        self._meta_path = meta_file(self._dir, name)
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

    def depth(self) -> int:
        return self._depth

    def name_path(self, suffix: str) -> str:
        """A file of ours beside the queue's: `<name>.diskqueue.<suffix>`."""
        return os.path.join(self._dir, f"{self.name}.diskqueue.{suffix}")

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
            remove(self._file_name(num), self._log)
        self._write_file_num += 1
        self._write_pos = 0
        self._read_file_num = self._write_file_num
        self._read_pos = 0
        self._depth = 0

    def _logf(self, level: int, msg: str, *args: object) -> None:
        self._log.log(level, "DISKQUEUE(%s) " + msg, self.name, *args)

    def _file_name(self, num: int) -> str:
        return data_file(self._dir, self.name, num)

    def _check_open(self) -> None:
        if self._closed:
            raise QueueClosedError(f"DISKQUEUE({self.name}) exiting")

    def _close_reader(self) -> None:
        if self._reader is not None:
            self._reader.close()
            self._reader = None
        self._read_end = None

    def _close_write_fd(self) -> None:
        if self._write_fd is not None:
            os.close(self._write_fd)
            self._write_fd = None

    def _close_files(self) -> None:
        self._close_reader()
        self._close_write_fd()
