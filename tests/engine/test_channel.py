"""The engine on its own: a broker, its topics and channels driven through their synchronous
calls with no socket, no disk and trio's mock clock (timeouts and deferrals happen when the test
moves the clock and runs the scan the daemon's scanner would run)."""

from __future__ import annotations

from collections.abc import AsyncIterator, Sequence

import pytest
import trio
import trio.testing

from nsqd.engine.api import Refused
from nsqd.engine.broker import Broker
from nsqd.engine.channel import Channel
from nsqd.engine.message import Message
from nsqd.engine.ports import UNBOUNDED, StoreError
from nsqd.engine.queue import messages
from nsqd.engine.settings import Settings
from protocol.v2 import ErrorCode, NSQError


class ListOverflow:
    """An overflow store in a list (the engine's port; the disk queue is storage's)."""

    has_expiries = False

    def __init__(self) -> None:
        self.msgs: list[Message] = []
        self.refuse = ""  # a store error to raise on put

    def put(self, msg: Message) -> None:
        if self.refuse:
            raise StoreError(self.refuse)
        self.msgs.append(msg)

    def put_run(self, ids: Sequence[bytes], bodies: Sequence[bytes], ts: int) -> None:
        for msg in messages(ids, bodies, ts):
            self.put(msg)

    def get(self) -> Message | None:
        return self.msgs.pop(0) if self.msgs else None

    def get_many(self, n: int, max_bytes: int = UNBOUNDED) -> list[Message]:
        end = min(n, len(self.msgs))
        for i, msg in enumerate(self.msgs[:end]):
            max_bytes -= len(msg.body)
            if max_bytes <= 0:
                end = i + 1
                break
        taken, self.msgs[:end] = self.msgs[:end], []
        return taken

    def peek(self, n: int) -> list[Message]:
        return self.msgs[:n]

    def __len__(self) -> int:
        return len(self.msgs)

    def clear(self) -> None:
        self.msgs.clear()

    def close(self) -> None:
        pass

    def delete(self) -> None:
        self.msgs.clear()


class Reader:
    """A consumer as a front-end implements it: credit from RDY, the messages it was sent."""

    _seq = 0

    def __init__(self, rdy: int, msg_timeout: float = 60.0) -> None:
        Reader._seq += 1
        self.id = Reader._seq
        self.msg_timeout = msg_timeout
        self.sample_rate = 0
        self.msg_timeout_explicit = True
        self.rdy = rdy
        self.got: list[Message] = []
        self.sent: list[tuple[bytes, int]] = []  # (body, attempts) as each delivery went out
        self.in_flight = 0
        self.timeouts = 0
        self.closed = False

    def credit(self) -> int:
        return self.rdy - self.in_flight

    def sample(self, msgs: list[Message]) -> list[Message]:
        return msgs

    def send(self, msgs: list[Message]) -> None:
        self.got += msgs
        self.sent += [(m.body, m.attempts) for m in msgs]
        self.in_flight += len(msgs)

    def finished(self, n: int) -> None:
        self.in_flight -= n

    def requeued(self) -> None:
        self.in_flight -= 1

    def timed_out(self) -> None:
        self.in_flight -= 1
        self.timeouts += 1

    def emptied(self) -> None:
        self.in_flight = 0

    def close(self) -> None:
        self.closed = True

    def stats(self, topic_filter: str = "") -> dict[str, object]:
        return {}

    def bodies(self) -> list[bytes]:
        return [m.body for m in self.got]


class Engine:
    """A broker with list stores; `spawn` runs a topic's pump in the test's nursery."""

    def __init__(self, nursery: trio.Nursery, **settings: object) -> None:
        self.stores: dict[str, ListOverflow] = {}
        self.broker = Broker(Settings(**settings), self._overflow, nursery.start_soon)  # type: ignore[arg-type]

    def _overflow(self, name: str, ephemeral: bool) -> ListOverflow:
        store = self.stores[name] = ListOverflow()
        return store

    def channel(self, topic: str = "t", name: str = "c") -> Channel:
        return self.broker.channel(topic, name)

    def subscribe(self, reader: Reader, topic: str = "t", name: str = "c") -> Channel:
        channel = self.channel(topic, name)
        channel.add_consumer(reader)
        channel.refresh(reader)
        return channel


@pytest.fixture
async def engine(mock_clock: trio.testing.MockClock) -> AsyncIterator[Engine]:
    async with trio.open_nursery() as nursery:
        yield Engine(nursery)
        nursery.cancel_scope.cancel()


def bodies(n: int, prefix: str = "m") -> list[bytes]:
    return [f"{prefix}{i}".encode() for i in range(n)]


