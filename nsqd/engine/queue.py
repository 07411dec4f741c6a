"""A topic's or channel's queue of messages waiting for a consumer.

Memory first, up to --mem-queue-size; beyond it the overflow store: the disk queue
(storage/overflow.py), or nothing for ephemeral topics and channels, which drop what does not fit in
memory, as nsqd does."""

from __future__ import annotations

from collections import deque
from collections.abc import Iterable, Iterator, Sequence
from itertools import chain, repeat

from protocol.v2.bodies import PackedBodies

from .message import Message
from .ports import UNBOUNDED, Overflow, StoreError


class DropOverflow:
    """Ephemeral queues: what does not fit in memory is dropped."""

    __slots__ = ()
    has_expiries = False

    def close(self) -> None:
        pass

    def delete(self) -> None:
        pass

    def put(self, msg: Message) -> None:
        pass

    def put_run(self, ids: Sequence[bytes], bodies: Sequence[bytes], ts: int) -> None:
        pass

    def put_many(self, msgs: Iterable[Message]) -> None:
        pass

    def get(self) -> Message | None:
        return None

    def get_many(self, n: int, max_bytes: int = UNBOUNDED) -> list[Message]:
        return []

    def peek(self, n: int) -> list[Message]:
        return []

    def peek_chunks(self, n: int, chunk: int) -> Iterator[list[Message]]:
        return iter(())

    def __len__(self) -> int:
        return 0

    def clear(self) -> None:
        pass


class Run:
    """Consecutive messages of one publish still waiting in a queue, kept as the publish's
    own sequences (ids, bodies, one timestamp; their items are made when sliced: guid.IdRun,
    PackedBodies) and a position: no per-message record until a
    message is taken. Channels of one topic share the lists, each with its own Run."""

    __slots__ = ("bodies", "end", "ids", "pos", "ts")

    def __init__(
        self, ids: Sequence[bytes], bodies: Sequence[bytes], ts: int, pos: int, end: int
    ) -> None:
        self.ids = ids
        self.bodies = bodies
        self.ts = ts
        self.pos = pos
        self.end = end

    def take(self, n: int, max_bytes: int = UNBOUNDED) -> tuple[list[Message], int]:
        """The next n messages as records (fresh: attempts 0), none more once their bodies
        hold `max_bytes` (at least one), advancing the position; and their bodies' bytes."""
        a = self.pos
        b, nbytes = fitting(self.bodies, a, min(a + n, self.end), max_bytes)
        self.pos = b
        msgs = list(map(Message, self.ids[a:b], self.bodies[a:b], repeat(self.ts, b - a)))
        return msgs, nbytes

    def view(self, n: int) -> list[Message]:
        a = self.pos
        b = min(a + n, self.end)
        return list(map(Message, self.ids[a:b], self.bodies[a:b], repeat(self.ts, b - a)))


