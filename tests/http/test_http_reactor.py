"""The HTTP reactor's hand-overs (nsqd/http/reactor.py): a keep-alive connection whose wholly
buffered POST /pub or /mpub requests are answered by the reactor goes to its own task for
anything else (another path, a request that arrives in pieces, Expect: 100-continue, the end of
the stream, an answer the socket does not take) and comes back after it. Each conversation is
played against ours and the Go nsqd and must get the same bytes (Date masked); the timeouts and
the shutdown of connections in the reactor are checked in process. Every wait is bounded."""

from __future__ import annotations

import socket
import struct
import time
from collections.abc import Iterator
from typing import Any

import pytest
import trio
from nsqhttp_support import HOST, Daemon
from test_http_server import IO_TIMEOUT, MAX_HEAD, head_of, mask_date
from test_http_server_inprocess import receive_all, serving, until

from nsqd.http.server import Request, Response

DAEMONS = ("ours",)  # each test plays its conversation against `reference` itself

Step = bytes | float | None  # bytes to send, a pause, or None: end our side (SHUT_WR)


def pub(body: bytes, query: bytes = b"topic=r") -> bytes:
    return b"POST /pub?%s HTTP/1.1\r\nHost: x\r\nContent-Length: %d\r\n\r\n%s" % (
        query,
        len(body),
        body,
    )


def mpub(body: bytes, query: bytes = b"topic=r") -> bytes:
    return pub(body, query).replace(b"POST /pub", b"POST /mpub", 1)


def binary(*messages: bytes) -> bytes:
    return struct.pack(">i", len(messages)) + b"".join(
        struct.pack(">i", len(m)) + m for m in messages
    )


PING = b"GET /ping HTTP/1.1\r\nHost: x\r\n\r\n"
KEEP = b"Connection: keep-alive\r\n"
K10 = b"GET /ping HTTP/1.0\r\n" + KEEP + b"\r\n"  # an HTTP/1.0 keep-alive request
CL_LIST = b"\r\nContent-Length: 1,1\r\n\r\n"  # ends a head
CHUNKED = (
    b"POST /pub?topic=r HTTP/1.1\r\nHost: x\r\nTransfer-Encoding: chunked\r\n\r\n"
    b"1\r\na\r\n0\r\n\r\n"
)


def converse(port: int, steps: list[Step]) -> bytes:
    """Play `steps` on one connection; everything received until the server closes or the
    socket is quiet for a moment after the last step."""
    with socket.create_connection((HOST, port), timeout=IO_TIMEOUT) as s:
        s.setsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)
        for step in steps:
            if step is None:
                s.shutdown(socket.SHUT_WR)
            elif isinstance(step, float):
                time.sleep(step)
            else:
                s.sendall(step)
        s.settimeout(0.5)
        data = b""
        try:
            while chunk := s.recv(65536):
                data += chunk
            data += b"<EOF>"
        except TimeoutError:
            pass
        except ConnectionResetError:
            data += b"<RST>"
    return mask_date(data)


@pytest.fixture(scope="module")
def both(nsqd: Daemon, reference: Daemon) -> Iterator[tuple[int, int]]:
    yield nsqd.http_port, reference.http_port


def same(both: tuple[int, int], steps: list[Step]) -> bytes:
    ours, go = (converse(port, steps) for port in both)
    assert ours == go
    return ours


OK = b"HTTP/1.1 200 OK\r\n"

