"""The Redis connections' I/O, Redis's way, on the daemon's one reactor (nsqd/net/reactor.py:
one task owns an epoll set of every client socket, trio waits on the epoll fd itself): each
pass reads what is ready, runs the complete commands of each client in order, writes the log
once for the whole pass (group commit: every reply of the pass is durable before any is sent),
then sends each client its replies in one write (a pass whose log write fails answers its
writes -MISCONF, as Redis answers the writes after a failed AOF write: Frontend.write_log).
No task and no scheduler hop per client or per command: that is what a request/response round
trip costs.

A blocking command that finds nothing parks its client, and so does a reply deferred for a
group's peers (a bridge pop, commands.Deferred): nsqd/resp/parking.py. A client whose replies
do not fit in its socket buffer waits for EPOLLOUT before its next commands run, and is not read
until then."""

from __future__ import annotations

import math
import os
import select
from time import perf_counter
from typing import TYPE_CHECKING

import trio

from protocol.resp.codec import Parser, ProtocolError

from ..log import log
from ..net.boundary import describe
from ..net.reactor import Loop
from ..net.transport import SocketTransport, write_now
from .commands import Block, Session, dispatch
from .commands.pubsub import forget
from .parking import Parking

if TYPE_CHECKING:
    from .server import Frontend

READ_SIZE = 65536
QUERY_MAX = 1 << 30  # Redis's client-query-buffer-limit: a client past it is closed
BATCH = 256  # commands of one client per pass, so a long pipeline cannot starve the others
# a client whose commands took this long in a pass (a script: up to its time limit) has the
# rest run after a pause of PAUSE_S, in which the loop and trio serve every other connection
# (NSQ's included: an accept, a TLS handshake, a request are several rounds of trio's)
PASS_TIME_S = 0.05
PAUSE_S = 0.005
# Redis's client-output-buffer-limit for subscribers (pubsub 32mb 8mb 60): one whose unsent
# output passes HARD_LIMIT, or stays past SOFT_LIMIT for SOFT_SECONDS, is closed (a subscriber
# that never reads would hold every message published to it, once per matching pattern)
PUBSUB_HARD_LIMIT = 32 << 20
PUBSUB_SOFT_LIMIT = 8 << 20
PUBSUB_SOFT_SECONDS = 60.0
_OUT = select.EPOLLOUT
_read, _write = os.read, os.write


class Client:
    __slots__ = (
        "block", "close_after_send", "closed", "due", "fd", "later", "out", "over_since", "parser",
        "paused", "queued", "remote", "replies", "session", "socket", "timed_out", "wrote",
    )  # fmt: skip

    def __init__(self, fe: Frontend, stream: trio.SocketStream, remote: str) -> None:
        self.socket = SocketTransport(stream)
        self.fd = self.socket.fd  # (never changes: read and written on every request)
        self.due = math.inf  # the reactor's timer: a parked command's timeout
        self.remote = remote
        self.parser = Parser(fe.max_bulk)
        self.parser.strict_auth = bool(fe.password)
        self.session = Session(fe, fe.broker.next_client_id(), self.parser)
        self.replies: list[bytes] = []  # answered this pass, sent after the log write
        # which of them answer a change (their records must be written before they are sent)
        self.wrote: list[int] = []
        self.out = bytearray()  # sent in part: the rest waits for EPOLLOUT (del from the front
        # of a bytearray is cheap: a slow reader of a big reply costs no quadratic copying)
        self.block: Block | None = None  # parked on a blocking command
        self.timed_out = False
        self.paused = False  # its commands wait out the reactor's PAUSE_S (a slow one ran)
        self.queued = False  # in the reactor's send list this pass
        self.close_after_send = False
        self.closed = False
        self.later = 0  # bytes of pub/sub messages among `replies`
        self.over_since = math.inf  # when its unsent output went past PUBSUB_SOFT_LIMIT

    def __repr__(self) -> str:
        return f"RESP: {self.remote}"

    @property
    def blocked(self) -> bool:
        return self.block is not None


