"""The Redis front-end (--resp-address): `Frontend` owns the keyspace, the blocking engine,
the bridge, the log and the expiry task, and is what the daemon starts and stops; its
listeners' accept loops hand each new connection to the reactor (reactor.py), which runs
them all."""

from __future__ import annotations

import time
from collections.abc import Awaitable, Callable
from typing import Any, Protocol

import trio

from ..config.options import Options
from ..engine.broker import Broker
from ..log import log
from ..net.reactor import Loop
from .blocking import Blocking, Waiter
from .bridge import Bridge, Peers
from .commands import Block, Session
from .databases import Databases
from .expiry import Expirer, publisher
from .reactor import Client, Reactor

RETRY_S = 1.0  # a failed log write is tried again this often (Redis: serverCron's second)


class KeyspaceLog(Protocol):
    """Where the keyspace's changes are kept (storage/resp_log.py, made by the daemon)."""

    appended: int  # records since the start (which commands changed something)
    # set here: how each fsync of the log went, told on the event loop (None: it succeeded)
    synced: Callable[[OSError | None], None]

    def load(self, keyspace: Databases) -> int:
        """Replay into `keyspace`, then record its changes; how many records were applied."""
        ...

    def flush(self) -> bool:
        """Write the changes gathered so far (before their replies are sent); True when
        there were any. OSError when the write failed: what it did not write is kept and
        written first by the next flush."""
        ...

    def seal(self, before: int) -> None:
        """The records appended since `appended` was `before` (two or more) are one
        command's: replayed all or none."""
        ...

    def replay(self, keyspace: Databases) -> int:
        """Apply the log as it is on disk to `keyspace` again (DEBUG RELOAD, LOADAOF)."""
        ...

    def close(self) -> None: ...


