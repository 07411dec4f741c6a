"""A channel's in-flight set (nsqd/engine/inflight.py) on its own: what the scanner gets back
when deadlines pass, and how long a finished message outlives its FIN."""

from __future__ import annotations

import weakref

from nsqd.engine.inflight import TimeoutQueue
from nsqd.engine.message import Message


class Tracked(Message):
    """A message a weak reference can follow (Message itself has slots only)."""


def message(i: int) -> Tracked:
    return Tracked(b"%016d" % i, b"body", 0)


def test_expired_messages_come_back_by_deadline_finished_never_touched_later() -> None:
    q = TimeoutQueue()
    a, b, c, d = (message(i) for i in range(4))
    q.deliver([a, b], None, 0.0, 10.0)
    q.deliver([c], None, 1.0, 5.0)
    q.deliver([d], None, 2.0, 20.0)
    del q.by_id[b.id]  # finished
    a.deadline = 30.0  # touched
    assert q.pop_expired(4.0) == []
    assert q.pop_expired(10.0) == [c]
    assert q.pop_expired(25.0) == [d]
    assert q.pop_expired(30.0) == [a]
    assert len(q) == 0 and q.pop_expired(100.0) == []


def test_a_finished_message_is_let_go_soon_one_at_a_time_or_in_batches() -> None:
    """Finished messages stay referenced from the deadline heap until it is rebuilt, each
    walked by the collector while it lives: at most 4,096 of them (or 3 for each message in
    flight), whether one message is in flight at a time or 2,500, and whether or not one
    message delivered first is held all along (it keeps the heap's top)."""
    for live, batch, held in [(1, 1, 0), (2500, 100, 0), (1, 1, 1), (1, 7, 1)]:
        q = TimeoutQueue()
        finished: list[weakref.ref[Tracked]] = []
        flying: list[Tracked] = []
        stuck = [message(-1)] if held else []
        q.deliver(stuck, None, 0.0, 1.0)
        for start in range(0, 30_000, batch):
            msgs = [message(i) for i in range(start, start + batch)]
            q.deliver(list(msgs), None, 0.0, 60.0)
            flying += msgs
            while len(flying) > live:
                done = flying.pop(0)
                del q.by_id[done.id]
                finished.append(weakref.ref(done))
                del done
            del msgs
        alive = sum(ref() is not None for ref in finished)
        assert alive <= max(4096, 3 * live) + batch, (live, batch, alive)
        if not held:  # finished in the order delivered: let go within two entries of it
            assert alive <= 3 * batch, (live, batch, alive)
        assert len(q) == live + held
        assert q.pop_expired(1.0) == stuck
        assert sorted(q.pop_expired(60.0), key=lambda m: m.id) == flying
