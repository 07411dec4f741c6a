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


class Counted(TimeoutQueue):
    """Counts its rebuilds."""

    rebuilds = 0

    def _compact(self) -> None:
        self.rebuilds += 1
        super()._compact()


def test_a_rebuild_keeps_each_hand_outs_messages_in_one_entry() -> None:
    """A message held long at the heap's top forces rebuilds; once it is finished, FINs in
    the order delivered let finished entries go as they come again, with no more rebuilds
    (a rebuild into one entry per message left `_trim` two messages a push to drop, so the
    heap filled again and was rebuilt every few thousand messages)."""
    q = Counted()
    stuck = message(-1)
    q.deliver([stuck], None, 0.0, 1.0)
    flying: list[Tracked] = []
    deadline = 60.0
    for start in range(0, 60_000, 100):
        if start == 20_000:
            del q.by_id[stuck.id]
            before = q.rebuilds
            assert before >= 2  # the held message made the heap fill
        deadline += 0.001
        msgs = [message(i) for i in range(start, start + 100)]
        q.deliver(msgs, None, 0.0, deadline)
        flying += msgs
        while len(flying) > 2500:
            del q.by_id[flying.pop(0).id]
    assert q.rebuilds - before <= 1
    assert len(q._heap) <= 2500 // 100 + 3  # entries of 100, not of one
    assert sorted(q.pop_expired(deadline), key=lambda m: m.id) == sorted(flying, key=lambda m: m.id)
