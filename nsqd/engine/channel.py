"""Channel: one consumer group of a topic. Its consumers share its messages.

Hot path, all synchronous (no task switch per message): `put` hands a message to the next
subscribed consumer with credit (round robin) or queues it; FIN/REQ/TOUCH act on the in-flight
set; `refresh` runs when a consumer's credit changes and drains the queue into it. The daemon's
scanner calls `scan` to time out in-flight messages and release deferred ones (later.py, the
deferred set and the sweep, is its base).

Every change of in-flight state happens here (`_hand_out`, `finish`, `requeue`, `touch`,
`scan`, `empty`): consumers (ports.Consumer) are told, never trusted to do the bookkeeping.
A channel with attributes (policies/) consults its `policy` at the named points: new messages
in, hand-out, retry (REQ, timeout) and the scan; without attributes its policy is the null one
and the record-free paths (`put_run`, `take_run`) apply. Its `journal` (--durable-inflight) is
told of every change of in-flight and deferred state; without one it is `NO_JOURNAL`. Time is
read through the settings' clock port."""

from __future__ import annotations

import time
from collections import deque
from collections.abc import Callable, Sequence
from typing import TYPE_CHECKING, Any

from protocol.v2 import ErrorCode, NSQError

from .e2e import E2ELatency
from .inflight import TimeoutQueue
from .later import Later
from .message import Message
from .policies.attributes import ChannelAttributes
from .policies.policy import NO_CHANNEL_POLICY, ChannelPolicy, NoChannelPolicy
from .ports import NO_JOURNAL, UNBOUNDED
from .queue import Backlog, messages
from .settings import Settings
from .stale import NO_STALE, NoStale, PumpFilter, StaleFilter

# What one round of a hand-out takes from the queue per ready consumer, at most (messages of
# any size): the round goes on while consumers have credit and room in their output.
HAND_OUT_BYTES = 1 << 20

if TYPE_CHECKING:
    from .ports import Consumer, Journal, OverflowFactory


def _fed(channel: Channel, consumer: Consumer) -> None:
    """The `starved` of a channel that nobody else feeds (every channel of a lone nsqd)."""


