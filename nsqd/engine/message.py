"""The daemon's message record: one per message per channel, no reference cycles."""

from __future__ import annotations

from typing import Any


class Message:
    # inflight.TimeoutQueue.deliver_run, storage/overflow.DiskOverflow.get_many and
    # group/pull.LinkDecoder.feed set these fields themselves: keep them in step
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
