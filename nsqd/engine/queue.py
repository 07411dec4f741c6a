"""A topic's or channel's queue of messages waiting for a consumer.

Memory first, up to --mem-queue-size; beyond it the overflow store: the disk queue
(storage/overflow.py), or nothing for ephemeral topics and channels, which drop what does not fit in
memory, as nsqd does."""

from __future__ import annotations

from collections import deque
from itertools import islice

from .message import Message
from .ports import Overflow


class DropOverflow:
    """Ephemeral queues: what does not fit in memory is dropped."""

    __slots__ = ()

    def close(self) -> None:
        pass

    def delete(self) -> None:
        pass

    def put(self, msg: Message) -> None:
        pass

    def get(self) -> Message | None:
        return None

    def peek(self, n: int) -> list[Message]:
        return []

    def __len__(self) -> int:
        return 0

    def clear(self) -> None:
        pass


class Backlog:
    __slots__ = ("_mem", "capacity", "overflow")

    def __init__(self, capacity: int, overflow: Overflow) -> None:
        self._mem: deque[Message] = deque()
        self.capacity = capacity
        self.overflow = overflow

    def __len__(self) -> int:
        return len(self._mem) + len(self.overflow)

    def __bool__(self) -> bool:
        return bool(self._mem) or len(self.overflow) > 0

    @property
    def backend_depth(self) -> int:
        return len(self.overflow)

    def put(self, msg: Message) -> None:
        if len(self._mem) < self.capacity:
            self._mem.append(msg)
        else:
            self.overflow.put(msg)

    def get(self) -> Message | None:
        # Older overflowed messages first once memory is drained, so none waits forever.
        if self._mem:
            return self._mem.popleft()
        return self.overflow.get()

    def extend(self, msgs: list[Message]) -> None:
        mem = self._mem
        room = self.capacity - len(mem)
        if room >= len(msgs):
            mem.extend(msgs)
            return
        if room > 0:
            mem.extend(msgs[:room])
        put = self.overflow.put
        for msg in msgs[max(room, 0) :]:
            put(msg)

    def peek(self, n: int) -> list[Message]:
        """Up to n messages in the order take() gives them, left in place."""
        mem = self._mem
        if len(mem) >= n:
            return list(islice(mem, n))
        return list(mem) + self.overflow.peek(n - len(mem))

    def take(self, n: int) -> list[Message]:
        """Up to n messages, oldest first."""
        mem = self._mem
        if len(mem) >= n:
            popleft = mem.popleft
            return [popleft() for _ in range(n)]
        msgs = list(mem)
        mem.clear()
        get = self.overflow.get
        while len(msgs) < n and (m := get()) is not None:
            msgs.append(m)
        return msgs

    def clear(self) -> None:
        self._mem.clear()
        self.overflow.clear()

    def push_front(self, msgs: list[Message]) -> None:
        """Give back messages taken but not handed out, ahead of the rest."""
        self._mem.extendleft(reversed(msgs))

    def close(self, extra: list[Message] | None = None) -> None:
        """Clean stop: memory (and `extra`, e.g. in-flight messages) to the overflow store."""
        put = self.overflow.put
        for msg in self._mem:
            put(msg)
        for msg in extra or ():
            put(msg)
        self._mem.clear()
        self.overflow.close()

    def delete(self) -> None:
        self._mem.clear()
        self.overflow.delete()
