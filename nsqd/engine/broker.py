"""The broker: the registry of topics and the one API every front-end calls.

TCP, HTTP and RESP publish through `publish`/`publish_deferred`, which fail with one error,
`api.Refused`, whatever refused (the store behind, a full queue, a topic's max_msg_size); it
carries each front-end's words (nsqd's E_PUB_FAILED, HTTP's 503 EXITING, a Redis -ERR). A
channel is acted on through the `ChannelHandle` that `existing_channel`/`channel_handle` give
(values in, values out); TCP consumers `subscribe` to the channel's own hot path. Topics and
channels are made and removed here, and every change is told to the `Hooks` listeners
(nsqd.dat, nsqlookupd registration)."""

from __future__ import annotations

import time
from collections.abc import Awaitable, Callable, Iterator, Mapping, Sequence
from contextlib import contextmanager
from functools import partial
from typing import TYPE_CHECKING, Any, Protocol

import trio

from ..log import log
from .api import MAX_TTL_MS, Making, Refused
from .channel import Channel
from .handle import ChannelHandle
from .pending import PendingPublishes
from .policies import attributes as attrs
from .policies.policy import NO_TOPIC_POLICY, MessageTooBig, QueueFull
from .ports import (
    Consumer,
    JournalFactory,
    NoBatch,
    OverflowFactory,
    Peer,
    StoreError,
    Subscription,
    WriteBatch,
    held,
    no_journal,
)
from .settings import Settings
from .topic import Topic

if TYPE_CHECKING:
    from .dedupe import Deduper  # --dedupe-window: NSQD imports it when the flag is set

Spawn = Callable[[Callable[[], Awaitable[Any]]], None]


class Hooks(Protocol):
    """Told when the set of topics and channels or a paused flag changes (nsqd.dat, nsqlookupd
    registration, the log)."""

    def topic_created(self, topic: Topic) -> None: ...
    def topic_deleted(self, topic: Topic) -> None: ...
    def channel_created(self, topic: Topic, channel: Channel) -> None: ...
    def channel_deleted(self, topic: Topic, channel: Channel) -> None: ...
    def paused_changed(self, topic: Topic, channel: Channel | None) -> None: ...


# what a topic's publish may raise: the store's error and the policies' refusals
_REFUSALS = (StoreError, QueueFull, MessageTooBig)


