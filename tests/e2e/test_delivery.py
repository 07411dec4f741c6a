"""Delivery control on the wire: CLS, RDY as an in-flight window, ephemeral channels, output
buffering and sampling."""

from __future__ import annotations

import json
import socket
import urllib.request
from collections.abc import Callable

import pytest
import trio

from .conftest import Daemon, DaemonPool, create_channels
from .wire import Conn, publish

QUIET = 0.4  # seconds to wait for something that must NOT arrive


async def pause(conn: Conn) -> None:
    """RDY 0, and make sure the daemon has acted on it before anything is published: nsqd
    answers commands in order (the PUB's OK), and its message pump sees the new RDY shortly
    after."""
    await conn.rdy(0)
    await conn.expect_open()
    await trio.sleep(0.1)


def bodies(n: int, prefix: bytes = b"m") -> list[bytes]:
    return [b"%s-%04d" % (prefix, i) for i in range(n)]


async def test_cls_stops_delivery_and_fin_still_allowed(shared_daemon: Daemon, topic: str) -> None:
    async with await Conn.open(shared_daemon.addr) as consumer:
        await consumer.sub(topic, "ch", rdy=10)
        await publish(shared_daemon.addr, topic, bodies(3, b"a"))
        in_flight = await consumer.messages(3)
        await consumer.cmd("CLS")
        await consumer.expect_response(b"CLOSE_WAIT")
        await publish(shared_daemon.addr, topic, bodies(3, b"b"))
        await consumer.rdy(10)  # ignored after CLS
        assert await consumer.messages_for(QUIET) == []
        await consumer.touch(in_flight[0].id)  # TOUCH and FIN are allowed in CLOSE_WAIT
        for m in in_flight:
            await consumer.fin(m.id)
        await consumer.req(in_flight[0].id, 0)  # already finished: the non-fatal error
        err = await consumer.expect_error()
        assert err.startswith("E_REQ_FAILED"), err
        await consumer.expect_open()
        # the server leaves closing the socket to the client
        assert await consumer.messages_for(0.2) == []
    # the other messages are still there for the next consumer, none of the FINed ones
    async with await Conn.open(shared_daemon.addr) as other:
        await other.sub(topic, "ch", rdy=10)
        got = await other.messages(3)
        assert sorted(m.body for m in got) == bodies(3, b"b")
        assert await other.messages_for(QUIET) == []


async def test_rdy_caps_in_flight(shared_daemon: Daemon, topic: str) -> None:
    async with await Conn.open(shared_daemon.addr) as consumer:
        await consumer.sub(topic, "ch", rdy=0)
        await publish(shared_daemon.addr, topic, bodies(20))
        assert await consumer.messages_for(QUIET) == []  # RDY 0: nothing
        await consumer.rdy(5)
        first = await consumer.messages(5)
        assert await consumer.messages_for(QUIET) == []  # 5 in flight = RDY 5
        for m in first[:2]:
            await consumer.fin(m.id)
        second = await consumer.messages(2)  # room for two more
        assert await consumer.messages_for(QUIET) == []
        await consumer.req(first[2].id, 0)  # back to the queue, and room for one
        third = await consumer.messages(1)
        assert await consumer.messages_for(QUIET) == []
        (back,) = third  # the requeued one, or one never delivered yet
        held = {m.body for m in [*first[:2], *first[3:], *second]}
        assert back.body not in held
        assert back.attempts == (2 if back.id == first[2].id else 1)
        # RDY 0 pauses even with room to spare; in-flight ones are unaffected
        await consumer.rdy(0)
        for m in [*first[3:], *second, *third]:
            await consumer.fin(m.id)
        assert await consumer.messages_for(QUIET) == []
        await consumer.expect_open()
        await consumer.rdy(50)
        rest = await consumer.messages(20 - 7)  # 20 published, 7 finished so far
        for m in rest:
            await consumer.fin(m.id)
        done = {m.body for m in [*first[:2], *first[3:], *second, *third, *rest]}
        assert done == set(bodies(20))
        assert await consumer.messages_for(QUIET) == []


