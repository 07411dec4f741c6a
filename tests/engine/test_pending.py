"""A reactor pass's single-message publishes (engine/pending.py), without a socket: a real Broker
on real disk queues and the store's real GroupCommit, held and deferring as the TCP and HTTP
reactors hold it. Nothing is stored before the commit is flushed, everything is stored by it in
the order the commands ran, and what could be refused is not made to wait."""

from __future__ import annotations

from collections.abc import AsyncIterator, Iterator
from contextlib import contextmanager
from pathlib import Path

import pytest
import trio

from nsqd.engine.broker import Broker
from nsqd.engine.pending import PendingPublishes
from nsqd.engine.settings import Settings
from nsqd.storage.commit import GroupCommit
from nsqd.storage.overflow import DiskOverflow

MEM = 4  # a small --mem-queue-size: a pass's batch can cross onto disk


@pytest.fixture
async def broker(tmp_path: Path) -> AsyncIterator[Broker]:
    async with trio.open_nursery() as nursery:
        made: list[Broker] = []
        commit = GroupCommit()

        def new_overflow(name: str, ephemeral: bool) -> DiskOverflow:
            return DiskOverflow(
                name, str(tmp_path), 1 << 20, 1 << 20, 2500, 2.0, made[0], noop, commit
            )

        made.append(Broker(Settings(mem_queue_size=MEM), new_overflow, nursery.start_soon))
        made[0].commit = commit
        yield made[0]
        made[0].close()
        nursery.cancel_scope.cancel()


def noop() -> None:
    pass


@contextmanager
def reactor_pass(broker: Broker) -> Iterator[list[str | None]]:
    """A pass as the TCP reactor runs one: held, its commands deferring; the release's
    outcome (None or the failure) lands in the list."""
    commit = broker.commit
    outcome: list[str | None] = []
    commit.hold()
    commit.deferring = True
    try:
        yield outcome
    finally:
        commit.deferring = False
        outcome.append(commit.release())


def queued(broker: Broker, topic: str, channel: str) -> list[bytes]:
    parts = broker.channel_handle(topic, channel).peek("queued", 100, 100)
    return [d.body for part in parts for d in part]


async def test_a_pass_s_publishes_wait_for_its_commit_then_are_stored_in_order(
    broker: Broker,
) -> None:
    broker.channel("t", "c")
    commit = broker.commit
    with reactor_pass(broker) as outcome:
        before = commit.appended
        for body in (b"a", b"b", b"c"):
            broker.publish("t", [body])
        broker.publish("u", [b"other topic"])
        broker.publish("t", [b"d"])
        # each counts as a record the publisher's answer waits for, and none is stored yet
        assert commit.appended - before == 5
        assert broker.topic("t").message_count == 0
        assert queued(broker, "t", "c") == []
    assert outcome == [None]
    topic = broker.topic("t")
    assert topic.message_count == 4
    assert queued(broker, "t", "c") == [b"a", b"b", b"c", b"d"]  # past MEM: on disk too
    assert broker.topic("u").message_count == 1
    assert not broker.pending.by_topic


async def test_a_larger_publish_has_what_waits_for_its_topic_stored_first(
    broker: Broker,
) -> None:
    broker.channel("t", "c")
    with reactor_pass(broker) as outcome:
        broker.publish("t", [b"a"])
        broker.publish("t", [b"b", b"c"])  # an MPUB: stored now, after what waited
        assert queued(broker, "t", "c") == [b"a", b"b", b"c"]
        broker.publish("t", [b"d"])
    assert outcome == [None]
    assert queued(broker, "t", "c") == [b"a", b"b", b"c", b"d"]


async def test_what_could_be_refused_or_is_answered_at_once_is_stored_at_once(
    broker: Broker,
) -> None:
    broker.channel("t", "c")
    with reactor_pass(broker) as outcome:
        broker.publish("t", [b"ttl"], ttl_ms=60_000)
        broker.publish("t", [b"keyed"], keys=["k"])
        assert broker.topic("t").message_count == 2
    broker.configure_channel("p", "c", {"max_depth": "5"})  # a policy that may refuse
    with reactor_pass(broker):
        broker.publish("p", [b"bounded"])
        assert broker.topic("p").message_count == 1
    commit = broker.commit
    commit.hold()  # held but not deferring: RESP's publishers, answered at once
    broker.publish("t", [b"resp"])
    assert broker.topic("t").message_count == 3
    assert commit.release() is None
    assert outcome == [None]


async def test_a_refusal_when_the_batch_is_stored_fails_the_pass_s_commit(
    broker: Broker,
) -> None:
    broker.channel("t", "c")
    with reactor_pass(broker) as outcome:
        broker.publish("t", [b"a"])
        broker.publish("t", [b"b"])
        # a policy set in the same pass (an HTTP request's): the batch meets it when stored
        broker.configure_channel("t", "c", {"max_depth": "1"})
    assert outcome == ["channel t:c is full (0 of max_depth 1)"]
    assert broker.topic("t").message_count == 0  # refused whole: nothing was acknowledged
    assert not broker.pending.by_topic


async def test_a_topic_deleted_before_the_commit_is_made_again_for_its_messages(
    broker: Broker,
) -> None:
    with reactor_pass(broker) as outcome:
        broker.publish("t", [b"a"])
        broker.delete_topic("t")
    assert outcome == [None]
    assert broker.topic("t").message_count == 1  # published after the delete, as its OK says


def test_a_fault_while_storing_a_batch_fails_the_commit_not_the_loop() -> None:
    """The store port raising something unexpected (a fault of ours) at the pass's end: the
    commit fails with a reason, so its publishers are refused, and the other topics' batches
    are stored; nothing escapes the release into the reactor's loop."""
    stored: list[tuple[str, list[bytes]]] = []

    def store(topic: str, bodies: list[bytes]) -> None:
        if topic == "bad":
            raise KeyError(topic)
        stored.append((topic, bodies))

    commit = GroupCommit()
    pending = PendingPublishes(store)
    commit.hold()
    pending.add("bad", b"x", commit)
    pending.add("good", b"y", commit)
    error = commit.release()
    assert error == "internal error - KeyError('bad')"
    assert stored == [("good", [b"y"])]
    assert not pending.by_topic
