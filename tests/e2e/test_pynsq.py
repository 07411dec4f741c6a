"""pynsq 0.9.1 Writer and Reader against the daemon: bulk delivery, channels, REQ, timeouts,
TOUCH and DPUB. Plus the raw-wire timing tests that need the same warmed daemon.

One daemon per kind for the module (--max-req-timeout=1s --max-msg-timeout=3s, to see the
clamps quickly), its channels created up front (see SCAN_REFRESH)."""

from __future__ import annotations

import asyncio
import re
import time
from collections import Counter
from typing import Any

import pytest
import trio

from .conftest import Daemon, DaemonPool, create_channels, wait_for_scan_refresh
from .pynsq_harness import Consumer, Publisher, run, settle
from .wire import Conn, publish

BULK = 10_000
CHANNELS = [
    ("bulk", "a"),
    ("bulk", "b"),
    ("requeue", "ch"),
    ("timeout", "ch"),
    ("touch", "ch"),
    ("touch_cap", "ch"),
    ("deferred", "ch"),
    ("raw_req", "ch"),
    ("raw_req_clamp", "ch"),
    ("raw_disconnect", "ch"),
]
MAX_REQ_TIMEOUT = 1.0
MAX_MSG_TIMEOUT = 3.0
FLAGS = (f"--max-req-timeout={MAX_REQ_TIMEOUT:g}s", f"--max-msg-timeout={MAX_MSG_TIMEOUT:g}s")


def _warm_up(daemon: Daemon) -> None:
    create_channels(daemon.addr, CHANNELS)
    wait_for_scan_refresh(daemon)


@pytest.fixture
def warm_daemon(daemon_pool: DaemonPool, daemon_kind: str) -> Daemon:
    return daemon_pool.get(daemon_kind, FLAGS, _warm_up)


def test_bulk_exactly_once_two_channels_and_split(warm_daemon: Daemon) -> None:
    """10,000 messages (MPUB batches and single PUBs): channel `a`'s one reader and channel
    `b`'s two readers each see every message exactly once (b's readers split them, both get
    some), every FIN is accepted and nothing is redelivered after the msg timeout."""
    addr = warm_daemon.tcp_address
    expected = [b"bulk-%05d" % i for i in range(BULK)]
    msg_timeout = 2

    async def scenario() -> list[Consumer]:
        kw = {"msg_timeout": msg_timeout}
        a = Consumer(addr, "bulk", "a", max_in_flight=200, reader_kwargs=kw).start()
        b1 = Consumer(addr, "bulk", "b", max_in_flight=100, reader_kwargs=kw).start()
        b2 = Consumer(addr, "bulk", "b", max_in_flight=100, reader_kwargs=kw).start()
        consumers = [a, b1, b2]
        for c in consumers:
            await c.subscribed()
        pub = await Publisher(addr).connected()
        try:
            for start in range(0, BULK - 500, 500):
                pub.mpub("bulk", expected[start : start + 500])
            for body in expected[BULK - 500 :]:
                pub.pub("bulk", body)
            await pub.all_acknowledged(20)
            await settle([a], BULK, 40, "channel a to get everything")
            await settle([b1, b2], BULK, 40, "channel b to get everything")
            await asyncio.sleep(msg_timeout + 0.7)  # a lost FIN would bring one back by now
        finally:
            pub.close()
            for c in consumers:
                c.close()
        return consumers

    a, b1, b2 = run(scenario, 90)
    for c in (a, b1, b2):
        assert c.errors == []
        redelivered = [d for d in c.deliveries if d.attempts != 1]
        assert redelivered == [], (
            f"{c.channel}: {len(redelivered)} of {len(c.deliveries)} deliveries were "
            f"redeliveries, {len(c.deliveries) - len(set(c.bodies))} duplicates; first: "
            f"{redelivered[:3]}"
        )
    assert sorted(a.bodies) == expected
    assert len(a.bodies) == BULK
    assert b1.bodies and b2.bodies, (len(b1.bodies), len(b2.bodies))
    assert not set(b1.bodies) & set(b2.bodies)
    assert sorted(b1.bodies + b2.bodies) == expected
    ids = Counter(d.id for d in a.deliveries)
    assert len(ids) == BULK
    assert {d.id for d in b1.deliveries + b2.deliveries} == set(ids)  # same ids per channel