async def test_a_consumer_that_lowers_rdy_below_its_in_flight_holds_up_no_other(
    shared_daemon: Daemon, topic: str
) -> None:
    """A consumer that lowered its RDY below what it held in flight stayed in our channel's
    ready rotation with a negative credit, and the hand-out sums the rotation's credits: a
    second consumer with RDY 2 got none of the queued messages until the first had finished
    enough (found by a campaign; in a group the negative credit also went to the peers as
    `RDY -4`, an E_INVALID that closed the pull link, again and again)."""
    base = f"http://127.0.0.1:{shared_daemon.http_port}"
    async with await Conn.open(shared_daemon.addr) as greedy:
        await greedy.sub(topic, "ch", rdy=10)
        await publish(shared_daemon.addr, topic, bodies(5, b"a"))
        assert len(await greedy.messages(5)) == 5
        await greedy.rdy(1)  # 5 in flight, RDY 1
        await greedy.expect_open()
        await trio.sleep(0.1)
        for action in ("pause", "unpause"):  # 3 queued meanwhile, and then handed out
            url = f"{base}/channel/{action}?topic={topic}&channel=ch"
            await trio.to_thread.run_sync(_post, url)
            if action == "pause":
                await publish(shared_daemon.addr, topic, bodies(3, b"b"))
        async with await Conn.open(shared_daemon.addr) as other:
            await other.sub(topic, "ch", rdy=2)
            got = await other.messages(2)
            assert {m.body for m in got} <= set(bodies(3, b"b"))


@pytest.mark.parametrize(("channel", "keeps_backlog"), [("ch", True), ("ch#ephemeral", False)])
async def test_ephemeral_channel_goes_with_its_last_client(
    shared_daemon: Daemon, topic: str, channel: str, keeps_backlog: bool
) -> None:
    """A non-ephemeral channel keeps its backlog with nobody subscribed; an ephemeral one is
    deleted when its last client leaves, and a new subscriber starts from scratch."""
    async with (
        await Conn.open(shared_daemon.addr) as one,
        await Conn.open(shared_daemon.addr) as two,
    ):
        await one.sub(topic, channel, rdy=0)
        await two.sub(topic, channel, rdy=0)
        await publish(shared_daemon.addr, topic, bodies(5, b"old"))
        await one.aclose()  # one client left: the channel stays
        await trio.sleep(0.2)
        await two.rdy(10)
        got = await two.messages(5)
        assert sorted(m.body for m in got) == bodies(5, b"old")
        for m in got:
            await two.fin(m.id)
        await pause(two)
        await publish(shared_daemon.addr, topic, bodies(3, b"backlog"))
    await trio.sleep(0.3)  # the last client left (nsqd deletes the channel asynchronously)
    async with await Conn.open(shared_daemon.addr) as late:
        await late.sub(topic, channel, rdy=10)
        got = await late.messages_for(QUIET)
        if keeps_backlog:
            assert sorted(m.body for m in got) == bodies(3, b"backlog")
        else:
            assert got == []
        await publish(shared_daemon.addr, topic, [b"new"])
        (msg,) = await late.messages(1)
        assert msg.body == b"new"
        assert msg.attempts == 1


async def test_ephemeral_topic_and_channel(shared_daemon: Daemon, topic: str) -> None:
    eph = f"{topic[:50]}#ephemeral"
    async with await Conn.open(shared_daemon.addr) as consumer:
        await consumer.sub(eph, "ch#ephemeral", rdy=0)
        await publish(shared_daemon.addr, eph, bodies(4, b"gone"))
    await trio.sleep(0.3)
    async with await Conn.open(shared_daemon.addr) as consumer:
        await consumer.sub(eph, "ch#ephemeral", rdy=10)
        assert await consumer.messages_for(QUIET) == []
        await publish(shared_daemon.addr, eph, [b"fresh"])
        (msg,) = await consumer.messages(1)
        assert msg.body == b"fresh"