class Channel(Later):
    # counted only by policies (not in nsqd's /stats)
    dead_letter_count = 0
    expired_count = 0
    dropped_count = 0
    delivery_count = 0  # deliveries, counting redeliveries (RSMQ's totalrecv)
    leases: dict[str, Any] | None = None  # holders of what HTTP received (engine/leases.py)
    # told after a consumer's credit changed (which one: a peer's link is one too): a group's
    # worker (nsqd/group) pulls from its peers what its own consumers have credit for
    starved: Callable[[Channel, Consumer], None] = staticmethod(_fed)

    def __init__(
        self,
        topic_name: str,
        name: str,
        settings: Settings,
        new_overflow: OverflowFactory,
        on_unused: Callable[[Channel], None],
        journal: Journal = NO_JOURNAL,
    ) -> None:
        self.topic_name = topic_name
        self.name = name
        self.ephemeral = name.endswith("#ephemeral")
        self._on_unused = on_unused  # an ephemeral channel's last consumer left
        overflow = new_overflow(f"{topic_name}:{name}", self.ephemeral)
        self.backlog = Backlog(settings.mem_queue_size, overflow)
        # --mem-queue-size=0: every message goes through the disk queue, as in nsqd (ephemeral
        # channels, which have no disk, still hand messages to a waiting consumer).
        self._hand_off = settings.mem_queue_size > 0 or self.ephemeral
        self.in_flight = TimeoutQueue()
        self.deferred = TimeoutQueue()
        self.consumers: dict[int, Consumer] = {}
        self._ready: deque[Consumer] = deque()  # the rotation of consumers with credit
        self._in_ready: set[int] = set()  # their ids
        self.paused = False
        self.deleted = False
        self.message_count = 0
        self.requeue_count = 0
        self.timeout_count = 0
        self.max_msg_timeout = settings.max_msg_timeout
        percentiles = settings.e2e_percentiles
        self.e2e_latency = E2ELatency(settings.e2e_window, percentiles) if percentiles else None
        self.max_consumers = settings.max_channel_consumers
        self.clock = settings.clock
        self.journal = journal  # --durable-inflight: in-flight and deferred state on disk
        # the topic's pump drops what the journal brought back (stale.py)
        self.stale: PumpFilter | NoStale = NO_STALE
        self.attributes = ChannelAttributes()
        # set by the topic from the attributes (topic.refresh_policies)
        self.policy: ChannelPolicy | NoChannelPolicy = NO_CHANNEL_POLICY
        self.created_at = time.time_ns() // 1_000_000
        self.modified_at = self.created_at
        journal.attach(self._live)
        self._recover(journal)

    def _live(self) -> tuple[list[Message], list[tuple[Message, int]]]:
        """In-flight and deferred messages (with due unix ms), for the journal's compaction."""
        deferred = [(m, self._wall_ms(m.deadline)) for m in self.deferred.by_id.values()]
        return list(self.in_flight.by_id.values()), deferred

    def _recover(self, journal: Journal) -> None:
        """What the journal kept from the last run: deferred messages wait for their original
        due time; in-flight ones go back to the queue at once, attempts kept; the disk
        queue's stale copies of them are dropped (stale.py)."""
        in_flight, deferred = journal.recover()
        ids = {m.id for m in in_flight}
        ids.update(m.id for m, _ in deferred)
        StaleFilter.install(f"{self.topic_name}:{self.name}", self.backlog, set(ids))
        if ids:
            self.stale = PumpFilter(ids)
        now, wall = self.clock(), time.time_ns() // 1_000_000
        for msg, due_ms in deferred:
            self.deferred.add(msg, now + max(0, due_ms - wall) / 1000)
        if in_flight:
            self.backlog.extend(in_flight)
            journal.released([m.id for m in in_flight])

    def __repr__(self) -> str:
        return f"Channel({self.topic_name}:{self.name})"

    @property
    def depth(self) -> int:
        return len(self.backlog)

    # -- messages in -----------------------------------------------------------------------

    def put(self, msg: Message) -> None:
        """A new message from the topic."""
        self.put_many([msg])

    def put_many(self, msgs: list[Message], *, pumped: bool = False) -> None:
        """New messages from the topic (an MPUB, or a chunk of the topic's backlog: `pumped`,
        whose refused part waits in memory, `_keep`)."""
        self.message_count += len(msgs)
        msgs = self.policy.incoming(self, msgs)
        fresh = bool(self._ready) and not self.backlog  # else a refill is under way (_dispatch)
        if fresh and not self.paused and self._hand_off:
            msgs = self._hand_out(msgs)  # straight to consumers with credit
        if not msgs:
            return
        if pumped:
            self._keep(*self.backlog.extend_refusing(msgs))
        else:
            self.backlog.extend(msgs)  # a publish: its publisher is refused
        if fresh:
            self._dispatch(len(msgs))  # (--mem-queue-size=0: they went through the disk)
        drop = self.policy.excess(self)
        if drop:
            self.dropped_count += len(self.backlog.take(drop))

    def put_moved(self, msgs: list[Message], takes: Callable[[Consumer], bool]) -> None:
        """Messages moved in from a peer (--workers, group/pull.py): `put_many`, handed out
        only to the consumers `takes` (this worker's own). A peer's link among the ready ones
        took them straight back, before this worker's FIN of the first copy reached the peer,
        which then had two copies under one id and refused that FIN. What is queued goes to
        whoever has credit later, as any queued message."""
        ready = self._ready
        aside = [c for c in ready if not takes(c)]
        if aside:
            self._ready = deque(c for c in ready if takes(c))
        try:
            self.put_many(msgs)
        finally:
            if aside:  # back in the rotation, but one that left meanwhile
                self._ready.extend(c for c in aside if c.id in self._in_ready)

    def put_run(self, ids: Sequence[bytes], bodies: Sequence[bytes], ts: int) -> None:
        """New messages of one publish (PUB, MPUB): records are made only for what is handed
        out now; the rest waits as a run of the publish's lists (queue.Run)."""
        if not self.policy.plain:
            return self.put_many(messages(ids, bodies, ts))  # policies work on records
        n = len(ids)
        self.message_count += n
        start = 0
        fresh = bool(self._ready) and not self.backlog  # else a refill is under way (_dispatch)
        if fresh and not self.paused and self._hand_off:
            start = self._hand_out_run(ids, bodies, ts)
        self.backlog.extend_run(ids, bodies, ts, start)
        if fresh and start < n:
            self._dispatch(n - start)  # (--mem-queue-size=0: they went through the disk)

    def _dispatch(self, budget: int = UNBOUNDED) -> bool:
        """Hand queued messages to the clients in the ready rotation, `budget` messages at
        most; True when it stopped there with more to hand out (see `dispatch_more`).

        Unbounded, it stops only when no consumer has credit or the queue is empty, so a
        consumer with credit waits in the rotation while messages are queued only after a
        budgeted refill stopped, and its reactor goes on with it in the passes after. A
        publish to a queue that holds messages then leaves them to that refill: the publisher
        does not do the consumers' refill from the disk queue (an MPUB 200 beside bench_reader
        took 5 ms so), and a requeue hands out its one message at most."""
        ready, backlog = self._ready, self.backlog
        while ready and backlog and not self.paused:
            if budget <= 0:
                return True
            credit = min(sum(c.credit() for c in ready), budget)
            if credit <= 0:
                return False
            # bounded by bytes too: a consumer's credit is counted in messages, and a few
            # thousand large ones read from disk at once would stall the loop and sit in its
            # output buffer (a consumer takes no more once its output passes its high water)
            limit = HAND_OUT_BYTES * len(ready)
            run = backlog.take_run(credit, limit) if self.policy.plain else None
            if run is not None:  # the common case: records made as they are handed out
                ids, bodies, ts = run
                given = self._hand_out_run(ids, bodies, ts)
                if given < len(ids):
                    backlog.push_front(messages(ids[given:], bodies[given:], ts))
                    return False
                budget -= given
                continue
            taken = backlog.take(credit, limit)
            if not taken:
                return False  # a disk depth that was off: nothing more to read
            rest = self._hand_out(taken)
            if rest:
                backlog.push_front(rest)
                return False
            budget -= len(taken)
        return False

    def dispatch_more(self, budget: int) -> bool:
        """Go on with a hand-out that stopped at its budget (`refresh(consumer, budget)`
        returned True); True again while more is left. A deleted channel has nothing."""
        return not self.deleted and self._dispatch(budget)

    def _hand_out(self, msgs: list[Message]) -> list[Message]:
        """Give `msgs` to ready consumers round robin, a fair share each, putting each batch
        in flight; return what is left."""
        ready, in_ready, in_flight = self._ready, self._in_ready, self.in_flight
        now = self.clock()
        policy = self.policy
        msgs, expired = policy.unexpired(self, msgs)  # never delivered past its TTL
        self.expired_count += expired
        while ready and msgs:
            consumer = ready.popleft()
            credit = consumer.credit()
            if credit <= 0:
                in_ready.discard(consumer.id)
                continue
            n = min(credit, max(1, len(msgs) // (len(ready) + 1)))
            if n >= len(msgs):
                batch, msgs = msgs, []
            else:
                batch, msgs = msgs[:n], msgs[n:]
            if consumer.sample_rate:
                batch = consumer.sample(batch)
            if batch:
                in_flight.deliver(batch, consumer, now, now + policy.timeout_for(consumer))
            self._sent(consumer, batch)
        return msgs

    def _sent(self, consumer: Consumer, batch: list[Message]) -> None:
        """`batch` is in flight to `consumer`: count it, journal it, send it, and keep the
        consumer in the rotation while it has credit."""
        if batch:
            self.delivery_count += len(batch)
            self.journal.held(batch)
            consumer.send(batch)
        if consumer.credit() > 0:
            self._ready.append(consumer)
        else:
            self._in_ready.discard(consumer.id)

    def _hand_out_run(self, ids: Sequence[bytes], bodies: Sequence[bytes], ts: int) -> int:
        """`_hand_out` for messages of one publish that have no record yet (no policy): each
        consumer's share is made in flight in one pass (inflight.deliver_run). Returns how
        many were handed out (the rest are the caller's)."""
        ready, in_ready, in_flight = self._ready, self._in_ready, self.in_flight
        now = self.clock()
        pos, total = 0, len(ids)
        while ready and pos < total:
            consumer = ready.popleft()
            credit = consumer.credit()
            if credit <= 0:
                in_ready.discard(consumer.id)
                continue
            end = pos + min(credit, max(1, (total - pos) // (len(ready) + 1)))
            deadline = now + consumer.msg_timeout
            if consumer.sample_rate:
                batch = consumer.sample(messages(ids[pos:end], bodies[pos:end], ts))
                if batch:
                    in_flight.deliver(batch, consumer, now, deadline)
            else:
                batch = in_flight.deliver_run(
                    ids[pos:end], bodies[pos:end], ts, consumer, now, deadline
                )
            pos = end
            self._sent(consumer, batch)
        return pos

    # -- consumers -------------------------------------------------------------------------

    def add_consumer(self, consumer: Consumer) -> None:
        if self.max_consumers and len(self.consumers) >= self.max_consumers:
            raise NSQError(
                ErrorCode.E_SUB_FAILED,
                f"SUB failed consumers for {self.topic_name}:{self.name} "
                f"exceeds limit of {self.max_consumers}",
            )
        self.consumers[consumer.id] = consumer

    def remove_consumer(self, consumer: Consumer) -> None:
        # Its in-flight messages stay in flight until their timeout, as in nsqd.
        if self.consumers.pop(consumer.id, None) is None:
            return
        if consumer.id in self._in_ready:
            self._in_ready.discard(consumer.id)
            if consumer in self._ready:  # not if `put_moved` holds it aside
                self._ready.remove(consumer)
        if self.ephemeral and not self.consumers and not self.deleted:
            self._on_unused(self)

    def refresh(self, consumer: Consumer, budget: int = UNBOUNDED) -> bool:
        """The consumer's credit may have changed: (re)join the rotation, hand out the queue,
        `budget` messages at most: True when more is left for `dispatch_more` (a reactor
        refilling a consumer from a long backlog a share per pass, so that one consumer's
        refill does not hold up every other connection's commands)."""
        if consumer.id not in self._in_ready and consumer.credit() > 0:
            self._in_ready.add(consumer.id)
            self._ready.append(consumer)
        more = self._dispatch(budget)
        self.starved(self, consumer)
        return more

    def refresh_all(self) -> None:
        for consumer in list(self.consumers.values()):
            self.refresh(consumer)

    # -- FIN / REQ / TOUCH -----------------------------------------------------------------

    @staticmethod
    def _not_yours(msg: Message | None, msg_id: bytes, verb: str, code: ErrorCode) -> NSQError:
        reason = "ID not in flight" if msg is None else "client does not own message"
        return NSQError(code, f"{verb} {msg_id.decode('latin-1')} failed {reason}")

    def _take(self, consumer: Consumer, msg_id: bytes, verb: str, code: ErrorCode) -> Message:
        msg = self.in_flight.get(msg_id)
        if msg is None or msg.owner is not consumer:
            raise self._not_yours(msg, msg_id, verb, code)
        return msg

    def finish(self, consumer: Consumer, msg_ids: list[bytes]) -> list[NSQError]:
        """FIN each id; the E_FIN_FAILED errors (non-fatal) come back in order."""
        by_id = self.in_flight.by_id
        get = by_id.get
        e2e = self.e2e_latency
        done = 0
        for msg_id in msg_ids:  # the consume hot path: a FIN per message, none refused
            msg = get(msg_id)
            if msg is None or msg.owner is not consumer:
                break
            del by_id[msg_id]
            msg.owner = None
            done += 1
            if e2e is not None:
                e2e.insert(msg.timestamp)
        if done == len(msg_ids):
            finished, errors = msg_ids, []
        else:
            finished, errors = self._finish_rest(consumer, msg_ids, done)
        consumer.finished(len(finished))
        if finished:
            self.journal.released(finished)
        return errors

    def _finish_rest(
        self, consumer: Consumer, msg_ids: list[bytes], done: int
    ) -> tuple[list[bytes], list[NSQError]]:
        """finish() from its first refused id on: the ids finished and the errors."""
        by_id = self.in_flight.by_id
        finished, errors = msg_ids[:done], []
        for msg_id in msg_ids[done:]:
            msg = by_id.get(msg_id)
            if msg is None or msg.owner is not consumer:
                errors.append(self._not_yours(msg, msg_id, "FIN", ErrorCode.E_FIN_FAILED))
                continue
            del by_id[msg_id]
            msg.owner = None
            finished.append(msg_id)
            if self.e2e_latency is not None:
                self.e2e_latency.insert(msg.timestamp)
        return finished, errors

    def requeue(self, consumer: Consumer, msg_id: bytes, delay_ms: int) -> None:
        if self.put_back(consumer, msg_id, delay_ms):
            self._dispatch(1)

    def put_back(self, consumer: Consumer, msg_id: bytes, delay_ms: int) -> int:
        """REQ without its hand-out: 1 when the message is back in the queue, for the caller
        to hand out (`redeliver`: HTTP's REQs, in a hold of the group commit)."""
        msg = self._take(consumer, msg_id, "REQ", ErrorCode.E_REQ_FAILED)
        del self.in_flight.by_id[msg_id]
        msg.owner = None
        consumer.requeued()
        self.requeue_count += 1
        return self._retry(msg, delay_ms)

    def _retry(self, msg: Message, delay_ms: int) -> int:
        """A REQ'd or timed-out message: back to the queue (1: for the caller to hand out) or
        deferred, unless its policy sends it to the dead-letter topic."""
        if self.policy.retry(self, msg):
            self.dead_letter_count += 1
            self.journal.released([msg.id])
            return 0
        if delay_ms > 0:
            self.defer(msg, delay_ms)
            return 0
        return self._requeue(msg)

    def touch(self, consumer: Consumer, msg_id: bytes, timeout: float | None = None) -> None:
        """TOUCH: in flight again for the consumer's timeout (or `timeout` s: an HTTP lease)."""
        msg = self._take(consumer, msg_id, "TOUCH", ErrorCode.E_TOUCH_FAILED)
        # Never past delivery + max-msg-timeout; the heap entry catches up lazily.
        if timeout is None:
            timeout = self.policy.timeout_for(consumer)
        deadline = self.clock() + timeout
        msg.deadline = min(deadline, msg.delivered_at + self.max_msg_timeout)

    # -- taken on request (HTTP /channel/receive; ours) -------------------------------------

    def lend(self, owner: Consumer, n: int, timeout: float) -> list[Message]:
        """Up to n queued messages, now in flight to `owner` for `timeout` s (a lease that is
        not in the ready rotation: it asks instead). Nothing while paused, as for TCP."""
        if self.paused or n <= 0:
            return []
        msgs: list[Message] = []
        while len(msgs) < n and self.backlog:
            taken = self.backlog.take(n - len(msgs))
            if not taken:
                break
            taken, expired = self.policy.unexpired(self, taken)
            self.expired_count += expired
            msgs += taken
        if msgs:
            now = self.clock()
            self.in_flight.deliver(msgs, owner, now, now + timeout)
            self.delivery_count += len(msgs)
            self.journal.held(msgs, at_once=True)  # the lease is answered right after
        return msgs

    # -- admin -----------------------------------------------------------------------------

    def pause(self) -> None:
        self.paused = True

    def unpause(self) -> None:
        self.paused = False
        self.refresh_all()

    def empty(self) -> None:
        """Drop queued, in-flight and deferred messages (later FINs for them fail)."""
        self.backlog.clear()
        self.in_flight.clear()
        self.deferred.clear()
        self.journal.clear()
        for consumer in self.consumers.values():
            consumer.emptied()
        self.refresh_all()

    def close_consumers(self) -> None:
        for consumer in list(self.consumers.values()):
            consumer.close()

    def close(self) -> None:
        """Clean shutdown: queued, in-flight and deferred messages all go to disk (deferred ones
        lose their delay, as in nsqd; with a journal they stay there, due times kept)."""
        self.close_consumers()
        journal = self.journal
        kept = self._live()[1] if journal.durable else []
        extra = self.in_flight.clear()
        deferred = self.deferred.clear()
        if not journal.durable:
            extra += deferred
        for msg in extra:
            msg.owner = None
        self.backlog.close(extra)
        journal.close(kept)

    def delete(self) -> None:
        self.deleted = True
        self.close_consumers()
        self.in_flight.clear()
        self.deferred.clear()
        self.backlog.delete()
        self.journal.delete()
