"""A disk queue's durability: the data files fsynced and the metadata file (depth, read and write
positions, go-diskqueue's text) replaced whole, by `sync()`, which the daemon runs in a worker
thread when `needs_sync()` says so (--sync-every records or --sync-timeout); it holds the
queue's lock only for a snapshot. At --sync-every=1 a read's position is also written at once
after the held pass that read it (`_position_read`), as go-diskqueue syncs right after each read.

A base of storage/diskqueue.py's DiskQueue (its own methods: no extra call level)."""

from __future__ import annotations

import os
import random
import time
from dataclasses import dataclass
from typing import Final

from .diskqueue_files import meta_text, remove, write_all
from .diskqueue_state import DiskQueueError, QueueState

_META_FLAGS: Final = os.O_WRONLY | os.O_CREAT | os.O_EXCL | os.O_CLOEXEC


@dataclass(slots=True)
class SyncJob:
    fds: list[int]  # private fds: fsynced then closed by whoever runs the job
    meta: str
    seq: int


class QueueSync(QueueState):
    """When the queue syncs, and the metadata file's writes, ordered by their snapshot."""

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
            self._persist_meta(SyncJob([], self._meta_now(), self._meta_seq), fsync=False)
        except OSError:
            self._dirty = True

    def _snapshot(self) -> SyncJob:
        fds = self._unsynced_fds
        self._unsynced_fds = []
        if self._write_fd is not None:
            fds.append(os.dup(self._write_fd))  # our own fd: put() may close or roll the other
        self._meta_seq += 1
        self._count = 0
        self._dirty = False
        self._last_sync = time.monotonic()
        return SyncJob(fds, self._meta_now(), self._meta_seq)

    def _meta_now(self) -> str:
        """The metadata of the queue as it stands (the lock held); buffered records are not in
        the file yet, so it does not claim them."""
        return meta_text(
            self._depth - self._pending_count,
            (self._read_file_num, self._read_pos),
            (self._write_file_num, self._write_pos - self._pending_bytes),
        )

    def _run_sync(self, job: SyncJob) -> None:
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

    def _persist_meta(self, job: SyncJob, *, fsync: bool = True) -> None:
        with self._meta_lock:
            if job.seq <= self._meta_written:
                return  # a newer state is already on disk (or the queue was emptied/deleted)
            tmp = f"{self._meta_path}.{random.getrandbits(63)}.tmp"
            fd = os.open(tmp, _META_FLAGS, 0o600)
            try:
                try:
                    write_all(fd, job.meta.encode())
                    if fsync:
                        os.fsync(fd)
                finally:
                    os.close(fd)
                os.replace(tmp, self._meta_path)
            except OSError:
                remove(tmp, self._log)
                raise
            self._meta_written = job.seq

    def _forget_meta(self, seq: int) -> None:
        """No metadata file: a sync already under way whose snapshot is older than `seq` must
        not write one back (the queue was emptied or deleted)."""
        with self._meta_lock:
            self._meta_written = seq
            remove(self._meta_path, self._log)
