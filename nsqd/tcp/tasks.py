"""A client connection's own tasks, where the reactor does not serve it (TLS, snappy or deflate,
an AUTH server): a reader that parses and runs commands
and flushes the replies itself (one send per received chunk), and a writer that sends message
frames on nsqd's flush policy (buffer full, no credit left, or the output-buffer-timeout tick)
and heartbeats. `Client` (nsqd/tcp/connection.py) is the connection's state and the channel's
consumer; these are its methods for running on its own."""

from __future__ import annotations

import math
from typing import TYPE_CHECKING, Any

import trio

from protocol.v2 import (
    CLOSED,
    HEARTBEAT_FRAME,
    NEED_DATA,
    Auth,
    DPub,
    ErrorCode,
    Identify,
    MPubStart,
    Negotiation,
    NSQError,
    ProtocolClosed,
    Pub,
    Sub,
    encode_error,
    encode_response,
)

from ..engine.api import Making, held
from ..log import log
from ..net.transport import StreamError
from . import commands
from .upgrade import upgrade

if TYPE_CHECKING:
    from .connection import Client

RECEIVE_SIZE = 256 * 1024
# Commands that need the AUTH server's permission, by the verb nsqd names in its errors.
# MPUB is checked before its body is read, as nsqd does.
# what ends a client's writes: the peer gone, the socket closed here, a write past its deadline
_WRITE_ENDED = (trio.BrokenResourceError, trio.ClosedResourceError, trio.TooSlowError)
_AUTH_CHECKED: dict[type, str] = {Pub: "PUB", MPubStart: "MPUB", DPub: "DPUB", Sub: "SUB"}


class _Ended(trio.abc.Stream):
    """The stream and transport of a connection that ended: nothing to read, nothing sent."""

    async def receive_some(self, max_bytes: int | None = None) -> bytes:
        return b""

    async def receive(self, max_bytes: int) -> bytes:
        return b""

    async def send_all(self, data: bytes | bytearray | memoryview) -> None:
        raise trio.ClosedResourceError

    async def send(self, data: bytes, limit: float) -> None:
        raise trio.ClosedResourceError

    async def wait_send_all_might_not_block(self) -> None:
        raise trio.ClosedResourceError

    async def aclose(self) -> None:
        pass


_ENDED = _Ended()


def upgrades(negotiation: Negotiation | None) -> bool:
    """Whether an IDENTIFY's answer starts TLS or compression on the connection."""
    return negotiation is not None and (
        negotiation.tls or negotiation.snappy or negotiation.deflate
    )


