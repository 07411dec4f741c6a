"""Topic: takes published messages and fans each out to every channel.

With no channel yet, or while paused, messages wait in the topic's own queue; the first
channel (or the unpause) receives that backlog, moved over by a short-lived pump task in
bounded chunks so a large backlog never stalls other clients.

Attributes (policies/) on the topic or its channels give it a `policy`, consulted before a
publish stores anything (`admit`), after its queue grows (`trim`), in the pump and the scan."""

from __future__ import annotations

import time
from collections.abc import Awaitable, Callable, Sequence
from itertools import repeat
from typing import Any, Protocol

import trio

from protocol.v2.bodies import PackedBodies

from ..log import log
from .channel import Channel
from .guid import GUIDFactory
from .message import DeferredMessage, Message
from .policies.attributes import ChannelAttributes, TopicAttributes
from .policies.policy import (
    NO_CHANNEL_POLICY,
    NO_TOPIC_POLICY,
    ChannelPolicy,
    ExpiringMessage,
    NoTopicPolicy,
    TopicPolicy,
)
from .ports import (
    NO_JOURNAL,
    JournalFactory,
    OverflowFactory,
    StoreError,
    WriteBatch,
    held,
    no_journal,
)
from .queue import Backlog
from .settings import Settings
from .stale import NO_STALE

_PUMP_CHUNK = 1024
_PUMP_BYTES = 4 << 20  # a chunk of large messages is smaller: the loop runs between chunks


class TopicEvents(Protocol):
    """What a topic tells its registry (the broker), and the stores' group commit its pump
    holds."""

    commit: WriteBatch

    def channel_created(self, topic: Topic, channel: Channel) -> None: ...
    def channel_deleted(self, topic: Topic, channel: Channel) -> None: ...
    def topic_unused(self, topic: Topic) -> None:
        """An ephemeral topic lost its last channel."""
        ...

    def republish(self, topic: str, bodies: list[bytes]) -> None:
        """A policy's publish (dead letters, expiry events) into another topic."""
        ...


