"""The bridge between Redis lists and NSQ: a push to key `topic:<name>` publishes each element
as one message to NSQ topic <name>; a pop from key `channel:<topic>:<channel>` takes the next
message of that channel and finishes it at once (LPOP/RPOP with COUNT, BLPOP/BRPOP, LMOVE/BLMOVE
from it: a blocked client is served by the next message published). LLEN gives the topic's or
channel's depth. So a Redis producer feeds NSQ consumers and an NSQ producer feeds Redis
consumers; both ends of a channel key are its one FIFO.

A popping client is an engine.ports.Consumer of the channel (credit = how many it wants now)
for as long as its pop or its wait lasts.

In a group (--workers, worker 0 holds the keys) a channel's messages are in every worker's
partition. A blocked pop is a consumer here, so the pulls bring it any worker's; a pop that
does not block, or an LLEN, that this partition cannot answer alone asks the other workers
(`Peers`, nsqd/group/lists.py) before it answers: `more`, `one_more` and `more_depth` give
the command that ask, which it defers its reply for (commands.Deferred)."""

from __future__ import annotations

import time
from collections import deque
from collections.abc import Awaitable, Callable
from typing import TYPE_CHECKING, Any, Protocol

from protocol.resp.codec import ReplyError
from protocol.v2.names import is_valid_name

from ..engine.api import Refused
from ..engine.broker import Broker

if TYPE_CHECKING:
    from ..engine.api import Message
    from ..engine.handle import ChannelHandle
    from .blocking import Waiter

TOPIC, CHANNEL = b"topic:", b"channel:"
BRIDGED = (TOPIC, CHANNEL)


def is_bridged(key: bytes) -> bool:
    return key.startswith(BRIDGED)


class Taken(Protocol):
    """A message a peer holds in flight for a move until it is settled."""

    body: bytes

    async def settle(self, done: bool) -> None:
        """Finish it at its peer (done), or give it back to its channel there."""
        ...


class Peers(Protocol):
    """The group's other workers, as the bridge asks them; absent alone (and in a group
    without HTTP, where no peer can be asked)."""

    async def pop(self, topic: str, channel: str, n: int) -> list[bytes]:
        """Up to `n` of the channel's messages from the peers' partitions, taken and
        finished there: their bodies."""
        ...

    async def take(self, topic: str, channel: str) -> Taken | None:
        """One of the channel's messages, held in flight at its peer; None when no peer
        has one."""
        ...

    async def depth(self, topic: str, channel: str | None) -> int:
        """The peers' depths of the topic, or of its channel, summed."""
        ...


class PopConsumer:
    """A pop, or a blocked client, as a channel consumer: wants `want` messages, finishes
    each as it is handed over, and passes the bodies on."""

    msg_timeout = 60.0
    msg_timeout_explicit = False
    sample_rate = 0

    def __init__(self, client_id: int, channel: ChannelHandle, want: int, remote: str) -> None:
        self.id = client_id
        self.channel = channel
        self.want = want
        self.remote = remote
        self.bodies: list[bytes] = []
        self.waiter: Waiter | None = None
        self.key = b""
        self.connect_ts = int(time.time())

    def credit(self) -> int:
        if self.waiter is not None and self.waiter.done:
            return 0
        return self.want

    def sample(self, msgs: list[Message]) -> list[Message]:
        return msgs

    def send(self, msgs: list[Message]) -> None:
        self.want -= len(msgs)
        ids = [m.id for m in msgs]
        waiter = self.waiter
        if waiter is None:
            # a pop takes and finishes: nothing stays in flight to this consumer
            self.channel.finish_for(self, ids)
            self.bodies.extend(m.body for m in msgs)
            return
        reply, taken = waiter.attempt(self.key, msgs[0].body)  # want was 1
        if taken:
            self.channel.finish_for(self, ids)
        else:
            # a move refused (its destination became another type while it waited, or the
            # bridge would not publish the body): as Redis, this waiter alone gets the error
            # and the element stays where it was (in the channel); the publisher that served
            # it is not concerned
            self.channel.requeue_for(self, ids)
        waiter.finish(reply)

    def finished(self, n: int) -> None:
        pass

    def requeued(self) -> None:
        pass

    def timed_out(self) -> None:
        pass

    def emptied(self) -> None:
        pass

    def close(self) -> None:
        self.want = 0

    def stats(self, topic_filter: str = "") -> dict[str, Any]:
        return {
            "client_id": "resp",
            "hostname": self.remote,
            "version": "RESP",
            "remote_address": self.remote,
            "state": 3,
            "ready_count": self.want,
            "in_flight_count": 0,
            "message_count": 0,
            "finish_count": 0,
            "requeue_count": 0,
            "connect_ts": self.connect_ts,
            "sample_rate": 0,
            "deflate": False,
            "snappy": False,
            "user_agent": "resp",
            "tls": False,
            "tls_cipher_suite": "",
            "tls_version": "",
            "tls_negotiated_protocol": "",
            "tls_negotiated_protocol_is_mutual": False,
        }


