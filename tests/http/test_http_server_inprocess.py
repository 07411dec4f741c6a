"""The HTTP server layer (nsqd/http/server.py) in process, with short timeouts: idle, slow and
non-reading clients, the read limit, 100-continue, handler errors and shutdown. Every wait is
bounded. (What net/http answers on the wire, beside the Go nsqd: test_http_server.py.)"""

from __future__ import annotations

from collections.abc import AsyncIterator
from contextlib import asynccontextmanager
from typing import Any

import pytest
import trio
from nsqhttp_support import HOST

from nsqd.http.server import BodyError, Request, Response, Server

IO_TIMEOUT = 5.0


async def echo(req: Request) -> Response:
    """Answers with the method, path and the whole body."""
    body = req.method.encode() + b" " + req.raw_path + b" " + await req.read(1 << 20)
    return 200, [(b"Content-Length", b"%d" % len(body))], body


@asynccontextmanager
async def serving(handler: Any = echo, **options: Any) -> AsyncIterator[tuple[Server, int]]:
    server = Server(handler, **options)
    listeners = await trio.open_tcp_listeners(0, host=HOST)
    port = listeners[0].socket.getsockname()[1]
    async with trio.open_nursery() as nursery:
        await nursery.start(server.serve, [(listener, None) for listener in listeners])
        try:
            yield server, port
        finally:
            server.close()


async def until(predicate: Any) -> None:
    for _ in range(1000):  # the caller's fail_after bounds it
        if predicate():
            return
        await trio.sleep(0.01)
    raise AssertionError("condition never met")


async def receive_all(stream: trio.abc.Stream) -> bytes:
    """Everything until the server closes (or resets) the connection."""
    data = b""
    try:
        while chunk := await stream.receive_some(65536):
            data += chunk
    except trio.BrokenResourceError:
        pass
    return data


async def test_idle_keep_alive_connection_is_closed() -> None:
    with trio.fail_after(IO_TIMEOUT):
        async with serving(idle_timeout=0.3) as (_, port):
            stream = await trio.open_tcp_stream(HOST, port)
            start = trio.current_time()
            await stream.send_all(b"GET /a HTTP/1.1\r\nHost: x\r\n\r\n")
            assert (await receive_all(stream)).endswith(b"\r\n\r\nGET /a ")
            assert 0.25 < trio.current_time() - start < 2.0
            silent = await trio.open_tcp_stream(HOST, port)  # never sends a byte
            assert await receive_all(silent) == b""


async def test_slow_request_heads_are_cut_off() -> None:
    with trio.fail_after(IO_TIMEOUT):
        async with serving(header_timeout=0.4) as (_, port):
            half = await trio.open_tcp_stream(HOST, port)
            await half.send_all(b"GET /a HTTP/1.1\r\nHo")
            drip = await trio.open_tcp_stream(HOST, port)
            start = trio.current_time()

            async def drip_feed() -> None:  # one byte at a time keeps no head alive forever
                try:
                    for byte in b"GET /b HTTP/1.1\r\nHost: x\r\nX-Long: aaaaaaaaaaaaaaaaaaaa":
                        await drip.send_all(bytes([byte]))
                        await trio.sleep(0.05)
                except trio.BrokenResourceError:
                    pass

            async with trio.open_nursery() as nursery:
                nursery.start_soon(drip_feed)
                assert await receive_all(drip) == b""
                assert await receive_all(half) == b""
                nursery.cancel_scope.cancel()
            assert trio.current_time() - start < 2.0


async def test_slow_bodies_are_cut_off_and_others_still_served() -> None:
    finished = []

    async def handler(req: Request) -> Response:
        body = await req.read(100)
        finished.append(body)
        return 200, [(b"Content-Length", b"2")], b"OK"

    with trio.fail_after(IO_TIMEOUT):
        async with serving(handler, body_timeout=0.3) as (_, port):
            slow = await trio.open_tcp_stream(HOST, port)
            await slow.send_all(b"POST / HTTP/1.1\r\nHost: x\r\nContent-Length: 10\r\n\r\nabc")
            other = await trio.open_tcp_stream(HOST, port)
            await other.send_all(b"POST / HTTP/1.1\r\nHost: x\r\nContent-Length: 2\r\n\r\nhi")
            assert (await other.receive_some(4096)).endswith(b"\r\n\r\nOK")
            assert await receive_all(slow) == b""  # closed, no answer
            assert finished == [b"hi"]


