"""A channel as a front-end sees it: `ChannelHandle`, given by `Broker.existing_channel` (and
`Broker.channel_handle`), acts on one channel by message id and lease name and answers values
(api.Deliveries, api.Outcome, api.ChannelFigures), never the channel's own records or sets.

HTTP's peek / receive / pop / fin / req / touch / cancel / defer and the Redis bridge's pops go
through it; TCP consumers keep the channel's own hot path (Broker.subscribe)."""

from __future__ import annotations

from collections.abc import Callable, Iterable, Iterator
from typing import TYPE_CHECKING

from protocol.v2 import NSQError

from . import leases
from .api import ChannelFigures, Deliveries, Failure, Outcome
from .ports import StoreError, held

if TYPE_CHECKING:
    from .channel import Channel
    from .message import Message
    from .policies.attributes import ChannelAttributes
    from .ports import Consumer, WriteBatch


class ChannelHandle:
    __slots__ = ("_channel", "_commit", "_lease_timeout")

    def __init__(self, channel: Channel, lease_timeout: float, commit: WriteBatch) -> None:
        self._channel = channel
        self._lease_timeout = lease_timeout  # a new lease's own timeout (--msg-timeout)
        # the stores' group commit: a take is held in it as a pass of the loop holds its reads
        self._commit = commit

    # -- what it is ---------------------------------------------------------------------------

    @property
    def attributes(self) -> ChannelAttributes:
        return self._channel.attributes

    def figures(self) -> ChannelFigures:
        c = self._channel
        return ChannelFigures(
            c.depth,
            len(c.in_flight),
            len(c.deferred),
            c.message_count,
            c.delivery_count,
            c.created_at,
            c.modified_at,
            c.dead_letter_count,
            c.expired_count,
            c.dropped_count,
        )

    # -- seeing and taking ------------------------------------------------------------------

    def peek(self, state: str, n: int, chunk: int) -> Iterator[Deliveries]:
        """Up to n messages of `state` (one of api.STATES), oldest first, in parts of up to
        `chunk`, each read when it is asked for; nothing changes."""
        for msgs, due in leases.peek(self._channel, state, n, chunk):
            yield self._deliveries(msgs, due)

    def receive(
        self,
        lease: str,
        n: int,
        timeout: float,
        max_bytes: int = 0,
        again: bool = False,
        held_only: bool = False,
    ) -> Deliveries:
        """Up to n messages in flight under the named lease for `timeout` s (leases.receive)."""
        channel = self._channel
        holder = self._lease(lease)
        msgs = self._taken(leases.receive, channel, holder, n, timeout, max_bytes, again, held_only)
        return self._deliveries(msgs, leases.due_ms(msgs[0].deadline) if msgs else 0)

    def pop(self, lease: str, n: int, timeout: float) -> Deliveries:
        """Up to n queued messages, received and finished at once."""
        return self._deliveries(self._taken(self._pop, self._lease(lease), n, timeout), None)

    def _pop(self, holder: Consumer, n: int, timeout: float) -> list[Message]:
        channel = self._channel
        msgs = channel.lend(holder, n, timeout)
        if msgs:
            channel.finish(holder, [m.id for m in msgs])
        return msgs

    def _taken(self, take: Callable[..., list[Message]], *args: object) -> list[Message]:
        """`take(*args)` in a hold of the group commit, as a pass of the loop holds its reads:
        with --sync-every=1 a disk queue writes its read position at the release, once what
        the take wrote is on file (a journal's records), and so before the answer leaves; the
        syncer wrote it ~100 ms later, and a kill -9 right after the answer (a pop's, a
        receive's FIN'd at once) handed the messages out again. A failed write of the hold
        refuses the take, as it would have unheld."""
        msgs, error = held(self._commit, take, *args)
        if error is not None:
            raise StoreError(error)
        return msgs

    def held(self, lease: str) -> list[bytes]:
        """The ids the named lease holds in flight now."""
        return leases.held_by(self._channel, self._lease(lease))

    # -- by id: FIN, REQ, TOUCH (each id once; a TCP consumer's message is never HTTP's) ------

    def finish(self, ids: Iterable[bytes], lease: str | None = None) -> Outcome:
        """FIN: one channel call per holder (a Spark driver finishes tens of thousands)."""
        channel = self._channel
        done, failed = 0, list[Failure]()
        for holder, group in self._holders(ids, lease).items():
            by_id = channel.in_flight.by_id
            bad = [i for i in group if (m := by_id.get(i)) is None or m.owner is not holder]
            errors = channel.finish(holder, group)
            failed += [
                Failure(i, e.code.value, e.desc or "") for i, e in zip(bad, errors, strict=True)
            ]
            done += len(group) - len(bad)
        return Outcome(done, failed)

    def requeue(self, ids: Iterable[bytes], delay_ms: int, lease: str | None = None) -> Outcome:
        """REQ: each message back in the queue (written as it goes: one its store refuses
        waits in memory), then what went back handed out in a hold of the group commit, as
        the scanner's redelivery: with --sync-every=1 a disk queue read by that hand-out
        writes its read position before the FIN can be read (unheld, the syncer wrote it
        ~100 ms later, and a kill -9 after the FINs gave them back). A failed write of the
        hand-out (a journal's record) is logged by its file, /ping NOK."""
        channel = self._channel
        queued = [0]

        def put_back(holder: Consumer, msg_id: bytes) -> None:
            queued[0] += channel.put_back(holder, msg_id, delay_ms)

        outcome = self._each(ids, lease, put_back)
        if queued[0]:
            held(self._commit, channel.redeliver, queued[0], [])
        return outcome

    def touch(self, ids: Iterable[bytes], timeout: float, lease: str | None = None) -> Outcome:
        channel = self._channel
        return self._each(ids, lease, lambda holder, i: channel.touch(holder, i, timeout))

    def _each(
        self, ids: Iterable[bytes], lease: str | None, act: Callable[[Consumer, bytes], None]
    ) -> Outcome:
        done, failed = 0, list[Failure]()
        for holder, group in self._holders(ids, lease).items():
            for msg_id in group:
                try:
                    act(holder, msg_id)
                except NSQError as exc:
                    failed.append(Failure(msg_id, exc.code.value, exc.desc or ""))
                else:
                    done += 1
        return Outcome(done, failed)

    def _holders(self, ids: Iterable[bytes], lease: str | None) -> dict[Consumer, list[bytes]]:
        """Each distinct id under the holder it acts through: the named lease (`lease`), else
        the HTTP lease that holds it (a message a TCP consumer holds fails with nsqd's
        reason, through the default lease)."""
        unique = list(dict.fromkeys(ids))
        if lease:
            return {self._lease(lease): unique}
        default = self._lease("")
        by_id = self._channel.in_flight.by_id
        groups: dict[Consumer, list[bytes]] = {}
        for msg_id in unique:
            msg = by_id.get(msg_id)
            owner = msg.owner if msg is not None else None
            holder = owner if isinstance(owner, leases.Lease) else default
            groups.setdefault(holder, []).append(msg_id)
        return groups

    # -- deferred messages by id ------------------------------------------------------------

    def cancel_deferred(self, msg_id: bytes) -> bool:
        return self._channel.cancel_deferred(msg_id)

    def reschedule_deferred(self, msg_id: bytes, delay_ms: int) -> bool:
        return self._channel.reschedule_deferred(msg_id, delay_ms)

    # -- consumers that ask (the Redis bridge's pops) ---------------------------------------

    def join(self, consumer: Consumer) -> None:
        self._channel.add_consumer(consumer)

    def leave(self, consumer: Consumer) -> None:
        self._channel.remove_consumer(consumer)

    def offer(self, consumer: Consumer) -> None:
        """Hand `consumer` what its credit allows now."""
        self._channel.refresh(consumer)

    def finish_for(self, consumer: Consumer, ids: list[bytes]) -> None:
        """FIN what was just sent to `consumer` (a pop takes and finishes)."""
        self._channel.finish(consumer, ids)

    def requeue_for(self, consumer: Consumer, ids: list[bytes]) -> None:
        """REQ what was just sent to `consumer` (a pop that could not take it): back in the
        queue, its attempts kept, for the next consumer."""
        for msg_id in ids:
            self._channel.requeue(consumer, msg_id, 0)

    # -- inside -----------------------------------------------------------------------------

    def _lease(self, name: str) -> leases.Lease:
        return leases.lease_of(self._channel, self._lease_timeout, name)

    def _deliveries(self, msgs: list[Message], due: list[int | None] | int | None) -> Deliveries:
        return Deliveries(msgs, due, self._channel.policy.ttl_ns)
