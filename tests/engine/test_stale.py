"""stale.py: after a kill -9 a channel's disk queue (and its topic's, through the pump) may
give again messages the --durable-inflight journal brought back; those copies are dropped,
and nothing else: not a message requeued behind them, not one that came only from disk."""

from __future__ import annotations

from pathlib import Path
from types import SimpleNamespace

from nsqd.engine.message import Message
from nsqd.engine.queue import Backlog
from nsqd.engine.stale import NO_STALE, PumpFilter, StaleFilter
from nsqd.storage.overflow import DiskOverflow


def disk(path: Path) -> DiskOverflow:
    health = SimpleNamespace(last_error=None)
    return DiskOverflow("t:c", str(path), 1 << 20, 1 << 20, 2500, 2.0, health, lambda: None)


def msg(i: int, attempts: int = 0) -> Message:
    return Message(b"%016d" % i, b"body-%d" % i, 1, attempts)


def ids(msgs: list[Message]) -> list[bytes]:
    return [m.id for m in msgs]


def test_drops_the_journaled_ids_among_what_was_on_disk_then_steps_aside(tmp_path: Path) -> None:
    backlog = Backlog(0, disk(tmp_path))  # --mem-queue-size=0: everything on disk
    on_disk = [msg(i) for i in range(10)]
    backlog.overflow.put_many(on_disk)
    journaled = {msg(2).id, msg(5).id, msg(9).id}
    inner = backlog.overflow
    StaleFilter.install("t:c", backlog, set(journaled))
    assert backlog.overflow is not inner
    # the journal's copies go behind what is on disk (mem0), then one of them, delivered and
    # requeued meanwhile: all past the start's reads, so none is taken for a stale copy
    backlog.extend([msg(2, 1), msg(5, 1), msg(9, 1)])
    backlog.put(msg(2, 2))
    assert ids(backlog.peek(3)) == [msg(0).id, msg(1).id, msg(3).id]
    first = backlog.take(4)
    assert ids(first) == [msg(i).id for i in (0, 1, 3, 4)]
    rest = backlog.take(100)
    assert ids(rest) == [msg(i).id for i in (6, 7, 8, 2, 5, 9, 2)]
    assert [m.attempts for m in rest[-4:]] == [1, 1, 1, 2]
    assert backlog.overflow is inner  # ten reads past the start: nothing more to check


def test_a_requeued_stale_copy_behind_the_first_is_dropped_too(tmp_path: Path) -> None:
    backlog = Backlog(0, disk(tmp_path))
    # message 1 was read, requeued (written again), read again and held: two stale copies
    backlog.overflow.put_many([msg(1), msg(2), msg(1, 1)])
    StaleFilter.install("t:c", backlog, {msg(1).id})
    backlog.extend([msg(1, 2)])
    got = backlog.take(10)
    assert [(m.id, m.attempts) for m in got] == [(msg(2).id, 0), (msg(1).id, 2)]


def test_byte_limit_and_at_least_one(tmp_path: Path) -> None:
    backlog = Backlog(0, disk(tmp_path))
    backlog.overflow.put_many([msg(i) for i in range(6)])
    StaleFilter.install("t:c", backlog, {msg(0).id, msg(1).id})
    got = backlog.take(10, max_bytes=1)  # one message however small the limit
    assert ids(got) == [msg(2).id]
    assert ids(backlog.take(10)) == [msg(i).id for i in (3, 4, 5)]


def test_nothing_installed_without_journaled_ids_or_disk(tmp_path: Path) -> None:
    backlog = Backlog(0, disk(tmp_path))
    inner = backlog.overflow
    StaleFilter.install("t:c", backlog, {msg(1).id})  # an empty disk queue
    assert backlog.overflow is inner
    inner.put(msg(1))
    StaleFilter.install("t:c", backlog, set())  # no journal, or an empty one
    assert backlog.overflow is inner


def test_clear_steps_aside(tmp_path: Path) -> None:
    backlog = Backlog(0, disk(tmp_path))
    inner = backlog.overflow
    inner.put_many([msg(1), msg(2)])
    StaleFilter.install("t:c", backlog, {msg(1).id})
    backlog.clear()
    assert backlog.overflow is inner and len(backlog) == 0
    backlog.put(msg(1, 1))
    assert ids(backlog.take(5)) == [msg(1).id]


def test_pump_filter_drops_each_journaled_id_once() -> None:
    pump = PumpFilter({msg(1).id, msg(3).id})
    assert ids(pump.fresh([msg(0), msg(1), msg(2)])) == [msg(0).id, msg(2).id]
    assert ids(pump.fresh([msg(1), msg(3)])) == [msg(1).id]  # 1 came once already
    batch = [msg(5)]
    assert NO_STALE.fresh(batch) is batch
