"""What a topic's or channel's attributes do, at the engine's named points.

A channel with attributes gets a `ChannelPolicy`, a topic a `TopicPolicy`; without any, the
queue's `policy` is the null one (`NO_CHANNEL_POLICY`, `NO_TOPIC_POLICY`: `plain`, every point
a no-op), and a channel takes its record-free fast paths while its policy is plain. The points
return decisions (what is left, how many to drop, dead-lettered or not); the queue acts on
them and keeps its own counters. The points:

- `admit` (topic publish, before anything is stored): a message over the topic's
  `max_msg_size`, or a publish that would pass a `max_depth` with `overflow=reject`, is refused
  whole (`MessageTooBig`, `QueueFull`);
- `incoming` (a channel receives new messages): the default `delay` defers them;
- `excess` (after messages were queued): `overflow=drop_oldest` says how many of the oldest
  queued ones to drop;
- `unexpired` (hand-out, and the topic's pump): a message past its TTL is never delivered; it
  is published to `expired_topic` when one is set, else dropped, and counted;
- `retry` (a REQ or a timeout): a message delivered `max_attempts` times goes to the
  dead-letter topic instead of back to the queue;
- `sweep` (the 100 ms scan): expired messages at the head of the queue leave it without
  waiting for a consumer.

Policies publish (dead letters, expiry events) through a `Publish` callable the broker gives,
the same path as any publish."""

from __future__ import annotations

import time
from collections.abc import Callable, Sequence
from typing import TYPE_CHECKING

from ...log import log
from ..message import Message
from .attributes import ChannelAttributes, dead_letter_name

if TYPE_CHECKING:
    from ..channel import Channel
    from ..ports import Consumer
    from ..queue import Backlog
    from ..topic import Topic

Publish = Callable[[str, list[bytes]], None]  # (topic, bodies); raises when refused


def _held(channel: Channel) -> int:
    """What a channel's `max_depth` counts: queued, in flight and deferred."""
    return len(channel.backlog) + len(channel.in_flight) + len(channel.deferred)


class QueueFull(Exception):
    """A publish refused by `overflow=reject`; str() says which queue and its bound."""


class MessageTooBig(Exception):
    """A body over the topic's `max_msg_size`."""

    def __init__(self, size: int, limit: int) -> None:
        super().__init__(f"message too big {size} > {limit}")
        self.size = size
        self.limit = limit


class ExpiringMessage(Message):
    """A message published with its own TTL (`/pub?ttl=`): `expires` is unix ns."""

    __slots__ = ("defer_ms", "expires")  # defer_ms: as DeferredMessage's

    def __init__(
        self,
        msg_id: bytes,
        body: bytes,
        timestamp: int,
        attempts: int = 0,
        expires: int = 0,
        defer_ms: int = 0,
    ) -> None:
        super().__init__(msg_id, body, timestamp, attempts)
        self.expires = expires
        self.defer_ms = defer_ms

    def copy(self) -> ExpiringMessage:
        return ExpiringMessage(
            self.id, self.body, self.timestamp, self.attempts, self.expires, self.defer_ms
        )


class _Expiry:
    """The TTL rule shared by topic and channel policies: expired messages are filtered out
    and reported to `expired_topic`."""

    plain = False  # a real policy: the queue takes its policed paths
    ttl_ns: int
    expired_topic: str
    check_expiry: bool
    publish: Publish

    def is_expired(self, msg: Message, now_ns: int) -> bool:
        ttl = self.ttl_ns
        if ttl and msg.timestamp + ttl <= now_ns:
            return True
        expires = msg.expires
        return bool(expires) and expires <= now_ns

    def _unexpired(self, queue: str, msgs: list[Message]) -> tuple[list[Message], int]:
        if not self.check_expiry:
            return msgs, 0
        live, dead = self._split(msgs)
        if dead:
            self._report(queue, dead)
        return live, len(dead)

    def _split(self, msgs: list[Message]) -> tuple[list[Message], list[Message]]:
        now = time.time_ns()
        live, dead = [], []
        for msg in msgs:
            (dead if self.is_expired(msg, now) else live).append(msg)
        return live, dead

    def _report(self, queue: str, dead: list[Message]) -> None:
        if self.expired_topic:
            try:
                self.publish(self.expired_topic, [m.body for m in dead])
            except Exception as exc:  # a full or failing expiry topic: the event is lost
                log.error("%s: %d expiry events not published - %s", queue, len(dead), exc)


