"""A served connection's output and deadlines in the TCP reactor's passes (nsqd/tcp/reactor.py):
what its commands and its deliveries put in its output is written in one write, at the end of
its read or (a delivery from another connection's publish or a timer) at once when urgent, else
when nsqd's flush ticker (output_buffer_timeout) says, timed by the loop's heap; a socket that
does not take all of it is watched for EPOLLOUT, and one that takes nothing for nsqd's write
deadline ends its connection; a consumer whose output drained below HIGH_WATER is refilled. The
same heap entry keeps its heartbeats and nsqd's read deadline (two heartbeat intervals without a
command). While the reactor serves a connection this is the connection's `Waker` (`kick`,
`lost`).

A mixin of the reactor (`Reactor(Output, Refills, Parking)`): its calls are the reactor's own
methods, so the read that writes a client's answers (`_serve`) pays no extra call level."""

from __future__ import annotations

import math
from collections.abc import Callable
from typing import TYPE_CHECKING

import trio

from protocol.v2 import HEARTBEAT_FRAME

from ..engine.api import WriteBatch, held
from ..log import log
from ..net.reactor import EpollReactor, Loop
from .connection import HIGH_WATER

if TYPE_CHECKING:
    from .connection import Client


class Output(EpollReactor):
    # the reactor's, used here
    _commit: WriteBatch
    _top_up: Callable[[Client], None]
    drop: Callable[[Client], None]

    def __init__(self, loop: Loop | None = None) -> None:
        super().__init__(loop)
        self._lost: list[Client] = []  # whose peer was gone: dropped at the next pass

    def _write(self, client: Client, filled: bool = False) -> None:
        if not client._out or client.reactor is not self or client._sending:
            return  # (sending: its socket is full, the rest goes when it takes output)
        # a consumer past HIGH_WATER takes no messages (it leaves the channel's rotation); so
        # may one whose socket was `filled` (the rest of a write that did not all go): its
        # output may have passed it meanwhile, though what is left is below it now
        stopped = client._out_size >= HIGH_WATER or filled
        try:
            sent_all = client.send_now()
        except trio.BrokenResourceError:
            client.peer_gone()
            return
        if not sent_all:
            # The socket is full: the rest goes when it takes output again, while its
            # commands are still read; meanwhile its deliveries wait in its output (past
            # HIGH_WATER it takes none, as nsqd's message pump stops while a write blocks),
            # and a socket that takes nothing for nsqd's write deadline ends the connection.
            now = trio.current_time()  # (a write from outside a pass: the loop's is old)
            client._sending = True
            client.write_deadline = now + max(client.read_timeout, 1.0)
            self.want_output(client, True)
            self._schedule(client, now)
        elif stopped:
            # it takes messages again: refilled in a hold of the group commit, as a pass's
            # reads are (`_passed` writes its publishers after the pass's release): with
            # --sync-every=1 what the refill reads from a disk queue has its read position
            # written before it leaves; unheld, the syncer wrote it ~100 ms later
            held(self._commit, self._top_up, client)

    def _drain(self, client: Client) -> None:
        """Its full socket takes output again: send what waited, and once all of it is sent,
        refill it. Refilled only when the rest was past HIGH_WATER, a consumer whose output
        had passed it got no more messages until its next command (a REQ'd message waited
        in the queue while its RDY allowed it, test_read_position.py)."""
        client._sending = False
        client.write_deadline = math.inf
        self.want_output(client, False)
        self._write(client, True)

    def _drop_lost(self) -> None:
        """Drop the connections whose peer was gone (the reactor's `_passing` calls it while
        `_lost` holds some)."""
        lost, self._lost = self._lost, []
        for client in lost:
            self.drop(client)

    def lost(self, client: Client) -> None:
        """Its peer is gone (`Client.peer_gone`: it takes nothing more): dropped at the start
        of the next pass (a write may fail inside a channel's hand-out, which must not see the
        consumer it is serving removed)."""
        if client.reactor is not self or client in self._lost:
            return
        if not self._lost:
            self.wake()
        self._lost.append(client)

    def kick(self, client: Client) -> None:
        """`client`'s output changed outside its own commands (its `Waker` while served
        here): urgent output (a delivery that filled its credit or its buffer) is
        written now, and output that waits for nsqd's flush ticker is timed."""
        if client._busy or client._sending or client.reactor is not self:
            return  # its read's end writes it, or its socket taking output again
        if client._urgent:  # (here: a delivery's write that did not all go, or past HIGH_WATER)
            self._write(client, True)
        elif client.has_output:
            self._schedule(client, trio.current_time())

    # -- heartbeats and the read deadline ----------------------------------------------------

    def _schedule(self, client: Client, now: float | None = None) -> None:
        due = min(client.next_heartbeat, client.last_read + client.read_timeout)
        due = min(due, client.write_deadline)
        if client.has_output and not client._sending:  # waiting for nsqd's flush ticker
            due = min(due, client.flush_due(self.loop.now if now is None else now))
        self.schedule(client, due)

    def _expire(self, client: Client, now: float) -> None:
        if client.reactor is not self:
            return
        if now >= client.last_read + client.read_timeout:
            log.info("[%s] read timeout: no command for two heartbeats", client)
            self.drop(client)
            return
        if now >= client.write_deadline:
            log.info("[%s] write timeout: its socket took no output", client)
            self.drop(client)
            return
        if now >= client.next_heartbeat:
            client.respond(HEARTBEAT_FRAME)
            client.next_heartbeat = now + client.heartbeat_interval
        if client._urgent or (client.has_output and now >= client.flush_due(now)):
            self._write(client)
            if client.reactor is not self:
                return
        self._schedule(client)
