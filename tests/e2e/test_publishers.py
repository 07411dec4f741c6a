"""Publishers' connections on the wire: answers that outgrow the socket buffers all arrive, in
order, and a connection that starts subscribing after publishing (in one write) keeps its order.

Ours serves plain connections from one reactor task, which waits for a full socket to take
output again while it goes on reading its commands, and keeps a connection that subscribes
(nsqd/tcp/reactor.py); these are the moments where bytes could be lost or reordered. Run
against the Go nsqd too, which proves the expectations."""

from __future__ import annotations

import json
import socket
import struct
import urllib.request

import trio

from protocol.v2 import FrameType

from .conftest import Daemon
from .wire import Conn, command, mpub_body

OK_FRAME = struct.pack(">ii", 6, 0) + b"OK"


async def _stats_depth(daemon: Daemon, topic: str) -> int:
    def get() -> int:
        url = f"http://127.0.0.1:{daemon.http_port}/stats?format=json&topic={topic}"
        with urllib.request.urlopen(url, timeout=5) as resp:
            stats = json.load(resp)
        (t,) = [t for t in stats["topics"] if t["topic_name"] == topic]
        return int(t["depth"])

    return await trio.to_thread.run_sync(get)


async def test_publisher_reading_late_gets_every_answer(daemon: Daemon, topic: str) -> None:
    """50,000 PUBs sent before any answer is read, into a 4 KiB receive buffer: the daemon's
    writes of the 500 KB of OKs are cut short many times; every OK arrives and nothing else."""
    n = 50_000
    sock = trio.socket.socket(socket.AF_INET, socket.SOCK_STREAM)
    sock.setsockopt(socket.SOL_SOCKET, socket.SO_RCVBUF, 4096)
    await sock.connect(daemon.addr)
    stream = trio.SocketStream(sock)
    requests = b"  V2" + command(f"PUB {topic}", b"0123456789") * n
    received = bytearray()

    async def send() -> None:
        await stream.send_all(requests)

    async def read_late() -> None:
        await trio.sleep(1.0)  # let the answers back up first
        while len(received) < n * len(OK_FRAME):
            data = await stream.receive_some(65536)
            assert data, f"closed after {len(received)} bytes"
            received.extend(data)

    with trio.fail_after(60):
        async with trio.open_nursery() as nursery:
            nursery.start_soon(send)
            nursery.start_soon(read_late)
    assert bytes(received) == OK_FRAME * n
    assert await _stats_depth(daemon, topic) == n
    await stream.aclose()


async def test_publish_then_subscribe_in_one_write(daemon: Daemon, topic: str) -> None:
    """PUB, SUB, RDY and another PUB in one write: the PUB's OK, then SUB's, then the second
    PUB's OK and the first message (their order is the daemon's race, as in nsqd)."""
    async with await Conn.open(daemon.addr) as conn:
        await conn.send(
            command(f"PUB {topic}", b"first")
            + command(f"SUB {topic} ch")
            + command("RDY 1")
            + command(f"PUB {topic}", b"second")
        )
        assert (await conn.read_frame()).data == b"OK"
        assert (await conn.read_frame()).data == b"OK"
        rest = [await conn.read_frame(), await conn.read_frame()]
        kinds = sorted(f.frame_type for f in rest)
        assert kinds == [FrameType.RESPONSE, FrameType.MESSAGE], rest
        (msg,) = [f for f in rest if f.frame_type == FrameType.MESSAGE]
        assert msg.data.endswith(b"first")
        await conn.expect_open()


async def test_each_publisher_s_messages_arrive_in_the_order_it_sent_them(
    daemon: Daemon, topic: str
) -> None:
    """Four connections each pipeline PUBs, MPUBs of one and MPUBs of three into one topic (ours
    stores a pass's single-message publishes together when the pass ends, engine/pending.py,
    and any other publish to the topic after what waits): one consumer receives every message
    once, and each connection's in the order it sent them."""
    conns, rounds = 4, 150
    sent: dict[int, list[bytes]] = {c: [] for c in range(conns)}
    writes: dict[int, list[bytes]] = {c: [] for c in range(conns)}
    for c in range(conns):
        for r in range(rounds):
            bodies = [b"%d-%04d-%d" % (c, r, k) for k in range((1, 1, 3)[r % 3])]
            sent[c].extend(bodies)
            writes[c].append(
                command(f"PUB {topic}", bodies[0])
                if r % 3 == 0
                else command(f"MPUB {topic}", mpub_body(bodies))
            )
    async with await Conn.open(daemon.addr) as consumer:
        await consumer.sub(topic, "ch", rdy=2500)

        async def publish(c: int) -> None:
            async with await Conn.open(daemon.addr) as conn:
                for i in range(0, rounds, 10):  # ten commands a write, their OKs after
                    await conn.send(b"".join(writes[c][i : i + 10]))
                    for _ in writes[c][i : i + 10]:
                        await conn.expect_response(b"OK")

        with trio.fail_after(30):
            async with trio.open_nursery() as nursery:
                for c in range(conns):
                    nursery.start_soon(publish, c)
            total = sum(len(b) for b in sent.values())
            got = [m.body for m in await consumer.messages(total, within=20.0)]
    assert sorted(got) == sorted(b for bodies in sent.values() for b in bodies)
    for c in range(conns):
        mine = [b for b in got if b.startswith(b"%d-" % c)]
        assert mine == sent[c], f"connection {c}'s messages out of order"


async def test_consumers_gone_mid_delivery_leave_the_publisher_be(
    daemon: Daemon, topic: str
) -> None:
    """Consumers that reset their connections while a publisher's messages are handed to them:
    a write to one fails inside the channel's hand-out. The publisher gets every OK and stays
    connected. Ours once ended such a consumer from inside the hand-out, which the channel did
    not expect (ValueError), and the error closed the publisher's connection (seen as
    bench_writer's "panic: EOF" with a reader exiting mid-run)."""
    body = b"x" * 2000
    async with await Conn.open(daemon.addr) as publisher:
        await publisher.mpub(topic, [body])  # the topic; its channel comes with the first SUB

        async def consumers() -> None:
            for _ in range(150):
                sock = socket.create_connection(daemon.addr)
                sock.sendall(b"  V2" + command(f"SUB {topic} ch") + command("RDY 2500"))
                sock.setsockopt(socket.SOL_SOCKET, socket.SO_LINGER, struct.pack("ii", 1, 0))
                await trio.sleep(0.002)
                sock.close()  # a reset, with messages on their way to it

        async with trio.open_nursery() as nursery:
            nursery.start_soon(consumers)
            with trio.fail_after(60):
                for _ in range(300):
                    await publisher.mpub(topic, [body] * 20)
        await publisher.expect_open()
