"""Plain-TCP V2 connections that only publish, served the way nsqd/resp/reactor.py serves Redis
clients: one task owns an epoll set of their sockets (trio waits on the epoll fd itself), reads
what is ready, runs each client's complete commands synchronously and writes its answers in one
write (the loop itself is nsqd/net/reactor.py's). A request/response round trip (PUB, MPUB,
DPUB, NOP, a plain IDENTIFY) then costs no task switch and no per-socket trio wait, which is
what bounded PUB round trips.

A connection stays here while what it asks is synchronous. The first command that needs a task
of its own (SUB and the consumer commands, an IDENTIFY that starts TLS or compression, AUTH) or
an answer the socket does not take at once hands the connection over: it leaves the epoll set
and its `Client.serve` task starts with that command, the parser's buffered bytes and any unsent
output, so the client sees one ordered stream either way. Heartbeats and nsqd's read deadline
(two heartbeat intervals without a command) are kept here by a heap of per-client deadlines.

Group commit: each pass of the shared loop holds the store's `WriteBatch` (from `_passing` to
`_passed`), so the pass's small TCP publishes (PUB) are stored together when the pass ends (one
publish per topic, engine/pending.py), what they append to the disk queues is written with one
write per queue file, and their answers are sent only after that; a client that appended many
records (an MPUB) has them written when its commands are done and is answered then. A failed
write turns the answers not yet sent of the pass's publishers into their command's E_PUB_FAILED
(E_MPUB_FAILED, E_DPUB_FAILED), which closes the connection as nsqd's does (a publisher whose
own records were written may be refused too: it retries, and at least once holds)."""

from __future__ import annotations

from collections.abc import Callable
from typing import TYPE_CHECKING, Any

import trio

from protocol.v2 import (
    CLOSED,
    HEARTBEAT_FRAME,
    NEED_DATA,
    DPub,
    Identify,
    MPub,
    MPubStart,
    Nop,
    NSQError,
    ProtocolClosed,
    Pub,
    encode_error,
)
from protocol.v2.errors import ErrorCode

from ..engine.api import WriteBatch
from ..log import log
from ..net.boundary import guarded
from ..net.reactor import EpollReactor, Loop
from ..net.transport import SocketTransport
from . import commands
from .tasks import RECEIVE_SIZE, upgrades

if TYPE_CHECKING:
    from .connection import Client

# Commands run here; any other hands its connection to a task of its own.
_HERE = frozenset((Pub, MPub, MPubStart, DPub, Nop))


# A client that appended this many records to disk queues (an MPUB) has them written at once
# and is answered without waiting for the rest of the pass: its OK is not held up by the
# other clients' work, and the pass still groups the small publishes (PUB).
WRITE_NOW = 32
# what a publisher whose write failed is told, by its first command that wrote
_FAILED: dict[type, tuple[ErrorCode, str]] = {
    Pub: (ErrorCode.E_PUB_FAILED, "PUB"),
    MPub: (ErrorCode.E_MPUB_FAILED, "MPUB"),
    DPub: (ErrorCode.E_DPUB_FAILED, "DPUB"),
}

# Commands run here; any other hands its connection to a task of its own.
_HERE = frozenset((Pub, MPub, MPubStart, DPub, Nop))


