"""A pull's link served in the loop (nsqd/group/links.py), against a peer played by the test on
a real 127.0.0.1 socket: the worker's side is an engine (a broker, a channel, a consumer with
credit) with a Pull whose session the loop reads and writes. What the peer sees is nsqd's V2
from a consumer: the greeting, RDYs, FINs (or REQs), NOPs for heartbeats."""

from __future__ import annotations

import socket
import struct
from collections.abc import AsyncIterator, Callable

import pytest
import trio

from nsqd.engine.api import NoBatch
from nsqd.group import links
from nsqd.group.links import Links
from nsqd.group.pull import Pull
from nsqd.net.reactor import Loop
from tests.engine.test_channel import Engine, Reader

WAIT = 10.0  # seconds a step may take before the test fails


def message_frame(msg_id: bytes, body: bytes, attempts: int = 1, ts: int = 1) -> bytes:
    payload = struct.pack(">qH16s", ts, attempts, msg_id) + body
    return struct.pack(">ii", len(payload) + 4, 2) + payload


def response_frame(data: bytes) -> bytes:
    return struct.pack(">ii", len(data) + 4, 0) + data


def ident(i: int) -> bytes:
    return b"%016d" % i


class Peer:
    """The peer's side of one link session: what the worker wrote, read as it comes."""

    def __init__(self, stream: trio.SocketStream) -> None:
        self.stream = stream
        self.buf = b""

    async def read_until(self, done: Callable[[bytes], bool]) -> bytes:
        with trio.fail_after(WAIT):
            while not done(self.buf):
                data = await self.stream.receive_some(65536)
                assert data, f"the link closed; it had sent {self.buf[-200:]!r}"
                self.buf += data
        return self.buf

    async def greet(self) -> None:
        """Read the magic, IDENTIFY and SUB; answer both with OK."""
        await self.read_until(lambda b: b"SUB t c\n" in b)
        assert self.buf.startswith(b"  V2IDENTIFY\n")
        self.buf = self.buf[self.buf.index(b"SUB t c\n") + 8 :]
        await self.stream.send_all(response_frame(b"OK") + response_frame(b"OK"))

    def lines(self) -> list[bytes]:
        return self.buf.split(b"\n")[:-1]


class Side:
    """The worker's side: its loop, its links, a consumer of t:c with credit, and the pull."""

    def __init__(
        self, nursery: trio.Nursery, address: tuple[str, int], rdy: int, memory: int = 100_000
    ) -> None:
        self.engine = Engine(nursery, mem_queue_size=memory)
        self.reader = Reader(rdy=rdy)
        self.channel = self.engine.subscribe(self.reader)
        self.loop = Loop()
        self.links = Links(self.loop, NoBatch())
        self.pull = Pull(
            self.engine.broker, "t", "c", lambda: address, 1, "worker-0", 1_000_000, self.links
        )
        # the worker's port: a consumer's credit changed (worker.py's _starved)
        self.channel.starved = lambda channel, consumer: self.pull.nudge(self.pull.want())
        nursery.start_soon(self.loop.run)
        nursery.start_soon(self.links.run)
        nursery.start_soon(self.pull.run)


@pytest.fixture
async def listener() -> AsyncIterator[trio.SocketListener]:
    sock = trio.socket.socket()
    sock.setsockopt(socket.SOL_SOCKET, socket.SO_RCVBUF, 4096)  # inherited by the accepted
    await sock.bind(("127.0.0.1", 0))
    sock.listen()
    listener = trio.SocketListener(sock)
    async with listener:
        yield listener


def address_of(listener: trio.SocketListener) -> tuple[str, int]:
    return listener.socket.getsockname()[:2]


