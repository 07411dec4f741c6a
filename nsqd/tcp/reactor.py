"""Plain-TCP V2 connections, publishers and consumers, served the way nsqd/resp/reactor.py
serves Redis clients: one task owns an epoll set of their sockets (trio waits on the epoll fd
itself), reads what is ready, runs each client's complete commands synchronously and writes its
answers in one write (the loop itself is nsqd/net/reactor.py's). A request/response round trip
(PUB, MPUB, DPUB, NOP, a plain IDENTIFY) then costs no task switch and no per-socket trio wait,
which is what bounded PUB round trips; a consumer's RDY, FIN, REQ and TOUCH are read the same
way, and the messages they make room for are written at the end of that read (or, delivered
by another connection's publish or a timer, from the pass that delivered them: the channel
calls `Client.send`). Output that waits for nsqd's flush ticker (output_buffer_timeout) is timed
by the heap; a socket that does not take all of it is watched for EPOLLOUT, its commands still
read meanwhile, and one that takes nothing for nsqd's write deadline ends its connection: how
and when output is written, with heartbeats and nsqd's read deadline (two heartbeat intervals
without a command) on the same per-client deadline, is nsqd/tcp/output.py's.

A connection leaves for tasks of its own (nsqd/tcp/tasks.py) only when it needs them: an
IDENTIFY that starts TLS or compression, AUTH. It leaves the epoll set and its `Client.serve`
task starts with that command, the parser's buffered bytes and any unsent output, so the client
sees one ordered stream either way. A SUB of a channel that a group's peer workers are still
making (`Making`) parks its connection out of the set until they have (nsqd/tcp/parking.py);
a consumer is refilled a share at a time (nsqd/tcp/refills.py).

Group commit: each pass of the shared loop holds the store's `WriteBatch` (from `_passing` to
`_passed`), so the pass's small TCP publishes (PUB) are stored together when the pass ends (one
publish per topic, engine/pending.py), what they append to the disk queues is written with one
write per queue file, and their answers are sent only after that; a client that appended many
records (an MPUB) has them written when its commands are done and is answered then. A failed
write turns the answers not yet sent of the pass's publishers into their command's E_PUB_FAILED
(E_MPUB_FAILED, E_DPUB_FAILED), which closes the connection as nsqd's does (a publisher whose
own records were written may be refused too: it retries, and at least once holds)."""

from __future__ import annotations

import math
import select
from collections.abc import Callable
from typing import TYPE_CHECKING, Any

from protocol.v2 import (
    CLOSED,
    NEED_DATA,
    Cls,
    DPub,
    Fin,
    Identify,
    MPub,
    MPubStart,
    Nop,
    NSQError,
    ProtocolClosed,
    Pub,
    Rdy,
    Req,
    Sub,
    Touch,
    encode_error,
)
from protocol.v2.errors import ErrorCode

from ..engine.api import Making, WriteBatch
from ..log import log
from ..net.boundary import guarded
from ..net.reactor import Loop
from ..net.transport import SocketTransport
from . import commands
from .connection import HIGH_WATER, OWN_TASKS
from .output import Output
from .parking import Parking
from .refills import Refills
from .tasks import RECEIVE_SIZE, upgrades

if TYPE_CHECKING:
    from .connection import Client

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

_OUT = select.EPOLLOUT

# Commands run here; any other (an AUTH, an IDENTIFY that upgrades) hands its connection to a
# task of its own. A consumer stays: its deliveries are written from the pass that made them.
_HERE = frozenset((Pub, MPub, MPubStart, DPub, Nop, Sub, Rdy, Fin, Req, Touch, Cls))


