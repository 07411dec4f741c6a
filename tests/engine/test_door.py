"""The engine's door without a socket: a real Broker on real disk queues (storage's DiskOverflow
in a temporary directory), called as the front-ends call it. One refusal type carries every
front-end's words; the channel handle answers values, counts each id once, and leaves the
engine's records to the engine."""

from __future__ import annotations

from collections.abc import AsyncIterator
from pathlib import Path

import pytest
import trio

from nsqd.engine.api import Delivery, Making, Message, Outcome, Refused
from nsqd.engine.broker import Broker
from nsqd.engine.handle import ChannelHandle
from nsqd.engine.settings import Settings
from nsqd.storage.overflow import DiskOverflow

ABSENT = b"0123456789abcdef"


@pytest.fixture
async def broker(tmp_path: Path) -> AsyncIterator[Broker]:
    async with trio.open_nursery() as nursery:
        made: list[Broker] = []

        def new_overflow(name: str, ephemeral: bool) -> DiskOverflow:
            return DiskOverflow(name, str(tmp_path), 1 << 20, 1 << 20, 2500, 2.0, made[0], noop)

        made.append(Broker(Settings(), new_overflow, nursery.start_soon))
        yield made[0]
        made[0].close()
        nursery.cancel_scope.cancel()


def noop() -> None:
    pass


async def test_a_full_queue_is_one_refusal_in_every_front_end_s_words(broker: Broker) -> None:
    broker.configure_channel("t", "c", {"max_depth": "2"})
    broker.publish("t", [b"a", b"b"])
    with pytest.raises(Refused) as caught:
        broker.publish("t", [b"c"])
    full = caught.value
    reason = "channel t:c is full (2 of max_depth 2)"
    err = full.nsq("MPUB")
    assert (str(err), err.fatal) == (f"E_MPUB_FAILED MPUB failed {reason}", False)
    assert (full.http_status, full.http_message, full.http_detail) == (
        503,
        "QUEUE_FULL",
        {"detail": reason},
    )
    assert full.redis == f"ERR publish failed {reason}"
    with pytest.raises(Refused):
        broker.publish_deferred("t", b"d", 1000)  # DPUB meets the same bound
    assert broker.health == "OK"  # a policy's refusal is not a store failure


async def test_a_body_over_the_topic_s_max_msg_size(broker: Broker) -> None:
    broker.configure_topic("t", {"max_msg_size": "5"})
    with pytest.raises(Refused) as caught:
        broker.publish("t", [b"12345", b"123456"])
    big = caught.value
    err = big.nsq("PUB")
    assert (str(err), err.fatal) == ("E_BAD_MESSAGE PUB message too big 6 > 5", True)  # as nsqd
    assert (big.http_status, big.http_message, big.http_detail) == (413, "MSG_TOO_BIG", None)
    assert big.redis == "ERR message too big 6 > 5"
    assert broker.depth("t") == 0  # refused whole


async def test_a_refused_configuration_changes_nothing(broker: Broker) -> None:
    for params in ({"ttl": "\u00b2"}, {"max_depth": "\u0661\u0662"}, {"ttl": "+5"}):
        with pytest.raises(Refused) as caught:
            broker.configure_channel("u", "c", params)
        assert (caught.value.http_status, caught.value.http_message) == (400, "INVALID_VALUE")
    with pytest.raises(Refused) as caught:
        broker.configure_topic("u", {"colour": "red"})
    assert caught.value.http_message == "INVALID_ATTRIBUTE"
    assert not broker.exists("u")
    assert broker.configure_topic("u", {"ttl": "12"}).ttl == 12


async def test_missing_topics_and_channels_are_404s(broker: Broker) -> None:
    broker.create_topic("t")
    for topic, channel, message in (("x", "c", "TOPIC_NOT_FOUND"), ("t", "c", "CHANNEL_NOT_FOUND")):
        with pytest.raises(Refused) as caught:
            broker.existing_channel(topic, channel)
        assert (caught.value.http_status, caught.value.http_message) == (404, message)
    assert not broker.exists("t", "c")


async def test_the_channel_handle_answers_values(broker: Broker) -> None:
    channel = broker.channel_handle("t", "c")
    broker.publish("t", [b"a", b"b", b"c"])
    got = channel.receive("", 2, 30.0)
    assert [(d.body, d.attempts) for d in got] == [(b"a", 1), (b"b", 1)]
    assert all(type(d) is Delivery and d.due is not None and d.due > 0 for d in got)
    assert [(d.body, d.due) for d in _peek(channel, "queued", 5)] == [(b"c", None)]
    assert [d.id for d in _peek(channel, "in_flight", 5)] == [got[0].id, got[1].id]
    a, b = got[0].id, got[1].id
    out = channel.finish([a, a, ABSENT])  # an id given twice is acted on and counted once
    assert type(out) is Outcome and out.done == 1
    assert [(f.id, str(f)) for f in out.failed] == [
        (ABSENT, f"E_FIN_FAILED FIN {ABSENT.decode()} failed ID not in flight")
    ]
    assert channel.finish([a]).failed[0].reason.endswith("ID not in flight")
    assert channel.touch([b, b], 10.0) == Outcome(1, [])
    assert channel.requeue([b], 0) == Outcome(1, [])
    popped = channel.pop("", 5, 30.0)
    assert sorted(d.body for d in popped) == [b"b", b"c"]
    assert channel.figures().in_flight == 0 and channel.figures().depth == 0