def fitting(bodies: Sequence[bytes], a: int, b: int, max_bytes: int) -> tuple[int, int]:
    """The end (a < end <= b, when a < b) of the bodies from `a` on, none more once they hold
    `max_bytes`, and how many bytes they hold: what a hand-out of large messages takes at once."""
    if type(bodies) is PackedBodies:
        size = bodies.nbytes // max(len(bodies), 1) or 1
        end = min(b, a + max(1, -(-max_bytes // size)))
        return end, (end - a) * size
    total = sum(map(len, bodies[a:b]))
    if total <= max_bytes:
        return b, total
    total = 0
    for i in range(a, b):
        total += len(bodies[i])
        if total >= max_bytes:
            return i + 1, total
    return b, total


def messages(ids: Sequence[bytes], bodies: Sequence[bytes], ts: int) -> list[Message]:
    return list(map(Message, ids, bodies, repeat(ts, len(ids))))


class Backlog:
    """Memory holds records (requeued or deferred messages come back as records) and runs of
    a publish (`extend_run`), oldest first; `_count` is the messages memory holds."""

    __slots__ = ("_count", "_mem", "capacity", "overflow")

    def __init__(self, capacity: int, overflow: Overflow) -> None:
        self._mem: deque[Message | Run] = deque()
        self._count = 0
        self.capacity = capacity
        self.overflow = overflow

    def __len__(self) -> int:
        return self._count + len(self.overflow)

    def __bool__(self) -> bool:
        return self._count > 0 or len(self.overflow) > 0

    @property
    def backend_depth(self) -> int:
        return len(self.overflow)

    def put(self, msg: Message) -> None:
        if self._count < self.capacity:
            self._mem.append(msg)
            self._count += 1
        else:
            self.overflow.put(msg)

    def get(self) -> Message | None:
        # Older overflowed messages first once memory is drained, so none waits forever.
        if self._count:
            return self.take(1)[0]
        return self.overflow.get()

    def extend(self, msgs: list[Message]) -> None:
        put = self.overflow.put
        for msg in self._to_memory(msgs):
            put(msg)

    def extend_refusing(self, msgs: list[Message]) -> tuple[list[Message], StoreError | None]:
        """extend(), but the overflow's refusal returns the messages from the refused one on
        (none of them stored) and why, rather than raising; the ones before it are stored
        (a write a message, unless a group commit buffers them)."""
        rest = self._to_memory(msgs)
        put = self.overflow.put
        for i, msg in enumerate(rest):
            try:
                put(msg)
            except StoreError as exc:
                return rest[i:], exc
        return [], None

    def _to_memory(self, msgs: list[Message]) -> list[Message]:
        """What fits of `msgs` into memory goes there; the rest is the overflow's."""
        room = self.capacity - self._count
        if room >= len(msgs):
            self._mem.extend(msgs)
            self._count += len(msgs)
            return []
        if room > 0:
            self._mem.extend(msgs[:room])
            self._count += room
        return msgs[max(room, 0) :]

    def extend_run(
        self, ids: Sequence[bytes], bodies: Sequence[bytes], ts: int, start: int = 0
    ) -> None:
        """Messages ids[start:] of one publish, without a record each while in memory."""
        n = len(ids) - start
        if n <= 0:
            return
        room = self.capacity - self._count
        if room >= n:
            self._mem.append(Run(ids, bodies, ts, start, len(ids)))
            self._count += n
            return
        if room > 0:
            self._mem.append(Run(ids, bodies, ts, start, start + room))
            self._count += room
            start += room
        self.overflow.put_run(ids[start:], bodies[start:], ts)

    def take_run(
        self, n: int, max_bytes: int = UNBOUNDED
    ) -> tuple[list[bytes], list[bytes], int] | None:
        """Up to n messages (their bodies within `max_bytes`, at least one) from the head
        when it is a run, as (ids, bodies, timestamp) without records; None when the head is
        a record (or memory is empty)."""
        mem = self._mem
        if not mem:
            return None
        head = mem[0]
        if type(head) is not Run:
            return None
        a = head.pos
        b = head.pos = fitting(head.bodies, a, min(a + n, head.end), max_bytes)[0]
        if b >= head.end:
            mem.popleft()
        self._count -= b - a
        return head.ids[a:b], head.bodies[a:b], head.ts

    def take(self, n: int, max_bytes: int = UNBOUNDED) -> list[Message]:
        """Up to n messages, oldest first; none more once their bodies hold `max_bytes` (at
        least one), so a hand-out of large messages stays bounded in memory and time."""
        mem = self._mem
        msgs: list[Message] = []
        left = max_bytes
        while mem and len(msgs) < n and left > 0:
            head = mem[0]
            if type(head) is Run:
                taken, nbytes = head.take(n - len(msgs), left)
                left -= nbytes
                msgs += taken
                if head.pos >= head.end:
                    mem.popleft()
            else:
                msg: Message = mem.popleft()  # type: ignore[assignment]
                left -= len(msg.body)
                msgs.append(msg)
        self._count -= len(msgs)
        if len(msgs) < n and left > 0:
            # read ahead, not one call a message
            msgs += self.overflow.get_many(n - len(msgs), left)
        return msgs

    def peek(self, n: int) -> list[Message]:
        """Up to n messages in the order take() gives them, left in place."""
        out = self.peek_memory(n)
        if len(out) < n:
            out += self.overflow.peek(n - len(out))
        return out

    def peek_chunks(self, n: int, chunk: int) -> Iterator[list[Message]]:
        """peek(n) in parts of up to `chunk`: memory's (bounded by --mem-queue-size) as it is
        now, then the overflow's, each part read when it is asked for."""
        mem = self.peek_memory(n)
        for a in range(0, len(mem), chunk):
            yield mem[a : a + chunk]
        if len(mem) < n:
            yield from self.overflow.peek_chunks(n - len(mem), chunk)

    def peek_memory(self, n: int) -> list[Message]:
        out: list[Message] = []
        for item in self._mem:
            if len(out) >= n:
                break
            if type(item) is Run:
                out += item.view(n - len(out))
            else:
                out.append(item)  # type: ignore[arg-type]
        return out

    def clear(self) -> None:
        self._mem.clear()
        self._count = 0
        self.overflow.clear()

    def push_front(self, msgs: list[Message]) -> None:
        """Give back messages taken but not handed out, ahead of the rest."""
        self._mem.extendleft(reversed(msgs))
        self._count += len(msgs)

    def close(self, extra: list[Message] | None = None) -> None:
        """Clean stop: memory (and `extra`, e.g. in-flight messages) to the overflow store,
        a run's records made as they are written (not all of memory's at once)."""
        mem = self._mem
        held = chain.from_iterable(
            item.view(item.end - item.pos) if type(item) is Run else (item,) for item in mem
        )
        try:
            self.overflow.put_many(chain(held, extra or ()))
        finally:
            mem.clear()
            self._count = 0
        self.overflow.close()

    def delete(self) -> None:
        self._mem.clear()
        self._count = 0
        self.overflow.delete()
