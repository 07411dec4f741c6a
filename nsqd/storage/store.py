"""Everything on disk under --data-path: the directory lock, one disk queue per non-ephemeral
topic and channel, nsqd.dat, the record logs of the features that keep files (journals, dedupe
keys, resp.log), and the tasks that keep them durable: the one syncer (fsync of the queues and
record logs every --sync-every writes or --sync-timeout), the journals' release flusher, and
the metadata writer (nsqd.dat after topic/channel changes)."""

from __future__ import annotations

import os
import time
from typing import TYPE_CHECKING

import trio

from ..engine.ports import StoreError
from ..engine.queue import DropOverflow
from ..log import log
from ..version import VERSION
from . import attributes, dirlock, metadata
from .commit import GroupCommit
from .diskqueue import DiskQueueError
from .overflow import DiskOverflow

if TYPE_CHECKING:
    from ..config.options import Options
    from ..engine.broker import Broker
    from ..engine.channel import Channel
    from ..engine.ports import Overflow
    from ..engine.topic import Topic
    from .dedupe import KeyFile
    from .journal import ChannelJournal
    from .resp_log import RespLog

SYNC_CHECK_INTERVAL = 0.1


class Storage:
    def __init__(self, options: Options) -> None:
        self.options = options
        self._broker: Broker | None = None
        opts = options
        self.data_path = os.path.abspath(opts.data_path or os.getcwd())
        self._queues: dict[int, DiskOverflow] = {}
        self._lock_fd: int | None = None
        self._metadata_dirty = False
        self._metadata_wakeup: trio.Event | None = None
        self._sync_wakeup = trio.Event()
        self._journals: list[ChannelJournal] = []
        self._to_flush: list[ChannelJournal] = []
        self._flush_wakeup = trio.Event()
        self._has_attributes = False  # the attributes file exists
        self._key_file: KeyFile | None = None  # --dedupe-window
        self._logs: list[KeyFile | RespLog] = []  # record logs the syncer keeps (but journals)
        self.commit = GroupCommit()  # the disk queues' group commit (held by the reactors)

    def attach(self, broker: Broker) -> None:
        """The broker whose topics live here: nsqd.dat follows its changes (a Hooks listener)
        and disk failures set its health."""
        self._broker = broker
        broker.commit = self.commit
        broker.hooks.append(self)
        broker.attribute_listeners.append(self.attributes_changed)

    @property
    def broker(self) -> Broker:
        assert self._broker is not None, "Storage.attach(broker) first"
        return self._broker

    # -- lifecycle -------------------------------------------------------------------------

    def lock(self) -> None:
        self._lock_fd = dirlock.lock(self.data_path)

    def load(self) -> None:
        """Recreate the topics and channels of nsqd.dat; their disk queues reopen themselves."""
        broker = self.broker
        if broker.deduper is not None:
            self._open_key_file()  # its records checked against the queue files as found
        written_ns = metadata.written_ns(self.data_path)
        try:
            records = metadata.load(self.data_path)
        except metadata.MetadataError as exc:
            raise metadata.MetadataError(f"failed to load metadata - {exc}") from None
        with broker.restoring():
            for rec in records:
                topic = broker.topic(rec.name)
                if rec.paused:
                    topic.pause()
                for name, paused in rec.channels:
                    channel = topic.get_channel(name)
                    if paused:
                        channel.pause()
            if self.options.durable_inflight:
                self._adopt_journals(written_ns)
            doc = attributes.read(self.data_path)
            self._has_attributes = bool(doc["topics"])
            attributes.restore(self.broker, doc)
        if self._key_file is not None:  # (made above exactly when there is a deduper)
            assert broker.deduper is not None
            broker.deduper.attach(self._key_file)
        self.persist_now()

    def _open_key_file(self) -> None:
        """--dedupe-window: the keys' file, read before any disk queue opens (a key whose
        messages never reached their queue's file is forgotten: storage/dedupe.py)."""
        from .dedupe import KeyFile  # --dedupe-window only (start time, memory)

        opts = self.options
        self._key_file = KeyFile(
            self.data_path,
            opts.sync_every,
            opts.sync_timeout,
            self.sync_wanted,
            self.commit,
            self.broker,
        )
        self._logs.append(self._key_file)
        self._key_file.scan()

    def _adopt_journals(self, since_ns: int) -> None:
        """The channels of journals nsqd.dat does not list but which were written after it: a
        kill -9 came between the channel's making and nsqd.dat's write. Made again here, their
        messages are in /stats and nsqd.dat at once, not only when a consumer SUBs."""
        from .journal import written_after  # that flag only (start time, memory)

        broker = self.broker
        for topic_name, channel_name in written_after(self.data_path, since_ns):
            topic = broker.topics.get(topic_name)
            if topic is not None and channel_name in topic.channels:
                continue
            log.info(
                "JOURNAL(%s:%s): channel not in %s - made again",
                topic_name,
                channel_name,
                metadata.FILE_NAME,
            )
            broker.topic(topic_name).get_channel(channel_name)

    def close(self) -> None:
        """Clean shutdown: nsqd.dat, then every queue flushed and closed, then the lock."""
        try:
            self.persist_now()
        except OSError as exc:
            # as nsqd's Exit: logged, and the queues are still written; what memory holds
            # would otherwise be lost for a file that the next start can do without
            log.error("failed to persist metadata - %s", exc)
        self.commit.hold()  # what memory held goes to each queue file in one write
        try:
            self.broker.close()
        finally:
            self.commit.release()
        if self._key_file is not None:
            self._key_file.close()
        if self._lock_fd is not None:
            os.close(self._lock_fd)
            self._lock_fd = None

    # -- queues ----------------------------------------------------------------------------

    def new_overflow(self, name: str, ephemeral: bool) -> Overflow:
        if ephemeral:
            return DropOverflow()
        opts = self.options
        queue = DiskOverflow(
            name,
            self.data_path,
            opts.max_bytes_per_file,
            opts.max_msg_size,
            opts.sync_every,
            opts.sync_timeout,
            self.broker,
            self.sync_wanted,
            self.commit,
        )
        self._queues[id(queue)] = queue
        return queue

    def new_journal(self, name: str) -> ChannelJournal:
        """--durable-inflight: the journal of channel `name` ("topic:channel")."""
        from .journal import SUFFIX, ChannelJournal  # that flag only (start time, memory)

        opts = self.options
        journal = ChannelJournal(
            os.path.join(self.data_path, name + SUFFIX),
            opts.sync_every,
            opts.sync_timeout,
            self._journal_wants_flush,
            self.sync_wanted,
            self.commit,
            self.broker,
        )
        self._journals.append(journal)
        return journal

    def new_resp_log(self) -> RespLog:
        """--resp-address: the keyspace's log, resp.log (the front-end replays and flushes it;
        this storage's syncer fsyncs it)."""
        from .resp_log import RespLog  # that flag only (start time, memory)

        opts = self.options
        resp_log = RespLog(self.data_path, opts.sync_every, opts.sync_timeout, self.sync_wanted)
        self._logs.append(resp_log)
        return resp_log

    def _journal_wants_flush(self, journal: ChannelJournal) -> None:
        self._to_flush.append(journal)
        self._flush_wakeup.set()

    async def journal_flusher(self) -> None:
        """Write the releases (FIN runs) the journals gathered, once per scheduler pass: one
        write() per journal for everything its channel finished meanwhile."""
        while True:
            await self._flush_wakeup.wait()
            self._flush_wakeup = trio.Event()
            batch, self._to_flush = self._to_flush, []
            for journal in batch:
                try:
                    journal.flush()
                except StoreError:
                    pass  # logged and told to /ping by the journal; its FINs come back

    def sync_wanted(self) -> None:
        self._sync_wakeup.set()

    async def syncer(self) -> None:
        """The one syncer: fsync the queues and record logs that reached --sync-every writes
        (woken at once) or --sync-timeout (checked every 100 ms), in a worker thread so the
        event loop never waits on the disk."""
        while True:
            with trio.move_on_after(SYNC_CHECK_INTERVAL):
                await self._sync_wakeup.wait()
            self._sync_wakeup = trio.Event()
            self._journals = [j for j in self._journals if not j.closed]
            for journal in self._journals:
                if journal.needs_sync():
                    await trio.to_thread.run_sync(journal.sync)  # (its failure is its own)
            for record_log in self._logs:
                if record_log.needs_sync():
                    error = None
                    try:
                        await trio.to_thread.run_sync(record_log.sync)
                    except OSError as exc:
                        error = exc
                        self.broker.store_failed(str(exc))
                        log.error("%s: fsync failed - %s", record_log.path, exc)
                    record_log.synced(error)  # (resp.log: a failed fsync refuses writes)
            for key, overflow in list(self._queues.items()):
                if overflow.closed:
                    del self._queues[key]
                    continue
                if overflow.queue.needs_sync():
                    try:
                        await trio.to_thread.run_sync(overflow.queue.sync)
                        overflow.sync_extra()
                    except DiskQueueError as exc:
                        self.broker.store_failed(str(exc))
                        log.error("%s", exc)

    # -- nsqd.dat: a Hooks listener of the broker -----------------------------------------------

    def topic_created(self, topic: Topic) -> None:
        if not topic.ephemeral:
            self.metadata_changed()

    def topic_deleted(self, topic: Topic) -> None:
        if not topic.ephemeral:
            self.metadata_changed()
        if self._has_attributes:
            self._attributes_dropped()  # its attributes go with it

    def channel_created(self, topic: Topic, channel: Channel) -> None:
        if not channel.ephemeral:
            self.metadata_changed()

    def channel_deleted(self, topic: Topic, channel: Channel) -> None:
        if not channel.ephemeral:
            self.metadata_changed()
        if self._has_attributes:
            self._attributes_dropped()

    def attributes_changed(self) -> None:
        """Write the attributes file now, before the change is acknowledged (rare, small);
        StoreError when it cannot be written (logged, /ping NOK: the change is refused)."""
        doc = attributes.snapshot(self.broker.topics.values())
        try:
            attributes.write(self.data_path, doc)
        except OSError as exc:
            reason = f"attributes write failed - {exc}"
            log.error("ATTRIBUTES: %s", reason)
            self.broker.store_failed(reason)
            raise StoreError(reason) from exc
        self._has_attributes = bool(doc["topics"])

    def _attributes_dropped(self) -> None:
        """A deleted topic's or channel's attributes leave the file. The delete itself (an
        ephemeral channel's last consumer gone, an HTTP delete) goes on when that write fails:
        raised, it ended the connection that left with an unexpected error."""
        try:
            self.attributes_changed()
        except StoreError:
            pass  # logged, /ping NOK; the file keeps them until its next write

    def paused_changed(self, topic: Topic, channel: Channel | None) -> None:
        self.metadata_changed()  # nsqd.dat keeps the paused flags

    def metadata_changed(self) -> None:
        self._metadata_dirty = True
        if self._metadata_wakeup is not None:
            self._metadata_wakeup.set()

    def _snapshot(self) -> tuple[bytes, int]:
        """nsqd.dat's bytes now, and when they were taken (the file's time: metadata.write)."""
        taken = time.time_ns()
        return metadata.snapshot(self.broker.topics.values(), VERSION), taken

    def persist_now(self) -> None:
        self._metadata_dirty = False
        metadata.write(self.data_path, *self._snapshot())

    async def metadata_writer(self) -> None:
        while True:
            self._metadata_wakeup = trio.Event()
            if not self._metadata_dirty:
                await self._metadata_wakeup.wait()
            self._metadata_dirty = False
            data, taken = self._snapshot()
            try:
                await trio.to_thread.run_sync(metadata.write, self.data_path, data, taken)
            except OSError as exc:
                log.error("failed to persist metadata - %s", exc)