BUFFER_SETTINGS = [
    {"output_buffer_size": -1},
    {"output_buffer_size": 64, "output_buffer_timeout": 25},
    {"output_buffer_size": 65536, "output_buffer_timeout": 1000},
    {"output_buffer_timeout": -1, "heartbeat_interval": 1000},  # flushed with the heartbeat
]


@pytest.mark.parametrize(
    "settings", BUFFER_SETTINGS, ids=lambda s: ",".join(f"{k}={v}" for k, v in s.items())
)
async def test_output_buffer_settings_deliver(
    shared_daemon: Daemon, topic: str, settings: dict[str, int]
) -> None:
    """Whatever the buffering, messages arrive (loosely: within a few seconds), RDY not used up."""
    async with await Conn.open(shared_daemon.addr) as consumer:
        answer = await consumer.identify(**settings)
        if settings.get("output_buffer_size", 0) > 0:
            assert answer["output_buffer_size"] == settings["output_buffer_size"]
        if settings.get("output_buffer_timeout", 0) > 0:
            assert answer["output_buffer_timeout"] == settings["output_buffer_timeout"]
        await consumer.sub(topic, "ch", rdy=100)
        start = trio.current_time()
        await publish(shared_daemon.addr, topic, bodies(3))
        got = await consumer.messages(3, within=3)
        assert trio.current_time() - start < 2.5
        assert sorted(m.body for m in got) == bodies(3)
        for m in got:
            await consumer.fin(m.id)


async def test_sample_rate_roughly_honoured(shared_daemon: Daemon, topic: str) -> None:
    """sample_rate 50: about half the messages reach this client; the rest are dropped."""
    n = 1000
    async with await Conn.open(shared_daemon.addr) as consumer:
        answer = await consumer.identify(sample_rate=50)
        assert answer["sample_rate"] == 50
        await consumer.sub(topic, "ch", rdy=2000)
        await publish(shared_daemon.addr, topic, bodies(n))
        got = []
        with trio.fail_after(15):
            while batch := await consumer.messages_for(0.5):
                got += batch
                for m in batch:
                    await consumer.fin(m.id)
        received = [m.body for m in got]
        assert len(set(received)) == len(received)
        assert set(received) <= set(bodies(n))
        assert 0.35 * n <= len(received) <= 0.67 * n, len(received)


async def test_each_channel_gets_its_own_first_attempt(shared_daemon: Daemon, topic: str) -> None:
    """Two channels with ready consumers: each gets the message as a first delivery (same id,
    body and timestamp; attempts 1 on both: attempts are per channel)."""
    async with (
        await Conn.open(shared_daemon.addr) as one,
        await Conn.open(shared_daemon.addr) as two,
    ):
        await one.sub(topic, "one", rdy=5)
        await two.sub(topic, "two", rdy=5)
        await publish(shared_daemon.addr, topic, [b"fan out"])
        m1 = await one.expect_message()
        m2 = await two.expect_message()
        assert (m1.id, m1.body, m1.timestamp) == (m2.id, m2.body, m2.timestamp)
        assert (m1.attempts, m2.attempts) == (1, 1)


async def test_large_messages_fill_the_rdy_window(shared_daemon: Daemon, topic: str) -> None:
    """Five messages of the default --max-msg-size (1 MiB) to a consumer with RDY 5 that
    FINs only once it holds all five (a batching consumer): all five arrive."""
    size = 1024 * 1024
    async with await Conn.open(shared_daemon.addr) as consumer:
        await consumer.sub(topic, "ch", rdy=5)
        async with await Conn.open(shared_daemon.addr) as producer:
            for i in range(5):
                await producer.pub(topic, bytes([i]) * size)
        got = await consumer.messages(5, within=5)
        assert sorted(m.body[:1] for m in got) == [bytes([i]) for i in range(5)]
        assert all(len(m.body) == size for m in got)
        for m in got:
            await consumer.fin(m.id)
        await consumer.expect_open()