class Topic:
    # counted only by policies (not in nsqd's /stats)
    expired_count = 0
    dropped_count = 0

    def __init__(
        self,
        name: str,
        settings: Settings,
        new_overflow: OverflowFactory,
        events: TopicEvents,
        spawn: Callable[[Callable[[], Awaitable[Any]]], None],
        new_journal: JournalFactory = no_journal,
    ) -> None:
        self.name = name
        self._new_journal = new_journal
        self.settings = settings
        self._new_overflow = new_overflow
        self._events = events
        self._spawn = spawn
        self.ephemeral = name.endswith("#ephemeral")
        self.backlog = Backlog(settings.mem_queue_size, new_overflow(name, self.ephemeral))
        self.channels: dict[str, Channel] = {}
        self._fanout: list[Channel] = []
        self.paused = False
        self.deleted = False
        self._pumping = False
        # A new topic keeps its messages while a listener looks up where they go (a hold
        # each): nsqlookupd's list of its channels, so the first messages reach every channel
        # the cluster knows (nsqd's GetTopic); the group's pause (group/new_topics.py).
        self.holds = 0
        self.guid = GUIDFactory(settings.node_id)
        self.message_count = 0
        self.message_bytes = 0
        self.attributes = TopicAttributes()
        self.policy: TopicPolicy | NoTopicPolicy = NO_TOPIC_POLICY
        # a message with its own TTL was published here (or is in the disk queue)
        self.message_ttls = self.backlog.overflow.has_expiries
        self.created_at = time.time_ns() // 1_000_000
        self.modified_at = self.created_at
        if self.message_ttls:
            self.refresh_policies()

    def __repr__(self) -> str:
        return f"Topic({self.name})"

    @property
    def _flowing(self) -> bool:
        return bool(self._fanout) and not self.paused and not self.holds

    def hold(self) -> None:
        """Keep what is published in the topic's queue until `release` (as while paused)."""
        self.holds += 1

    def release(self) -> None:
        self.holds -= 1
        self._start_pump()

    @property
    def flowing_now(self) -> bool:
        """A publish goes straight to the channels (nothing waits in the topic's queue)."""
        return self._flowing and not self.backlog

    @property
    def depth(self) -> int:
        return len(self.backlog)

    # -- attributes and their policies -----------------------------------------------------

    def configure(self, attributes: TopicAttributes) -> None:
        self.attributes = attributes
        self.modified_at = time.time_ns() // 1_000_000
        self.refresh_policies()

    def configure_channel(self, channel: Channel, attributes: ChannelAttributes) -> None:
        channel.attributes = attributes
        channel.modified_at = time.time_ns() // 1_000_000
        self.refresh_policies()

    def refresh_policies(self) -> None:
        """Rebuild the policies from the attributes (channels first: the topic's guards are
        the channels that refuse publishes)."""
        republish = self._events.republish
        for channel in self.channels.values():
            wanted = ChannelPolicy.wanted(self, channel.attributes)
            channel.policy = (
                ChannelPolicy(self, channel.attributes, republish) if wanted else NO_CHANNEL_POLICY
            )
        self.policy = TopicPolicy(self, republish) if TopicPolicy.wanted(self) else NO_TOPIC_POLICY

    # -- publishing ------------------------------------------------------------------------

    def publish(self, bodies: Sequence[bytes], ttl_ms: int = 0) -> None:
        """PUB / MPUB: new messages, one id each, one timestamp for the batch (`ttl_ms`: each
        message expires that long after it; /pub?ttl=)."""
        policy = self.policy
        if ttl_ms:
            return self._publish_expiring(bodies, ttl_ms)
        plain = policy.plain  # (every point a no-op: not called, two calls a publish saved)
        if not plain:
            policy.admit(self, bodies)  # refuses the whole batch, before anything is stored
            if policy.delay:
                return self._publish_each(bodies, policy.delay, 0)
        ts = time.time_ns()
        n = len(bodies)
        # No record, and no id object, per message here: each channel gets the publish's own
        # sequences (an IdRun, the parser's PackedBodies or a list), made into records when
        # messages are taken from a queue or handed straight to a consumer.
        ids = self.guid.next_run(n, ts)
        self.message_count += n
        self.message_bytes += (
            bodies.nbytes if type(bodies) is PackedBodies else sum(map(len, bodies))
        )
        # (`_flowing`, inline)
        if self._fanout and not self.paused and not self.holds and not self.backlog:
            for channel in self._fanout:
                channel.put_run(ids, bodies, ts)
        else:
            self.backlog.extend_run(ids, bodies, ts)
            if not plain:
                self._trim()

    def _trim(self) -> None:
        drop = self.policy.excess(self)
        if drop:
            self.dropped_count += len(self.backlog.take(drop))

    def publish_deferred(self, body: bytes, delay_ms: int) -> None:
        self.policy.admit(self, [body])
        self._publish_each([body], max(delay_ms, 0), 0)

    def _publish_expiring(self, bodies: list[bytes], ttl_ms: int) -> None:
        if not self.message_ttls:
            self.message_ttls = True  # from now on every queue of this topic checks expiry
            self.refresh_policies()
        self.policy.admit(self, bodies)
        self._publish_each(bodies, self.policy.delay, ttl_ms)

    def _publish_each(self, bodies: list[bytes], delay_ms: int, ttl_ms: int) -> None:
        """The slower path: deferred messages, or messages with their own TTL."""
        ts = time.time_ns()
        ids = self.guid.next_ids(len(bodies))
        self.message_count += len(bodies)
        self.message_bytes += sum(map(len, bodies))
        msgs: list[Message]
        if ttl_ms:
            expires = ts + ttl_ms * 1_000_000
            msgs = [
                ExpiringMessage(i, b, ts, 0, expires, delay_ms)
                for i, b in zip(ids, bodies, strict=True)
            ]
        elif delay_ms:
            msgs = [DeferredMessage(i, b, ts, delay_ms) for i, b in zip(ids, bodies, strict=True)]
        else:
            msgs = list(map(Message, ids, bodies, repeat(ts)))
        if self._flowing and not self.backlog:
            self._fan_out(msgs, deferred=bool(delay_ms))
        else:
            self.backlog.extend(msgs)
            self._trim()

    def _fan_out(self, msgs: list[Message], *, deferred: bool, pumped: bool = False) -> None:
        """Every channel gets every message: the first channel the records themselves, the
        others copies sharing the body. All copies are made before any channel delivers (a
        delivery counts an attempt on the record it sends). What the pump brings passes each
        channel's `stale` (a copy its journal holds already)."""
        channels = self._fanout
        batches = [msgs] + [[m.copy() for m in msgs] for _ in channels[1:]]
        for channel, batch in zip(channels, batches, strict=True):
            try:
                if pumped:
                    batch = channel.stale.fresh(batch)
                if deferred:
                    ready_now = []
                    for m in batch:
                        if m.defer_ms:
                            delay, m.defer_ms = m.defer_ms, 0
                            channel.put_deferred(m, delay)
                        else:
                            ready_now.append(m)
                    batch = ready_now
                if batch:
                    channel.put_many(batch, pumped=pumped)
            except StoreError as exc:
                if not pumped:
                    raise  # a publish: its publisher is refused
                self._lost_to(channel, len(batch), exc)

    def _lost_to(self, channel: Channel, n: int, exc: StoreError) -> None:
        """A chunk of the topic's backlog that the channel's disk refused (a full disk, its
        journal: /ping NOK by then): what it did not take is lost to that channel with a log
        line, as nsqd's pump loses it, and the pump goes on (the chunk has left the topic's
        queue); raised, it ended the pump's task and the daemon with it."""
        log.error(
            "TOPIC(%s): failed to put up to %d messages to channel(%s) - %s",
            self.name,
            n,
            channel.name,
            exc,
        )

    # -- channels --------------------------------------------------------------------------

    def get_channel(self, name: str) -> Channel:
        channel = self.channels.get(name)
        if channel is None:
            ephemeral = name.endswith("#ephemeral")
            journal = NO_JOURNAL if ephemeral else self._new_journal(f"{self.name}:{name}")
            channel = Channel(
                self.name, name, self.settings, self._new_overflow, self._channel_unused, journal
            )
            self.channels[name] = channel
            self._fanout = list(self.channels.values())
            if channel.backlog.overflow.has_expiries:
                self.message_ttls = True  # its disk queue kept messages with their own TTL
            if not self.policy.plain or self.message_ttls:
                self.refresh_policies()  # the topic's TTL reaches the new channel too
            self._events.channel_created(self, channel)
            self._start_pump()
        return channel

    def delete_channel(self, name: str) -> None:
        channel = self.channels.pop(name, None)
        if channel is None:
            return
        self._fanout = list(self.channels.values())
        channel.delete()
        if not channel.policy.plain:
            self.refresh_policies()  # no longer a guard of publishes
        self._events.channel_deleted(self, channel)
        if self.ephemeral and not self.channels and not self.deleted:
            self._events.topic_unused(self)

    def _channel_unused(self, channel: Channel) -> None:
        """An ephemeral channel lost its last consumer."""
        self.delete_channel(channel.name)

    # -- the pump: topic backlog -> channels -----------------------------------------------

    def _start_pump(self) -> None:
        if self.backlog and self._flowing and not self._pumping:
            self._pumping = True
            self._spawn(self._pump)

    async def _pump(self) -> None:
        try:
            while self.backlog and self._flowing and not self.deleted:
                # a journal's write that the release refuses is logged by it, /ping NOK
                held(self._events.commit, self._pump_chunk)
                await trio.lowlevel.checkpoint()
            if not self.backlog:
                for channel in self._fanout:  # what was on disk at the start has come
                    channel.stale = NO_STALE
        finally:
            self._pumping = False

    def _pump_chunk(self) -> None:
        """A chunk of the backlog to every channel, inside a hold of the group commit (as a
        pass of the loop holds its reads): with --sync-every=1 the topic's queue writes its
        read position at the release, once the channels' queues have the chunk on file, and
        a channel's queue read by a hand-out here writes its own, both before a FIN can be
        read. Unheld, the syncer wrote them ~100 ms later, and a kill -9 after the consumer's
        FINs gave the whole chunk back. The channels' queues write through the hold, a
        message at a time as unheld: what one's disk refuses is refused at its message, and
        that channel alone keeps the rest in memory (Channel._keep); buffered, the release's
        one write per queue refused the whole chunk, and no channel knew what it had lost."""
        commit = self._events.commit
        chunk, expired = self.policy.unexpired(self, self.backlog.take(_PUMP_CHUNK, _PUMP_BYTES))
        self.expired_count += expired
        commit.through = True
        try:
            self._fan_out(chunk, deferred=any(m.defer_ms for m in chunk), pumped=True)
        finally:
            commit.through = False

    # -- admin -----------------------------------------------------------------------------

    def pause(self) -> None:
        self.paused = True

    def unpause(self) -> None:
        self.paused = False
        self._start_pump()

    def empty(self) -> None:
        self.backlog.clear()

    def scan(self) -> None:
        """The scanner's pass over the topic's own queue (expired messages leave it)."""
        self.expired_count += self.policy.sweep(self)

    def delete(self) -> None:
        """Topic deletion: its channels and every queued message go too."""
        self.deleted = True
        for name in list(self.channels):
            self.delete_channel(name)
        self.backlog.delete()

    def close(self) -> None:
        """Clean shutdown: everything still queued goes to disk."""
        self.deleted = True
        failed: Exception | None = None
        for channel in self.channels.values():
            try:
                channel.close()
            except Exception as exc:  # the other channels and the backlog are still written
                failed = exc
        self.backlog.close()
        if failed is not None:
            raise failed