class ChannelPolicy(_Expiry):
    def __init__(
        self,
        topic: Topic,
        attrs: ChannelAttributes,
        publish: Publish,
    ) -> None:
        t = topic.attributes
        self.publish = publish
        self.msg_timeout = attrs.msg_timeout / 1000
        self.max_attempts = attrs.max_attempts
        self.dead_letter_topic = attrs.dead_letter_topic or dead_letter_name(topic.name)
        self.ttl_ns = (attrs.ttl or t.ttl) * 1_000_000
        self.expired_topic = attrs.expired_topic or t.expired_topic
        self.check_expiry = bool(self.ttl_ns) or topic.message_ttls
        self.max_depth = attrs.max_depth
        self.drop_oldest = attrs.overflow == "drop_oldest"
        self.rejects = bool(attrs.max_depth) and not self.drop_oldest
        self.delay = attrs.delay

    @staticmethod
    def wanted(topic: Topic, attrs: ChannelAttributes) -> bool:
        t = topic.attributes
        return not attrs.off or bool(t.ttl) or topic.message_ttls

    # -- the named points --------------------------------------------------------------------

    def room(self, channel: Channel, n: int) -> None:
        """Raise QueueFull if `n` more messages would pass max_depth (reject mode): the
        bound counts what the channel holds (queued, in flight, deferred)."""
        held = _held(channel)
        if held + n > self.max_depth:
            raise QueueFull(
                f"channel {channel.topic_name}:{channel.name} is full "
                f"({held} of max_depth {self.max_depth})"
            )

    def incoming(self, channel: Channel, msgs: list[Message]) -> list[Message]:
        if not self.delay:
            return msgs
        for msg in msgs:
            channel.defer(msg, self.delay)
        return []

    def excess(self, channel: Channel) -> int:
        """How many of the oldest queued messages `overflow=drop_oldest` drops now."""
        if not self.drop_oldest:
            return 0
        return max(0, min(_held(channel) - self.max_depth, len(channel.backlog)))

    def unexpired(self, channel: Channel, msgs: list[Message]) -> tuple[list[Message], int]:
        """The live messages of `msgs`, and how many expired (reported, not delivered)."""
        return self._unexpired(f"CHANNEL({channel.topic_name}:{channel.name})", msgs)

    def retry(self, channel: Channel, msg: Message) -> bool:
        """True when `msg` went to the dead-letter topic instead of back to the queue."""
        if not self.max_attempts or msg.attempts < self.max_attempts:
            return False
        try:
            self.publish(self.dead_letter_topic, [msg.body])
        except Exception as exc:  # kept in the channel: nothing is lost
            log.error(
                "CHANNEL(%s:%s): dead letter %s not published, requeued - %s",
                channel.topic_name,
                channel.name,
                msg.id.decode(),
                exc,
            )
            return False
        return True

    def sweep(self, channel: Channel) -> int:
        """Expired messages taken off the head of the queue; how many."""
        if not self.check_expiry:
            return 0
        dead = _sweep_head(self, channel.backlog)
        if dead:
            self._report(f"CHANNEL({channel.topic_name}:{channel.name})", dead)
        return len(dead)

    def timeout_for(self, consumer: Consumer) -> float:
        if self.msg_timeout and not consumer.msg_timeout_explicit:
            return self.msg_timeout
        return consumer.msg_timeout


