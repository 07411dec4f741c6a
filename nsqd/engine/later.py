"""What comes back to a channel later: deferred messages (DPUB, REQ with a delay, a message
its queue's disk refused, kept in memory and offered again every REQUEUE_RETRY seconds), those
moved or dropped by id (HTTP /message/defer, /message/cancel), and the scanner's sweep: in-flight
messages that timed out and deferred ones that fell due, queued again (`expire`) and handed out
(`redeliver`, which the broker runs in a hold of the group commit).

A base of channel.Channel (`Channel(Later)`): its calls are the channel's own methods, so the
hot paths that reach them (a REQ, the scanner's sweep) pay no extra call level."""

from __future__ import annotations

import time
from typing import TYPE_CHECKING

from ..log import log
from .ports import StoreError

if TYPE_CHECKING:
    from collections.abc import Callable

    from .inflight import TimeoutQueue
    from .message import Message
    from .policies.policy import ChannelPolicy, NoChannelPolicy
    from .ports import Consumer, Journal
    from .queue import Backlog

# how long a message its queue's disk refused waits in memory before it is offered again
REQUEUE_RETRY = 1.0


class Later:
    """The deferred set, the requeues and the scanner's sweep of a channel."""

    # A disk that refuses the channel's messages (full, failing) is logged when it starts, by
    # one line a retry round while it goes on and when it ends: a line per message per
    # round was 200 lines a second for a refused backlog of 200. (Class defaults: a channel
    # sets them only once its disk refuses.)
    _refusing = False  # messages wait in memory for the channel's queue to take them
    _refused = 0  # how many times the disk refused a message of the channel
    _refusal = ""  # the latest refusal's reason
    _retry_at = 0.0  # when all that wait are offered to the queue again, in one round

    topic_name: str
    name: str
    backlog: Backlog
    in_flight: TimeoutQueue
    deferred: TimeoutQueue
    consumers: dict[int, Consumer]
    journal: Journal
    policy: ChannelPolicy | NoChannelPolicy
    clock: Callable[[], float]
    message_count: int
    timeout_count: int
    expired_count: int

    if TYPE_CHECKING:

        def _retry(self, msg: Message, delay_ms: int) -> int: ...
        def _dispatch(self, budget: int = ...) -> bool: ...
        def refresh(self, consumer: Consumer, budget: int = ...) -> bool: ...

    def _wall_ms(self, deadline: float) -> int:
        """A deadline on the clock as unix ms (what a journal keeps across restarts)."""
        return time.time_ns() // 1_000_000 + round((deadline - self.clock()) * 1000)

    def put_deferred(self, msg: Message, delay_ms: int) -> None:
        self.message_count += 1
        self.defer(msg, delay_ms)

    def defer(self, msg: Message, delay_ms: int) -> None:
        deadline = self.clock() + delay_ms / 1000
        self.deferred.add(msg, deadline)
        self.journal.deferred([msg], self._wall_ms(deadline))

    def _requeue(self, msg: Message) -> int:
        """`msg` back in the queue (1), or kept in memory when its store refused it (0); the
        caller hands it out (`_dispatch`), the scanner's in a hold of its own (`redeliver`)."""
        try:
            self.backlog.put(msg)
        except StoreError as exc:
            self._requeue_later(msg, exc)
            return 0
        self.journal.released([msg.id])  # queued again: its queue keeps it now
        return 1

    def _requeue_later(self, msg: Message, exc: StoreError) -> None:
        """A timed-out, REQ'd or due message whose queue's disk refused it (full, failing:
        /ping is NOK by then) waits in memory as a deferred message and is offered to the
        queue again at the next retry round (`_kept`). Raised, the failure went up into the
        scanner (or the command) and stopped the daemon; nsqd drops such a message."""
        if not self._refused_first(exc):
            log.error(
                "CHANNEL(%s:%s): message %s not requeued, kept in memory - %s",
                self.topic_name,
                self.name,
                msg.id.decode("latin-1"),
                exc,
            )
        self.deferred.add(msg, self._retry_due())

    def _keep(self, refused: list[Message], exc: StoreError | None) -> None:
        """The part of a chunk of the topic's backlog that this channel's disk refused (full,
        failing: /ping is NOK by then) waits in memory as deferred messages, offered to the
        queue again at the next retry round as `_requeue_later`'s: the chunk has left the
        topic's queue (and reached the other channels), so dropped it was lost to this
        channel for good, as nsqd's pump loses it."""
        if not refused:
            return
        if not self._refused_first(exc, len(refused)):
            log.error(
                "CHANNEL(%s:%s): %d messages of the topic's backlog not queued, kept in memory"
                " - %s",
                self.topic_name,
                self.name,
                len(refused),
                exc,
            )
        due = self._retry_due()
        for msg in refused:
            self.deferred.add(msg, due)

    def _refused_first(self, exc: StoreError | None, n: int = 1) -> bool:
        """Count `n` messages the disk refused; False for the first refusal of a stretch (its
        caller logs it), True while the disk goes on refusing (the retry round logs them)."""
        self._refusal = str(exc)
        self._refused += n
        if self._refusing:
            return True
        self._refusing = True
        return False

    def _retry_due(self) -> float:
        """When the messages the disk refused are offered again: every one refused before
        that time waits for the same round, so a round logs one line, not one a message."""
        now = self.clock()
        if self._retry_at <= now:
            self._retry_at = now + REQUEUE_RETRY
        return self._retry_at

    def _kept(self, refusing: bool, queued: int, refused: int) -> None:
        """The end of a sweep while the disk refuses (`refusing`: since before it; else the
        stretch began in this sweep, whose first refusal is logged): one line for the
        `refused` it refused again, or one when it took them all (some queued, none refused)."""
        if not refusing:
            return
        if refused:
            log.error(
                "CHANNEL(%s:%s): %d messages kept in memory, disk refused: %s",
                self.topic_name,
                self.name,
                refused,
                self._refusal,
            )
        elif queued:
            self._refusing = False
            log.info(
                "CHANNEL(%s:%s): the disk takes messages again, %d queued",
                self.topic_name,
                self.name,
                queued,
            )

    def cancel_deferred(self, msg_id: bytes) -> bool:
        """Drop a deferred message; False when none of this channel has that id."""
        msg = self.deferred.by_id.pop(msg_id, None)  # its heap entry is skipped when it surfaces
        if msg is None:
            return False
        self.journal.released([msg_id])
        return True

    def reschedule_deferred(self, msg_id: bytes, delay_ms: int) -> bool:
        """Move a deferred message's due time to now + delay_ms; False when there is none."""
        msg = self.deferred.by_id.get(msg_id)
        if msg is None:
            return False
        self.defer(msg, delay_ms)  # a new heap entry; the old one is stale from now on
        return True

    def scan(self, now: float) -> bool:
        """Time out expired in-flight messages and release due deferred ones, then hand them
        out; True if any."""
        due = self.expire(now)
        if due is None:
            return False
        self.redeliver(*due)
        return True

    def expire(self, now: float) -> tuple[int, list[Consumer]] | None:
        """The scanner's first half: expired in-flight messages and due deferred ones back in
        the queue, each written as it goes (one its store refuses waits in memory, which a
        held write's failure could not tell); None when nothing was due, else how many were
        queued and the owners of those that timed out, for `redeliver`."""
        self.expired_count += self.policy.sweep(self)
        timed_out = self.in_flight.pop_expired(now)
        released = self.deferred.pop_expired(now)
        if not timed_out and not released:
            return None
        refusing, refused = self._refusing, self._refused
        queued = 0
        owners: list[Consumer] = []
        for msg in timed_out:
            self.timeout_count += 1
            owner = msg.owner
            msg.owner = None
            queued += self._retry(msg, 0)
            if owner is not None:
                owner.timed_out()
                owners.append(owner)
        for msg in released:
            queued += self._requeue(msg)
        if self._refusing:
            self._kept(refusing, queued, self._refused - refused)
        return queued, owners

    def redeliver(self, queued: int, owners: list[Consumer]) -> None:
        """The scanner's second half: what `expire` queued handed out (`queued` at most to
        the rotation), then the owners of the timed-out ones refilled. The broker holds the
        group commit around it, as a pass holds its reads: with --sync-every=1 a disk queue's
        read position is written at the release, in the same stretch, so before a FIN of
        these deliveries can be read (the queue's writes are `expire`'s, made unheld)."""
        if queued:
            self._dispatch(queued)
        consumers = self.consumers
        for owner in owners:
            if consumers.get(owner.id) is owner:
                self.refresh(owner)
