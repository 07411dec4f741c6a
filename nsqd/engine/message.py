"""The daemon's message record: one per message per channel, no reference cycles."""

from __future__ import annotations

from typing import Any


class Message:
    # inflight.TimeoutQueue.deliver_run sets these fields itself: keep the two in step
    __slots__ = (
        "attempts",
        "body",
        "deadline",
        "defer_ms",
        "delivered_at",
        "id",
        "owner",
        "timestamp",
    )
    # unix ns after which it is not delivered; 0: none (policies.ExpiringMessage has its own)
    expires = 0

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
        self.defer_ms = 0  # DPUB delay while still queued at the topic

    def copy(self) -> Message:
        # Each channel gets its own record; the body bytes are shared.
        m = Message(self.id, self.body, self.timestamp, self.attempts)
        m.defer_ms = self.defer_ms
        return m

    def __repr__(self) -> str:
        return f"Message({self.id!r}, attempts={self.attempts})"

    def __eq__(self, other: Any) -> bool:
        return self is other

    __hash__ = object.__hash__