class Frontend:
    def __init__(
        self,
        options: Options,
        broker: Broker,
        keyspace_log: KeyspaceLog,
        loop: Loop | None = None,
        peers: Peers | None = None,
    ) -> None:
        self.options = options
        self.loop = loop  # the daemon's reactor loop; None: the reactor runs one of its own
        self.broker = broker
        self.password = options.resp_password.encode()
        self.max_bulk = options.resp_max_bulk
        self.ks = Databases()  # the 16 of SELECT; each session works in one (Session.ks)
        self.blocking = Blocking(self.ks.ready)
        self.bridge = Bridge(broker, options.max_msg_size, peers)
        self.log = keyspace_log
        # while resp.log has records a failed write left, or its last fsync failed: the reply
        # that refuses write commands, Redis's to a failed AOF write or fsync (None: neither)
        self.misconf: bytes | None = None
        self._write_error: OSError | None = None  # the failed write whose records are kept
        self._sync_error: OSError | None = None  # the last fsync's, until one succeeds
        keyspace_log.synced = self._synced
        self.expirer = Expirer(self.ks, self._expired)
        if options.resp_expiry_topic:
            self.ks.on_expired = publisher(broker, options.resp_expiry_topic)
        self.settings: dict[bytes, bytes] = {}  # CONFIG SET's values (commands/admin.py)
        self.connections: dict[int, Client] = {}  # by session id
        self.channels: dict[bytes, set[Session]] = {}  # pub/sub: channel -> subscribers
        self.patterns: dict[bytes, set[Session]] = {}
        self.reactor: Reactor | None = None
        self._nursery: trio.Nursery | None = None  # serve()'s: the deferred replies' asks
        self.started = time.time()
        self.address: tuple[str, int] | None = None

    def load(self) -> None:
        n = self.log.load(self.ks)
        log.info("RESP: %d keys restored (%d log records)", self.ks.key_count(), n)

    def serve_ready(self) -> None:
        """Serve the waiters of keys that got elements, outside a command (the reactor seals
        a command's records with those of the waiters it served): a served move's pop and
        push are replayed whole."""
        before = self.log.appended
        self.blocking.serve_ready()
        if self.log.appended - before > 1:
            self.log.seal(before)

    def _expired(self) -> None:
        """An expiry pass's DEL records written, after the clients blocked on what it deleted
        are answered (Keyspace.lost, as for DEL and FLUSHALL: a group consumer whose stream
        expired gets -UNBLOCKED now, as from Redis's expiry cycle, not at its timeout). No
        client waits for the records: a failed write is handled as a command's (`write_log`);
        raised, it ended the expiry task and the daemon with it, before the queues' clean
        stop."""
        if self.ks.ready:
            self.serve_ready()
        self.write_log()

    # -- resp.log's writes -----------------------------------------------------------------

    def write_log(self) -> bool:
        """Write the records gathered so far (the reactor's pass, before its replies); False
        when they are not written: this write failed, or an earlier one did and its records
        wait for `_retry_log`, which writes them and these in order (a write here would put
        these first when the disk takes writes again between two retries)."""
        if self.misconf is not None:
            return False
        try:
            if self.log.flush():
                self.broker.store_wrote()  # as nsqd: the next good write makes it healthy
        except OSError as exc:
            self._log_failed(exc)
            return False
        return True

    def _log_failed(self, exc: OSError) -> None:
        """As Redis after a failed AOF write (appendfsync everysec): what was not written is
        kept (records.py), write commands are refused with -MISCONF until it is, /ping of
        the daemon says NOK; the daemon goes on (Redis's appendfsync always exits here)."""
        reason = exc.strerror or str(exc)
        self._write_error = exc
        self._refuse()
        log.error(
            "RESP: Error writing to resp.log: %s - write commands are refused until it can be"
            " written (tried again every %gs)",
            reason,
            RETRY_S,
        )
        self.broker.store_failed(f"resp.log write failed - {exc}")

    async def _retry_log(self) -> None:
        """Every RETRY_S while a write failed: the kept records written (with what came
        since, in order); once they are, writes are served again."""
        while True:
            await trio.sleep(RETRY_S)
            if self.misconf is None:
                continue
            try:
                self.log.flush()  # (after a failed fsync: what expiries recorded meanwhile)
            except OSError as exc:  # still failing: the reply names the latest error
                self._write_error = exc
                self._refuse()
                self.broker.store_failed(f"resp.log write failed - {exc}")
                continue
            if self._write_error is not None:
                self._write_error = None
                self._solved("write")

    def _synced(self, error: OSError | None) -> None:
        """The storage's syncer fsynced resp.log, or failed to. As Redis after a failed AOF
        fsync (aof_bio_fsync_status): writes are refused with -MISCONF naming its error
        until a later fsync succeeds; that one comes once something new is written (an
        expiry's record, since writes are refused), as Redis's."""
        if error is not None:
            if self._sync_error is None:
                log.error(
                    "RESP: Error fsyncing resp.log: %s - write commands are refused until an"
                    " fsync succeeds",
                    error.strerror or error,
                )
            self._sync_error = error
            self._refuse()
        elif self._sync_error is not None:
            self._sync_error = None
            self._solved("fsync")

    def _refuse(self) -> None:
        """`misconf` from what failed: a failed write first, then a failed fsync (Redis's
        writeCommandsDeniedByDiskError)."""
        failed = self._write_error or self._sync_error
        self.misconf = None if failed is None else _misconf(failed)

    def _solved(self, what: str) -> None:
        """A failure is over: writes are served again unless the other one holds."""
        self._refuse()
        if self.misconf is None:
            self.broker.store_wrote()
            log.warning("RESP: resp.log %s error looks solved, writes are served again.", what)

    # -- what commands call ------------------------------------------------------------------

    def block(
        self, waiter: Waiter, timeout: float, on_timeout: bytes, at_once: bytes | None = None
    ) -> Block:
        return Block(waiter, timeout, on_timeout, at_once)

    def deliver(self, client_id: int, data: bytes) -> None:
        """A pub/sub message for another connection: sent with this pass's replies."""
        conn = self.connections.get(client_id)
        if conn is not None and self.reactor is not None:
            self.reactor.send_later(conn, data)

    def kill(self, client_id: int) -> None:
        """CLIENT KILL of another connection: closed at once, unanswered."""
        conn = self.connections.get(client_id)
        if conn is not None and self.reactor is not None:
            self.reactor.end(conn)

    def unblock(self, client_id: int, reply: bytes | None) -> bool:
        """CLIENT UNBLOCK of another connection (reactor.py)."""
        return self.reactor is not None and self.reactor.unblock(client_id, reply)

    def spawn(self, fn: Callable[..., Awaitable[None]], *args: Any) -> None:
        """Start a task beside the reactor (a deferred reply's ask of the group's peers)."""
        assert self._nursery is not None
        self._nursery.start_soon(fn, *args)

    def remote_of(self, s: Session) -> str:
        conn = self.connections.get(s.id)
        return conn.remote if conn is not None else ""

    def list_lengths(self) -> dict[str, int]:
        """Every list key -> its length (for /stats or /metrics)."""
        return self.ks.list_lengths()

    # -- running -------------------------------------------------------------------------------

    async def serve(
        self,
        listeners: list[trio.SocketListener],
        *,
        task_status: trio.TaskStatus[None] = trio.TASK_STATUS_IGNORED,
    ) -> None:
        self.address = listeners[0].socket.getsockname()[:2]
        self.settings[b"port"] = b"%d" % self.address[1]  # CONFIG GET port: the bound one
        self.reactor = Reactor(self, self.loop)
        async with trio.open_nursery() as nursery:
            self._nursery = nursery
            nursery.start_soon(self.expirer.run)
            nursery.start_soon(self._retry_log)
            nursery.start_soon(self.reactor.run)
            for listener in listeners:
                nursery.start_soon(self._accept, listener)
            task_status.started()

    async def _accept(self, listener: trio.SocketListener) -> None:
        while True:
            try:
                stream = await listener.accept()
            except OSError as exc:  # out of file descriptors and the like: try again soon
                log.error("RESP: accept failed - %s", exc)
                await trio.sleep(0.1)
                continue
            self.reactor.add(stream)

    def close(self) -> None:
        """Clean stop: everything logged is written and fsynced (records a failed write left
        are tried once more; if the disk still refuses them they are lost, logged)."""
        try:
            self.log.close()
        except OSError as exc:
            log.error("RESP: resp.log not written at the stop, its last changes are lost - %s", exc)


def _misconf(exc: OSError) -> bytes:
    """Redis's reply to a write command after a failed AOF write (strerror of its errno)."""
    return f"-MISCONF Errors writing to the AOF file: {exc.strerror or exc}\r\n".encode()
