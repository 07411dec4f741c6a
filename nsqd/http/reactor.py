"""Plain HTTP connections served without a task switch per request: one task owns an epoll set
of their sockets (the loop is nsqd/net/reactor.py's), reads what is ready and answers, in the
same pass and one write, every request that is plainly valid (h1fast's fast path), wholly
buffered, head and body, and that has a synchronous route (`route_now`: POST /pub and /mpub).
A keep-alive publisher then costs a read, a parse, the publish and a write per request.

Every connection keeps its task (server.Connection.run), parked on an event while it is here.
Anything else wakes it and it goes on as the task-based server always did, with the parser's
buffered bytes and any answer the socket did not take: another path, a request not yet wholly
received, one h1fast hands to h11, an answer that does not fit in the socket, the end of the
stream after a partial request. So every status code, header, error and timeout is the task
server's. After a request it served, a task whose parser is still on the fast path gives its
connection back. Here, an idle connection is closed after `idle_timeout` (a heap of deadlines),
and the server's close() ends the connections here (they are idle: parked, between requests)."""

from __future__ import annotations

from typing import TYPE_CHECKING

import trio

from ..engine.api import NoBatch, WriteBatch
from ..log import log
from ..net.reactor import EpollReactor, Loop
from . import gonet, parser

if TYPE_CHECKING:
    from .server import Connection, RouteNow, Server

_DONE = parser.DONE
_Data = parser.Data
_END = parser.EndOfMessage()
READ_SIZE = 65536


class HTTPReactor(EpollReactor):
    def __init__(
        self,
        server: Server,
        route_now: RouteNow,
        max_body: int,
        loop: Loop | None = None,
        commit: WriteBatch | None = None,
    ) -> None:
        super().__init__(loop)
        self.server = server
        self.commit = commit or NoBatch()  # the stores' group commit, held by the loop's pass
        self._held: list[tuple[Connection, bytes, bool]] = []  # answers waiting for its write
        self.route_now = route_now
        # bodies up to this: whatever a route leaves unread, the task server would have
        # drained it and kept the connection (net/http's 256 KiB), as here
        self.max_body = max_body

    async def serve(self, conn: Connection) -> bool | None:
        """Serve `conn` here until it needs its task: then whether it has a request begun
        (its head's timeout applies, not the idle one); None once the connection is done."""
        conn.resume = None
        if self.server.closing:  # the loop is ending or ended
            return None
        conn.wake = wake = trio.Event()
        conn.last_active = now = trio.current_time()
        self.watch(conn)
        conn.idle = True
        try:
            self.schedule(conn, now + self.server.idle_timeout)
            if conn.http.fast.buffered or conn.eof:  # the task left a pipelined request
                self._serve_buffered(conn)
            await wake.wait()
        finally:
            conn.idle = False
            self.unwatch(conn)
        return conn.resume

    def _hand_over(self, conn: Connection, begun: bool) -> None:
        if self.unwatch(conn):
            conn.resume = begun
            conn.wake.set()

    def _end(self, conn: Connection) -> None:
        """Its task returns, closing the socket."""
        if self.unwatch(conn):
            conn.resume = None
            conn.wake.set()

    # -- the loop's hooks ------------------------------------------------------------------

    def _fail(self, conn: Connection) -> None:
        self._end(conn)

    def _shutdown(self) -> None:
        for conn in list(self.conns.values()):
            self._end(conn)

    def _expire(self, conn: Connection, now: float) -> None:
        due = conn.last_active + self.server.idle_timeout
        if now >= due:
            self._end(conn)  # as the task server: closed without an answer
        elif self.watching(conn):
            self.schedule(conn, due)

    def _ready(self, conn: Connection, events: int) -> None:
        data = conn.socket.read_now(READ_SIZE)
        if data is None:
            return
        conn.last_active = self.loop.now
        if not data:
            conn.eof = True
        conn.http.receive_data(data)
        self._serve_buffered(conn)

    # -- requests ------------------------------------------------------------------------

    def _serve_buffered(self, conn: Connection) -> None:
        """Answer the wholly buffered requests with a route here, in one write; hand the
        connection over at the first other one, or end it at the end of its stream."""
        http = conn.http
        fast = http.fast
        answers = []
        close = False
        commit = self.commit
        appended = commit.appended
        commit.deferring = True  # its publishes' records wait for the pass's one write
        try:
            while True:
                found = fast.buffered_request()
                if found is None:
                    break
                answer = self._answer(http, *found)
                if answer is None:
                    break
                answers.append(answer)
                if http.our_state is not _DONE:  # a route's answer ended keep-alive
                    close = True
                    break
                http.start_next_cycle()
        finally:
            commit.deferring = False
        data = b"".join(answers)
        if commit.depth and commit.appended != appended:
            # what these answers confirm is buffered in the pass's group commit: they go
            # after its write (storage/commit.py), as the TCP publishers' OKs
            if not self._held:
                commit.later(self._after_commit)
            self._held.append((conn, data, close))
            return
        self._answered(conn, data, close)

    def _after_commit(self, error: str | None) -> None:
        held, self._held = self._held, []
        for conn, data, close in held:
            if not self.watching(conn):
                continue
            if error is None:
                self._answered(conn, data, close)
            else:  # not stored, so not acknowledged: closed unanswered (the client retries)
                log.error("HTTP: %s - publish failed %s", conn, error)
                self._end(conn)

    def _answered(self, conn: Connection, data: bytes, close: bool) -> None:
        fast = conn.http.fast
        if data and not self._write(conn, data):
            return
        if close or (not fast.buffered and (conn.eof or self.server.closing)):
            self._end(conn)
        elif fast.buffered or conn.eof:
            self._hand_over(conn, True)

    def _answer(
        self, http: parser.ServerConnection, head: parser.RequestHead, end: int, length: int
    ) -> bytes | None:
        """The answer to a buffered request with a route here, None to leave it to the task
        (which then parses it again: nothing is consumed)."""
        if length >= self.max_body:
            return None
        raw_path, _, query = head.target.partition(b"?")
        route = self.route_now(head.method, raw_path, query)
        # of gonet.check_head's refusals only the Host one can meet a head h1fast parsed with
        # a route here (HTTP/1.1, a path from the root, printable values; no escapes in it)
        if route is None or gonet.bad_host(head.headers):
            return None
        body = http.fast.take_request(end, length)
        status, headers, content = route(query, length, body)
        data = http.send(gonet.response(status, headers))
        if content:
            data += http.send(_Data(data=content))
        return data + http.send(_END)

    def _write(self, conn: Connection, data: bytes) -> bool:
        """False when the connection left (a write error ends it; what the socket does not
        take now its task sends, with the write timeout)."""
        try:
            sent = conn.socket.write_now(data)
        except trio.BrokenResourceError:
            self._end(conn)
            return False
        if sent < len(data):
            conn.pending = data[sent:]
            self._hand_over(conn, bool(conn.http.fast.buffered))
            return False
        return True