class OwnTasks:
    """The reader and writer tasks of a `Client` that runs on its own (a base of `Client`:
    every attribute they use is the client's)."""

    async def run(self: Client) -> None:
        await self.serve()

    async def serve(self: Client, pending: Any = None) -> None:
        """This connection's own reader and writer tasks until it ends; `pending` is a command
        the reactor parsed and handed over with the connection."""
        try:
            with self._cancel_scope:
                async with trio.open_nursery() as nursery:
                    nursery.start_soon(self._writer)
                    if pending is None or await self._process(pending):
                        await self._reader()
                    nursery.cancel_scope.cancel()
        finally:
            self.ended()
            with trio.CancelScope(shield=True), trio.move_on_after(1):
                await self.transport.aclose()
            # This Client lives on while it owns in-flight messages (until they time out, as
            # in nsqd): its stream layers must not (a deflate compressor alone is ~300 KiB).
            self.stream = self.base_stream = self.transport = _ENDED
            self.tls_stream = None

    async def _reader(self: Client) -> None:
        conn = self.conn
        while True:
            try:
                data = await self.transport.receive(RECEIVE_SIZE)
            except ProtocolClosed as exc:  # a compressed stream Go's readers refuse
                log.error("[%s] - %s", self, exc)
                return
            except StreamError as exc:  # a TLS record that does not decrypt
                log.error("[%s] - failed to read command - %s", self, exc)
                return
            self.last_read = trio.current_time()
            conn.receive_data(data)
            if not await self._process() or not data:
                return

    async def _process(self: Client, pending: Any = None) -> bool:
        """Run every complete command (`pending` first); False when the connection must
        close."""
        conn = self.conn
        execute = commands.execute
        self._busy = True
        try:
            while True:
                if pending is None:
                    cmd = conn.next_command()
                else:
                    cmd, pending = pending, None
                if cmd is NEED_DATA:
                    break
                if cmd is CLOSED:
                    return False
                kind = type(cmd)
                if kind is Identify:
                    await self._identify(cmd)
                    continue
                if kind is Auth:
                    await self._auth(cmd)
                    continue
                if self.auth is not None and kind in _AUTH_CHECKED:
                    await self.auth.check(
                        _AUTH_CHECKED[kind], cmd.topic, getattr(cmd, "channel", "")
                    )
                try:
                    # in a hold of the group commit, as the loop's pass holds its commands
                    held(self._commit, execute, self, cmd)
                except NSQError as err:
                    if err.fatal:
                        raise
                    self.respond(encode_error(bytes(err)))
                except Making as making:  # a SUB: run again once its channel is made
                    await making.made()
                    pending = cmd
        except NSQError as err:
            err.__traceback__ = None  # its frames hold the parser's buffer (a body cut short)
            log.error("[%s] - %s", self, err)
            self.respond(encode_error(bytes(err)))
            await self._flush_quietly()
            return False
        except (trio.BrokenResourceError, trio.ClosedResourceError, trio.TooSlowError):
            return False
        except ProtocolClosed as exc:
            log.error("[%s] - %s", self, exc)
            return False
        finally:
            self._busy = False
        if self.needs_refresh:
            self.needs_refresh = False
            if self.channel is not None:
                self._refill()
        if self._urgent:
            await self._flush_quietly()
        return not self.closed

    async def _identify(self: Client, cmd: Identify) -> None:
        negotiation = commands.identify(self, cmd)
        self.identified_by(cmd, negotiation)
        await self.flush()
        if upgrades(negotiation):
            while self._sending:  # noqa: ASYNC110 -- a heartbeat going out ends in plaintext
                await trio.sleep(0.001)
            self._sending = True
            try:
                await upgrade(self, negotiation)
            finally:
                self._sending = False
        self.conn.resume()

    async def _auth(self: Client, cmd: Auth) -> None:
        if self.auth is None:
            raise NSQError(ErrorCode.E_AUTH_DISABLED, "AUTH disabled")
        self.respond(encode_response(await self.auth.auth(cmd.secret)))

    # -- writing ---------------------------------------------------------------------------

    async def _flush_quietly(self: Client) -> None:
        try:
            await self.flush()
        except _WRITE_ENDED:
            self.close()

    async def flush(self: Client) -> None:
        if self._sending:
            return  # the task already sending picks up what was added
        self._sending = True
        stopped = False
        try:
            while self._out:
                data = b"".join(self._out)
                self._out.clear()
                self._out_size = 0
                self._urgent = False
                self._next_tick = math.inf
                self._sending_size = len(data)
                # A consumer that does not read is let go when it has been silent for as long
                # as nsqd's read deadline allows (two heartbeats), not sooner: Go's buffered
                # writer rarely blocks where our sends do.
                await self.transport.send(data, max(self.read_timeout, 1.0))
                # what was added meanwhile is here too: the most this flush's output held
                stopped = stopped or self.output_full()
                self._sending_size = 0
        finally:
            self._sending = False
        channel = self.channel
        if channel is not None and (stopped or channel.backlog) and self.credit() > 0:
            # past HIGH_WATER it took no messages, and a hand-out then left it out of the
            # channel's rotation: it rejoins it here even with nothing queued yet (one message
            # over 4 MiB passed it alone, and what was published after it never came)
            self._refill()

    def _refill(self: Client) -> None:
        """Hand out what its credit allows, in a hold of the group commit as the loop's pass
        holds its refills: with --sync-every=1 a disk queue writes its read position at the
        release, before this client's FINs are read (unheld, the syncer wrote it ~100 ms
        later, and a kill -9 after the FINs gave them back). A failed write is the queue's
        (logged, /ping NOK), as a refill's in a pass."""
        channel = self.channel
        if channel is not None:
            held(self._commit, channel.refresh, self)

    async def _writer(self: Client) -> None:
        try:
            await self._write_loop()
        except _WRITE_ENDED:
            self.close()

    async def _write_loop(self: Client) -> None:
        lot = self._lot
        while True:
            now = trio.current_time()
            if now >= self.last_read + self.read_timeout:
                # nsqd's read deadline: nothing from the client for two heartbeat intervals
                log.info("[%s] read timeout: no command for two heartbeats", self)
                self.close()
                return
            if now >= self.next_heartbeat:
                self.respond(HEARTBEAT_FRAME)
                self.next_heartbeat = now + self.heartbeat_interval
            if self._out and not self._sending and (self._urgent or now >= self.flush_due(now)):
                await self.flush()
                continue
            deadline = min(self.next_heartbeat, self.last_read + self.read_timeout)
            if self._out and not self._sending:
                deadline = min(deadline, self._next_tick)
            with trio.move_on_at(deadline):
                await lot.park()