class MoveConsumer(PopConsumer):
    """LMOVE/RPOPLPUSH from a channel key: one message, handed to `put` (the push into the
    move's destination) while it is still in flight, then finished; when `put` refuses it
    (the destination topic's max_msg_size, a full queue) it goes back to the channel and the
    error is the move's. A pop would have finished it first, and a refusal lost it."""

    def __init__(
        self, client_id: int, channel: ChannelHandle, remote: str, put: Callable[[bytes], None]
    ) -> None:
        super().__init__(client_id, channel, 1, remote)
        self.put = put
        self.refused: ReplyError | None = None

    def send(self, msgs: list[Message]) -> None:
        self.want -= len(msgs)
        ids = [m.id for m in msgs]
        try:
            self.put(msgs[0].body)  # want was 1
        except ReplyError as exc:
            self.channel.requeue_for(self, ids)
            self.refused = exc
            return
        self.channel.finish_for(self, ids)
        self.bodies.append(msgs[0].body)


class Bridge:
    def __init__(self, broker: Broker, max_msg_size: int, peers: Peers | None = None) -> None:
        self.broker = broker
        self.max_msg_size = max_msg_size  # --max-msg-size, as for a PUB
        self.peers = peers

    def _topic(self, key: bytes) -> str:
        if not key.startswith(TOPIC):
            raise ReplyError(
                "ERR bridge: push to topic:<topic>; channel:<topic>:<channel> is for pops"
            )
        name = key[len(TOPIC) :]
        if not is_valid_name(name):
            raise ReplyError("ERR bridge: invalid topic name")
        return name.decode()

    def _channel(self, key: bytes) -> tuple[str, str]:
        if not key.startswith(CHANNEL):
            raise ReplyError(
                "ERR bridge: pop from channel:<topic>:<channel>; topic:<topic> is for pushes"
            )
        topic, _, channel = key[len(CHANNEL) :].partition(b":")
        if not is_valid_name(topic):
            raise ReplyError("ERR bridge: invalid topic name")
        if not is_valid_name(channel):
            raise ReplyError("ERR bridge: invalid channel name")
        return topic.decode(), channel.decode()

    def check_push(self, key: bytes) -> None:
        """The error a push to `key` would get for its name (a move checks it first)."""
        self._topic(key)

    def push(self, key: bytes, elems: list[bytes]) -> int:
        """Publish each element as a message; the number published."""
        topic = self._topic(key)
        if any(not e for e in elems):
            raise ReplyError("ERR bridge: an NSQ message body cannot be empty")
        if any(len(e) > self.max_msg_size for e in elems):
            raise ReplyError(f"ERR bridge: message too big (--max-msg-size {self.max_msg_size})")
        try:
            self.broker.publish(topic, list(elems))
        except Refused as exc:  # any refusal (a full queue too) is answered, never a close
            raise ReplyError(exc.redis.replace("ERR ", "ERR bridge: ", 1)) from None
        return len(elems)

    def pop(self, key: bytes, count: int, remote: str = "resp") -> list[bytes]:
        """Take (and finish) up to `count` queued messages of the channel."""
        topic, name = self._channel(key)
        if count <= 0:
            return []
        channel = self.broker.channel_handle(topic, name)
        consumer = PopConsumer(self.broker.next_client_id(), channel, count, remote)
        self._offer(channel, consumer)
        return consumer.bodies

    def move(self, key: bytes, put: Callable[[bytes], None], remote: str = "resp") -> bytes | None:
        """One queued message of the channel moved by `put` (MoveConsumer): its body, None
        when there was none; `put`'s ReplyError, with the message back in the channel."""
        topic, name = self._channel(key)
        channel = self.broker.channel_handle(topic, name)
        consumer = MoveConsumer(self.broker.next_client_id(), channel, remote, put)
        self._offer(channel, consumer)
        if consumer.refused is not None:
            raise consumer.refused
        return consumer.bodies[0] if consumer.bodies else None

    def more(self, key: bytes, n: int) -> Callable[[], Awaitable[list[bytes]]] | None:
        """In a group, where this partition gave fewer than wanted: the ask of the peers for
        `n` more of the channel's messages; None alone, or when none is wanted."""
        peers = self.peers
        if peers is None or n <= 0:
            return None
        topic, channel = self._channel(key)
        return lambda: peers.pop(topic, channel, n)

    def one_more(self, key: bytes) -> Callable[[], Awaitable[Taken | None]] | None:
        """A move's `more`: one message, held at its peer until the move settles it."""
        peers = self.peers
        if peers is None:
            return None
        topic, channel = self._channel(key)
        return lambda: peers.take(topic, channel)

    def more_depth(self, key: bytes) -> Callable[[], Awaitable[int]] | None:
        """LLEN's `more`: the peers' depths of the topic or channel; None alone."""
        peers = self.peers
        if peers is None:
            return None
        if key.startswith(TOPIC):
            topic = self._topic(key)
            return lambda: peers.depth(topic, None)
        topic, channel = self._channel(key)
        return lambda: peers.depth(topic, channel)

    def _offer(self, channel: ChannelHandle, consumer: PopConsumer) -> None:
        """`consumer` joins the channel for one hand-out of what is queued, then leaves."""
        self._join(channel, consumer)
        try:
            channel.offer(consumer)
        finally:
            channel.leave(consumer)

    def _join(self, channel: ChannelHandle, consumer: PopConsumer) -> None:
        try:
            channel.join(consumer)
        except Exception as exc:  # --max-channel-consumers reached
            raise ReplyError(f"ERR bridge: {exc}") from None

    def length(self, key: bytes) -> int:
        if key.startswith(TOPIC):
            return self.broker.depth(self._topic(key))
        return self.broker.depth(*self._channel(key))

    def exists(self, key: bytes) -> bool:
        """Whether the topic (topic:) or channel (channel:) exists: TYPE says list then."""
        try:
            if key.startswith(TOPIC):
                return self.broker.exists(self._topic(key))
            return self.broker.exists(*self._channel(key))
        except ReplyError:
            return False

    def watch(self, waiter: Waiter, remote: str) -> None:
        """Make a blocked client a consumer (credit 1) of each channel key it waits on; the
        bridge's error where it cannot wait."""
        if waiter.kind is not deque:  # a sorted-set pop: these names are plain keys to it
            return
        keys = [k for k in dict.fromkeys(waiter.keys) if is_bridged(k)]
        names = [self._channel(k) for k in keys]  # every error before anything is joined
        if is_bridged(waiter.moves_to):
            # a move to a key that takes no push (channel:, a bad topic name) can never be
            # served: refused before it waits, with LMOVE's error (its source was empty, so
            # that was checked first, as Redis does; where nothing waits, in MULTI or a
            # script, it answers as LMOVE on an empty source does: nil)
            self.check_push(waiter.moves_to)
        for key, (topic, name) in zip(keys, names, strict=True):
            channel = self.broker.channel_handle(topic, name)
            consumer = PopConsumer(self.broker.next_client_id(), channel, 1, remote)
            consumer.waiter, consumer.key = waiter, key
            self._join(channel, consumer)
            waiter.consumers.append(consumer)
        for consumer in waiter.consumers:
            if not waiter.done:
                consumer.channel.offer(consumer)

    def unwatch(self, waiter: Waiter) -> None:
        for consumer in waiter.consumers:
            consumer.channel.leave(consumer)
        waiter.consumers.clear()