@pytest.mark.parametrize(("channel", "kept"), [("ch", 100), ("ch#ephemeral", 10)])
async def test_backlog_beyond_mem_queue_size(
    daemon_pool: DaemonPool, daemon_kind: str, topic: str, channel: str, kept: int
) -> None:
    """--mem-queue-size=10: a channel's backlog beyond 10 messages goes to disk (nsqd; ours
    may keep it elsewhere) and is all delivered; an ephemeral channel drops the overflow."""
    d = daemon_pool.get(daemon_kind, ("--mem-queue-size=10",))
    async with await Conn.open(d.addr) as consumer:
        await consumer.sub(topic, channel, rdy=0)
        await publish(d.addr, topic, bodies(100))
        # the Go nsqd's topic copies its own backlog into the channel after the OK: a RDY
        # sent while it copies takes from the ephemeral channel's memory as it is refilled
        await _settled(d, topic)
        await consumer.rdy(100)
        got = await consumer.messages(kept, within=5)
        assert await consumer.messages_for(QUIET) == []
        received = [m.body for m in got]
        assert len(set(received)) == kept
        assert set(received) <= set(bodies(100))
        if channel == "ch":
            assert sorted(received) == bodies(100)


def _post(url: str) -> None:
    urllib.request.urlopen(urllib.request.Request(url, data=b""), timeout=5).close()


def _topic_stats(daemon: Daemon, topic: str) -> dict:
    url = f"http://127.0.0.1:{daemon.http_port}/stats?format=json&topic={topic}"
    (doc,) = json.loads(urllib.request.urlopen(url, timeout=5).read())["topics"]
    return doc


async def _settled(daemon: Daemon, topic: str) -> None:
    """Until the topic has handed its whole backlog to its channels (and the one message its
    pump may hold in hand, a moment later)."""
    for _ in range(250):
        await trio.sleep(0.02)
        if not _topic_stats(daemon, topic)["depth"]:
            await trio.sleep(0.05)
            return
    raise AssertionError(f"{daemon.kind}: topic {topic} still copying its backlog after 5 s")


def _in_flight(daemon: Daemon, topic: str) -> int:
    return sum(c["in_flight_count"] for c in _topic_stats(daemon, topic)["channels"])


async def test_large_messages_from_disk_go_out_as_the_consumer_reads(
    make_daemon: Callable[..., Daemon], topic: str
) -> None:
    """A consumer with a wide RDY window that is slow to read, on a backlog of 1 MiB messages
    most of which are on disk: nsqd puts in flight what its connection takes (its message
    pump writes one at a time), not the whole window at once. Ours once read every message
    the window allowed from disk in one go, on the loop, and queued them all for the socket
    (3.7 GiB of memory for 1,000 such messages; the Spark reader's availableNow run then
    saw nothing for seconds and ended early)."""
    daemon = make_daemon("--mem-queue-size=4")
    n, size = 48, 1 << 20  # the default --max-msg-size
    create_channels(daemon.addr, [(topic, "ch")])
    for i in range(0, n, 4):
        batch = [b"%04d" % j + b"x" * (size - 4) for j in range(i, i + 4)]
        await publish(daemon.addr, topic, batch)
    async with await Conn.open(daemon.addr) as consumer:
        consumer.stream.socket.setsockopt(socket.SOL_SOCKET, socket.SO_RCVBUF, 1 << 16)
        await consumer.sub(topic, "ch", rdy=n)
        await trio.sleep(1.0)  # not reading: only what the sockets hold can be in flight
        held = _in_flight(daemon, topic)
        got = []
        for _ in range(n):
            (msg,) = await consumer.messages(1, within=10)
            got.append(int(msg.body[:4]))
            await consumer.fin(msg.id)
    assert sorted(got) == list(range(n))
    assert held <= n // 3, f"{daemon.kind}: {held} of {n} large messages in flight unread"