class Reactor(Output, Refills, Parking):
    def __init__(
        self, spawn: Callable[..., Any], commit: WriteBatch, loop: Loop | None = None
    ) -> None:
        super().__init__(loop)
        self._commit = commit
        # (client, its output's length before this read's commands, its first command that
        # appended to a disk queue): answered after the pass's write
        self._held: list[tuple[Client, int, type]] = []
        # (client, id) of the pass's REQs whose record went to a disk queue: E_REQ_FAILED,
        # as nsqd answers a requeue its disk refused, if the pass's write fails
        self._requeued: list[tuple[Client, bytes]] = []
        self._mark = 0  # the output's length before the read being served
        self._wrote: type | None = None  # that first command, of the client being served
        self._spawn = spawn  # start_soon of the clients nursery
        self.clients: dict[int, Client] = self.conns

    # -- connections in and out ----------------------------------------------------------

    def adopt(self, client: Client, socket: SocketTransport) -> None:
        """Serve `client`, whose transport is the plain `socket`."""
        client.socket = socket
        client.waker = self
        self.watch(client)
        self._schedule(client)

    def drop(self, client: Client) -> None:
        """Close a connection served here (its end, or the daemon's shutdown)."""
        if not self._forget(client):
            return
        client.ended()
        client.socket.close_now()

    def _forget(self, client: Client) -> bool:
        if not self.unwatch(client) and not self._unpark(client):
            return False
        client.reactor = None
        client.waker = OWN_TASKS
        # what waits for a full socket is its writer task's to send now
        client._sending = False
        client.write_deadline = math.inf
        return True

    def _hand_over(self, client: Client, pending: Any = None) -> None:
        """The connection needs a task of its own from here on."""
        if self._forget(client):
            self._spawn(guarded, client, client.serve, pending)

    # -- the loop's hooks ------------------------------------------------------------------

    def _shutdown(self) -> None:
        for client in [*self.clients.values(), *self._parked]:
            self.drop(client)

    def _fail(self, client: Client) -> None:
        self.drop(client)

    def _passing(self) -> None:
        if self._lost:
            self._drop_lost()
        self._commit.hold()
        if self._made:
            self._resume()
        if self._refills:
            self._refill()

    def _passed(self) -> None:
        error = self._commit.release()
        held, self._held = self._held, []
        for client, mark, wrote in held:
            if error is None:
                self._write(client)
            else:
                self._refuse(client, mark, error, wrote)
        if self._requeued:
            requeued, self._requeued = self._requeued, []
            if error is not None:
                for client, msg_id in requeued:
                    self._req_failed(client, msg_id, error)

    def _req_failed(self, client: Client, msg_id: bytes, error: str) -> None:
        """A REQ whose record the pass's write lost: nsqd's E_REQ_FAILED (not fatal; the
        message is lost, as nsqd loses a requeue its disk refused)."""
        if client.reactor is not self:
            return
        text = f"REQ {msg_id.decode('latin-1')} failed {error}"
        client.respond(encode_error(bytes(NSQError(ErrorCode.E_REQ_FAILED, text))))
        self._write(client)

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
        if events & _OUT:  # its full socket takes output again
            self._drain(client)
            if not events & ~_OUT or client.reactor is not self:
                return
        if client._sending and client._out_size >= HIGH_WATER:
            # its answers pile up unread past HIGH_WATER (its deliveries stopped there): its
            # commands wait in the kernel's buffers until its socket takes output, as nsqd's
            # IOLoop waits on such a write (read on, one client that sent FINs of unknown ids
            # and read nothing grew the daemon by ~40 MB a second)
            self.only_output(client)
            return
        data = client.socket.read_now(RECEIVE_SIZE)
        if data is None:
            return
        client.last_read = self.loop.now
        client.conn.receive_data(data)
        self._serve(client)

    def _serve(self, client: Client, pending: Sub | None = None) -> None:
        """Run what `client` sent (`pending` first) and answer it, now or after the pass's
        write."""
        commit = self._commit
        self._mark = mark = len(client._out)  # its out_mark(), inline
        appended = commit.appended
        self._wrote = None
        # its publishes stay buffered: its answers wait for the pass's write (HTTP's and
        # RESP's publishes in the same pass are answered at once, so the broker writes them)
        commit.deferring = True
        client._busy = True  # its deliveries wait in its output: its answers go first
        try:
            served = self._run(client, pending)
        finally:
            commit.deferring = False
            client._busy = False
        if served:
            if commit.urgent:  # a FIN's record (--sync-every=1) is on file before answers go
                commit.flush()
            if client.needs_refresh:  # its RDY or FINs made room: refilled once per read
                client.needs_refresh = False
                self._top_up(client)
                if client.reactor is not self:
                    return
            appended = commit.appended - appended
            wrote = self._wrote
            if not appended or wrote is None:
                # no publish of its own waits for the write: a REQ's record or a refill's is
                # the queue's (its failure logged, /ping NOK); refused, a consumer was closed
                # with a PUB's error (or, REQ'ing, took the reactor down: no such error)
                self._write(client)
            elif appended < WRITE_NOW:
                # a small publish: answered once the pass's one write has this one's too
                self._held.append((client, mark, wrote))
            elif (error := commit.flush()) is None:
                self._write(client)  # an MPUB is a write of its own: no wait for the pass
            else:
                self._refuse(client, mark, error, wrote)

    def _run(self, client: Client, pending: Sub | None = None) -> bool:
        """Run the complete commands (`pending` first); False when the connection is closed,
        handed over or parked."""
        conn = client.conn
        run = commands.TABLE  # (commands.execute's lookup, with the command's type known)
        commit = self._commit
        try:
            while True:
                if pending is None:
                    cmd = conn.next_command()
                else:
                    cmd, pending = pending, None
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
                        run[kind](client, cmd)
                    except NSQError as err:
                        if err.fatal:
                            raise
                        client.respond(encode_error(bytes(err)))
                    except Making as making:  # a SUB: run again once its channel is made
                        if self._settled(client):
                            self._park(client, cmd, making)
                        return False
                    if commit.appended != appended:
                        if kind in _FAILED:
                            if self._wrote is None:
                                self._wrote = kind
                        elif kind is Req:  # its record waits for the pass's write too
                            self._requeued.append((client, cmd.msg_id))
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
