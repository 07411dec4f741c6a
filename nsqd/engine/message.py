"""The daemon's message record: one per message per channel, no reference cycles."""

from __future__ import annotations

from collections.abc import Iterable
from typing import Any


class Message:
    # inflight.TimeoutQueue.deliver_run and records() below set these fields themselves:
    # keep the three in step
    __slots__ = (
        "attempts",
        "body",
        "deadline",
        "delivered_at",
        "id",
        "owner",
        "timestamp",
    )
    # unix ns after which it is not delivered; 0: none (policies.ExpiringMessage has its own)
    expires = 0
    # a DPUB's delay while it waits at its topic; 0: none (DeferredMessage has its own: a
    # slot every record would carry, and every record made would store)
    defer_ms = 0

    def __init__(
        self,
        msg_id: bytes,
        body: bytes,
        timestamp: int,
        attempts: int = 0,
        owner: Any = None,
        delivered_at: float = 0.0,
        deadline: float = 0.0,
    ) -> None:
        self.id = msg_id  # 16 ASCII hex bytes
        self.body = body
        self.timestamp = timestamp  # wall-clock ns at publish, kept across requeues
        self.attempts = attempts
        self.owner = owner  # the consumer holding it while in flight
        self.deadline = deadline  # trio clock, while in flight (TOUCH moves it) or deferred
        self.delivered_at = delivered_at

    def copy(self) -> Message:
        # Each channel gets its own record; the body bytes are shared.
        return Message(self.id, self.body, self.timestamp, self.attempts)

    def __repr__(self) -> str:
        return f"Message({self.id!r}, attempts={self.attempts})"

    def __eq__(self, other: Any) -> bool:
        return self is other

    __hash__ = object.__hash__


def records(fields: Iterable[tuple[int, int, bytes, bytes]], less: int = 0) -> list[Message]:
    """Records from (timestamp, attempts, id, body) fields, attempts `less` fewer (never below
    0): a disk queue's read-ahead, a peer's deliveries to the link. Fields set here, not by
    __init__ (no Python call per message, as inflight.deliver_run)."""
    out: list[Message] = []
    append = out.append
    new = object.__new__
    for ts, attempts, msg_id, body in fields:
        msg = new(Message)
        msg.id = msg_id
        msg.body = body
        msg.timestamp = ts
        msg.attempts = attempts - less if attempts > less else 0
        msg.owner = None
        msg.delivered_at = msg.deadline = 0.0
        append(msg)
    return out


class DeferredMessage(Message):
    """A DPUB's message: its delay, until its topic hands it to the channels (each defers it;
    then it is 0)."""

    __slots__ = ("defer_ms",)

    def __init__(self, msg_id: bytes, body: bytes, timestamp: int, defer_ms: int) -> None:
        super().__init__(msg_id, body, timestamp)
        self.defer_ms = defer_ms

    def copy(self) -> DeferredMessage:
        m = DeferredMessage(self.id, self.body, self.timestamp, self.defer_ms)
        m.attempts = self.attempts
        return m
