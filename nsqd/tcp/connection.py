"""One client connection: its protocol state, RDY credit and output buffer, and the channel's
consumer (`send`, called synchronously by the channel). The reactor serves a plain connection
in its passes (nsqd/tcp/reactor.py); one that needs tasks of its own runs them from
nsqd/tcp/tasks.py."""

from __future__ import annotations

import math
import os
import random
import time
from collections import Counter
from typing import TYPE_CHECKING, Any, Protocol

import trio

from protocol.v2 import (
    OK_FRAME,
    ClientSettings,
    Identify,
    Negotiation,
    V2Connection,
    encode_response,
)
from protocol.v2.message import append_message_frames
from protocol.v2.state import ClientState

from ..engine.api import NoBatch
from ..net.transport import SocketTransport, Transport, transport_for
from .stats import client_stats
from .tasks import OwnTasks

if TYPE_CHECKING:
    from ..auth.session import ClientAuth, Identity
    from ..engine.api import Message, Subscription, WriteBatch
    from ..engine.broker import Broker
    from ..net.tls_stream import TLSStream
    from ..node import Node
    from .reactor import Reactor

# A client whose unsent output passes this stops taking messages until its socket drains,
# as nsqd's message pump stops while a write blocks.
HIGH_WATER = 4 * 1024 * 1024


class Waker(Protocol):
    """Who sends a client's output once it changed outside a write (a delivery, a flush
    deadline to time, new settings)."""

    def kick(self, client: Client) -> None: ...

    def lost(self, client: Client) -> None:
        """Its peer is gone (a write failed), maybe inside a channel's hand-out: end the
        connection after that call, never inside it (the channel is mid-rotation)."""
        ...


class _OwnTasksWaker:
    """A client with tasks of its own: its writer task, parked until told."""

    @staticmethod
    def kick(client: Client) -> None:
        if len(client._lot):
            client._lot.unpark_all()

    @staticmethod
    def lost(client: Client) -> None:
        client._cancel_scope.cancel()  # its task ends it


OWN_TASKS: Waker = _OwnTasksWaker()


