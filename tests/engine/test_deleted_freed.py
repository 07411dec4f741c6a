"""A deleted topic or channel is freed by refcounting, the moment the broker lets it go: the
daemon raises the collector's thresholds (cli.py) so far that a full collection is rare, and
whatever a reference cycle keeps (a channel, its queues, its journal) piles up with every
topic or channel made and deleted. A real Broker on storage's disk queues and journals in a
temporary directory, with the collector off."""

from __future__ import annotations

import gc
import os
import weakref
from collections.abc import AsyncIterator, Iterator
from pathlib import Path

import pytest
import trio

from nsqd.engine.broker import Broker
from nsqd.engine.settings import Settings
from nsqd.storage.commit import GroupCommit
from nsqd.storage.journal import SUFFIX, ChannelJournal
from nsqd.storage.overflow import DiskOverflow


@pytest.fixture
def no_collector() -> Iterator[None]:
    gc.collect()
    gc.disable()
    yield
    gc.enable()


@pytest.fixture
async def broker(tmp_path: Path, no_collector: None) -> AsyncIterator[Broker]:
    commit = GroupCommit()
    async with trio.open_nursery() as nursery:
        made: list[Broker] = []

        def new_overflow(name: str, ephemeral: bool) -> DiskOverflow:
            return DiskOverflow(
                name, str(tmp_path), 1 << 20, 1 << 20, 2500, 2.0, made[0], noop, commit
            )

        def new_journal(name: str) -> ChannelJournal:  # --durable-inflight's
            path = os.path.join(tmp_path, name + SUFFIX)
            return ChannelJournal(path, 2500, 2.0, noop_journal, noop, commit, made[0])

        made.append(
            Broker(Settings(mem_queue_size=1), new_overflow, nursery.start_soon, new_journal)
        )
        yield made[0]
        made[0].close()
        nursery.cancel_scope.cancel()


def noop() -> None:
    pass


def noop_journal(journal: ChannelJournal) -> None:
    pass


async def test_a_deleted_channel_is_freed_at_once(broker: Broker, tmp_path: Path) -> None:
    broker.topic("t")
    broker.create_channel("t", "c")
    broker.publish("t", [b"one", b"two", b"three"])  # past memory: on the channel's disk queue
    channel = weakref.ref(broker.topics["t"].channels["c"])
    queue = weakref.ref(broker.topics["t"].channels["c"].backlog.overflow.queue)
    broker.remove_channel("t", "c")
    assert channel() is None, "the deleted channel waits for the cyclic garbage collector"
    assert queue() is None, "its disk queue waits for the cyclic garbage collector"
    assert not [name for name in os.listdir(tmp_path) if name.startswith("t:c.")]


async def test_a_deleted_topic_is_freed_at_once(broker: Broker) -> None:
    broker.topic("gone")
    broker.create_channel("gone", "c")
    broker.publish("gone", [b"one", b"two", b"three"])
    channel = weakref.ref(broker.topics["gone"].channels["c"])
    topic = weakref.ref(broker.topics["gone"])
    queue = weakref.ref(broker.topics["gone"].backlog.overflow.queue)
    broker.remove_topic("gone")
    assert topic() is None, "the deleted topic waits for the cyclic garbage collector"
    assert channel() is None, "its channel waits for the cyclic garbage collector"
    assert queue() is None, "its disk queue waits for the cyclic garbage collector"
