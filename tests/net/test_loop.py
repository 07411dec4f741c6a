"""The reactor's loop (nsqd/net/reactor.py) while it sleeps in trio with no deadline of its own:
its connections' deadlines (through the alarm task and the bell) and a `wake` from another task
(the bell) end the sleep on time, one deadline after another, and two loops in one trio run (a
front-end on its own beside the daemon's, in tests) each serve their connections. Passes back
to back skip trio's checkpoint only while trio has nothing to do (`trio_probe`): a task ready,
a socket ready in trio's set, a timer and the loop's cancellation still come on time.

Real sockets (socketpairs for the loop's connections). A watchdog thread writes to a
connection of the loop every WATCHDOG seconds: a sleep that missed its cause ends then
instead of hanging the suite, and the test's elapsed time says it was missed."""

from __future__ import annotations

import math
import socket
import threading
import time
from collections.abc import AsyncIterator, Iterator
from contextlib import asynccontextmanager, contextmanager
from typing import Any

import trio

from nsqd.net.reactor import EpollReactor, Loop, trio_probe
from nsqd.net.transport import SocketTransport

WATCHDOG = 5.0
PROMPT = 1.0  # every cause below ends the sleep well within this (the watchdog's is 5 s)


class Conn:
    def __init__(self, sock: socket.socket) -> None:
        sock.setblocking(False)
        self.sock = sock  # kept: the transport holds its fd only
        self.socket = SocketTransport(trio.SocketStream(trio.socket.from_stdlib_socket(sock)))
        self.due = math.inf


class Echo(EpollReactor):
    """Answers what it reads; counts its passes and its connections' deadlines."""

    def __init__(self, loop: Loop | None = None) -> None:
        super().__init__(loop)
        self.expired: list[float] = []
        self.expiring = trio.Event()  # set by each deadline met
        self.passing = trio.Event()  # set by each pass

    def _ready(self, conn: Any, events: int) -> None:
        data = conn.socket.read_now(65536)
        if data.startswith(b"later"):  # a deadline set in a pass, before the loop sleeps
            self.schedule(conn, self.loop.now + float(data[5:] or 0.05))
        elif data:
            conn.socket.write_now(data)
        elif data == b"":
            self.unwatch(conn)

    def _expire(self, conn: Any, now: float) -> None:
        self.expired.append(now)
        self.expiring.set()

    def _fail(self, conn: Any) -> None:
        self.unwatch(conn)

    def _shutdown(self) -> None:
        for conn in list(self.conns.values()):
            self.unwatch(conn)

    def _passed(self) -> None:
        self.passing.set()


@contextmanager
def watchdog(sock: socket.socket) -> Iterator[None]:
    """Write a byte to `sock` (the client side of a loop's connection) every WATCHDOG s."""
    done = threading.Event()

    def bark() -> None:
        while not done.wait(WATCHDOG):
            sock.send(b"!")

    thread = threading.Thread(target=bark, daemon=True)
    thread.start()
    try:
        yield
    finally:
        done.set()
        thread.join()


@asynccontextmanager
async def echo_loop(loop: Loop | None = None) -> AsyncIterator[tuple[Echo, socket.socket]]:
    """An Echo front-end with one connection, its loop running; the client's socket."""
    echo = Echo(loop)
    ours, theirs = socket.socketpair()
    theirs.settimeout(WATCHDOG * 2)
    echo.watch(Conn(ours))
    with watchdog(theirs):
        async with trio.open_nursery() as nursery:
            nursery.start_soon(echo.loop.run if loop is None else echo.run)
            await trio.sleep(0.01)  # the loop runs and waits
            try:
                yield echo, theirs
            finally:
                nursery.cancel_scope.cancel()
    theirs.close()


async def echoes(client: socket.socket, data: bytes) -> bool:
    client.send(data)
    return await trio.to_thread.run_sync(client.recv, 100) == data


async def test_a_deadline_set_in_a_pass_ends_the_sleep() -> None:
    async with echo_loop() as (echo, client):
        started = trio.current_time()
        client.send(b"later")
        await echo.expiring.wait()
        assert echo.expired[0] - started < PROMPT


async def test_deadlines_one_after_the_other() -> None:
    """Two deadlines set in passes: when the first is met the loop sleeps until the second."""
    async with echo_loop() as (echo, client):
        ours, theirs = socket.socketpair()
        with theirs:
            echo.watch(Conn(ours))
            started = trio.current_time()
            client.send(b"later0.05")
            theirs.send(b"later0.15")
            while len(echo.expired) < 2:
                echo.expiring = trio.Event()
                await echo.expiring.wait()
            assert echo.expired[1] - echo.expired[0] > 0.05
            assert echo.expired[1] - started < PROMPT


