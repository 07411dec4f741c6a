"""Messages seen and taken on request (ours; nsqd has neither): peeking at a channel's queued,
in-flight or deferred messages without changing them, and the `Lease` holder that HTTP
receive puts messages in flight to.

A `Lease` is one per channel: a `Consumer` that never has credit (it is never in the ready
rotation; `Channel.lend` gives it messages when asked) and is not in the channel's consumer
list (not a client in /stats). FIN/REQ/TOUCH by id go through the channel with the lease as
owner, so a message delivered to a TCP client can never be finished over HTTP, nor the other
way round, and an expired lease times out and is redelivered exactly like a TCP delivery."""

from __future__ import annotations

import time
from collections.abc import Iterator
from typing import TYPE_CHECKING, Any

import trio

if TYPE_CHECKING:
    from .channel import Channel
    from .message import Message


class Lease:
    """The holder of a channel's messages received over HTTP."""

    sample_rate = 0
    msg_timeout_explicit = True

    def __init__(self, lease_id: int, msg_timeout: float) -> None:
        self.id = lease_id
        self.msg_timeout = msg_timeout
        self.finished_count = self.requeued_count = self.timed_out_count = 0

    def credit(self) -> int:
        return 0

    def sample(self, msgs: list[Message]) -> list[Message]:
        return msgs

    def send(self, msgs: list[Message]) -> None:  # pragma: no cover - never in the rotation
        raise AssertionError("a lease is lent to, never sent to")

    def finished(self, n: int) -> None:
        self.finished_count += n

    def requeued(self) -> None:
        self.requeued_count += 1

    def timed_out(self) -> None:
        self.timed_out_count += 1

    def emptied(self) -> None:
        pass

    def close(self) -> None:
        pass

    def stats(self, topic_filter: str = "") -> dict[str, Any]:  # pragma: no cover
        return {}


def lease_of(channel: Channel, msg_timeout: float, name: str = "") -> Lease:
    """The channel's lease holder called `name` ("" for the default one), made on first use
    and kept on the channel. Named leases let one caller take a batch and another finish it
    whole (a Spark driver finishing what its executors received)."""
    leases = channel.leases
    if leases is None:
        leases = channel.leases = {}
    lease = leases.get(name)
    if lease is None:
        if len(leases) >= 256:
            _prune(channel, leases)
        lease = leases[name] = Lease(-1, msg_timeout)
    return lease


def held_by(channel: Channel, lease: Lease) -> list[bytes]:
    """The ids `lease` holds in flight now."""
    return [m.id for m in channel.in_flight.by_id.values() if m.owner is lease]


def receive(
    channel: Channel,
    lease: Lease,
    n: int,
    timeout: float,
    max_bytes: int = 0,
    again: bool = False,
    held_only: bool = False,
) -> list[Message]:
    """Up to n messages for `lease`, in flight for `timeout` s.

    `again` (a retried receive: a Spark task run twice, a batch replayed after a restart) gives
    back first what the lease already holds, oldest first, each touched for `timeout` (attempts
    unchanged: the same delivery), then queued messages up to n; `held_only` with it stops
    there (a group's worker gathers every worker's held messages before any takes a new one:
    group/messages.py). With `max_bytes`, taking stops
    once the bodies reach it; queued messages are taken in chunks that start at one message and
    at most double (sized by the largest body seen), so only the last chunk can pass the cap,
    by fewer messages than were taken before it. Neither changes `Channel.lend`."""
    msgs: list[Message] = []
    if again:
        held = [m for m in channel.in_flight.by_id.values() if m.owner is lease]
        held.sort(key=lambda m: (m.delivered_at, m.timestamp))
        msgs = held[:n]
        for m in msgs:
            channel.touch(lease, m.id, timeout)
        if held_only:
            return msgs
    if not max_bytes:
        return msgs + channel.lend(lease, n - len(msgs), timeout)
    size = sum(len(m.body) for m in msgs)
    largest = max((len(m.body) for m in msgs), default=0)
    while len(msgs) < n and size < max_bytes:
        room = (max_bytes - size) // largest if largest else 1
        chunk = channel.lend(lease, max(1, min(n - len(msgs), room, len(msgs) or 1)), timeout)
        if not chunk:
            break
        msgs += chunk
        for m in chunk:
            size += len(m.body)
            largest = max(largest, len(m.body))
    return msgs


def _prune(channel: Channel, leases: dict[str, Lease]) -> None:
    """Forget named leases that hold nothing any more (finished, or timed out)."""
    live = {id(m.owner) for m in channel.in_flight.by_id.values()}
    for name in [n for n, lease in leases.items() if n and id(lease) not in live]:
        del leases[name]


def due_ms(deadline: float) -> int:
    """A trio-clock deadline as unix ms."""
    return time.time_ns() // 1_000_000 + round((deadline - trio.current_time()) * 1000)


def peek(
    channel: Channel, state: str, n: int, chunk: int
) -> Iterator[tuple[list[Message], list[int | None] | None]]:
    """Up to n messages of `state`, oldest first, in parts of up to `chunk`, each with their
    due times (unix ms) when in flight or deferred (None: queued); nothing changes (attempts,
    order, timers). Queued messages are read part by part as they are asked for (a long
    backlog on disk); the held ones are sorted once."""
    if state == "queued":
        for part in channel.backlog.peek_chunks(n, chunk):
            yield part, None
        return
    if state == "in_flight":
        held = sorted(channel.in_flight.by_id.values(), key=lambda m: (m.delivered_at, m.timestamp))
    else:
        held = sorted(channel.deferred.by_id.values(), key=lambda m: m.deadline)
    held = held[:n]
    for a in range(0, len(held), chunk):
        part = held[a : a + chunk]
        yield part, [due_ms(m.deadline) for m in part]