CONVERSATIONS: dict[str, list[Step]] = {
    "pipelined pubs in one write": [pub(b"a") + pub(b"b") + mpub(b"c\nd\n") + pub(b"e")],
    "a body in two writes after a pub": [
        pub(b"one") + pub(b"two-halves")[:-5],
        0.1,
        b"alves" + pub(b"three"),
        0.05,
        pub(b"four"),
    ],
    "a head in two writes after a pub": [
        pub(b"one") + pub(b"two")[:20],
        0.1,
        pub(b"two")[20:],
        0.05,
        pub(b"three"),
    ],
    "other paths between pubs": [
        pub(b"a") + PING + pub(b"b"),
        0.05,
        b"GET /nope HTTP/1.1\r\nHost: x\r\n\r\n" + pub(b"c"),
        0.05,
        b"PUT /pub?topic=r HTTP/1.1\r\nHost: x\r\nContent-Length: 1\r\n\r\nx" + pub(b"d"),
        0.05,
        b"POST /p%75b?topic=r HTTP/1.1\r\nHost: x\r\nContent-Length: 1\r\n\r\nx" + pub(b"e"),
    ],
    "errors answered in the reactor": [
        pub(b"")
        + pub(b"x", b"topic=bad!name")
        + pub(b"x", b"tropic=r")
        + pub(b"x", b"topic=r&defer=abc")
        + pub(b"x" * 101)  # over --max-msg-size: 413, the body discarded, kept alive
        + mpub(b"y" * 1001)  # over --max-body-size
        + mpub(b"z" * 101 + b"\n")
        + mpub(binary(b"ok", b"fine"), b"topic=r&binary=true")
        + mpub(binary(b"ok")[:-1], b"topic=r&binary=true")
        + mpub(b"\x00\x00\x00\x02\x00\x00\x00\x00", b"topic=r&binary=true")
        + mpub(b"m", b"topic=r&binary=maybe")
        + pub(b"a%zz", b"topic=r&x=%zz")
        + pub(b"last"),
    ],
    "expect 100-continue after a pub": [
        pub(b"a")
        + b"POST /pub?topic=r HTTP/1.1\r\nHost: x\r\nExpect: 100-continue\r\n"
        + b"Content-Length: 4\r\n\r\n",
        0.1,
        b"body" + pub(b"b"),
    ],
    "end of stream after pubs": [pub(b"a") + pub(b"b"), None],
    "end of stream inside a request": [pub(b"a") + pub(b"cut short")[:-3], None],
    # a handler's read meets the end of a Content-Length body cut short: Go's body then reads
    # as ended, so the answer has no `Connection: close` (the connection still ends)
    "end of stream inside a binary mpub": [
        mpub(binary(b"abc"), b"topic=r&binary=true")[:-2],
        None,
    ],
    "end of stream inside a body read by NewReqParams": [
        b"POST /channel/create?topic=r&channel=c HTTP/1.1\r\nHost: x\r\nContent-Length: 9"
        b"\r\n\r\nab",
        None,
    ],
    "end of stream inside a body no handler reads": [  # Go's discard meets it: closed
        b"POST /nope HTTP/1.1\r\nHost: x\r\nContent-Length: 9\r\n\r\nab",
        None,
    ],
    "end of stream inside a chunked body": [  # its reader fails instead: closed
        b"POST /pub?topic=r HTTP/1.1\r\nHost: x\r\nTransfer-Encoding: chunked\r\n\r\n5\r\nab",
        None,
    ],
    "end of stream inside a head": [pub(b"a") + b"POST /pub?topic=r HTTP/1.1\r\nHo", None],
    # net/http answers a head cut short by the end of the stream with a 400, but reads a
    # request after the first only once 4 bytes of it came (its Peek(4))
    "end of stream inside a first head": [b"G", None],
    "end of stream after a first request line": [b"GET /ping HTTP/1.1\r\n", None],
    "end of stream after 3 bytes of a second head": [PING + b"GET", None],
    "end of stream after 4 bytes of a second head": [PING + b"GET ", None],
    "end of stream after a CRLF": [PING + b"\r\n", 0.1, None],
    "a CRLF then a request": [PING + b"\r\n", 0.1, PING],  # not judged before 4 bytes
    # after a POST it skips up to 4 CR or LF (old clients end a body with one)
    "a CRLF after a pub": [pub(b"a") + b"\r\n" + PING],
    "a CRLF in pieces after a pub": [pub(b"a") + b"\r", 0.05, b"\n", 0.05, PING],
    "three CRLFs after a pub": [pub(b"a") + b"\r\n\r\n\r\n" + PING],  # 4 bytes only
    "a CRLF after a chunked pub": [
        b"POST /pub?topic=r HTTP/1.1\r\nHost: x\r\nTransfer-Encoding: chunked\r\n\r\n"
        b"3\r\nabc\r\n0\r\n\r\n\r\n" + PING
    ],
    "a CRLF and 2 bytes after a pub, then the end": [pub(b"a") + b"\r\nPO", None],
    "a CRLF after a GET": [PING + b"\r\n" + PING],  # only after a POST
    # HTTP/1.0: an HTTP/1.0 status line; kept alive (and said so) only on the client's word
    "HTTP/1.0": [b"GET /ping HTTP/1.0\r\n\r\n" + PING],
    "HTTP/1.0 pub": [pub(b"a").replace(b"HTTP/1.1", b"HTTP/1.0")],
    "HTTP/1.0 keep-alive": [
        (K10 + pub(b"a", b"topic=r").replace(b"HTTP/1.1\r\n", b"HTTP/1.0\r\n" + KEEP) + PING),
    ],
    "HTTP/1.0 keep-alive, close": [K10.replace(b"keep-alive", b"keep-alive, close") + PING],
    "HTTP/1.0 keep-alive answers": [
        K10.replace(b"GET /ping", b"HEAD /ping")
        + K10.replace(b"/ping", b"/nope")
        + pub(b"x" * 101).replace(b"HTTP/1.1\r\n", b"HTTP/1.0\r\n" + KEEP)  # 413, read
        + K10.replace(b"HTTP/1.0", b"HTTP/1.0\r\nHost: a/b")  # net/http's own 400
        + PING
    ],
    # net/http takes a target's bytes past ASCII raw (h11 refuses them): the router's 404, a
    # topic name nsqd's check refuses, a query it ignores or passes on; on a request h11 reads too
    "a target with bytes past ASCII": [
        b"GET /\xe9 HTTP/1.1\r\nHost: x\r\n\r\n"
        + pub(b"a", b"topic=\xc3\xa9")
        + b"GET /ping?a=\xff HTTP/1.1\r\nHost: x\r\n\r\n"
        + CHUNKED.replace(b"topic=r", b"topic=r\xe9")
        + K10.replace(b"/ping", b"/p\xe9ng")
        + b"GET /stats/?topic=\xe9 HTTP/1.1\r\nHost: x\r\n\r\n"  # the redirect escapes it
        + PING
    ],
    # net/http's Content-Length: one number (h11 takes a list of equal ones), an empty one absent
    "a Content-Length list": [pub(b"a") + pub(b"b").replace(b"Length: 1", b"Length: 1, 1")],
    "a Content-Length list beside a number": [pub(b"a").replace(b"\r\n\r\n", CL_LIST, 1)],
    "a Content-Length list on a chunked pub": [CHUNKED.replace(b"\r\n\r\n", CL_LIST, 1)],
    "an empty Content-Length": [
        pub(b"").replace(b"Length: 0", b"Length:")
        + b"GET /ping HTTP/1.1\r\nHost: x\r\nContent-Length: \r\nContent-Length:\r\n\r\n"
        + CHUNKED.replace(b"\r\n\r\n", b"\r\nContent-Length:\r\n\r\n", 1)
        + PING
    ],
    # net/http judges a request line once it ended (h11 by its first byte): a TLS ClientHello
    # on the plain port waits, and gets its 400 at a line end or at the end of the stream
    "a head with no line end": [b"\x16\x03\x01\x00\xa5\x01\x00\x00\xa1\x03\x03", 0.3],
    "a head with no line end, then one": [b"\x16\x03\x01\x00\xa5\x01", 0.2, b"\x00\n"],
    "a head with no line end, then the end": [b"\x16\x03\x01\x00\xa5\x01", 0.2, None],
    # and refuses a request line as soon as it ended (h11 waits for the head's end)
    "a bad request line before the head's end": [b"GET /ping HTTP/9\r\nHost: x\r\n", 0.3],
    "a request line with no scheme before the head's end": [b"GET ping HTTP/1.1\r\n", 0.3],
    "a later bad request line before the head's end": [PING + b"garbage\n", 0.3],
    "a good request line before the head's end": [b"GET /ping HTTP/1.1\r\nHost: x\r\n", 0.3],
    # net/http's head size limit holds for a request after one h11 read
    "a head over the limit after a chunked pub": [CHUNKED + head_of(MAX_HEAD + 8192) + PING],
    "a head over the limit after HTTP/1.0 keep-alive": [K10 + head_of(MAX_HEAD + 8192) + PING],
    "a bad host after a pub": [pub(b"a") + b"POST /pub HTTP/1.1\r\nHost: x/y\r\n\r\n"],
    "a pipelined close": [
        pub(b"a") + b"GET /ping HTTP/1.1\r\nHost: x\r\nConnection: close\r\n\r\n" + pub(b"b")
    ],
}