async def test_publish_before_any_channel_waits_in_the_topic(engine: Engine) -> None:
    engine.broker.publish("t", bodies(3))
    topic = engine.broker.topics["t"]
    assert topic.depth == 3 and topic.message_count == 3
    reader = Reader(rdy=10)
    engine.subscribe(reader)
    await trio.testing.wait_all_tasks_blocked()  # the topic's pump moves its queue
    assert reader.bodies() == bodies(3)
    assert topic.depth == 0


async def test_every_channel_gets_its_own_copy(engine: Engine) -> None:
    a, b = Reader(rdy=5), Reader(rdy=5)
    engine.subscribe(a, name="one")
    engine.subscribe(b, name="two")
    engine.broker.publish("t", bodies(4))
    assert a.bodies() == b.bodies() == bodies(4)
    assert [m.id for m in a.got] == [m.id for m in b.got]
    assert all(x is not y for x, y in zip(a.got, b.got, strict=True))  # a record per channel


async def test_consumers_of_one_channel_share_its_messages_within_their_credit(
    engine: Engine,
) -> None:
    a, b = Reader(rdy=3), Reader(rdy=3)
    channel = engine.subscribe(a)
    engine.subscribe(b)
    engine.broker.publish("t", bodies(10))
    assert len(a.got) == len(b.got) == 3
    assert sorted(a.bodies() + b.bodies() + [m.body for m in channel.backlog.take(10)]) == sorted(
        bodies(10)
    )


async def test_fin_frees_credit_and_the_queue_flows_again(engine: Engine) -> None:
    reader = Reader(rdy=1)
    channel = engine.subscribe(reader)
    engine.broker.publish("t", bodies(3))
    assert reader.bodies() == [b"m0"]
    assert channel.finish(reader, [reader.got[0].id]) == []
    channel.refresh(reader)  # what a front-end does after a FIN
    assert reader.bodies() == [b"m0", b"m1"]
    assert len(channel.in_flight) == 1 and channel.depth == 1


async def test_a_refill_with_a_budget_stops_there_and_goes_on_later(engine: Engine) -> None:
    """A reactor refills a consumer from a long queue a share at a time (`refresh` with a
    budget, then `dispatch_more` in the passes after): in order, nothing twice, nothing lost,
    and True exactly while more is left for the consumer's credit."""
    channel = engine.channel()
    engine.broker.publish("t", bodies(100))
    reader = Reader(rdy=70)
    channel.add_consumer(reader)
    assert channel.refresh(reader, 30) is True
    assert reader.bodies() == bodies(30)
    assert channel.dispatch_more(30) is True
    assert channel.dispatch_more(30) is False  # its credit ends at 70: 10 of this share
    assert reader.bodies() == bodies(70) and channel.depth == 30
    assert channel.dispatch_more(30) is False  # nothing more until credit comes back


async def test_a_publish_leaves_a_refill_under_way_to_the_refill(engine: Engine) -> None:
    """While a budgeted refill is under way (a consumer with credit, messages queued) a
    publish only queues its messages: the publisher does not do the consumer's refill from
    the queue; the refill hands them out after the older ones."""
    channel = engine.channel()
    engine.broker.publish("t", bodies(50))
    reader = Reader(rdy=100)
    channel.add_consumer(reader)
    assert channel.refresh(reader, 20) is True
    engine.broker.publish("t", bodies(5, "new"))
    assert reader.bodies() == bodies(20) and channel.depth == 35
    while channel.dispatch_more(20):
        pass
    assert reader.bodies() == bodies(50) + bodies(5, "new") and channel.depth == 0
    engine.broker.publish("t", bodies(1, "then"))  # nothing queued: straight to its credit
    assert reader.bodies()[-1] == b"then0"


async def test_a_deleted_channel_has_no_refill_to_go_on_with(engine: Engine) -> None:
    channel = engine.channel()
    engine.broker.publish("t", bodies(10))
    reader = Reader(rdy=10)
    channel.add_consumer(reader)
    assert channel.refresh(reader, 4) is True
    engine.broker.remove_channel("t", "c")
    assert channel.dispatch_more(4) is False
    assert reader.bodies() == bodies(4)


async def test_a_run_of_fins_with_refused_ids_finishes_the_others(engine: Engine) -> None:
    """A read's FINs with refusals among them (an unknown id, one given twice, another
    consumer's): each refused in order, every other one finished and counted once."""
    a, b = Reader(rdy=3), Reader(rdy=1)
    channel = engine.subscribe(a)
    engine.subscribe(b)
    engine.broker.publish("t", bodies(4))
    (x, y, z), (w,) = [m.id for m in a.got], [m.id for m in b.got]
    unknown = b"0123456789abcdef"
    errors = channel.finish(a, [x, unknown, y, x, w, z])
    assert [bytes(e) for e in errors] == [
        b"E_FIN_FAILED FIN " + unknown + b" failed ID not in flight",
        b"E_FIN_FAILED FIN " + x + b" failed ID not in flight",
        b"E_FIN_FAILED FIN " + w + b" failed client does not own message",
    ]
    assert a.in_flight == 0 and b.in_flight == 1
    assert list(channel.in_flight.by_id) == [w]


