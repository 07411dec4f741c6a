"""The Redis connections' I/O, Redis's way: one task owns an epoll set of every client socket
(trio waits on the epoll fd itself), reads what is ready, runs the complete commands of each
client in order, writes the log once for the whole pass (group commit: every reply of the pass
is durable before any is sent), then sends each client its replies in one write. No task and
no scheduler hop per client or per command: that is what a request/response round trip costs.

A blocking command that finds nothing parks its client (it stays in the epoll set, so a close
is seen at once and what it pipelines is kept for later); the waiter's notify (called by the
command or the bridge publish that served it) puts the client back in the run list and wakes
the loop through an eventfd; a heap of deadlines answers timeouts. A client whose replies do
not fit in its socket buffer waits for EPOLLOUT before its next commands run."""

from __future__ import annotations

import heapq
import os
import select
from itertools import count
from typing import TYPE_CHECKING

import trio

from ..log import log
from ..net.boundary import describe
from .blocking import Waiter
from .commands import Block, ReplyError, Session, dispatch
from .protocol import Parser, ProtocolError

if TYPE_CHECKING:
    from .server import Frontend

READ_SIZE = 65536
QUERY_MAX = 1 << 30  # Redis's client-query-buffer-limit: a client past it is closed
BATCH = 256  # commands of one client per pass, so a long pipeline cannot starve the others
_IN, _OUT = select.EPOLLIN, select.EPOLLOUT


class Client:
    __slots__ = (
        "block", "close_after_send", "closed", "fd", "out", "parser", "queued", "remote",
        "replies", "session", "sock", "timed_out",
    )  # fmt: skip

    def __init__(self, fe: Frontend, sock: trio.socket.SocketType, remote: str) -> None:
        self.sock = sock
        self.fd = sock.fileno()
        self.remote = remote
        self.parser = Parser(fe.max_bulk)
        self.parser.strict_auth = bool(fe.password)
        self.session = Session(fe, fe.broker.next_client_id(), self.parser)
        self.replies: list[bytes] = []  # answered this pass, sent after the log write
        self.out = bytearray()  # sent in part: the rest waits for EPOLLOUT (del from the front
        # of a bytearray is cheap: a slow reader of a big reply costs no quadratic copying)
        self.block: Block | None = None  # parked on a blocking command
        self.timed_out = False
        self.queued = False  # in the reactor's send list this pass
        self.close_after_send = False
        self.closed = False

    @property
    def blocked(self) -> bool:
        return self.block is not None