class Reactor(EpollReactor):
    def __init__(
        self, spawn: Callable[..., Any], commit: WriteBatch, loop: Loop | None = None
    ) -> None:
        super().__init__(loop)
        self._commit = commit
        # (client, its output's length before this read's commands, its first command that
        # appended to a disk queue): answered after the pass's write
        self._held: list[tuple[Client, int, type]] = []
        self._mark = 0  # the output's length before the read being served
        self._wrote: type | None = None  # that first command, of the client being served
        self._spawn = spawn  # start_soon of the clients nursery
        self.clients: dict[int, Client] = self.conns

    # -- connections in and out ----------------------------------------------------------

    def adopt(self, client: Client, socket: SocketTransport) -> None:
        """Serve `client`, whose transport is the plain `socket`."""
        client.socket = socket
        self.watch(client)
        self._schedule(client)

    def drop(self, client: Client) -> None:
        """Close a connection served here (its end, or the daemon's shutdown)."""
        if not self._forget(client):
            return
        client.ended()
        client.socket.close_now()

    def _forget(self, client: Client) -> bool:
        if not self.unwatch(client):
            return False
        client.reactor = None
        return True

    def _hand_over(self, client: Client, pending: Any = None) -> None:
        """The connection needs a task of its own from here on."""
        if self._forget(client):
            self._spawn(guarded, client, client.serve, pending)

    # -- the loop's hooks ------------------------------------------------------------------

    def _shutdown(self) -> None:
        for client in list(self.clients.values()):
            self.drop(client)

    def _fail(self, client: Client) -> None:
        self.drop(client)

    def _passing(self) -> None:
        self._commit.hold()

    def _passed(self) -> None:
        error = self._commit.release()
        held, self._held = self._held, []
        for client, mark, wrote in held:
            if error is None:
                self._write(client)
            else:
                self._refuse(client, mark, error, wrote)

    def _refuse(self, client: Client, mark: int, error: str, wrote: type) -> None:
        """The pass's write failed: this client's answers since `mark` never go out."""
        if client.reactor is not self:
            return
        client.retract(mark)
        code, verb = _FAILED[wrote]
        err = NSQError(code, f"{verb} failed {error}")
        log.error("[%s] - %s", client, err)
        client.respond(encode_error(bytes(err)))
        self._write(client)
        self._end(client)

    def _ready(self, client: Client, events: int) -> None:
        data = client.socket.read_now(RECEIVE_SIZE)
        if data is None:
            return
        client.last_read = self.loop.now
        client.conn.receive_data(data)
        commit = self._commit
        self._mark = mark = client.out_mark()
        appended = commit.appended
        self._wrote = None
        # its publishes stay buffered: its answers wait for the pass's write (HTTP's and
        # RESP's publishes in the same pass are answered at once, so the broker writes them)
        commit.deferring = True
        try:
            served = self._run(client)
        finally:
            commit.deferring = False
        if served:
            appended = commit.appended - appended
            if not appended:
                self._write(client)
            elif appended < WRITE_NOW:
                # a small publish: answered once the pass's one write has this one's too
                self._held.append((client, mark, self._wrote or Pub))
            elif (error := commit.flush()) is None:
                self._write(client)  # an MPUB is a write of its own: no wait for the pass
            else:
                self._refuse(client, mark, error, self._wrote or Pub)

    def _run(self, client: Client) -> bool:
        """Run the complete commands; False when the connection is closed or handed over."""
        conn = client.conn
        execute = commands.execute
        commit = self._commit
        try:
            while True:
                cmd = conn.next_command()
                if cmd is NEED_DATA:
                    return True
                if cmd is CLOSED:
                    if self._settled(client):  # its answers go now: what they confirm first
                        self._write(client)
                        self._end(client)
                    return False
                kind = type(cmd)
                if kind in _HERE:
                    appended = commit.appended
                    try:
                        execute(client, cmd)
                    except NSQError as err:
                        if err.fatal:
                            raise
                        client.respond(encode_error(bytes(err)))
                    if commit.appended != appended and self._wrote is None:
                        self._wrote = kind
                elif kind is not Identify or not self._identify(client, cmd):
                    # answers so far stay queued: the task sends them before this one's
                    if self._settled(client):
                        self._hand_over(client, cmd)
                    return False
        except NSQError as err:
            err.__traceback__ = None  # its frames hold the parser's buffer
            log.error("[%s] - %s", client, err)
            if self._settled(client):
                client.respond(encode_error(bytes(err)))
                self._write(client)
                self._end(client)
        except ProtocolClosed as exc:
            log.error("[%s] - %s", client, exc)
            self._end(client)
        return False

    def _settled(self, client: Client) -> bool:
        """Before a connection leaves the pass (its end, or a task of its own) with answers
        that confirm publishes still buffered: those are written now. False when that failed:
        its answers since this read are taken back and it is refused and closed, as `_passed`
        does for the publishers it holds (the task would have sent them unconfirmed)."""
        wrote = self._wrote
        if wrote is None:
            return True
        error = self._commit.flush()
        if error is None:
            return True
        self._refuse(client, self._mark, error, wrote)
        return False

    def _identify(self, client: Client, cmd: Identify) -> bool:
        """An IDENTIFY that upgrades nothing is answered here; False to hand it over."""
        negotiation = commands.identify(client, cmd)
        if upgrades(negotiation):
            return False
        first = not client.identified
        client.identified_by(cmd, negotiation)
        client.conn.resume()
        if first:
            self._schedule(client)  # its heartbeat interval may be shorter now
        return True

    def _end(self, client: Client) -> None:
        if client.reactor is self:
            self.drop(client)

    # -- output ----------------------------------------------------------------------------

    def _write(self, client: Client) -> None:
        if not client.has_output or client.reactor is not self:
            return
        try:
            sent_all = client.send_now()
        except trio.BrokenResourceError:
            self.drop(client)
            return
        if not sent_all:
            # the socket is full: the client's own writer task sends the rest, with nsqd's
            # write deadline, while its reader goes on
            self._hand_over(client)

    # -- heartbeats and the read deadline ----------------------------------------------------

    def _schedule(self, client: Client) -> None:
        self.schedule(client, min(client.next_heartbeat, client.last_read + client.read_timeout))

    def _expire(self, client: Client, now: float) -> None:
        if client.reactor is not self:
            return
        if now >= client.last_read + client.read_timeout:
            log.info("[%s] read timeout: no command for two heartbeats", client)
            self.drop(client)
            return
        if now >= client.next_heartbeat:
            client.respond(HEARTBEAT_FRAME)
            client.next_heartbeat = now + client.heartbeat_interval
            self._write(client)
            if client.reactor is not self:
                return
        self._schedule(client)
