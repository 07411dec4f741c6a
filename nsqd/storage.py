"""Everything on disk under --data-path: the directory lock, one disk queue per non-ephemeral
topic and channel, nsqd.dat, and the two tasks that keep them durable (fsync of the queues
every --sync-every ops or --sync-timeout, metadata rewrites after topic/channel changes)."""

from __future__ import annotations

import fcntl
import os
from typing import TYPE_CHECKING

import trio

from . import metadata
from .backlog import DropOverflow, Overflow
from .diskbacklog import DiskOverflow
from .diskqueue import DiskQueueError
from .log import log

if TYPE_CHECKING:
    from .daemon import NSQD

SYNC_CHECK_INTERVAL = 0.1


class Storage:
    def __init__(self, daemon: NSQD) -> None:
        self.daemon = daemon
        opts = daemon.options
        self.data_path = os.path.abspath(opts.data_path or os.getcwd())
        self._queues: dict[int, DiskOverflow] = {}
        self._lock_fd: int | None = None
        self._metadata_dirty = False
        self._metadata_wakeup: trio.Event | None = None
        self.last_error: str | None = None  # the most recent disk write failure, for /ping
        self.loading = False  # recreating nsqd.dat's topics: no lookupd queries, no rewrites
        self._sync_wakeup = trio.Event()

    # -- lifecycle -------------------------------------------------------------------------

    def lock(self) -> None:
        fd = os.open(self.data_path, os.O_RDONLY)
        try:
            fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
        except OSError as exc:
            os.close(fd)
            raise OSError(
                exc.errno,
                f"failed to lock data-path: cannot flock directory {self.data_path} - "
                f"{os.strerror(exc.errno or 0).lower()} (possibly in use by another instance "
                "of nsqd)",
            ) from exc
        self._lock_fd = fd

    def load(self) -> None:
        """Recreate the topics and channels of nsqd.dat; their disk queues reopen themselves."""
        self.loading = True
        try:
            for rec in metadata.load(self.data_path):
                topic = self.daemon.get_topic(rec.name)
                if rec.paused:
                    topic.pause()
                for name, paused in rec.channels:
                    channel = topic.get_channel(name)
                    if paused:
                        channel.pause()
        finally:
            self.loading = False
        self.persist_now()

    def close(self) -> None:
        """Clean shutdown: nsqd.dat, then every queue flushed and closed, then the lock."""
        self.persist_now()
        for topic in list(self.daemon.topics.values()):
            try:
                topic.close()
            except DiskQueueError as exc:
                log.error("TOPIC(%s): failed to flush to disk - %s", topic.name, exc)
        if self._lock_fd is not None:
            os.close(self._lock_fd)
            self._lock_fd = None

    # -- queues ----------------------------------------------------------------------------

    def new_overflow(self, name: str, ephemeral: bool) -> Overflow:
        if ephemeral:
            return DropOverflow()
        opts = self.daemon.options
        queue = DiskOverflow(
            name,
            self.data_path,
            opts.max_bytes_per_file,
            opts.max_msg_size,
            opts.sync_every,
            opts.sync_timeout,
            self,
            self.sync_wanted,
        )
        self._queues[id(queue)] = queue
        return queue

    def sync_wanted(self) -> None:
        self._sync_wakeup.set()

    async def syncer(self) -> None:
        """fsync queues that reached --sync-every ops (woken at once) or --sync-timeout
        (checked every 100 ms), in a worker thread so the event loop never waits on the disk."""
        while True:
            with trio.move_on_after(SYNC_CHECK_INTERVAL):
                await self._sync_wakeup.wait()
            self._sync_wakeup = trio.Event()
            for key, overflow in list(self._queues.items()):
                if overflow.closed:
                    del self._queues[key]
                    continue
                if overflow.queue.needs_sync():
                    try:
                        await trio.to_thread.run_sync(overflow.queue.sync)
                    except DiskQueueError as exc:
                        self.last_error = str(exc)
                        log.error("%s", exc)

    # -- nsqd.dat --------------------------------------------------------------------------

    def metadata_changed(self) -> None:
        self._metadata_dirty = True
        if self._metadata_wakeup is not None:
            self._metadata_wakeup.set()

    def persist_now(self) -> None:
        self._metadata_dirty = False
        metadata.write(self.data_path, metadata.snapshot(self.daemon, "1.3.0"))

    async def metadata_writer(self) -> None:
        while True:
            self._metadata_wakeup = trio.Event()
            if not self._metadata_dirty:
                await self._metadata_wakeup.wait()
            self._metadata_dirty = False
            data = metadata.snapshot(self.daemon, "1.3.0")
            try:
                await trio.to_thread.run_sync(metadata.write, self.data_path, data)
            except OSError as exc:
                log.error("failed to persist metadata - %s", exc)