def test_requeue_comes_back_with_attempts_plus_one(warm_daemon: Daemon) -> None:
    addr = warm_daemon.tcp_address

    def handler(message, delivery):  # type: ignore[no-untyped-def]
        if delivery.attempts == 1:
            message.requeue(delay=0, backoff=False)  # REQ <id> 0
            return None
        return True

    async def scenario() -> Consumer:
        c = await Consumer(addr, "requeue", "ch", on_message=handler).start().subscribed()
        pub = await Publisher(addr).connected()
        try:
            pub.pub("requeue", b"try again")
            await pub.all_acknowledged()
            await settle([c], 2, 10)
            await asyncio.sleep(0.3)
        finally:
            pub.close()
            c.close()
        return c

    c = run(scenario, 20)
    assert c.errors == []
    first, second = c.deliveries
    assert (first.attempts, second.attempts) == (1, 2)
    assert first.id == second.id
    assert first.body == second.body == b"try again"
    assert first.timestamp == second.timestamp


def test_unfinished_message_comes_back_after_msg_timeout(warm_daemon: Daemon) -> None:
    """IDENTIFY msg_timeout=1000 (Reader(msg_timeout=1)); the first delivery is never answered."""
    addr = warm_daemon.tcp_address

    def handler(message, delivery):  # type: ignore[no-untyped-def]
        if delivery.attempts == 1:
            message.enable_async()  # and never respond
            return None
        return True

    async def scenario() -> Consumer:
        c = Consumer(addr, "timeout", "ch", on_message=handler, reader_kwargs={"msg_timeout": 1})
        await c.start().subscribed()
        pub = await Publisher(addr).connected()
        try:
            pub.pub("timeout", b"slow")
            await pub.all_acknowledged()
            await settle([c], 2, 10, "the redelivery")
            await asyncio.sleep(0.3)
        finally:
            pub.close()
            c.close()
        return c

    c = run(scenario, 20)
    assert c.errors == []
    first, second = c.deliveries
    assert first.id == second.id
    assert (first.attempts, second.attempts) == (1, 2)
    gap = second.at - first.at
    assert 0.9 <= gap <= 3.0, gap


def test_touch_keeps_message_up_to_max_msg_timeout(warm_daemon: Daemon) -> None:
    """msg_timeout 1 s, TOUCH every 0.3 s. Topic `touch`: FIN after 1.7 s, never redelivered.
    Topic `touch_cap`: touched on and on, yet redelivered once delivery + --max-msg-timeout
    (3 s) has passed."""
    addr = warm_daemon.tcp_address
    held: dict[str, list[Any]] = {"touch": [], "touch_cap": []}

    def holder(topic: str):  # type: ignore[no-untyped-def]
        def handler(message, delivery):  # type: ignore[no-untyped-def]
            message.enable_async()
            held[topic].append(message)
            return None

        return handler

    async def scenario() -> tuple[Consumer, Consumer]:
        kw = {"msg_timeout": 1}
        c = Consumer(addr, "touch", "ch", on_message=holder("touch"), reader_kwargs=kw)
        capped = Consumer(addr, "touch_cap", "ch", on_message=holder("touch_cap"), reader_kwargs=kw)
        await c.start().subscribed()
        await capped.start().subscribed()
        pub = await Publisher(addr).connected()
        try:
            pub.pub("touch", b"long job")
            pub.pub("touch_cap", b"endless job")
            await pub.all_acknowledged()
            await settle([c], 1, 10)
            await settle([capped], 1, 10)
            for _ in range(5):
                await asyncio.sleep(0.3)
                held["touch"][0].touch()
                held["touch_cap"][0].touch()
            await asyncio.sleep(0.2)
            held["touch"][0].finish()
            while len(capped.deliveries) < 2 and time.monotonic() < capped.deliveries[0].at + 5:
                await asyncio.sleep(0.3)
                if len(capped.deliveries) < 2:
                    held["touch_cap"][0].touch()
            # gone within 0.3 s of its second delivery, before a third (1 s later) could come:
            # `c`'s wait below ends later than that where c's first RDY came late (loaded)
            capped.close()
            await asyncio.sleep(max(0.0, c.deliveries[0].at + 3.0 - time.monotonic()))
        finally:
            pub.close()
            c.close()
            capped.close()
        return c, capped

    c, capped = run(scenario, 20)
    assert c.errors == []  # a TOUCH or FIN after a timeout would have failed
    assert [d.attempts for d in c.deliveries] == [1]  # kept past three msg timeouts, no more
    assert [d.attempts for d in capped.deliveries] == [1, 2]
    gap = capped.deliveries[1].at - capped.deliveries[0].at
    assert MAX_MSG_TIMEOUT - 0.1 <= gap <= MAX_MSG_TIMEOUT + 1.5, gap