# Conversations net/http answers nothing to (yet)
UNANSWERED = {"a head with no line end", "a good request line before the head's end"}

# Where ours is known to differ from Go (none now)
KNOWN: set[str] = set()


@pytest.mark.parametrize(
    "name",
    [
        pytest.param(n, marks=pytest.mark.xfail(strict=True, reason="as before the reactor"))
        if n in KNOWN
        else n
        for n in CONVERSATIONS
    ],
)
def test_conversations_answer_as_go(both: tuple[int, int], name: str) -> None:
    answer = same(both, CONVERSATIONS[name])
    assert answer.count(b"HTTP/1.") >= 1 if name not in UNANSWERED else answer == b""


def test_stats_between_pubs(both: tuple[int, int]) -> None:
    """/stats differs from Go's in its body; the answers around it must not."""
    stats = b"GET /stats?format=json&topic=none HTTP/1.1\r\nHost: x\r\n\r\n"
    steps: list[Step] = [pub(b"a") + stats + pub(b"b"), 0.05, stats, 0.05, pub(b"c")]
    ours, go = (converse(port, steps) for port in both)
    for data in (ours, go):
        assert data.count(OK) == 5 and data.count(b'"topics":') == 2
    assert ours.split(OK)[1] == go.split(OK)[1]  # the first /pub's answer
    assert ours.split(OK)[-1] == go.split(OK)[-1]  # the last one's


