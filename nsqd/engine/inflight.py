"""Messages keyed by id, each with a deadline: a channel's in-flight set and its deferred set.

A dict gives FIN/REQ/TOUCH their O(1) lookup; a heap of (deadline, seq, [messages]) gives the
scanner the expired ones, one heap entry per delivered batch (they share a deadline). Removal
from the dict leaves the heap entry behind (lazy deletion); a TOUCH only moves
`message.deadline`, and the stale entry is re-pushed when it surfaces. No timer object per
message, one sweep per channel per scan."""

from __future__ import annotations

import heapq
from itertools import count

from .message import Message

# Dead references kept at most (and at most 3 in 4) where `_trim` cannot take them (a message
# in flight for long at the heap's top): a finished message lives until the heap is rebuilt,
# and while it lives the interpreter's collector walks it. With 65,536 kept, a worker serving
# one message at a time held ~17k finished messages (with their entry's tuple and list: 50k
# objects, the whole young generation), and each collection of that generation stopped the
# worker for 19-25 ms on 2 cores (the latency row's p99). The rebuild costs what is live, at
# most a quarter of what it drops.
DEAD_KEPT = 4096


class TimeoutQueue:
    __slots__ = ("_heap", "_heap_msgs", "_seq", "by_id")

    def __init__(self) -> None:
        self.by_id: dict[bytes, Message] = {}
        self._heap: list[tuple[float, int, list[Message]]] = []
        self._heap_msgs = 0  # messages referenced from the heap, dead ones included
        self._seq = count()

    def __len__(self) -> int:
        return len(self.by_id)

    def add(self, msg: Message, deadline: float) -> None:
        """A deferred message, released at `deadline`."""
        self.add_many([msg], deadline)

    def add_many(self, msgs: list[Message], deadline: float) -> None:
        by_id = self.by_id
        for msg in msgs:
            msg.deadline = deadline
            by_id[msg.id] = msg
        self._push(msgs, deadline)

    def deliver(self, msgs: list[Message], owner: object, now: float, deadline: float) -> None:
        """Messages handed to `owner` at `now`: one more attempt each, in flight until
        `deadline` (one loop: this is the delivery hot path)."""
        by_id = self.by_id
        for msg in msgs:
            msg.attempts += 1
            msg.owner = owner
            msg.delivered_at = now
            msg.deadline = deadline
            by_id[msg.id] = msg
        self._push(msgs, deadline)

    def deliver_run(
        self,
        ids: list[bytes],
        bodies: list[bytes],
        ts: int,
        owner: object,
        now: float,
        deadline: float,
    ) -> list[Message]:
        """`deliver` for messages that have no record yet: each record is made in flight
        (attempts 1, owner, deadline) in one constructor call."""
        by_id = self.by_id
        msgs = []
        append = msgs.append
        new = object.__new__
        for msg_id, body in zip(ids, bodies, strict=True):
            # Message's fields set here, not by its __init__: no Python call per message
            # (~40% of the cost of making a record; the consume hot path)
            msg = new(Message)
            msg.id = msg_id
            msg.body = body
            msg.timestamp = ts
            msg.attempts = 1
            msg.owner = owner
            msg.delivered_at = now
            msg.deadline = deadline
            by_id[msg_id] = msg
            append(msg)
        self._push(msgs, deadline)
        return msgs

    def _push(self, msgs: list[Message], deadline: float) -> None:
        heapq.heappush(self._heap, (deadline, next(self._seq), msgs))
        self._heap_msgs += len(msgs)
        self._trim()
        if self._heap_msgs > DEAD_KEPT and self._heap_msgs > 4 * len(self.by_id):
            self._compact()

    def _trim(self) -> None:
        """Drop up to two entries at the heap's top whose messages are all finished: where
        messages are finished in the order they were delivered (the common case, one timeout
        for all), dead entries go as they come, one or two a push, not thousands at a rebuild
        (freeing 4,096 messages at once took ~2 ms on 2 cores: the latency row's p99). The
        top entry's last message first: while it is in flight the entry stays, at one look."""
        heap, by_id = self._heap, self.by_id
        for _ in range(2):
            if len(heap) < 2:
                return
            msgs = heap[0][2]
            for msg in reversed(msgs):
                if by_id.get(msg.id) is msg:
                    return  # in flight (perhaps touched, or delivered again: kept either way)
            heapq.heappop(heap)
            self._heap_msgs -= len(msgs)

    def get(self, msg_id: bytes) -> Message | None:
        return self.by_id.get(msg_id)

    def pop_expired(self, now: float) -> list[Message]:
        """Remove and return every message whose deadline is at or before `now`."""
        heap, by_id = self._heap, self.by_id
        expired: list[Message] = []
        while heap and heap[0][0] <= now:
            deadline, _, msgs = heapq.heappop(heap)
            self._heap_msgs -= len(msgs)
            for msg in msgs:
                if by_id.get(msg.id) is not msg or msg.deadline < deadline:
                    continue  # finished, requeued or re-added since: a dead reference
                if msg.deadline > deadline:  # touched: wait for the new deadline
                    heapq.heappush(heap, (msg.deadline, next(self._seq), [msg]))
                    self._heap_msgs += 1
                    continue
                del by_id[msg.id]
                expired.append(msg)
        return expired

    def clear(self) -> list[Message]:
        msgs = list(self.by_id.values())
        self.by_id.clear()
        self._heap.clear()
        self._heap_msgs = 0
        return msgs

    def _compact(self) -> None:
        """Mostly dead references (messages finished long before their deadline): rebuild
        from what is live, one entry per run of messages that share a deadline (those of one
        hand-out, consecutive in `by_id`), as they were pushed. One entry a message would leave
        `_trim` two messages a push to drop while a push adds a run: with a consumer's FINs
        lagging another's, a rebuild came every ~8,000 messages delivered, 2.7% of a reader's
        worker."""
        seq = self._seq
        heap: list[tuple[float, int, list[Message]]] = []
        last = None
        run: list[Message] = []
        for msg in self.by_id.values():
            if msg.deadline != last:
                last = msg.deadline
                run = [msg]
                heap.append((last, next(seq), run))
            else:
                run.append(msg)
        heapq.heapify(heap)
        self._heap = heap
        self._heap_msgs = len(self.by_id)
