"""A small HTTP/1.1 server on Trio for nsqd's HTTP and HTTPS listeners (the parser behind
parser.py: h1fast for plainly valid requests, h11 for the rest).

One task per connection and none per request: the connection task parses the request, calls
`handler(request)` and writes the `(status, headers, body)` it returns. With `route_now`
(synchronous routes), plain connections are served by the server's reactor while their
requests are wholly buffered ones those routes take, their tasks parked meanwhile
(nsqd/http/reactor.py); everything below holds for them too. Keep-alive and pipelined
requests are answered in order on the same connection. The handler reads the body itself
(`Request.read(limit)` reads at most `limit` bytes, so a size limit holds while reading); what
it leaves unread is discarded afterwards as net/http does (up to 256 KiB, else the connection is
closed after the response).

What a client may hold, and for how long: an idle keep-alive connection `idle_timeout`, a request
head `header_timeout` from its first byte, a body `body_timeout` without progress and
`request_timeout` in all, a response `write_timeout` to be taken, a TLS handshake
`header_timeout`. Then the connection is closed without an answer (net/http, as nsqd runs it,
has no timeouts). None of this blocks any other task (the TCP protocol runs elsewhere).

Answers match Go's net/http where h11 lets them: the status line's reason phrase, no Server
header, and for a request h11 rejects net/http's plain-text `400 Bad Request` (or 431, 501, 505)
with `Connection: close` and no length, after which the connection is closed."""

from __future__ import annotations

import math
import socket
import ssl
from collections.abc import Awaitable, Callable
from typing import Any

import trio

from ..engine.api import WriteBatch
from ..log import log
from ..net.boundary import describe, guarded
from ..net.reactor import Loop
from ..net.transport import SocketTransport, Transport, transport_for
from . import gonet, parser
from .reactor import HTTPReactor
from .request import BodyError, Request

Headers = list[tuple[bytes, bytes]]
Response = tuple[int, Headers, bytes]
# (method, raw path, query string) -> a synchronous route taking (query string, length, body),
# or None
RouteNow = Callable[[bytes, bytes, bytes], Callable[[bytes, int, bytes], Response] | None]

IDLE_TIMEOUT = 300.0
HEADER_TIMEOUT = 60.0
BODY_TIMEOUT = 60.0
REQUEST_TIMEOUT = 300.0
WRITE_TIMEOUT = 60.0
MAX_HEADER_BYTES = (1 << 20) + 4096  # net/http's DefaultMaxHeaderBytes and its slack
MAX_POST_HANDLER_READ = 256 << 10  # net/http discards at most this much unread body
CLOSE_LINGER = 0.5  # after a final answer, how long unread input is drained (RST avoidance)
RECEIVE_SIZE = 65536

_NEED_DATA = parser.NEED_DATA
_REQUESTS = parser.REQUESTS
_Data = parser.Data
_EndOfMessage = parser.EndOfMessage
_SEND_BODY = parser.SEND_BODY
_DONE = parser.DONE
_MUST_CLOSE = parser.MUST_CLOSE
_END = parser.EndOfMessage()
_INTERNAL_ERROR = (
    500,
    [(b"Content-Type", b"text/plain; charset=utf-8"), (b"Content-Length", b"21")],
    b"Internal Server Error",
)
_CONTINUE = parser.InformationalResponse(status_code=100, headers=[], reason=b"Continue")


Handler = Callable[[Any], Awaitable[Response]]