async def test_a_dripping_body_is_cut_off_in_all() -> None:
    async def handler(req: Request) -> Response:
        await req.read(1000)
        return 200, [(b"Content-Length", b"2")], b"OK"

    with trio.fail_after(IO_TIMEOUT):
        async with serving(handler, body_timeout=0.3, request_timeout=0.6) as (_, port):
            stream = await trio.open_tcp_stream(HOST, port)
            start = trio.current_time()
            await stream.send_all(b"POST / HTTP/1.1\r\nHost: x\r\nContent-Length: 100\r\n\r\n")

            async def drip() -> None:  # a byte every 0.1 s: never idle for body_timeout
                try:
                    for _ in range(100):
                        await stream.send_all(b"b")
                        await trio.sleep(0.1)
                except (trio.BrokenResourceError, trio.ClosedResourceError):
                    pass

            async with trio.open_nursery() as nursery:
                nursery.start_soon(drip)
                assert await receive_all(stream) == b""
                nursery.cancel_scope.cancel()
            assert 0.5 < trio.current_time() - start < 2.0


async def test_a_client_that_does_not_read_is_dropped() -> None:
    big = b"x" * (32 << 20)

    async def handler(req: Request) -> Response:
        await req.drain()
        return 200, [(b"Content-Length", b"%d" % len(big))], big

    with trio.fail_after(IO_TIMEOUT):
        async with serving(handler, write_timeout=0.3) as (server, port):
            stream = await trio.open_tcp_stream(HOST, port)
            await stream.send_all(b"GET / HTTP/1.1\r\nHost: x\r\n\r\n")
            await until(lambda: server.open_connections == 0)
            await stream.aclose()


async def test_read_limit_and_leftover_body() -> None:
    async def handler(req: Request) -> Response:
        head = await req.read(10)  # the rest is discarded by the server
        return 200, [(b"Content-Length", b"%d" % len(head))], head

    with trio.fail_after(IO_TIMEOUT):
        async with serving(handler) as (_, port):
            stream = await trio.open_tcp_stream(HOST, port)
            small = b"POST / HTTP/1.1\r\nHost: x\r\nContent-Length: 100\r\n\r\n" + b"b" * 100
            await stream.send_all(small + small)
            data = b""
            while data.count(b"bbbbbbbbbb") < 2:
                data += await stream.receive_some(4096)
            assert b"Connection: close" not in data
            # 300 KB unread (over net/http's 256 KiB) closes after the answer
            big = b"POST / HTTP/1.1\r\nHost: x\r\nContent-Length: 300000\r\n\r\n"
            await stream.send_all(big + b"c" * 20)
            data = await receive_all(stream)
            assert b"Connection: close\r\n" in data
            assert data.endswith(b"c" * 10)


async def test_expect_100_continue() -> None:
    with trio.fail_after(IO_TIMEOUT):
        async with serving() as (_, port):
            stream = await trio.open_tcp_stream(HOST, port)
            await stream.send_all(
                b"POST /x HTTP/1.1\r\nHost: x\r\nExpect: 100-continue\r\nContent-Length: 4\r\n\r\n"
            )
            assert await stream.receive_some(4096) == b"HTTP/1.1 100 Continue\r\n\r\n"
            await stream.send_all(b"body")
            assert (await stream.receive_some(4096)).endswith(b"\r\n\r\nPOST /x body")


async def test_handler_errors() -> None:
    async def handler(req: Request) -> Response:
        if req.path == "/boom":
            raise RuntimeError("boom")
        try:
            await req.drain()
        except BodyError:
            return 500, [(b"Content-Length", b"3")], b"bad"
        return 200, [(b"Content-Length", b"2")], b"OK"

    with trio.fail_after(IO_TIMEOUT):
        async with serving(handler) as (_, port):
            stream = await trio.open_tcp_stream(HOST, port)
            await stream.send_all(b"GET /boom HTTP/1.1\r\nHost: x\r\n\r\n")
            data = await stream.receive_some(4096)
            assert data.startswith(b"HTTP/1.1 500 Internal Server Error\r\n")
            await stream.send_all(  # still usable; then a malformed chunk reaches the handler
                b"POST /x HTTP/1.1\r\nHost: x\r\nTransfer-Encoding: chunked\r\n\r\nzz\r\n"
            )
            data = await receive_all(stream)
            assert data.startswith(b"HTTP/1.1 500 Internal Server Error\r\n")
            assert data.endswith(b"Connection: close\r\n\r\nbad")


async def test_close_ends_idle_connections_and_lets_requests_finish() -> None:
    release = trio.Event()

    async def handler(req: Request) -> Response:
        if req.path == "/slow":
            await release.wait()
        return 200, [(b"Content-Length", b"2")], b"OK"

    with trio.fail_after(IO_TIMEOUT):
        async with serving(handler) as (server, port):
            idle = await trio.open_tcp_stream(HOST, port)
            busy = await trio.open_tcp_stream(HOST, port)
            await busy.send_all(b"GET /slow HTTP/1.1\r\nHost: x\r\n\r\n")
            await until(lambda: server.open_connections == 2)
            await trio.sleep(0.05)
            server.close()
            assert await receive_all(idle) == b""
            release.set()
            assert (await receive_all(busy)).endswith(b"\r\n\r\nOK")
            with pytest.raises(OSError):
                await trio.open_tcp_stream(HOST, port)  # no longer accepting