async def test_a_consumer_that_stops_reading_is_let_go(
    make_daemon: Callable[..., Daemon], topic: str
) -> None:
    """A consumer that goes on sending commands (NOPs, so nsqd's read deadline never comes) but
    reads nothing, with more waiting for it than the sockets hold. nsqd's message pump ends on
    the blocked write's deadline (a heartbeat interval) and leaves the connection open, its
    reader still answering; ours ends the connection once its socket took nothing for two
    heartbeats (as it did when a writer task sent: a consumer that is stuck shows as gone).
    Ours waits for a full socket in the reactor, which serves consumers without tasks of
    their own: without a deadline there it would hold the connection open for good."""
    daemon = make_daemon()
    create_channels(daemon.addr, [(topic, "ch")])
    body = b"x" * (64 << 10)
    for _ in range(4):
        await publish(daemon.addr, topic, [body] * 50)  # 12.8 MB: past any socket's buffers
    async with await Conn.open(daemon.addr) as consumer:
        consumer.stream.socket.setsockopt(socket.SOL_SOCKET, socket.SO_RCVBUF, 1 << 16)
        await consumer.identify(heartbeat_interval=1000)
        await consumer.sub(topic, "ch", rdy=200)
        start = trio.current_time()
        clients = 1
        limit = 4 if daemon.kind == "reference" else 10
        while clients and trio.current_time() - start < limit:
            try:
                await consumer.cmd("NOP")
            except (trio.BrokenResourceError, trio.ClosedResourceError):
                pass  # closed by the daemon; its stats say so next
            await trio.sleep(0.2)
            channels = _topic_stats(daemon, topic)["channels"]
            clients = sum(len(c["clients"]) for c in channels)
        waited = trio.current_time() - start
    if daemon.kind == "reference":
        assert clients == 1, f"nsqd let the consumer go after {waited:.1f} s"
        return
    assert not clients, f"the consumer still connected after {waited:.1f} s"
    assert waited > 1.5, f"let go after {waited:.1f} s, before its deadline (2 s)"


async def test_a_full_window_fills_from_disk_while_a_publisher_keeps_publishing(
    daemon_pool: DaemonPool, daemon_kind: str, topic: str
) -> None:
    """A consumer opens a window of 2,500 on a backlog mostly on disk while a publisher's
    MPUBs keep coming: the window fills exactly (ours hands a long refill out a share per
    loop pass while a publisher waits to be read, and must still finish it), every MPUB is
    answered, and FINs drain backlog and publishes alike, each message once."""
    d = daemon_pool.get(daemon_kind, ("--mem-queue-size=100",))
    create_channels(d.addr, [(topic, "ch")])
    backlog = bodies(12_000, b"old")
    for i in range(0, len(backlog), 2_000):
        await publish(d.addr, topic, backlog[i : i + 2_000])
    fresh = [bodies(100, b"new%02d" % i) for i in range(40)]
    window = 2_500
    received: list[bytes] = []

    async def publisher() -> None:
        async with await Conn.open(d.addr) as conn:
            for batch in fresh:
                await conn.mpub(topic, batch)

    async with await Conn.open(d.addr) as consumer:
        async with trio.open_nursery() as nursery:
            nursery.start_soon(publisher)
            await consumer.sub(topic, "ch", rdy=window)
            got = await consumer.messages(window, within=20)
        assert await consumer.messages_for(QUIET) == []  # no more than its credit
        received += [m.body for m in got]
        total = len(backlog) + sum(map(len, fresh))
        while True:
            for msg in got:
                await consumer.fin(msg.id)
            left = total - len(received)
            if not left:
                break
            got = await consumer.messages(min(window, left), within=20)
            received += [m.body for m in got]
    assert sorted(received) == sorted(backlog + [b for batch in fresh for b in batch])