def test_many_pubs_on_one_connection_are_all_counted(nsqd: Daemon) -> None:
    requests = b"".join(pub(b"m%d" % i, b"topic=count") for i in range(300))
    with socket.create_connection((HOST, nsqd.http_port), timeout=IO_TIMEOUT) as s:
        for start in range(0, len(requests), 1000):  # pieces that cut heads and bodies
            s.sendall(requests[start : start + 1000])
        data = b""
        while data.count(OK) < 300:
            data += s.recv(65536)
        s.sendall(b"GET /stats?format=json&topic=count HTTP/1.1\r\nHost: x\r\n\r\n")
        stats = b""
        while b'"message_count":' not in stats:
            stats += s.recv(65536)
    assert b'"message_count":300' in stats


# -- in process: the reactor's timeouts, shutdown and full sockets ------------------------------


def fast_route(method: bytes, raw_path: bytes, query: bytes) -> Any:
    """POST /fast answered in the reactor with its body; everything else by the handler."""
    if method != b"POST" or not raw_path.startswith(b"/fast"):
        return None
    if raw_path == b"/fast/big":
        big = b"x" * (32 << 20)
        return lambda qs, length, body: (200, [(b"Content-Length", b"%d" % len(big))], big)
    return lambda qs, length, body: (200, [(b"Content-Length", b"%d" % len(body))], body)


async def slow_echo(req: Request) -> Response:
    body = b"task " + await req.read(1 << 20)
    return 200, [(b"Content-Length", b"%d" % len(body))], body


def fast(body: bytes, path: bytes = b"/fast") -> bytes:
    return b"POST %s HTTP/1.1\r\nHost: x\r\nContent-Length: %d\r\n\r\n%s" % (
        path,
        len(body),
        body,
    )


async def test_connections_come_back_to_the_reactor() -> None:
    with trio.fail_after(IO_TIMEOUT):
        async with serving(slow_echo, route_now=fast_route) as (server, port):
            stream = await trio.open_tcp_stream(HOST, port)
            await stream.send_all(fast(b"1") + fast(b"2", b"/slow") + fast(b"3"))
            data = b""
            while not data.endswith(b"\r\n\r\n3"):
                data += await stream.receive_some(4096)
            assert data.count(b"\r\n\r\n") == 3 and b"\r\n\r\ntask 2" in data
            reactor = server.reactor
            assert reactor is not None
            await until(lambda: len(reactor.conns) == 1)  # back after /slow
            await stream.aclose()
            await until(lambda: server.open_connections == 0)


async def test_idle_connections_in_the_reactor_are_closed() -> None:
    with trio.fail_after(IO_TIMEOUT):
        async with serving(slow_echo, route_now=fast_route, idle_timeout=0.3) as (server, port):
            stream = await trio.open_tcp_stream(HOST, port)
            start = trio.current_time()
            await stream.send_all(fast(b"abc"))
            assert (await receive_all(stream)).endswith(b"\r\n\r\nabc")
            assert 0.25 < trio.current_time() - start < 2.0
            silent = await trio.open_tcp_stream(HOST, port)
            assert await receive_all(silent) == b""
            await until(lambda: server.open_connections == 0)


async def test_close_ends_connections_in_the_reactor() -> None:
    with trio.fail_after(IO_TIMEOUT):
        async with serving(slow_echo, route_now=fast_route) as (server, port):
            stream = await trio.open_tcp_stream(HOST, port)
            await stream.send_all(fast(b"abc"))
            assert (await stream.receive_some(4096)).endswith(b"\r\n\r\nabc")
            reactor = server.reactor
            assert reactor is not None and len(reactor.conns) == 1
            server.close()
            assert await receive_all(stream) == b""


async def test_an_answer_the_socket_does_not_take_goes_to_the_task() -> None:
    with trio.fail_after(IO_TIMEOUT):
        async with serving(slow_echo, route_now=fast_route) as (_, port):
            reader = await trio.open_tcp_stream(HOST, port)
            await reader.send_all(fast(b"", b"/fast/big") + fast(b"after"))
            data = bytearray()
            while not data.endswith(b"after"):  # the rest from the task, then the next answer
                chunk = await reader.receive_some(1 << 20)
                assert chunk
                data += chunk
            assert len(data) > 32 << 20 and data.count(b"HTTP/1.1 200 OK\r\n") == 2
            await reader.aclose()
        async with serving(slow_echo, route_now=fast_route, write_timeout=0.3) as (server, port):
            idle = await trio.open_tcp_stream(HOST, port)
            await idle.send_all(fast(b"", b"/fast/big"))  # and never reads
            await until(lambda: server.open_connections == 1)
            await until(lambda: server.open_connections == 0)  # the write timeout
            await idle.aclose()
