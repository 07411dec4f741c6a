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
(two heartbeat intervals without a command) are kept here by a heap of per-client deadlines."""

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

from ..log import log
from ..net.boundary import guarded
from ..net.reactor import EpollReactor, Loop
from ..net.transport import SocketTransport
from . import commands
from .connection import RECEIVE_SIZE, upgrades

if TYPE_CHECKING:
    from .connection import Client

# Commands run here; any other hands its connection to a task of its own.
_HERE = frozenset((Pub, MPub, MPubStart, DPub, Nop))


class Reactor(EpollReactor):
    def __init__(self, spawn: Callable[..., Any], loop: Loop | None = None) -> None:
        super().__init__(loop)
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

    def _ready(self, client: Client, events: int) -> None:
        data = client.socket.read_now(RECEIVE_SIZE)
        if data is None:
            return
        client.last_read = self.loop.now
        client.conn.receive_data(data)
        if self._run(client):
            self._write(client)

    def _run(self, client: Client) -> bool:
        """Run the complete commands; False when the connection is closed or handed over."""
        conn = client.conn
        execute = commands.execute
        try:
            while True:
                cmd = conn.next_command()
                if cmd is NEED_DATA:
                    return True
                if cmd is CLOSED:
                    self._write(client)
                    self._end(client)
                    return False
                kind = type(cmd)
                if kind in _HERE:
                    try:
                        execute(client, cmd)
                    except NSQError as err:
                        if err.fatal:
                            raise
                        client.respond(encode_error(bytes(err)))
                elif kind is not Identify or not self._identify(client, cmd):
                    # answers so far stay queued: the task sends them before this one's
                    self._hand_over(client, cmd)
                    return False
        except NSQError as err:
            err.__traceback__ = None  # its frames hold the parser's buffer
            log.error("[%s] - %s", client, err)
            client.respond(encode_error(bytes(err)))
            self._write(client)
            self._end(client)
        except ProtocolClosed as exc:
            log.error("[%s] - %s", client, exc)
            self._end(client)
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