class Reactor:
    def __init__(self, fe: Frontend) -> None:
        self.fe = fe
        self.ep = select.epoll()
        self.clients: dict[int, Client] = {}
        self.wake_fd = os.eventfd(0, os.EFD_NONBLOCK | os.EFD_CLOEXEC)
        self.ep.register(self.wake_fd, _IN)
        self.runnable: list[Client] = []  # resumed, or with commands left over
        self.to_send: list[Client] = []
        self.timers: list[tuple[float, int, Client, Waiter]] = []
        self._seq = count()
        self._in_pass = False

    # -- clients in and out --------------------------------------------------------------

    def add(self, stream: trio.SocketStream) -> None:
        sock = stream.socket
        try:
            peer = sock.getpeername()
            remote = f"{peer[0]}:{peer[1]}"
        except OSError:
            remote = ":0"
        client = Client(self.fe, sock, remote)
        self.clients[client.fd] = client
        self.fe.connections[client.session.id] = client
        self.ep.register(client.fd, _IN)

    def _close(self, client: Client) -> None:
        if client.closed:
            return
        client.closed = True
        if client.block is not None:
            self._unpark(client)
        fe = self.fe
        fe.ks.unwatch(client.session)
        fe.connections.pop(client.session.id, None)
        self.clients.pop(client.fd, None)
        try:
            self.ep.unregister(client.fd)
        except (OSError, ValueError):
            pass
        client.parser.release()
        client.replies.clear()
        client.sock.close()

    def close_all(self) -> None:
        for client in list(self.clients.values()):
            self._close(client)
        self.ep.close()
        os.close(self.wake_fd)

    # -- the loop ------------------------------------------------------------------------

    async def run(self) -> None:
        try:
            while True:
                if self.runnable:
                    await trio.lowlevel.checkpoint()
                else:
                    with trio.move_on_at(self.timers[0][0] if self.timers else float("inf")):
                        await trio.lowlevel.wait_readable(self.ep.fileno())
                self._in_pass = True
                try:
                    self._pass()
                finally:
                    self._in_pass = False
        finally:
            self.close_all()

    def _pass(self) -> None:
        for fd, mask in self.ep.poll(0):
            if fd == self.wake_fd:
                try:
                    os.eventfd_read(fd)
                except BlockingIOError:
                    pass
                continue
            client = self.clients.get(fd)
            if client is None:
                continue
            try:
                if mask & _OUT:
                    self._write_out(client)
                if mask & ~_OUT and not client.closed:
                    self._read(client)
            except Exception as exc:  # one client must never take the others down
                log.error("RESP: [%s] unexpected error - %s", client.remote, describe(exc))
                self._close(client)
        if self.timers:
            self._expire(trio.current_time())
        while self.runnable:
            ready, self.runnable = self.runnable, []
            for client in ready:
                if client.closed:
                    continue
                try:
                    self._resume(client)
                except Exception as exc:
                    log.error("RESP: [%s] unexpected error - %s", client.remote, describe(exc))
                    self._close(client)
        self._commit()

    def _read(self, client: Client) -> None:
        try:
            data = os.read(client.fd, READ_SIZE)
        except BlockingIOError:
            return
        except OSError:
            data = b""
        if not data:
            self._close(client)
            return
        client.parser.feed(data)
        if client.parser.buffered() > QUERY_MAX:
            log.warning("RESP: [%s] closing: query buffer over %d bytes", client.remote, QUERY_MAX)
            self._close(client)
            return
        if client.block is None and not client.out and not client.close_after_send:
            self._process(client)

    def _process(self, client: Client) -> None:
        """Run the client's complete commands (up to BATCH) until one blocks."""
        fe, s, parser, replies = self.fe, client.session, client.parser, client.replies
        ks = fe.ks
        for _ in range(BATCH):
            try:
                argv = parser.next()
            except ProtocolError as exc:
                replies.append(exc.reply)
                client.close_after_send = True
                break
            if argv is None:
                break
            reply = dispatch(s, argv)
            if ks.ready:
                fe.blocking.serve_ready()
            if type(reply) is Block:
                answer = self._park(client, reply)
                if answer is None:
                    break
                reply = answer
            replies.append(reply)  # type: ignore[arg-type]
            if s.close_after:
                client.close_after_send = True
                break
        else:
            self.runnable.append(client)  # more may be buffered: next pass
        if replies and not client.queued:
            client.queued = True
            self.to_send.append(client)

    # -- blocking ------------------------------------------------------------------------

    def _park(self, client: Client, blk: Block) -> bytes | None:
        """Register the waiter; its answer when served at once, None when parked."""
        fe, waiter = self.fe, blk.waiter
        fe.blocking.add(waiter)
        try:
            fe.bridge.watch(waiter, client.remote)
        except ReplyError as exc:
            fe.blocking.remove(waiter)
            fe.bridge.unwatch(waiter)
            return exc.reply
        if waiter.done:
            fe.blocking.remove(waiter)
            fe.bridge.unwatch(waiter)
            return waiter.reply
        client.block = blk
        client.timed_out = False
        waiter.notify = lambda: self._wake(client)
        if blk.timeout > 0:
            deadline = trio.current_time() + blk.timeout
            heapq.heappush(self.timers, (deadline, next(self._seq), client, waiter))
        return None

    def _unpark(self, client: Client) -> None:
        blk = client.block
        assert blk is not None
        client.block = None
        self.fe.blocking.remove(blk.waiter)
        self.fe.bridge.unwatch(blk.waiter)
        blk.waiter.notify = None
        if len(self.timers) > 64 + 2 * len(self.clients):
            # served waiters leave their deadlines behind: keep the heap to the parked ones
            self.timers = [t for t in self.timers if t[2].block and t[2].block.waiter is t[3]]
            heapq.heapify(self.timers)

    def _wake(self, client: Client) -> None:
        """A waiter was served (by a command here, or a publish from another task)."""
        self.runnable.append(client)
        if not self._in_pass:
            os.eventfd_write(self.wake_fd, 1)

    def _expire(self, now: float) -> None:
        timers = self.timers
        while timers and timers[0][0] <= now:
            _, _, client, waiter = heapq.heappop(timers)
            blk = client.block
            if blk is not None and blk.waiter is waiter and not waiter.done:
                client.timed_out = True
                self.runnable.append(client)

    def _resume(self, client: Client) -> None:
        blk = client.block
        if blk is not None:
            waiter = blk.waiter
            if not waiter.done and not client.timed_out:
                return
            self._unpark(client)
            if self.fe.ks.ready:
                self.fe.blocking.serve_ready()  # a move served from a channel pushed a list
            client.replies.append(waiter.reply if waiter.done else blk.on_timeout)
            if not client.queued:
                client.queued = True
                self.to_send.append(client)
        if not client.out and not client.close_after_send:
            self._process(client)

    # -- output --------------------------------------------------------------------------

    def _commit(self) -> None:
        """One log write for the pass, then every client's replies (durable before sent)."""
        clients, self.to_send = self.to_send, []
        try:
            self.fe.log.flush()
        except OSError as exc:
            # not durable, so not acknowledged: these clients are closed unanswered
            log.error("RESP: resp.log write failed - %s", exc)
            self.fe.broker.store_failed(f"resp.log write failed - {exc}")
            for client in clients:
                client.queued = False
                self._close(client)
            return
        for client in clients:
            client.queued = False
            if client.closed or not client.replies:
                continue
            data = b"".join(client.replies)
            client.replies.clear()
            self._send(client, data)

    def _send(self, client: Client, data: bytes) -> None:
        if client.out:
            client.out += data
            return
        try:
            sent = os.write(client.fd, data)
        except BlockingIOError:
            sent = 0
        except OSError:
            self._close(client)
            return
        if sent < len(data):
            client.out += memoryview(data)[sent:]
            self.ep.modify(client.fd, _IN | _OUT)
        elif client.close_after_send:
            self._close(client)

    def _write_out(self, client: Client) -> None:
        try:
            sent = os.write(client.fd, client.out)
        except BlockingIOError:
            return
        except OSError:
            self._close(client)
            return
        del client.out[:sent]
        if client.out:
            return
        self.ep.modify(client.fd, _IN)
        if client.close_after_send:
            self._close(client)
        else:
            self.runnable.append(client)  # what it sent meanwhile