async def test_its_own_deadlines_and_a_wake_end_the_sleep() -> None:
    async with echo_loop() as (echo, _):
        conn = next(iter(echo.conns.values()))
        started = trio.current_time()
        echo.schedule(conn, started + 0.05)
        await echo.expiring.wait()
        assert echo.expired[0] - started < PROMPT
        # a task that wakes the loop, which then has nothing else to do
        await trio.sleep(0.02)
        waited = time.monotonic()
        echo.passing = trio.Event()
        echo.wake()
        await echo.passing.wait()
        assert time.monotonic() - waited < PROMPT


async def test_two_loops_in_one_run() -> None:
    async with echo_loop() as (_, client1), echo_loop() as (_, client2):
        started = time.monotonic()
        for _ in range(20):
            assert await echoes(client2, b"two")
            assert await echoes(client1, b"one")
        assert time.monotonic() - started < PROMPT * 2


async def test_a_front_end_on_a_shared_loop() -> None:
    """The daemon's way: front-ends given one loop, which runs on its own."""
    loop = Loop()
    async with trio.open_nursery() as nursery:
        nursery.start_soon(loop.run)
        async with echo_loop(loop) as (_, client):
            started = time.monotonic()
            assert await echoes(client, b"shared")
            assert time.monotonic() - started < PROMPT
        nursery.cancel_scope.cancel()


async def test_the_probe_sees_a_ready_task_and_ready_io() -> None:
    waiting, close = trio_probe()
    ours, theirs = socket.socketpair()
    trio_side = trio.socket.from_stdlib_socket(ours)
    got: list[bytes] = []

    async def reader() -> None:
        got.append(await trio_side.recv(10))

    try:
        assert not waiting()
        async with trio.open_nursery() as nursery:
            nursery.start_soon(reader)
            assert waiting()  # the new task is ready to run
            await trio.sleep(0.01)  # it runs and waits for its socket in trio's epoll set
            assert not waiting()
            theirs.send(b"x")  # no checkpoint: trio has not looked at its set yet
            assert waiting()
        assert got == [b"x"]
        assert not waiting()
    finally:
        close()
        trio_side.close()
        theirs.close()


def flood(sock: socket.socket, stop: threading.Event) -> threading.Thread:
    """A thread (not started) that keeps the loop busy: it sends on `sock` and reads the echo,
    as fast as the loop echoes, until `stop` is set or `sock` fails (the loop ended and closed
    its side)."""

    def run() -> None:
        sock.settimeout(PROMPT)
        try:
            while not stop.is_set():
                sock.send(b"busy" * 64)
                sock.recv(65536)
        except OSError:
            pass

    return threading.Thread(target=run, daemon=True)


async def test_busy_passes_give_trio_its_turns() -> None:
    """A connection that always has input keeps the loop's passes back to back (a thread
    sending as fast as the loop echoes): a task woken by its socket, one by its timer and
    the loop's cancellation all come within PROMPT."""
    async with echo_loop() as (_, client):
        stop = threading.Event()
        flooding = flood(client, stop)
        flooding.start()
        try:
            ours, theirs = socket.socketpair()
            with ours, theirs, trio.socket.from_stdlib_socket(ours) as trio_side:
                started = time.monotonic()
                await trio.sleep(0.02)
                assert time.monotonic() - started < PROMPT
                threading.Timer(0.02, theirs.send, (b"x",)).start()
                started = time.monotonic()
                assert await trio_side.recv(10) == b"x"
                assert time.monotonic() - started < PROMPT
        finally:
            stop.set()
            await trio.to_thread.run_sync(flooding.join)  # the loop echoes its last send


async def test_a_busy_loop_stops_when_cancelled() -> None:
    loop = Loop()
    echo = Echo(loop)
    ours, theirs = socket.socketpair()
    echo.watch(Conn(ours))
    stop = threading.Event()
    flooding = flood(theirs, stop)
    try:
        async with trio.open_nursery() as nursery:
            nursery.start_soon(loop.run)
            await trio.sleep(0.01)
            flooding.start()
            await trio.sleep(0.05)
            started = time.monotonic()
            loop.close()
        assert time.monotonic() - started < PROMPT
    finally:
        stop.set()
        theirs.shutdown(socket.SHUT_RDWR)  # its recv ends: the loop that echoed has ended
        flooding.join()
        theirs.close()
        ours.close()
