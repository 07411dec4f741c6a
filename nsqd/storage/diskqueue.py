"""File-backed FIFO queue, byte-compatible with go-diskqueue v1.1.0 (what nsqd v1.3.0 uses).

Synchronous: an append is one ``write()`` into the page cache (microseconds; it survives
``kill -9`` once it returns), or, while a ``GroupCommit`` is held, a record buffered until its
release writes all of them with one ``write()`` (storage/commit.py). Only ``sync()`` and
``close()`` fsync: the daemon polls ``needs_sync()`` and runs ``sync()`` in a worker thread,
so the methods share a lock that ``sync()`` holds only for a snapshot. Beyond go-diskqueue
(same files): a finished file read to its end is deleted, never flagged ``.bad``; a write file
whose size differs from the metadata is never appended to; records past a stale or missing
metadata write position are counted into the depth.

The queue is one object made of its parts, each a module: the state they share and what the
files say at open (diskqueue_state.py, diskqueue_files.py), the reader (diskqueue_reader.py),
the writer (diskqueue_writer.py) and the syncer with the metadata file (diskqueue_sync.py).
Here: the queue as its owners see it, and its end (close, empty, delete)."""

from __future__ import annotations

import logging
import os

from .diskqueue_reader import QueueReader
from .diskqueue_state import DiskQueueError, MessageSizeError, QueueClosedError, none_lost
from .diskqueue_sync import QueueSync
from .diskqueue_writer import QueueWriter

__all__ = ["DiskQueue", "DiskQueueError", "MessageSizeError", "QueueClosedError"]


class DiskQueue(QueueReader, QueueWriter, QueueSync):
    """One queue's files in ``data_path``; channel queues are named ``topic:channel``.

    ``read()`` returns None only when the reader has caught up with the writer; ``depth()``
    can be off (even negative) after a crash until then, as in go-diskqueue.
    """

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
            self._forget_meta(self._meta_seq)  # a sync already under way must not win
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
            self._forget_meta(1 << 62)  # later snapshots of a running sync are dropped
            self._let_owner_go()

    def _let_owner_go(self) -> None:
        """A closed queue writes nothing, so loses nothing: forget `on_lost`. Its owner's bound
        method (storage/overflow.py's) is a reference cycle that refcounting cannot free: every
        deleted topic or channel's queue stayed in memory until a full collection, which the
        daemon's thresholds (cli.py) make rare."""
        self._on_lost = none_lost