class Client(OwnTasks):
    socket: SocketTransport  # plain TCP only: what the reactor and the inline writes use

    def __init__(
        self,
        node: Node,
        broker: Broker,
        stream: trio.abc.Stream,
        remote: tuple[str, int],
        reactor: Reactor | None = None,
        commit: WriteBatch | None = None,
        private: bool = False,
    ) -> None:
        self.node = node
        self.broker = broker
        # the stores' group commit: a delivery made inside a pass that buffered a record (the
        # channel's journal) leaves after the pass's write
        self._commit: WriteBatch = commit or NoBatch()
        self.id = broker.next_client_id()
        self.stream = stream
        # the connection below any layer IDENTIFY negotiates: where a new TLS layer goes
        self.base_stream = stream
        transport = transport_for(stream)
        self.transport: Transport = transport
        if isinstance(transport, SocketTransport):
            self.socket = transport  # the plain socket: the reactor's and inline writes' way
        self.remote_address = f"{remote[0]}:{remote[1]}" if remote[0] else ""
        opts = node.options
        # `private`: on a group worker's link listener (loopback, for its peers' links), where
        # --tls-required asks for the group's secret (AUTH) instead of TLS
        tls_required = opts.tls_required_tcp and not private
        self.conn = V2Connection(node.limits, remote_ip=remote[0], tls_required=tls_required)
        self.channel: Subscription | None = None
        self.connect_ts = int(time.time())
        self.identified = False
        # credit and counters
        self.rdy = 0
        self.in_flight = 0
        self.in_ready = False  # in the channel's ready rotation
        self.message_count = 0
        self.finish_count = 0
        self.requeue_count = 0
        self.timeout_count = 0
        self.pub_counts: Counter[str] = Counter()  # (a count += 1 is no call once there)
        self.auth: ClientAuth | None = None
        secret_for_tls = private and opts.tls_required_tcp
        if opts.auth_http_address or secret_for_tls:
            from ..auth.session import ClientAuth  # only needed when AUTH is asked for

            self.auth = ClientAuth(node, repr(self), self._identity, secret_for_tls)
        # negotiated stream layers (for /stats and AUTH's tls / common_name)
        self.tls_stream: TLSStream | trio.SSLStream[trio.abc.Stream] | None = None
        self.snappy = False
        self.deflate = False
        self._apply_settings(self.conn.settings)
        # output
        self._out: list[bytes] = []
        self._out_size = 0
        self._sending_size = 0
        self._sending = False
        self._busy = False  # this client's own commands are running
        self._after_commit = False  # its write waits for the pass's group commit
        self._urgent = False
        self._next_tick = math.inf
        self._lot = trio.lowlevel.ParkingLot()
        # told when the output changes: the writer task's wake-up, or while the reactor serves
        # this connection the reactor (which has no task to wake)
        self.waker: Waker = OWN_TASKS
        self.next_heartbeat = trio.current_time() + self.heartbeat_interval
        self.last_read = trio.current_time()
        self.needs_refresh = False
        self.closed = False
        self.accepting = False  # subscribed, not closing, not closed
        self._cancel_scope = trio.CancelScope()
        # the publishers' reactor that serves this connection until it needs a task of its
        # own (nsqd/tcp/reactor.py); None for TLS/AUTH set-ups and once it has one
        self.reactor: Reactor | None = reactor if self.auth is None else None
        self.due = math.inf  # the reactor's timer entry for this client
        # while the reactor waits for its full socket to take output: when the wait has
        # lasted as long as nsqd's write deadline allows
        self.write_deadline = math.inf

    def __repr__(self) -> str:
        return f"Client({self.remote_address})"

    def _identity(self) -> Identity:
        """What AUTH tells the auth server about this connection."""
        from ..auth.session import Identity
        from ..tls import peer_common_name

        remote_ip = self.remote_address.rsplit(":", 1)[0].strip("[]")
        tls = self.tls_stream
        return Identity(remote_ip, tls is not None, peer_common_name(tls) if tls else "")

    @property
    def settings(self) -> ClientSettings:
        return self.conn.settings

    @property
    def state(self) -> ClientState:
        return self.conn.state

    def _apply_settings(self, s: ClientSettings) -> None:
        """The message pump's settings: nsqd takes them from the first IDENTIFY only."""
        self.msg_timeout = s.msg_timeout_ms / 1000
        self.msg_timeout_explicit = s.msg_timeout_set  # else a channel's msg_timeout applies
        self.sample_rate = s.sample_rate
        self.heartbeat_interval = s.heartbeat_interval_ms / 1000 or math.inf
        self.output_buffer_size = s.output_buffer_size
        # 0 (IDENTIFY -1): no timed flush, every message frame goes out at once
        self.flush_interval = s.output_buffer_timeout_ms / 1000
        self._tick_origin = trio.current_time()  # nsqd's flush ticker starts here

    @property
    def read_timeout(self) -> float:
        """Two heartbeat intervals of the latest IDENTIFY (nsqd's read deadline)."""
        return 2 * (self.conn.settings.heartbeat_interval_ms / 1000 or math.inf)

    # -- the channel's Consumer (engine.ports.Consumer), called synchronously -------------

    def credit(self) -> int:
        """How many more messages this client may be sent right now: never below 0, though a
        RDY lowered under what is in flight leaves it so (the channel sums its rotation's
        credits, and a group's pull link asks its peers for the sum: a negative one stalled
        the other consumers and was sent as `RDY -N`)."""
        if not self.accepting or self._out_size + self._sending_size >= HIGH_WATER:
            return 0
        credit = self.rdy - self.in_flight
        return credit if credit > 0 else 0

    def output_full(self) -> bool:
        """Its unsent output is past HIGH_WATER: `credit` gives 0, and the channel's
        hand-out leaves it out of the rotation until a refill lets it back."""
        return self._out_size + self._sending_size >= HIGH_WATER

    def sample(self, msgs: list[Message]) -> list[Message]:
        rate = self.sample_rate
        return [m for m in msgs if random.randrange(100) <= rate]

    def send(self, msgs: list[Message]) -> None:
        """`msgs` are in flight to this client: their frames go into its output buffer."""
        out = self._out
        was_empty = not out
        size = append_message_frames(out, msgs)
        count = len(msgs)
        self.in_flight += count
        self.message_count += count
        self._out_size += size
        if (
            self._out_size >= self.output_buffer_size
            or self.in_flight >= self.rdy
            or not self.flush_interval
        ):
            if self._sending or self._busy or type(self.transport) is not SocketTransport:
                self._urgent = True
                self._wake()
            elif self._commit.buffered:
                # inside a pass's group commit, which may hold these messages' journal
                # record (the channel journals a delivery before it sends it): they leave
                # after its write (once for the pass's deliveries)
                if not self._after_commit:
                    self._after_commit = True
                    self._commit.later(self._write_after_commit)
            else:
                self._write_inline()
        elif was_empty:
            self._wake()  # start the output-buffer-timeout clock

    def _write_after_commit(self, error: str | None) -> None:
        # sent even when the write failed: the messages are in flight to this client (the
        # store's failure turns /ping NOK); holding them back would only delay them
        self._after_commit = False
        if not self._out or self.closed:
            return
        if self._sending or self._busy:
            self._urgent = True
            self._wake()
        else:
            self._write_inline()

    def _write_inline(self) -> None:
        """Send the output now, from the pass that delivered it (a publisher's, a timer's):
        saves waking the writer task (or, served by the reactor, a pass of its own). Not while
        this client's own commands run: a publisher subscribed to its own topic gets its OK
        first."""
        if self._out_size >= HIGH_WATER:
            # past it the consumer takes no messages: its writer (the reactor's `kick`) sends
            # this and refills it once all of it went; sent here, nothing refilled it until
            # its next command (a REQ'd message waited in the queue while its RDY allowed it)
            self._urgent = True
            self._wake()
            return
        try:
            if not self.send_now():
                self._wake()  # the socket is full: the writer (the reactor) sends the rest
        except trio.BrokenResourceError:
            self.peer_gone()

    def peer_gone(self) -> None:
        """A write failed: it takes nothing more from here on, and whoever sends its output
        ends it (after a channel's hand-out that may be running: `Waker.lost`)."""
        self.closed = True
        self.accepting = False
        self.waker.lost(self)

    def send_now(self) -> bool:
        """One non-blocking write of the whole output on the plain socket: True when all of it
        went; else the rest stays queued, urgent, for the writer task (or the reactor, when the
        socket takes output again). BrokenResourceError if the connection is gone."""
        out = self._out
        data = out[0] if len(out) == 1 else b"".join(out)
        out.clear()
        self._next_tick = math.inf
        try:  # write_now's, inline: a call per answer saved
            sent = os.write(self.socket.fd, data)
        except BlockingIOError:
            sent = 0
        except OSError as exc:
            raise trio.BrokenResourceError(str(exc)) from exc
        if sent < len(data):
            rest = data[sent:]
            out.append(rest)
            self._out_size = len(rest)
            self._urgent = True
            return False
        self._out_size = 0
        self._urgent = False
        return True

    def finished(self, n: int) -> None:
        self.in_flight -= n
        self.finish_count += n

    def requeued(self) -> None:
        self.in_flight -= 1
        self.requeue_count += 1

    def timed_out(self) -> None:
        self.in_flight -= 1
        self.timeout_count += 1

    def emptied(self) -> None:
        self.in_flight = 0

    def stats(self, topic_filter: str = "") -> dict[str, Any]:
        return client_stats(self, topic_filter)

    def respond(self, frame: bytes, before: int | None = None) -> None:
        """Queue a response or error frame; it goes out at the end of this read. `before`
        puts it ahead of frames queued since `out_mark()` (a publisher subscribed to its own
        topic gets its OK before the message, as from nsqd)."""
        if before is None or before >= len(self._out):
            self._out.append(frame)
        else:
            self._out.insert(before, frame)
        self._out_size += len(frame)
        self._urgent = True

    @property
    def has_output(self) -> bool:
        """Frames queued and not yet sent."""
        return bool(self._out)

    def out_mark(self) -> int:
        return len(self._out)

    def retract(self, mark: int) -> None:
        """Take back the frames queued since `out_mark()` returned `mark` (unsent)."""
        del self._out[mark:]
        self._out_size = sum(map(len, self._out))

    def _wake(self) -> None:
        self.waker.kick(self)

    def flush_due(self, now: float) -> float:
        """When nsqd's fixed flush ticker next sends the output waiting here (math.inf when
        none waits or -1 turned timed flushes off)."""
        if self._next_tick == math.inf and self._out and self.flush_interval > 0:
            ticks = math.floor((now - self._tick_origin) / self.flush_interval) + 1
            self._next_tick = self._tick_origin + ticks * self.flush_interval
        return self._next_tick

    # -- lifecycle -------------------------------------------------------------------------

    def adopted(self) -> bool:
        """Whether the publishers' reactor serves this new connection (else `run` it)."""
        transport = self.transport
        if self.reactor is not None and isinstance(transport, SocketTransport):
            self.reactor.adopt(self, transport)
            return True
        self.reactor = None
        return False

    def ended(self) -> None:
        """Forget this connection everywhere (its socket is closed by the caller)."""
        self.closed = True
        self.accepting = False
        self.conn.release()  # a body cut short must not wait for the collector
        self._out.clear()
        if self.channel is not None:
            self.channel.remove_consumer(self)
        self.broker.remove_client(self)

    def close(self) -> None:
        self.closed = True
        self.accepting = False
        if self.reactor is not None:
            self.reactor.drop(self)
        self._cancel_scope.cancel()

    # -- IDENTIFY ------------------------------------------------------------------------

    def identified_by(self, cmd: Identify, negotiation: Negotiation | None) -> None:
        """IDENTIFY's synchronous part: the first one's settings, and the answer queued."""
        if not self.identified:
            # nsqd applies only the first IDENTIFY's timers and rates to the message pump.
            self.identified = True
            self._apply_settings(cmd.settings)
            self.next_heartbeat = trio.current_time() + self.heartbeat_interval
            self._wake()
        if negotiation is None:
            self.respond(OK_FRAME)
        else:
            self.respond(encode_response(negotiation.response))
