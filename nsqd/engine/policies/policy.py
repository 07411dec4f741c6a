"""What a topic's or channel's attributes do, at the engine's named points.

A channel with attributes gets a `ChannelPolicy`, a topic a `TopicPolicy`; without any, the
queue's `policy` is None and each named point costs one attribute check. The points:

- `admit` (topic publish, before anything is stored): a message over the topic's
  `max_msg_size`, or a publish that would pass a `max_depth` with `overflow=reject`, is refused
  whole (`MessageTooBig`, `QueueFull`);
- `incoming` (a channel receives new messages): the default `delay` defers them;
- `trim` (after messages were queued): `overflow=drop_oldest` drops the oldest queued ones;
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
from collections.abc import Callable
from typing import TYPE_CHECKING

from ...log import log
from ..message import Message
from .attributes import ChannelAttributes, dead_letter_name

if TYPE_CHECKING:
    from ..channel import Channel
    from ..ports import Consumer
    from ..topic import Topic

Publish = Callable[[str, list[bytes]], None]  # (topic, bodies); raises when refused


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

    __slots__ = ("expires",)

    def __init__(
        self, msg_id: bytes, body: bytes, timestamp: int, attempts: int = 0, expires: int = 0
    ) -> None:
        super().__init__(msg_id, body, timestamp, attempts)
        self.expires = expires

    def copy(self) -> ExpiringMessage:
        m = ExpiringMessage(self.id, self.body, self.timestamp, self.attempts, self.expires)
        m.defer_ms = self.defer_ms
        return m


class _Expiry:
    """The TTL rule shared by topic and channel policies: expired messages are filtered out
    and reported to `expired_topic`."""

    ttl_ns: int
    expired_topic: str
    check_expiry: bool
    publish: Publish

    def is_expired(self, msg: Message, now_ns: int) -> bool:
        ttl = self.ttl_ns
        if ttl and msg.timestamp + ttl <= now_ns:
            return True
        expires = getattr(msg, "expires", 0)
        return bool(expires) and expires <= now_ns

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
        held = len(channel.backlog) + len(channel.in_flight) + len(channel.deferred)
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

    def trim(self, channel: Channel) -> None:
        if not self.drop_oldest:
            return
        held = len(channel.backlog) + len(channel.in_flight) + len(channel.deferred)
        excess = min(held - self.max_depth, len(channel.backlog))
        if excess > 0:
            dropped = channel.backlog.take(excess)
            channel.dropped_count += len(dropped)

    def unexpired(self, channel: Channel, msgs: list[Message]) -> list[Message]:
        if not self.check_expiry:
            return msgs
        live, dead = self._split(msgs)
        if dead:
            channel.expired_count += len(dead)
            self._report(f"CHANNEL({channel.topic_name}:{channel.name})", dead)
        return live

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
        channel.dead_letter_count += 1
        return True

    def sweep(self, channel: Channel) -> None:
        if self.check_expiry:
            _sweep_head(self, channel.backlog, lambda dead: self.unexpired(channel, dead))

    def timeout_for(self, consumer: Consumer) -> float:
        if self.msg_timeout and not getattr(consumer, "msg_timeout_explicit", False):
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
        self.guarded = [
            c for c in topic.channels.values() if c.policy is not None and c.policy.rejects
        ]

    @staticmethod
    def wanted(topic: Topic) -> bool:
        return (
            not topic.attributes.off
            or topic.message_ttls
            or any(c.policy is not None and c.policy.rejects for c in topic.channels.values())
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
            assert channel.policy is not None
            channel.policy.room(channel, n)

    def trim(self, topic: Topic) -> None:
        if self.drop_oldest:
            excess = len(topic.backlog) - self.max_depth
            if excess > 0:
                topic.dropped_count += len(topic.backlog.take(excess))

    def unexpired(self, topic: Topic, msgs: list[Message]) -> list[Message]:
        if not self.check_expiry:
            return msgs
        live, dead = self._split(msgs)
        if dead:
            topic.expired_count += len(dead)
            self._report(f"TOPIC({topic.name})", dead)
        return live

    def sweep(self, topic: Topic) -> None:
        if self.check_expiry:
            _sweep_head(self, topic.backlog, lambda dead: self.unexpired(topic, dead))


def _sweep_head(
    rule: _Expiry, backlog: object, expire: Callable[[list[Message]], list[Message]]
) -> None:
    """Take expired messages off the head of `backlog` (a queue.Backlog) until a live one.
    The head is looked at with peek, so a live message stays where it is (on disk, if that
    is where it was)."""
    now = time.time_ns()
    peek, take = backlog.peek, backlog.take  # type: ignore[attr-defined]
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
    if dead:
        expire(dead)