async def test_fin_of_an_unknown_or_foreign_id_is_refused_with_nsqds_codes(
    engine: Engine,
) -> None:
    a, b = Reader(rdy=1), Reader(rdy=1)
    channel = engine.subscribe(a)
    engine.subscribe(b)
    engine.broker.publish("t", bodies(2))
    [errors] = [channel.finish(b, [a.got[0].id])]
    assert [bytes(e) for e in errors] == [
        b"E_FIN_FAILED FIN " + a.got[0].id + b" failed client does not own message"
    ]
    [errors] = [channel.finish(a, [b"0123456789abcdef"])]
    assert [bytes(e) for e in errors] == [
        b"E_FIN_FAILED FIN 0123456789abcdef failed ID not in flight"
    ]
    with pytest.raises(NSQError) as req:
        channel.requeue(b, a.got[0].id, 0)
    assert req.value.code is ErrorCode.E_REQ_FAILED


async def test_timeout_requeues_with_attempts_counted(
    engine: Engine, mock_clock: trio.testing.MockClock
) -> None:
    reader = Reader(rdy=1, msg_timeout=5.0)
    channel = engine.subscribe(reader)
    engine.broker.publish("t", [b"x"])
    first = reader.got[0]
    assert first.attempts == 1
    mock_clock.jump(4.9)
    assert not channel.scan(trio.current_time())
    mock_clock.jump(0.2)
    assert channel.scan(trio.current_time())
    assert reader.timeouts == 1 and channel.timeout_count == 1
    assert reader.sent == [(b"x", 1), (b"x", 2)]  # redelivered


async def test_touch_moves_the_deadline(engine: Engine, mock_clock: trio.testing.MockClock) -> None:
    reader = Reader(rdy=1, msg_timeout=5.0)
    channel = engine.subscribe(reader)
    engine.broker.publish("t", [b"x"])
    mock_clock.jump(4)
    channel.touch(reader, reader.got[0].id)
    mock_clock.jump(4)
    assert not channel.scan(trio.current_time())  # 8 s after delivery, 4 s after the TOUCH
    mock_clock.jump(1.5)
    assert channel.scan(trio.current_time())


async def test_req_with_a_delay_defers_then_delivers_again(
    engine: Engine, mock_clock: trio.testing.MockClock
) -> None:
    reader = Reader(rdy=5)
    channel = engine.subscribe(reader)
    engine.broker.publish("t", [b"x"])
    channel.requeue(reader, reader.got[0].id, 2000)
    assert channel.requeue_count == 1 and len(channel.deferred) == 1
    mock_clock.jump(1.9)
    channel.scan(trio.current_time())
    assert len(reader.got) == 1
    mock_clock.jump(0.2)
    channel.scan(trio.current_time())
    assert reader.sent == [(b"x", 1), (b"x", 2)]


async def test_deferred_publish_is_held_until_due(
    engine: Engine, mock_clock: trio.testing.MockClock
) -> None:
    reader = Reader(rdy=5)
    channel = engine.subscribe(reader)
    engine.broker.publish_deferred("t", b"later", 3000)
    engine.broker.publish("t", [b"now"])
    assert reader.bodies() == [b"now"]
    mock_clock.jump(3.1)
    channel.scan(trio.current_time())
    assert reader.bodies() == [b"now", b"later"]


async def test_a_deferred_publish_waits_in_every_channel_then_comes_once_each(
    engine: Engine, mock_clock: trio.testing.MockClock
) -> None:
    """DPUB to a topic of two channels: each channel defers its own record of it (the delay
    travels with the copy), then delivers it."""
    a, b = Reader(rdy=5), Reader(rdy=5)
    first, second = engine.subscribe(a, name="a"), engine.subscribe(b, name="b")
    engine.broker.publish_deferred("t", b"later", 2000)
    assert len(first.deferred) == len(second.deferred) == 1
    assert a.got == b.got == []
    mock_clock.jump(2.1)
    first.scan(trio.current_time())
    second.scan(trio.current_time())
    assert a.bodies() == b.bodies() == [b"later"]
    assert a.got[0] is not b.got[0] and a.got[0].defer_ms == b.got[0].defer_ms == 0


