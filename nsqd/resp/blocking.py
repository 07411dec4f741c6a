"""The blocking engine of BLPOP/BRPOP/BLMOVE/BRPOPLPUSH (seed 001 §4): FIFO waiters per key,
served after each command that gave a watched key elements, atomically (no other command runs
between the pop and the reply being fixed), the earliest waiter first; one push of several
elements serves several waiters. A waiter on a bridge key (channel:<t>:<c>) is also a channel
consumer (bridge.py) and is served by whichever comes first.

A waiter is removed from every queue when it is served, times out, or its connection closes."""

from __future__ import annotations

from collections import deque
from collections.abc import Callable
from typing import TYPE_CHECKING

if TYPE_CHECKING:
    from .keyspace import Keyspace


class Waiter:
    """One blocked client: the database it waits in, its keys in the caller's order, how it
    pops (`left`) and what it does with the element (`deliver`: the encoded reply; a move
    pushes it on first)."""

    __slots__ = ("consumers", "deliver", "done", "keys", "ks", "left", "notify", "reply")

    def __init__(
        self,
        ks: Keyspace,
        keys: list[bytes],
        left: bool,
        deliver: Callable[[bytes, bytes], bytes],
    ) -> None:
        self.ks = ks
        self.keys = keys
        self.left = left
        self.deliver = deliver
        self.done = False
        self.reply = b""
        self.notify: Callable[[], None] | None = None  # the reactor's wake-up for its client
        self.consumers: list = []  # bridge consumers to leave once done (bridge.py)

    def finish(self, reply: bytes) -> None:
        self.reply = reply
        self.done = True
        if self.notify is not None:
            self.notify()


class Blocking:
    """The waiters of every database: each keyspace's `watched` holds its key -> queue."""

    def __init__(self, ready: list[tuple[Keyspace, bytes]]) -> None:
        self.ready = ready  # shared with the keyspaces, which append to it

    def add(self, waiter: Waiter) -> None:
        queues: dict[bytes, deque[Waiter]] = waiter.ks.watched  # type: ignore[assignment]
        for key in dict.fromkeys(waiter.keys):
            if not key.startswith((b"channel:", b"topic:")):
                queues.setdefault(key, deque()).append(waiter)

    def remove(self, waiter: Waiter) -> None:
        queues: dict[bytes, deque[Waiter]] = waiter.ks.watched  # type: ignore[assignment]
        for key in dict.fromkeys(waiter.keys):
            queue = queues.get(key)
            if queue is None:
                continue
            try:
                queue.remove(waiter)
            except ValueError:
                pass
            if not queue:
                del queues[key]

    def serve_ready(self) -> None:
        """Serve the waiters of every key that got elements, FIFO per key, until the key is
        empty or has no waiter; a move's push may make another key ready, served in turn."""
        ready_now = self.ready
        while ready_now:
            ready = ready_now[:]
            ready_now.clear()  # the same list object: the keyspaces keep appending to it
            for ks, key in dict.fromkeys(ready):
                queues: dict[bytes, deque[Waiter]] = ks.watched  # type: ignore[assignment]
                queue = queues.get(key)
                while queue:
                    lst = ks.data.get(key)
                    if not isinstance(lst, deque) or not lst:
                        break
                    waiter = queue.popleft()
                    if waiter.done:
                        continue
                    self.remove(waiter)
                    elem = ks.pop(key, 1, waiter.left)[0]
                    waiter.finish(waiter.deliver(key, elem))
                if queue is not None and not queue:
                    queues.pop(key, None)