class TopicPolicy(_Expiry):
    def __init__(self, topic: Topic, publish: Publish) -> None:
        attrs = topic.attributes
        self.publish = publish
        self.max_msg_size = attrs.max_msg_size
        self.ttl_ns = attrs.ttl * 1_000_000
        self.expired_topic = attrs.expired_topic
        self.check_expiry = bool(self.ttl_ns) or topic.message_ttls
        self.max_depth = attrs.max_depth
        self.drop_oldest = attrs.overflow == "drop_oldest"
        self.delay = attrs.delay
        # the channels whose bound refuses publishes
        self.guarded = [c for c in topic.channels.values() if c.policy.rejects]

    @staticmethod
    def wanted(topic: Topic) -> bool:
        return (
            not topic.attributes.off
            or topic.message_ttls
            or any(c.policy.rejects for c in topic.channels.values())
        )

    def admit(self, topic: Topic, bodies: list[bytes]) -> None:
        limit = self.max_msg_size
        if limit:
            size = max(map(len, bodies), default=0)
            if size > limit:
                raise MessageTooBig(size, limit)
        n = len(bodies)
        if self.max_depth and not self.drop_oldest and not topic.flowing_now:
            depth = len(topic.backlog)
            if depth + n > self.max_depth:
                raise QueueFull(
                    f"topic {topic.name} is full ({depth} of max_depth {self.max_depth})"
                )
        for channel in self.guarded:
            channel.policy.room(channel, n)

    def excess(self, topic: Topic) -> int:
        """How many of the oldest queued messages `overflow=drop_oldest` drops now."""
        return max(0, len(topic.backlog) - self.max_depth) if self.drop_oldest else 0

    def unexpired(self, topic: Topic, msgs: list[Message]) -> tuple[list[Message], int]:
        return self._unexpired(f"TOPIC({topic.name})", msgs)

    def sweep(self, topic: Topic) -> int:
        if not self.check_expiry:
            return 0
        dead = _sweep_head(self, topic.backlog)
        if dead:
            self._report(f"TOPIC({topic.name})", dead)
        return len(dead)


class NoChannelPolicy:
    """A channel without attributes: every named point a no-op."""

    __slots__ = ()
    plain = True
    rejects = False
    ttl_ns = 0
    max_depth = 0
    delay = 0

    def room(self, channel: Channel, n: int) -> None:
        pass

    def incoming(self, channel: Channel, msgs: list[Message]) -> list[Message]:
        return msgs

    def excess(self, channel: Channel) -> int:
        return 0

    def unexpired(self, channel: Channel, msgs: list[Message]) -> tuple[list[Message], int]:
        return msgs, 0

    def retry(self, channel: Channel, msg: Message) -> bool:
        return False

    def sweep(self, channel: Channel) -> int:
        return 0

    def timeout_for(self, consumer: Consumer) -> float:
        return consumer.msg_timeout


class NoTopicPolicy:
    """A topic without attributes (and no message with its own TTL): every point a no-op."""

    __slots__ = ()
    plain = True
    delay = 0

    def admit(self, topic: Topic, bodies: Sequence[bytes]) -> None:
        pass

    def excess(self, topic: Topic) -> int:
        return 0

    def unexpired(self, topic: Topic, msgs: list[Message]) -> tuple[list[Message], int]:
        return msgs, 0

    def sweep(self, topic: Topic) -> int:
        return 0


NO_CHANNEL_POLICY = NoChannelPolicy()
NO_TOPIC_POLICY = NoTopicPolicy()


def _sweep_head(rule: _Expiry, backlog: Backlog) -> list[Message]:
    """Take expired messages off the head of `backlog` until a live one. The head is looked
    at with peek, so a live message stays where it is (on disk, if that is where it was)."""
    now = time.time_ns()
    peek, take = backlog.peek, backlog.take
    dead: list[Message] = []
    while len(dead) < 100_000:  # bounded work per scan
        head = peek(256)
        expired = 0
        for msg in head:
            if not rule.is_expired(msg, now):
                break
            expired += 1
        if expired:
            dead += take(expired)
        if expired < 256:
            break
    return dead