async def test_pause_holds_messages_and_unpause_delivers_them(engine: Engine) -> None:
    reader = Reader(rdy=5)
    channel = engine.subscribe(reader)
    engine.broker.set_paused(engine.broker.topics["t"], channel, True)
    engine.broker.publish("t", bodies(2))
    assert reader.got == [] and channel.depth == 2
    engine.broker.set_paused(engine.broker.topics["t"], channel, False)
    assert reader.bodies() == bodies(2)


async def test_empty_drops_queued_in_flight_and_deferred(engine: Engine) -> None:
    reader = Reader(rdy=1)
    channel = engine.subscribe(reader)
    engine.broker.publish("t", bodies(3))
    channel.requeue(reader, reader.got[0].id, 60_000)
    channel.refresh(reader)
    held = reader.got[-1].id
    channel.empty()
    assert (channel.depth, len(channel.in_flight), len(channel.deferred)) == (0, 0, 0)
    assert reader.in_flight == 0
    assert [bytes(e) for e in channel.finish(reader, [held])] == [
        b"E_FIN_FAILED FIN " + held + b" failed ID not in flight"
    ]


async def test_what_passes_mem_queue_size_goes_to_the_overflow_store(
    mock_clock: trio.testing.MockClock,
) -> None:
    async with trio.open_nursery() as nursery:
        engine = Engine(nursery, mem_queue_size=2)
        channel = engine.channel()
        engine.broker.publish("t", bodies(5))
        store = engine.stores["t:c"]
        assert channel.depth == 5 and len(store) == 3
        reader = Reader(rdy=10)
        engine.subscribe(reader)
        assert sorted(reader.bodies()) == bodies(5) and len(store) == 0
        nursery.cancel_scope.cancel()


async def test_a_store_refusal_is_one_publish_failure_and_turns_health_nok(
    mock_clock: trio.testing.MockClock,
) -> None:
    async with trio.open_nursery() as nursery:
        engine = Engine(nursery, mem_queue_size=0)
        engine.channel()
        engine.stores["t"].refuse = "disk full"
        engine.stores["t:c"].refuse = "disk full"
        with pytest.raises(Refused, match="disk full") as refused:
            engine.broker.publish("t", [b"x"])
        assert refused.value.kind == "store"
        assert engine.broker.health == "NOK - disk full"
        nursery.cancel_scope.cancel()


async def test_ephemeral_channel_goes_with_its_last_consumer(engine: Engine) -> None:
    reader = Reader(rdy=1)
    channel = engine.subscribe(reader, name="tmp#ephemeral")
    topic = engine.broker.topics["t"]
    assert "tmp#ephemeral" in topic.channels
    channel.remove_consumer(reader)
    assert "tmp#ephemeral" not in topic.channels and channel.deleted


async def test_max_channel_consumers_refuses_the_next_sub(
    mock_clock: trio.testing.MockClock,
) -> None:
    async with trio.open_nursery() as nursery:
        engine = Engine(nursery, max_channel_consumers=1)
        engine.subscribe(Reader(rdy=1))
        with pytest.raises(NSQError) as refused:
            engine.subscribe(Reader(rdy=1))
        assert refused.value.code is ErrorCode.E_SUB_FAILED
        assert (
            bytes(refused.value) == b"E_SUB_FAILED SUB failed consumers for t:c exceeds limit of 1"
        )
        nursery.cancel_scope.cancel()


async def test_lend_puts_up_to_n_in_flight_for_a_lease(
    engine: Engine, mock_clock: trio.testing.MockClock
) -> None:
    channel = engine.channel()
    engine.broker.publish("t", bodies(5))
    holder = Reader(rdy=0)
    lent = channel.lend(holder, 3, 10.0)
    assert [m.body for m in lent] == bodies(3) and len(channel.in_flight) == 3
    assert channel.depth == 2
    mock_clock.jump(10.1)
    channel.scan(trio.current_time())
    assert channel.depth == 5 and len(channel.in_flight) == 0  # back when the lease ran out


async def test_max_depth_with_overflow_reject_refuses_the_publish_whole(engine: Engine) -> None:
    engine.broker.configure_channel("t", "c", {"max_depth": "2", "overflow": "reject"})
    engine.broker.publish("t", bodies(2))
    with pytest.raises(Refused, match=r"channel t:c is full \(2 of max_depth 2\)") as refused:
        engine.broker.publish("t", [b"one too many"])
    assert refused.value.kind == "full"
    assert engine.channel().depth == 2


async def test_delete_topic_closes_its_consumers_and_forgets_it(engine: Engine) -> None:
    reader = Reader(rdy=1)
    engine.subscribe(reader)
    engine.broker.delete_topic("t")
    assert "t" not in engine.broker.topics and reader.closed