class Connection:
    """One client connection: reads requests with the parser (parser.py), answers them in
    order."""

    socket: SocketTransport  # plain TCP only: what the reactor reads and writes

    __slots__ = (
        "body_deadline",
        "body_read",
        "client",
        "due",
        "eof",
        "http",
        "idle",
        "last_active",
        "pending",
        "resume",
        "scope",
        "server",
        "socket",
        "stream",
        "tls",
        "transport",
        "unread",
        "wake",
    )

    def __init__(
        self, server: Server, stream: trio.abc.Stream, client: tuple[str, int], tls: bool
    ) -> None:
        self.server = server
        self.stream = stream
        transport = transport_for(stream)
        self.transport: Transport = transport
        if isinstance(transport, SocketTransport):
            self.socket = transport
        self.client = client
        self.tls = tls
        self.http = parser.server_connection(MAX_HEADER_BYTES)
        self.scope = trio.CancelScope()  # its deadline is the read timeout of the moment
        self.idle = False  # waiting for the next request: close() may end it at once
        self.unread = b""  # body bytes read past a handler's limit
        self.body_read = 0
        self.body_deadline = math.inf
        self.eof = False
        # while the server's reactor serves it (nsqd/http/reactor.py): its timer, its last
        # read, what it wakes this task with, an answer left for this task to send
        self.due = math.inf
        self.last_active = 0.0
        self.resume: bool | None = None
        self.wake: trio.Event | None = None
        self.pending = b""

    async def _fill(self, deadline: float) -> None:
        """Feed the parser the next bytes from the client (b"" at end of stream), if they come
        before `deadline` (else the connection's scope is cancelled)."""
        scope = self.scope
        scope.deadline = deadline
        data = await self.transport.receive(RECEIVE_SIZE)
        scope.deadline = math.inf
        self.eof = not data
        self.http.receive_data(data)

    async def body_chunk(self, deadline: float | None = None) -> bytes:
        """The next piece of the request body, waiting for bytes until `deadline` (by default
        the body timeouts); b"" at its end. BodyError if it cannot be read."""
        if self.unread:
            data, self.unread = self.unread, b""
            return data
        conn = self.http
        state = conn.their_state
        if state is _DONE or state is _MUST_CLOSE:  # ended (MUST_CLOSE: `Connection: close`)
            return b""
        while True:
            try:
                event = conn.next_event()
            except parser.ProtocolError as exc:
                exc.__traceback__ = None  # see _serve
                raise BodyError(str(exc)) from None
            kind = type(event)
            if kind is _Data:
                if event.chunk_start and conn.chunk_too_large():
                    raise BodyError("http chunk length too large")
                data = bytes(event.data)
                self.body_read += len(data)
                return data
            if kind is _EndOfMessage:
                return b""
            if event is _NEED_DATA:
                if conn.chunk_too_large():  # never wait for what Go would refuse
                    raise BodyError("http chunk length too large")
                if conn.they_are_waiting_for_100_continue:
                    try:
                        await self._send(conn.send(_CONTINUE))
                    except (trio.BrokenResourceError, trio.TooSlowError) as exc:
                        raise BodyError("cannot send 100 Continue") from exc
                if deadline is None:
                    until = trio.current_time() + self.server.body_timeout
                    await self._fill(min(until, self.body_deadline))
                else:
                    await self._fill(deadline)
                continue
            raise BodyError("connection closed")  # ConnectionClosed, or no body here

    async def _send(self, data: bytes) -> None:
        await self.transport.send(data, self.server.write_timeout)

    async def _next_request(self, begun: bool) -> parser.RequestHead | None:
        """The next request's head; None when the connection is done. `begun`: its first
        bytes are already buffered (the head's timeout applies, not the idle one)."""
        conn = self.http
        event = conn.next_event()
        if event is _NEED_DATA:
            server = self.server
            if server.closing:
                return None
            if not begun:
                self.idle = True
                await self._fill(trio.current_time() + server.idle_timeout)
                self.idle = False
                event = conn.next_event()
            if event is _NEED_DATA:
                with trio.move_on_after(server.header_timeout):
                    while event is _NEED_DATA:
                        await self._fill(math.inf)
                        event = conn.next_event()
                if event is _NEED_DATA:
                    return None  # a request head that never completed
        return event if type(event) in _REQUESTS else None

    async def run(self) -> None:
        """Serve requests until the connection is done: in the server's reactor while it can,
        in this task otherwise."""
        plain = type(self.transport) is SocketTransport and self.http.fast.on
        reactor = self.server.reactor if plain else None
        begun = False
        while True:
            if reactor is not None:
                resume = await reactor.serve(self)
                if resume is None:
                    return
                begun = resume
                if self.pending:
                    data, self.pending = self.pending, b""
                    await self._send(data)
            if not await self._serve(begun, reactor is not None):
                return

    async def _serve(self, begun: bool, give_back: bool) -> bool:
        """Answer requests in this task; True when the connection goes back to the reactor
        (`give_back`, after a request, while the parser is on its fast path)."""
        conn = self.http
        server = self.server
        handler = server.handler
        request_class = server.request_class
        while True:
            try:
                event = await self._next_request(begun)
            except parser.ProtocolError as exc:
                # h11 re-raises its error from a frame that holds it: a cycle, kept (with this
                # connection) until a full collection under the daemon's gc thresholds
                exc.__traceback__ = None
                if not self.eof or conn.cut_head_answered():  # else net/http says nothing
                    await self._reject(gonet.go_error(exc))
                return False
            begun = False
            if event is None:
                return False
            head = gonet.check_head(event)
            if type(head) is bytes:
                await self._reject(head)
                return False
            self.body_read = 0
            self.body_deadline = trio.current_time() + server.request_timeout
            request = request_class(self, event, *head)
            try:
                status, headers, body = await handler(request)
            except (trio.BrokenResourceError, trio.TooSlowError):
                raise  # the client is gone or does not read: no answer to give
            except Exception as exc:
                log.error("HTTP: error in %s %s - %s", request.method, request.path, describe(exc))
                status, headers, body = _INTERNAL_ERROR
            # the handler's reads met the end of the stream inside a Content-Length body: Go's
            # body reader then reads as ended, so its answer keeps keep-alive's headers (no
            # `Connection: close`) and the next read ends the connection
            cut = self.eof and request.header(b"transfer-encoding") is None
            # h11 ends an HTTP/1.0 request in MUST_CLOSE: read whole all the same
            http10 = event.http_version == b"1.0"
            read = conn.their_state is _DONE or (http10 and conn.their_state is _MUST_CLOSE)
            linger = not read and not await self._finish_body(request)
            if event.http_version == b"2.0":  # an HTTP/2 preface, answered as Go does, then closed
                linger = True
            elif cut:
                linger = False  # nothing left to drain: the client's side is closed
            if linger:
                headers = [*headers, (b"Connection", b"close")]
            data = conn.send(gonet.response(status, headers))
            keep10 = False
            if http10:
                keep10 = not linger and gonet.keeps_http10(
                    request.headers, headers, status, event.method
                )
                data = gonet.http10_head(data, keep10)
            if body and event.method != b"HEAD":
                data += conn.send(_Data(data=body))
            data += conn.send(_END)
            await self._send(data)
            if keep10:
                conn.keep_http10()
                self.unread = b""
                continue
            if conn.our_state is not _DONE or conn.their_state is not _DONE:
                if linger and isinstance(self.stream, trio.SocketStream):
                    await _linger(self.stream)
                return False
            conn.start_next_cycle()
            self.unread = b""
            if give_back and conn.fast.on and not server.closing:
                return True

    async def _finish_body(self, request: Request) -> bool:
        """After the handler: discard what is left of the body as net/http does; False if the
        connection cannot be kept (too much left, a malformed body, or no 100 Continue sent)."""
        conn = self.http
        if conn.their_state is not _SEND_BODY:
            return False
        length = request.content_length()
        if length is None and request.header(b"transfer-encoding") is None:
            length = 0  # no body at all
        if length != 0 and conn.they_are_waiting_for_100_continue:
            return False  # the client waits for a 100 Continue that never came
        if length is not None and length - self.body_read >= MAX_POST_HANDLER_READ:
            return False
        budget = MAX_POST_HANDLER_READ + 1
        with trio.move_on_after(self.server.body_timeout):
            try:
                while budget > 0:
                    chunk = await self.body_chunk(math.inf)
                    if not chunk:
                        return True
                    budget -= len(chunk)
            except BodyError:
                return False
        return False

    async def _reject(self, answer: bytes) -> None:
        """net/http's answer to a request it cannot parse, then a lingering close."""
        await self._send(answer)
        if isinstance(self.stream, trio.SocketStream):
            await _linger(self.stream)