def test_dpub_arrives_after_its_delay(warm_daemon: Daemon) -> None:
    addr = warm_daemon.tcp_address
    delay_ms = 800

    async def scenario() -> tuple[Consumer, float]:
        c = await Consumer(addr, "deferred", "ch", max_in_flight=10).start().subscribed()
        pub = await Publisher(addr).connected()
        try:
            sent = time.monotonic()
            pub.dpub("deferred", delay_ms, b"later")
            pub.pub("deferred", b"now")
            await pub.all_acknowledged()
            await settle([c], 2, 10, "the deferred message")
        finally:
            pub.close()
            c.close()
        return c, sent

    c, sent = run(scenario, 20)
    assert c.errors == []
    assert c.bodies == [b"now", b"later"]
    now, later = c.deliveries
    assert now.at - sent < 1.0
    assert later.at - sent >= delay_ms / 1000, later.at - sent
    assert later.at - sent <= delay_ms / 1000 + 2.0, later.at - sent
    assert later.attempts == 1


async def test_raw_req_with_delay(warm_daemon: Daemon) -> None:
    """REQ <id> 300 on the wire: deferred, back no earlier than 300 ms, attempts 2."""
    async with await Conn.open(warm_daemon.addr) as consumer:
        await consumer.sub("raw_req", "ch", rdy=1)
        await publish(warm_daemon.addr, "raw_req", [b"again"])
        first = await consumer.expect_message()
        assert first.attempts == 1
        assert re.fullmatch(rb"[0-9a-f]{16}", first.id), first.id
        assert abs(first.timestamp / 1e9 - time.time()) < 5  # publish time, ns since the epoch
        await consumer.req(first.id, 300)
        start = trio.current_time()
        second = await consumer.expect_message(3)
        assert trio.current_time() - start >= 0.29
        assert (second.id, second.body, second.timestamp) == (first.id, b"again", first.timestamp)
        assert second.attempts == 2
        await consumer.fin(second.id)
        await consumer.expect_open()


async def test_raw_req_delay_clamped_to_max_req_timeout(warm_daemon: Daemon) -> None:
    """REQ <id> 60000 with --max-req-timeout=1s: no error, the delay is clamped to 1 s."""
    async with await Conn.open(warm_daemon.addr) as consumer:
        await consumer.sub("raw_req_clamp", "ch", rdy=1)
        await publish(warm_daemon.addr, "raw_req_clamp", [b"clamped"])
        first = await consumer.expect_message()
        await consumer.req(first.id, 60_000)
        start = trio.current_time()
        second = await consumer.expect_message(MAX_REQ_TIMEOUT + 2)
        waited = trio.current_time() - start
        assert MAX_REQ_TIMEOUT - 0.05 <= waited <= MAX_REQ_TIMEOUT + 1.5, waited
        assert (second.id, second.attempts) == (first.id, 2)
        await consumer.fin(second.id)
        await consumer.expect_open()


async def test_raw_disconnect_requeues_only_after_msg_timeout(warm_daemon: Daemon) -> None:
    """A consumer leaves with a message in flight (msg_timeout 1 s): another consumer of the
    channel gets it only once that timeout has passed, as attempt 2."""
    async with await Conn.open(warm_daemon.addr) as other:
        await other.sub("raw_disconnect", "ch", rdy=1)
        async with await Conn.open(warm_daemon.addr) as leaver:
            await leaver.identify(msg_timeout=1000)
            await leaver.sub("raw_disconnect", "ch", rdy=1)
            await other.rdy(0)
            await other.expect_open()
            await trio.sleep(0.1)
            await publish(warm_daemon.addr, "raw_disconnect", [b"orphan"])
            first = await leaver.expect_message()
            delivered = trio.current_time()
        await other.rdy(1)
        second = await other.expect_message(4)
        waited = trio.current_time() - delivered
        assert 0.9 <= waited <= 2.5, waited
        assert (second.id, second.body, second.attempts) == (first.id, b"orphan", 2)
        await other.fin(second.id)
        await other.expect_open()