class Broker:
    def __init__(
        self,
        settings: Settings,
        new_overflow: OverflowFactory,
        spawn: Spawn,
        new_journal: JournalFactory | None = None,
        deduper: Deduper | None = None,
    ) -> None:
        self.settings = settings
        self.deduper = deduper  # --dedupe-window
        self.new_overflow = new_overflow
        self.new_journal = new_journal or no_journal  # --durable-inflight
        self.spawn = spawn
        self.topics: dict[str, Topic] = {}
        self.hooks: list[Hooks] = []
        # connected clients of every front-end (for /stats), ids unique across front-ends
        self.clients: dict[int, Peer] = {}
        self._client_seq = 0
        self.start_time = int(time.time())
        self.last_error: str | None = None  # the latest store failure, for /ping and /stats
        self.commit: WriteBatch = NoBatch()  # the store's group commit (set by the store)
        # a reactor pass's single-message publishes, stored together at its commit
        self.pending = PendingPublishes(self._store_batch)
        self.loading = False  # topics being restored from nsqd.dat
        # new channels a listener is making elsewhere too (the group: in every peer worker)
        self._making: dict[tuple[str, str], trio.Event] = {}
        self.subscribing: Consumer | None = None  # during a SUB's making of its channel
        # told after any attribute change (storage keeps them in a file of its own)
        self.attribute_listeners: list[Callable[[], None]] = []
        self.attribute_limits = attrs.Limits(
            max_msg_size=settings.max_msg_size,
            max_msg_timeout_ms=round(settings.max_msg_timeout * 1000),
            max_req_timeout_ms=round(settings.max_req_timeout * 1000),
        )

    # -- topics and channels -----------------------------------------------------------------

    def topic(self, name: str) -> Topic:
        """The topic, created if missing (nsqd's GetTopic)."""
        topic = self.topics.get(name)
        if topic is None:
            topic = Topic(
                name, self.settings, self.new_overflow, self, self.spawn, self.new_journal
            )
            self.topics[name] = topic
            log.info("TOPIC(%s): created", name)
            for hook in self.hooks:
                hook.topic_created(topic)
        return topic

    def create_topic(self, name: str) -> None:
        """The topic made if missing (/topic/create; MPUB and /mpub before their body)."""
        self.topic(name)

    def channel(self, topic: str, channel: str) -> Channel:
        return self.topic(topic).get_channel(channel)

    def subscribe(self, topic: str, channel: str, consumer: Consumer) -> Subscription:
        """SUB: `consumer` joins the channel (both made if missing); the channel is the TCP
        consumer's hot path (FIN / REQ / TOUCH / RDY) from then on. `Making` while a listener
        still makes a new channel elsewhere (its front-end waits, then asks again)."""
        self.subscribing = consumer  # who makes the channel, if new (a listener may ask)
        try:
            target = self.topic(topic).get_channel(channel)
        finally:
            self.subscribing = None
        making = self._making.get((topic, channel))
        if making is not None:
            raise Making(making.wait)
        target.add_consumer(consumer)
        return target

    def making(self, topic: str, channel: str) -> Callable[[], None]:
        """A listener makes this new channel elsewhere as well (from `channel_created`): a
        SUB of it is `Making` until the returned callable is called."""
        key = (topic, channel)
        event = self._making[key] = trio.Event()

        def made() -> None:
            event.set()
            if self._making.get(key) is event:
                del self._making[key]

        return made

    def channel_handle(self, topic: str, channel: str) -> ChannelHandle:
        """The channel (both made if missing), for a front-end."""
        return ChannelHandle(self.channel(topic, channel), self.settings.msg_timeout, self.commit)

    def existing_channel(self, topic: str, channel: str) -> ChannelHandle:
        """The channel if it exists; else Refused (404 TOPIC_NOT_FOUND / CHANNEL_NOT_FOUND)."""
        return ChannelHandle(self._found(topic, channel)[1], self.settings.msg_timeout, self.commit)

    def _found(self, topic: str, channel: str) -> tuple[Topic, Channel]:
        found = self._found_topic(topic)
        target = found.channels.get(channel)
        if target is None:
            raise Refused("not_found", f"no channel {channel}", code="CHANNEL_NOT_FOUND")
        return found, target

    def _found_topic(self, name: str) -> Topic:
        found = self.topics.get(name)
        if found is None:
            raise Refused("not_found", f"no topic {name}", code="TOPIC_NOT_FOUND")
        return found

    def exists(self, topic: str, channel: str | None = None) -> bool:
        found = self.topics.get(topic)
        return found is not None and (channel is None or channel in found.channels)

    def depth(self, topic: str, channel: str | None = None) -> int:
        """A topic's or channel's queued messages (0 when it does not exist)."""
        found = self.topics.get(topic)
        if found is None:
            return 0
        if channel is None:
            return found.depth
        target = found.channels.get(channel)
        return target.depth if target is not None else 0

    def delete_topic(self, name: str) -> None:
        topic = self.topics.pop(name, None)
        if topic is not None:
            log.info("TOPIC(%s): deleting", name)
            topic.delete()
            if self.deduper is not None:
                self.deduper.topic_deleted(name)
            for hook in self.hooks:
                hook.topic_deleted(topic)

    # -- nsqd's administrative calls, by name (Refused 404 when the topic or channel is missing)

    def require_topic(self, name: str) -> None:
        self._found_topic(name)

    def remove_topic(self, name: str) -> None:
        self.delete_topic(self._found_topic(name).name)

    def create_channel(self, topic: str, channel: str) -> None:
        """A channel of an existing topic (nsqd's /channel/create)."""
        self._found_topic(topic).get_channel(channel)

    def remove_channel(self, topic: str, channel: str) -> None:
        found, _ = self._found(topic, channel)
        found.delete_channel(channel)

    def empty(self, topic: str, channel: str | None = None) -> None:
        """Drop what the topic (or channel) holds; a store failure is Refused (500)."""
        target: Topic | Channel = (
            self._found_topic(topic) if channel is None else self._found(topic, channel)[1]
        )
        try:
            target.empty()
        except StoreError as exc:
            log.error("%r: failed to empty - %s", target, exc)
            raise Refused("internal", str(exc)) from exc

    def pause(self, topic: str, channel: str | None, paused: bool) -> None:
        if channel is None:
            self.set_paused(self._found_topic(topic), None, paused)
        else:
            self.set_paused(*self._found(topic, channel), paused)

    def set_paused(self, topic: Topic, channel: Channel | None, paused: bool) -> None:
        """An unpause hands the queue out in a hold of the group commit, as a pass holds its
        reads: with --sync-every=1 a disk read's position is written before its FIN can be
        read (an HTTP unpause is a task's: the syncer wrote it ~100 ms later, too late)."""
        target = channel if channel is not None else topic
        if paused:
            target.pause()
        else:
            _, error = held(self.commit, target.unpause)
            if error is not None:  # what the hand-out wrote (a journal's record)
                self.store_failed(error)
        for hook in self.hooks:
            hook.paused_changed(topic, channel)

    @contextmanager
    def restoring(self) -> Iterator[None]:
        """Topics made inside are restored state (nsqd.dat), not new ones."""
        self.loading = True
        try:
            yield
        finally:
            self.loading = False

    # TopicEvents, called by topics
    def channel_created(self, topic: Topic, channel: Channel) -> None:
        log.info("TOPIC(%s): new channel(%s)", topic.name, channel.name)
        for hook in self.hooks:
            hook.channel_created(topic, channel)

    def channel_deleted(self, topic: Topic, channel: Channel) -> None:
        log.info("CHANNEL(%s): deleting", channel.name)
        for hook in self.hooks:
            hook.channel_deleted(topic, channel)

    def topic_unused(self, topic: Topic) -> None:
        self.delete_topic(topic.name)

    @staticmethod
    def batch_keys(prefix: str, first: int, count: int) -> Sequence[str]:
        """The de-duplication keys `<prefix>/<first>` .. of a batch (publish's `keys`)."""
        from .dedupe import KeyRange  # only publishes with keys pay for the module

        return KeyRange(prefix, first, count)

    def republish(self, topic: str, bodies: list[bytes]) -> None:
        self.publish(topic, bodies)

    # -- attributes (policies) -------------------------------------------------------------

    def configure_topic(self, name: str, params: Mapping[str, str]) -> attrs.TopicAttributes:
        """Set a topic's attributes (creating it, like RSMQ's createQueue); a refusal
        (Refused 400) changes nothing, not even the topic's existence."""
        found = self.topics.get(name)
        current = found.attributes if found is not None else attrs.TopicAttributes()
        new = self._checked(current, params, name)
        topic = self.topic(name)
        if params:
            topic.configure(new)
            self._attributes_changed()
        return topic.attributes

    def configure_channel(
        self, topic_name: str, name: str, params: Mapping[str, str]
    ) -> attrs.ChannelAttributes:
        found = self.topics.get(topic_name)
        existing = found.channels.get(name) if found is not None else None
        current = existing.attributes if existing is not None else attrs.ChannelAttributes()
        new = self._checked(current, params, topic_name)
        topic = self.topic(topic_name)
        channel = topic.get_channel(name)
        if params:
            topic.configure_channel(channel, new)
            self._attributes_changed()
        return channel.attributes

    def _checked(self, current: attrs.A, params: Mapping[str, str], topic: str) -> attrs.A:
        try:
            return attrs.update(current, params, self.attribute_limits, topic)
        except attrs.AttributeRefused as exc:
            raise Refused("invalid", str(exc), code=exc.code) from exc

    def topic_view(self, name: str) -> tuple[attrs.TopicAttributes, dict[str, int]]:
        """An existing topic's attributes and what its policies did (Refused 404 if none)."""
        topic = self._found_topic(name)
        return topic.attributes, {"expired": topic.expired_count, "dropped": topic.dropped_count}

    def restore_attributes(
        self,
        topic_name: str,
        topic_attrs: attrs.TopicAttributes,
        channels: Mapping[str, attrs.ChannelAttributes],
    ) -> None:
        """What storage kept from the last run (the topic and its channels made if missing)."""
        topic = self.topic(topic_name)
        topic.attributes = topic_attrs
        for name, channel_attrs in channels.items():
            topic.get_channel(name).attributes = channel_attrs
        topic.refresh_policies()

    def _attributes_changed(self) -> None:
        """The stores keep the new attributes; a store that cannot is Refused (500)."""
        try:
            for listener in self.attribute_listeners:
                listener()
        except StoreError as exc:
            raise Refused("internal", str(exc)) from exc

    # -- publishing --------------------------------------------------------------------------

    def publish(
        self, topic: str, bodies: list[bytes], ttl_ms: int = 0, keys: Sequence[str] | None = None
    ) -> None:
        """PUB / MPUB: raises Refused when the store refused the messages or a topic's
        attributes did (a full queue, a body over max_msg_size). With
        de-duplication keys (one per body) and --dedupe-window, bodies whose key was seen
        are acknowledged and not stored. Inside a reactor's pass a message that nothing can
        refuse waits for the pass's commit (engine/pending.py)."""
        commit = self.commit
        topics = self.topics  # (`topic(topic)` inline while it is there: a call a PUB saved)
        if (
            commit.deferring
            and commit.depth
            and len(bodies) == 1
            and not ttl_ms
            and keys is None
            and (topics[topic] if topic in topics else self.topic(topic)).policy is NO_TOPIC_POLICY
        ):
            self.pending.add(topic, bodies[0], commit)
            return
        if ttl_ms and not 0 < ttl_ms <= MAX_TTL_MS:
            raise Refused("invalid", f"ttl must be 1 to {MAX_TTL_MS} ms", code="INVALID_TTL")
        if topic in self.pending.by_topic:  # what waits for this topic is stored first
            commit.flush()  # (a failure is the commit's: the pass's publishers are refused)
        deduper = self.deduper
        if keys is not None and deduper is not None:
            fresh = deduper.fresh(topic, keys)
            if len(fresh) < len(bodies):
                bodies, keys = [bodies[i] for i in fresh], [keys[i] for i in fresh]
            if bodies:
                self._stored_keyed(deduper, topic, keys, self.topic(topic).publish, bodies, ttl_ms)
            return
        self._stored(self.topic(topic).publish, bodies, ttl_ms)

    def _stored_keyed(
        self,
        deduper: Deduper,
        topic: str,
        keys: Sequence[str],
        publish: Callable[..., None],
        *args: Any,
    ) -> None:
        """A keyed publish stored as `_stored` stores one, its keys remembered in the same
        hold: the store writes the keys' record first, naming where the messages end in
        their queues (storage/dedupe.py), so that a kill -9 between the two writes costs a
        key, which the start finds unbacked and forgets, not a key's message stored twice. A
        refusal forgets them (the publisher retries for real)."""
        commit = self.commit

        def stored_and_remembered() -> None:
            journaled = commit.journaled
            publish(*args)
            # a message handed straight to a consumer under --durable-inflight has its
            # journal's record as its copy on disk: no queue position names it, so its keys
            # follow it
            deduper.remember(topic, keys, after=commit.journaled != journaled)
            # a write that fails refuses the publish, there or when a reactor's pass writes
            # (its publisher is closed unanswered): either way it is retried, to be stored
            commit.later(partial(deduper.written, topic, keys))

        try:
            self._stored(stored_and_remembered)
        except Refused:
            deduper.forget(topic, keys)
            raise

    def _store_batch(self, name: str, bodies: list[bytes]) -> None:
        topics = self.topics  # (`topic(name)` inline while it is there: a call a pass saved)
        (topics[name] if name in topics else self.topic(name)).publish(bodies)

    def _stored(self, publish: Callable[..., None], *args: Any) -> None:
        """One publish (an MPUB's bodies, in each queue they reach; a deferral's journal
        record) is one write per file; inside a reactor's pass the pass's hold is the outer
        one, and a publisher answered at once has its records written now."""
        try:
            _, error = held(self.commit, publish, *args)
        except _REFUSALS as exc:
            raise self._refused(exc) from exc
        if error is not None:
            raise self._refused(StoreError(error))
        self._written_now()

    def publish_deferred(self, topic: str, body: bytes, delay_ms: int, key: str = "") -> None:
        deduper = self.deduper if key else None
        if deduper is None:
            self._stored(self.topic(topic).publish_deferred, body, delay_ms)
        elif deduper.fresh(topic, [key]):
            self._stored_keyed(
                deduper, topic, [key], self.topic(topic).publish_deferred, body, delay_ms
            )

    def _written_now(self) -> None:
        """Inside another's hold, for a publisher answered at once: what the publish buffered
        (its de-duplication keys) is written now."""
        commit = self.commit
        if commit.depth and not commit.deferring and (error := commit.flush()) is not None:
            raise self._refused(StoreError(error))

    def _refused(self, exc: Exception) -> Refused:
        """What refused a publish, as the one refusal the front-ends answer."""
        if isinstance(exc, MessageTooBig):
            return Refused.too_big(exc.size, exc.limit)
        if isinstance(exc, QueueFull):
            return Refused("full", str(exc))
        self.last_error = str(exc)  # a store failure: /ping says NOK until the next start
        return Refused("store", str(exc))

    def store_failed(self, reason: str) -> None:
        """A store failed outside a publish (an fsync): health turns NOK."""
        self.last_error = reason

    def store_wrote(self) -> None:
        """A store wrote again (a front-end's own log): health turns OK, as nsqd's does on
        the next good write."""
        self.last_error = None

    @property
    def health(self) -> str:
        """nsqd's GetHealth: "OK", or "NOK - <the last store error>"."""
        return f"NOK - {self.last_error}" if self.last_error else "OK"

    # -- clients -----------------------------------------------------------------------------

    def next_client_id(self) -> int:
        self._client_seq += 1
        return self._client_seq

    def add_client(self, client: Peer) -> None:
        self.clients[client.id] = client

    def remove_client(self, client: Peer) -> None:
        self.clients.pop(client.id, None)

    # -- time and shutdown ---------------------------------------------------------------------

    def scan(self, now: float) -> None:
        """The scanner's sweep: each channel's due messages queued again as it goes, then
        handed out in a hold of the group commit (`Channel.redeliver`), as a pass of the loop
        holds its reads: with --sync-every=1 what a timer delivers again from disk has its
        read position written before its FIN can be read (the syncer wrote it ~100 ms later,
        and a kill -9 right after the redelivery's FIN gave it back, every time)."""
        commit = self.commit
        for topic in list(self.topics.values()):
            topic.scan()
            for channel in list(topic.channels.values()):
                due = channel.expire(now)
                if due is None:
                    continue
                _, error = held(commit, channel.redeliver, *due)
                if error is not None:  # what the hand-out wrote (a journal's record)
                    self.store_failed(error)

    def close(self) -> None:
        """Clean stop: every topic and channel puts what it holds into its store."""
        for topic in list(self.topics.values()):
            try:
                topic.close()
            except StoreError as exc:
                log.error("TOPIC(%s): failed to flush to disk - %s", topic.name, exc)
            except Exception as exc:  # a bug in one topic must not cost the others their stop
                kind = type(exc).__name__
                log.error("TOPIC(%s): failed to close - %s: %s", topic.name, kind, exc)