async def _linger(stream: trio.SocketStream) -> None:
    """Half-close and drop the client's unread input for a moment, so that closing with data
    unread (a TCP reset) does not destroy the last answer before the client reads it."""
    with trio.move_on_after(CLOSE_LINGER):
        try:
            await stream.send_eof()
            while await stream.receive_some(RECEIVE_SIZE):
                pass
        except (trio.BrokenResourceError, trio.ClosedResourceError):
            pass


async def _plain_http_first(stream: trio.SocketStream) -> bool:
    """Whether a client on the HTTPS port starts with a plain HTTP request (Go answers that
    with a 400 rather than a TLS alert). Peeks, so the TLS handshake still sees every byte."""
    sock = stream.socket
    while True:
        head = await sock.recv(5, socket.MSG_PEEK)
        if not head or head[0] == 0x16 or len(head) == 5:  # 0x16: a TLS handshake record
            return head in gonet.HTTP_STARTS
        await trio.sleep(0.01)  # a few bytes of something: wait for five


def _peer(stream: trio.SocketStream) -> tuple[str, int]:
    try:
        peer = stream.socket.getpeername()
        return peer[0], peer[1]
    except OSError:
        return "", 0


class Server:
    """Serves `handler` on listeners, plain or TLS, until `close()`."""

    def __init__(
        self,
        handler: Handler,
        *,
        request_class: type[Request] = Request,
        route_now: RouteNow | None = None,
        idle_timeout: float = IDLE_TIMEOUT,
        header_timeout: float = HEADER_TIMEOUT,
        body_timeout: float = BODY_TIMEOUT,
        request_timeout: float = REQUEST_TIMEOUT,
        write_timeout: float = WRITE_TIMEOUT,
        require_client_cert: bool = False,
        grace: float = 1.0,
        loop: Loop | None = None,
        commit: WriteBatch | None = None,
    ) -> None:
        self.handler = handler
        self.commit = commit  # the stores' group commit: route_now's answers wait for it
        self.request_class = request_class
        self.idle_timeout = idle_timeout
        self.header_timeout = header_timeout
        self.body_timeout = body_timeout
        self.request_timeout = request_timeout
        self.write_timeout = write_timeout
        self.require_client_cert = require_client_cert
        self.grace = grace
        self.closing = False
        self._closed = trio.Event()
        self._connections: set[Connection] = set()
        # with synchronous routes, plain connections are served by a reactor while they can
        self.route_now = route_now
        self.reactor: HTTPReactor | None = None
        self.loop = loop  # the daemon's reactor loop; None: the reactor runs one of its own

    async def serve(
        self,
        listeners: list[tuple[trio.SocketListener, ssl.SSLContext | None]],
        *,
        task_status: trio.TaskStatus[None] = trio.TASK_STATUS_IGNORED,
    ) -> None:
        """Accept on every listener (with a TLS context: HTTPS) until `close()`; then requests
        under way get `grace` seconds to finish."""
        async with trio.open_nursery() as connections:
            if self.route_now is not None:
                self.reactor = HTTPReactor(
                    self, self.route_now, MAX_POST_HANDLER_READ, self.loop, self.commit
                )
                connections.start_soon(self.reactor.run)
            async with trio.open_nursery() as acceptors:
                for listener, context in listeners:
                    acceptors.start_soon(self._accept, listener, context, connections)
                task_status.started()
                await self._closed.wait()
                acceptors.cancel_scope.cancel()
            for listener, _ in listeners:
                await listener.aclose()
            connections.cancel_scope.deadline = trio.current_time() + self.grace

    async def _accept(
        self,
        listener: trio.SocketListener,
        context: ssl.SSLContext | None,
        connections: trio.Nursery,
    ) -> None:
        async def handle(stream: trio.SocketStream) -> None:
            # the boundary also covers what the connection's own handler cannot (its close)
            await guarded("HTTP", self._connection, stream, context)

        await trio.serve_listeners(handle, [listener], handler_nursery=connections)

    @property
    def open_connections(self) -> int:
        return len(self._connections)

    def close(self) -> None:
        """Stop accepting; close idle connections now, the others after their request."""
        self.closing = True
        self._closed.set()
        if self.reactor is not None:
            self.reactor.close()
        for conn in self._connections:
            if conn.idle:
                conn.scope.cancel()

    async def _connection(self, stream: trio.SocketStream, context: ssl.SSLContext | None) -> None:
        client = _peer(stream)
        outer: trio.abc.Stream = stream
        conn: Connection | None = None
        try:
            if context is not None:
                tls = trio.SSLStream(stream, context, server_side=True, https_compatible=True)
                outer = tls
                with trio.move_on_after(self.header_timeout) as handshake:
                    if await _plain_http_first(stream):
                        await stream.send_all(gonet.HTTP_TO_HTTPS)
                        await _linger(stream)
                        return
                    await tls.do_handshake()
                if handshake.cancelled_caught:
                    return
                if self.require_client_cert and not tls.getpeercert(binary_form=True):
                    return  # Go's RequireAnyClientCert
            conn = Connection(self, outer, client, context is not None)
            self._connections.add(conn)
            with conn.scope:
                await conn.run()
        except (trio.BrokenResourceError, trio.ClosedResourceError, trio.TooSlowError):
            pass  # the client went away, or would not take its answer
        except Exception as exc:
            log.error("HTTP: connection from %s:%d - %s", *client, describe(exc))
        finally:
            if conn is not None:
                self._connections.discard(conn)
            with trio.CancelScope(shield=True) as closing:
                closing.deadline = trio.current_time() + 1.0
                await outer.aclose()
            if outer is not stream:
                # trio.SSLStream is a reference cycle (its handshake's _Once holds a bound
                # method): under the daemon's gc thresholds (cli.py) it would keep its OpenSSL
                # object, ~18 KiB of buffers, until a full collection. Let go of it now.
                vars(outer).clear()