async def test_a_named_lease_holds_its_batch(broker: Broker) -> None:
    channel = broker.channel_handle("t", "c")
    broker.publish("t", [b"a", b"b"])
    taken = channel.receive("job-1", 2, 30.0)
    assert sorted(channel.held("job-1")) == sorted(d.id for d in taken)
    assert channel.finish(channel.held("job-1"), "job-1") == Outcome(2, [])
    assert channel.held("job-1") == []


async def test_a_message_a_consumer_holds_is_not_the_handle_s(broker: Broker) -> None:
    sent: list[Message] = []

    class Consumer:
        id, msg_timeout, sample_rate = 7, 30.0, 0

        def credit(self) -> int:
            return 1 - len(sent)

        def send(self, msgs: list[Message]) -> None:
            sent.extend(msgs)

        def finished(self, n: int) -> None: ...
        def requeued(self) -> None: ...
        def timed_out(self) -> None: ...
        def emptied(self) -> None: ...
        def close(self) -> None: ...

    consumer = Consumer()
    subscription = broker.subscribe("t", "c", consumer)  # type: ignore[arg-type]
    subscription.refresh(consumer)  # type: ignore[arg-type]  # its credit: RDY 1
    broker.publish("t", [b"a"])
    assert [m.body for m in sent] == [b"a"]
    out = broker.existing_channel("t", "c").finish([sent[0].id])
    assert out.done == 0 and out.failed[0].reason.endswith("client does not own message")
    assert subscription.finish(consumer, [sent[0].id]) == []  # type: ignore[arg-type]


async def test_a_sub_waits_while_a_listener_makes_its_new_channel_elsewhere(
    broker: Broker,
) -> None:
    """A listener that makes a new channel elsewhere too (the group's workers) holds its SUB
    back (`Making`, nothing subscribed) until it says the channel is made; a channel already
    made, or made by no such listener, is subscribed at once."""
    made: list = []

    class MakesInPeers:
        def channel_created(self, topic, channel) -> None:  # type: ignore[no-untyped-def]
            made.append(broker.making(topic.name, channel.name))

        def topic_created(self, topic) -> None: ...  # type: ignore[no-untyped-def]
        def topic_deleted(self, topic) -> None: ...  # type: ignore[no-untyped-def]
        def channel_deleted(self, topic, channel) -> None: ...  # type: ignore[no-untyped-def]
        def paused_changed(self, topic, channel) -> None: ...  # type: ignore[no-untyped-def]

    class Consumer:
        id, msg_timeout, sample_rate = 8, 30.0, 0

        def credit(self) -> int:
            return 0

        def close(self) -> None: ...

    broker.subscribe("t", "before", Consumer())  # type: ignore[arg-type]
    broker.hooks.append(MakesInPeers())
    with pytest.raises(Making) as raised:
        broker.subscribe("t", "new", Consumer())  # type: ignore[arg-type]
    assert broker.topics["t"].channels["new"].consumers == {}  # made here, nobody subscribed
    with pytest.raises(Making):  # a second SUB meanwhile waits too
        broker.subscribe("t", "new", Consumer())  # type: ignore[arg-type]
    with trio.move_on_after(0.05) as waited:
        await raised.value.made()
    assert waited.cancelled_caught
    made.pop()()  # the peers have it
    await raised.value.made()
    consumer = Consumer()
    assert broker.subscribe("t", "new", consumer) is broker.topics["t"].channels["new"]  # type: ignore[arg-type]
    broker.subscribe("t", "before", Consumer())  # type: ignore[arg-type]
    assert made == []


def _peek(channel: ChannelHandle, state: str, n: int) -> list[Delivery]:
    return [d for part in channel.peek(state, n, 2) for d in part]


async def test_a_peek_reads_its_disk_part_by_part(tmp_path: Path) -> None:
    """A peek is read a part at a time as its parts are asked for (the HTTP peek turns the
    loop between them): memory's first, then the disk's from where the last part ended, or
    from the queue's head when consumers took past it meanwhile; nothing is taken."""
    async with trio.open_nursery() as nursery:
        made: list[Broker] = []

        def new_overflow(name: str, ephemeral: bool) -> DiskOverflow:
            return DiskOverflow(name, str(tmp_path), 1 << 20, 1 << 20, 2500, 2.0, made[0], noop)

        made.append(Broker(Settings(mem_queue_size=3), new_overflow, nursery.start_soon))
        broker = made[0]
        channel = broker.channel_handle("t", "c")
        bodies = [b"m%02d" % i for i in range(20)]
        broker.publish("t", bodies)
        parts = channel.peek("queued", 20, 4)
        assert [d.body for d in next(parts)] == bodies[:3]  # memory
        assert [d.body for d in next(parts)] == bodies[3:7]  # disk, first part
        assert [d.body for d in channel.pop("", 6, 30.0)] == bodies[:6]
        assert [d.body for d in next(parts)] == bodies[7:11]  # on from where it stopped
        assert [d.body for d in channel.pop("", 6, 30.0)] == bodies[6:12]
        assert [d.body for d in next(parts)] == bodies[12:16]  # the head: 11 was taken
        assert [d.body for d in next(parts)] == bodies[16:20]
        assert next(parts, None) is None
        assert broker.depth("t", "c") == 8
        broker.close()
        nursery.cancel_scope.cancel()