async def test_moved_messages_reach_the_consumer_and_are_fined_after_the_rdy_they_took(
    listener: trio.SocketListener, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setattr(links, "RDY_CHECK", 3600.0)  # a RDY here comes from the credit's port
    async with trio.open_nursery() as nursery:
        side = Side(nursery, address_of(listener), rdy=10)
        with trio.fail_after(WAIT):
            peer = Peer(await listener.accept())
        await peer.greet()
        await peer.read_until(lambda b: b"\n" in b)
        assert peer.lines() == [b"RDY 10"]  # the consumer's credit, one peer
        peer.buf = b""
        frames = [message_frame(ident(i), b"body%d" % i, attempts=2) for i in range(3)]
        await peer.stream.send_all(b"".join(frames) + response_frame(b"_heartbeat_"))
        await peer.read_until(lambda b: b.count(b"FIN ") == 3 and b"NOP\n" in b)
        assert side.reader.bodies() == [b"body0", b"body1", b"body2"]
        assert [m.id for m in side.reader.got] == [ident(i) for i in range(3)]
        lines = peer.lines()
        # the credit the three took goes out ahead of their FINs (the peer must not send more)
        assert lines.index(b"RDY 7") < lines.index(b"FIN " + ident(0))
        assert sorted(lines) == sorted([b"RDY 7", b"NOP"] + [b"FIN " + ident(i) for i in range(3)])
        # FINs here raise the credit again: a RDY once it grew by a quarter, sent at the end
        # of a pass the port's call rang for
        peer.buf = b""
        assert side.channel.finish(side.reader, [m.id for m in side.reader.got]) == []
        side.channel.refresh(side.reader)  # as a front-end does after a read's FINs
        await peer.read_until(lambda b: b"RDY 10\n" in b)
        nursery.cancel_scope.cancel()


async def test_a_malformed_frame_ends_the_session_and_the_pull_connects_again(
    listener: trio.SocketListener,
) -> None:
    async with trio.open_nursery() as nursery:
        Side(nursery, address_of(listener), rdy=5)
        with trio.fail_after(WAIT):
            peer = Peer(await listener.accept())
        await peer.greet()
        await peer.read_until(lambda b: b"RDY 5\n" in b)
        await peer.stream.send_all(struct.pack(">ii", 2, 2))  # a frame smaller than its type
        with trio.fail_after(WAIT):
            assert await peer.stream.receive_some(100) == b""  # the worker closed the link
            again = Peer(await listener.accept())
        await again.greet()
        await again.read_until(lambda b: b"RDY 5\n" in b)
        nursery.cancel_scope.cancel()


async def test_fins_that_the_peers_socket_cannot_take_go_out_later_in_order(
    listener: trio.SocketListener,
) -> None:
    count = 20_000
    async with trio.open_nursery() as nursery:
        side = Side(nursery, address_of(listener), rdy=count)
        with trio.fail_after(WAIT):
            peer = Peer(await listener.accept())
        await peer.greet()
        await peer.read_until(lambda b: b"RDY %d\n" % count in b)
        peer.buf = b""
        link = side.pull._link
        assert link is not None
        link.socket.stream.setsockopt(socket.SOL_SOCKET, socket.SO_SNDBUF, 4096)
        frames = b"".join(message_frame(ident(i), b"x") for i in range(count))
        await peer.stream.send_all(frames)  # the peer reads nothing meanwhile
        with trio.fail_after(WAIT):
            while len(side.reader.got) < count:  # noqa: ASYNC110 (the loop moves them)
                await trio.sleep(0.01)
        assert link.out  # the socket took only part of the FINs: the rest waits for EPOLLOUT
        await peer.read_until(lambda b: b.count(b"FIN ") == count)
        fins = [line for line in peer.lines() if line.startswith(b"FIN ")]
        assert fins == [b"FIN " + ident(i) for i in range(count)]
        nursery.cancel_scope.cancel()


async def test_messages_the_store_refuses_are_given_back(
    listener: trio.SocketListener,
) -> None:
    async with trio.open_nursery() as nursery:
        # --mem-queue-size=0: every message goes through the store, which refuses them
        side = Side(nursery, address_of(listener), rdy=4, memory=0)
        side.engine.stores["t:c"].refuse = "disk full"
        with trio.fail_after(WAIT):
            peer = Peer(await listener.accept())
        await peer.greet()
        await peer.read_until(lambda b: b"RDY 4\n" in b)
        peer.buf = b""
        await peer.stream.send_all(b"".join(message_frame(ident(i), b"y") for i in range(2)))
        await peer.read_until(lambda b: b.count(b"REQ ") == 2)
        assert [ln for ln in peer.lines() if ln.startswith(b"REQ")] == [
            b"REQ " + ident(i) + b" 0" for i in range(2)
        ]
        assert b"FIN" not in peer.buf and not side.reader.got
        nursery.cancel_scope.cancel()