class Reactor(Parking):
    def __init__(self, fe: Frontend, loop: Loop | None = None) -> None:
        super().__init__(loop)
        self.fe = fe
        self.clients: dict[int, Client] = self.conns
        self.runnable: list[Client] = []  # resumed, or with commands left over
        self.paused: list[Client] = []  # those that used PASS_TIME_S in this pass
        self.to_send: list[Client] = []

    # -- clients in and out --------------------------------------------------------------

    def add(self, stream: trio.SocketStream) -> None:
        try:
            peer = stream.socket.getpeername()
            remote = f"{peer[0]}:{peer[1]}"
        except OSError:
            remote = ":0"
        client = Client(self.fe, stream, remote)
        self.fe.connections[client.session.id] = client
        self.watch(client)

    def send_later(self, client: Client, data: bytes) -> None:
        """`data` goes out with this pass's replies, after its log write (a pub/sub message
        for another connection)."""
        client.later += len(data)
        if len(client.out) + client.later > PUBSUB_HARD_LIMIT:
            self._over_limit(client, PUBSUB_HARD_LIMIT)
            return
        client.replies.append(data)
        if not client.queued:
            client.queued = True
            self.to_send.append(client)
            self.wake()  # from outside a pass: one comes soon

    def _over_limit(self, client: Client, limit: int) -> None:
        log.warning(
            "RESP: [%s] closing: its unsent output passed %d bytes (client-output-buffer-limit"
            " pubsub)",
            client.remote,
            limit,
        )
        self._close(client)

    def _check_soft_limit(self, client: Client) -> None:
        """A subscriber's unsent output past PUBSUB_SOFT_LIMIT for PUBSUB_SOFT_SECONDS: closed
        (looked at when output is added, as Redis does)."""
        if len(client.out) <= PUBSUB_SOFT_LIMIT:
            client.over_since = math.inf
            return
        s = client.session
        if not (s.channels or s.patterns):
            return
        now = trio.current_time()
        if client.over_since == math.inf:
            client.over_since = now
        elif now - client.over_since >= PUBSUB_SOFT_SECONDS:
            self._over_limit(client, PUBSUB_SOFT_LIMIT)

    def end(self, client: Client) -> None:
        """Close a connection at once, unanswered (CLIENT KILL)."""
        self._close(client)

    def _close(self, client: Client) -> None:
        if client.closed:
            return
        client.closed = True
        if client.block is not None:
            self._unpark(client)
        fe = self.fe
        fe.ks.unwatch(client.session)
        forget(client.session)  # its channels and patterns (else kept until a PUBLISH)
        fe.connections.pop(client.session.id, None)
        self.unwatch(client)
        client.parser.release()
        client.replies.clear()
        client.socket.close_now()

    # -- the loop's hooks ------------------------------------------------------------------

    def _shutdown(self) -> None:
        for client in list(self.clients.values()):
            self._close(client)

    def _fail(self, client: Client) -> None:
        self._close(client)

    def _ready(self, client: Client, events: int) -> None:
        if events & _OUT:
            self._write_out(client)
            if client.closed or not events & ~_OUT:
                return
        # readable: SocketTransport.read_now written out, as the reads below (every request;
        # these sockets never leave the reactor, so its read sizing has nothing to size)
        try:
            data = _read(client.fd, READ_SIZE)
        except BlockingIOError:
            return
        except OSError:
            data = b""
        if not data:
            self._close(client)
            return
        if client.parser.feed(data) > QUERY_MAX:
            log.warning("RESP: [%s] closing: query buffer over %d bytes", client.remote, QUERY_MAX)
            self._close(client)
            return
        if client.block is None and not (client.out or client.close_after_send or client.paused):
            self._process(client)

    def _passed(self) -> None:
        while self.runnable:
            ready, self.runnable = self.runnable, []
            for client in ready:
                if client.closed:
                    continue
                try:
                    self._resume(client)
                except Exception as exc:  # one client must never take the others down
                    log.error("RESP: [%s] unexpected error - %s", client.remote, describe(exc))
                    self._close(client)
        if self.paused:
            self.fe.spawn(self._after_pause, self.paused)
            self.paused = []
        self._commit()

    # -- commands ------------------------------------------------------------------------

    def _process(self, client: Client) -> None:
        """Run the client's complete commands (up to BATCH) until one blocks."""
        fe, s, parser, replies = self.fe, client.session, client.parser, client.replies
        ks, records = fe.ks, fe.log
        started = perf_counter()
        for _ in range(BATCH):
            try:
                argv = parser.next()
            except ProtocolError as exc:
                replies.append(exc.reply)
                client.close_after_send = True
                break
            if argv is None:
                break
            before = records.appended
            reply = dispatch(s, argv)
            if ks.ready:
                fe.blocking.serve_ready()
            if isinstance(reply, Block):
                answer = self._park(client, reply)
                if answer is None:
                    break
                reply = answer
            changed = records.appended - before
            if changed > 1:  # an EXEC's, a script's, a *STORE's: replayed whole
                records.seal(before)
            if (
                changed
                and s.last is not None
                and s.last.writes
                and s.handed_at <= before  # (one that handed something over keeps its reply)
            ):
                client.wrote.append(len(replies))  # (a read's lazy expiry is no write)
            replies.append(reply)  # type: ignore[arg-type]
            if s.close_after:
                client.close_after_send = True
                break
            if perf_counter() - started > PASS_TIME_S:
                client.paused = True
                self.paused.append(client)
                break
        else:
            self.runnable.append(client)  # more may be buffered: next pass
        if replies and not client.queued:
            client.queued = True
            self.to_send.append(client)

    async def _after_pause(self, clients: list[Client]) -> None:
        await trio.sleep(PAUSE_S)
        for client in clients:
            client.paused = False
        self.runnable.extend(clients)
        self.wake()

    # -- output --------------------------------------------------------------------------

    def _commit(self) -> None:
        """One log write for the pass, then every client's replies (durable before sent)."""
        clients, self.to_send = self.to_send, []
        fe = self.fe
        failing = fe.misconf is not None  # (then this pass's commands were no writes)
        if not fe.write_log() and not failing:
            # this pass's write failed: a change is not acknowledged before its record is
            # written, so each write is answered as Redis answers the next ones (its change
            # is in memory and its record kept, written once the disk takes it); reads keep
            # their replies
            misconf = fe.misconf
            assert misconf is not None
            for client in clients:
                for i in client.wrote:
                    client.replies[i] = misconf
        for client in clients:
            client.queued = False
            if client.wrote:
                client.wrote.clear()
            replies = client.replies
            if client.closed or not replies:
                continue
            data = b"".join(replies)
            replies.clear()
            client.later = 0
            if client.out:
                client.out += data
                self._check_soft_limit(client)
                continue
            try:
                sent = _write(client.fd, data)  # write_now written out: every reply
            except BlockingIOError:
                sent = 0
            except OSError:
                self._close(client)
                continue
            if sent < len(data):
                client.out += memoryview(data)[sent:]
                # nor read until it takes them: a client that pipelines and never reads had
                # its commands read into its parser up to QUERY_MAX (1 GiB) each
                self.only_output(client)
                self._check_soft_limit(client)
            elif client.close_after_send:
                self._close(client)

    def _write_out(self, client: Client) -> None:
        try:
            sent = write_now(client.socket.fd, client.out)
        except trio.BrokenResourceError:
            self._close(client)
            return
        del client.out[:sent]
        if client.out:
            return
        self.want_output(client, False)
        if client.close_after_send:
            self._close(client)
        else:
            self.runnable.append(client)  # what it sent meanwhile
