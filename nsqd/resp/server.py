"""The Redis front-end's listener and connections (--resp-address).

One task per connection. Pipelining: every complete command of a read is run, in order, and
their replies go out in one send, after the log write that makes them durable (persist.py). A
blocking command that finds nothing parks the connection on its waiter (blocking.py) while a
second task watches the socket, so a client that goes away is removed from the wait queues at
once; what it pipelined meanwhile is kept and run after.

`Frontend` owns the keyspace, the blocking engine, the bridge, the log and the expiry task,
and is what the daemon starts and stops."""

from __future__ import annotations

import math
import time

import trio

from ..config.options import Options
from ..engine.broker import Broker
from ..log import log
from ..net.transport import SocketTransport
from .blocking import Blocking, Waiter
from .bridge import Bridge
from .commands import Block, ReplyError, Session, dispatch
from .expiry import Expirer, publisher
from .keyspace import Keyspace
from .persist import RespLog
from .protocol import Parser, ProtocolError

READ_SIZE = 65536
OUT_FLUSH = 256 * 1024  # a long pipeline's replies go out in pieces this big
QUERY_MAX = 1 << 30  # Redis's client-query-buffer-limit: a client past it is closed


class Frontend:
    def __init__(self, options: Options, broker: Broker, data_path: str) -> None:
        self.options = options
        self.broker = broker
        self.password = options.resp_password.encode()
        self.max_bulk = options.resp_max_bulk
        self.ks = Keyspace()
        self.blocking = Blocking(self.ks)
        self.bridge = Bridge(broker, options.max_msg_size)
        self.log = RespLog(data_path, options.sync_every, options.sync_timeout)
        self.expirer = Expirer(self.ks, self.log.flush)
        if options.resp_expiry_topic:
            self.ks.on_expired = publisher(broker, options.resp_expiry_topic)
        self.connections: dict[int, Connection] = {}
        self.started = time.time()
        self.address: tuple[str, int] | None = None

    def load(self) -> None:
        n = self.log.load(self.ks)
        log.info("RESP: %d keys restored (%d log records)", len(self.ks.data), n)

    # -- what commands call ------------------------------------------------------------------

    def block(self, waiter: Waiter, timeout: float, on_timeout: bytes) -> Block:
        return Block(waiter, timeout, on_timeout)

    def remote_of(self, s: Session) -> str:
        conn = self.connections.get(s.id)
        return conn.remote if conn is not None else ""

    def info(self) -> str:
        ks = self.ks
        blocked = sum(1 for c in self.connections.values() if c.blocked)
        port = self.address[1] if self.address else 0
        sections = {
            "Server": {
                "redis_version": "7.0.0",
                "redis_mode": "standalone",
                "server_name": "trio-nsqd",
                "tcp_port": port,
                "uptime_in_seconds": int(time.time() - self.started),
            },
            "Clients": {"connected_clients": len(self.connections), "blocked_clients": blocked},
            "Persistence": {"loading": 0, "aof_enabled": 1},
            "Keyspace": (
                {"db0": f"keys={len(ks.data)},expires={len(ks.expires)},avg_ttl=0"}
                if ks.data
                else {}
            ),
        }
        lines = []
        for name, fields in sections.items():
            lines.append(f"# {name}")
            lines += [f"{k}:{v}" for k, v in fields.items()]
            lines.append("")
        return "\r\n".join(lines)

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
        async with trio.open_nursery() as nursery:
            nursery.start_soon(self.log.syncer)
            nursery.start_soon(self.expirer.run)
            await nursery.start(trio.serve_listeners, self._handle, listeners)
            task_status.started()

    async def _handle(self, stream: trio.SocketStream) -> None:
        try:
            peer = stream.socket.getpeername()
            remote = f"{peer[0]}:{peer[1]}"
        except OSError:
            remote = ":0"
        conn = Connection(self, stream, remote)
        self.connections[conn.session.id] = conn
        try:
            await conn.run()
        except Exception:  # one client must never take the daemon down
            log.exception("RESP: [%s] unexpected error", remote)
        finally:
            self.connections.pop(conn.session.id, None)
            self.ks.unwatch(conn.session)
            conn.parser.release()
            with trio.CancelScope(shield=True):
                with trio.move_on_after(1):
                    await stream.aclose()

    def close(self) -> None:
        """Clean stop: everything logged is written and fsynced."""
        self.log.close()


class Connection:
    def __init__(self, fe: Frontend, stream: trio.SocketStream, remote: str) -> None:
        self.fe = fe
        self.stream = stream
        self.io = SocketTransport(stream)  # straight on the fd: fewer scheduler hops per command
        self.remote = remote
        self.parser = Parser(fe.max_bulk)
        self.parser.strict_auth = bool(fe.password)
        self.session = Session(fe, fe.broker.next_client_id(), self.parser)
        self.blocked = False

    async def run(self) -> None:
        try:
            while True:
                data = await self.io.receive(READ_SIZE)
                if not data or self._overflow(data):
                    return
                if not await self._serve():
                    return
        except (trio.BrokenResourceError, trio.ClosedResourceError):
            return

    def _overflow(self, data: bytes) -> bool:
        """Feed `data`; True when the client's unparsed input passed QUERY_MAX."""
        self.parser.feed(data)
        if self.parser.buffered() > QUERY_MAX:
            log.warning("RESP: [%s] closing: query buffer over %d bytes", self.remote, QUERY_MAX)
            return True
        return False

    async def _send(self, out: list[bytes]) -> None:
        self.fe.log.flush()  # durable before it is acknowledged
        if out:
            data = b"".join(out)
            out.clear()
            await self.io.send(data, math.inf)

    async def _serve(self) -> bool:
        """Run every complete command buffered; False when the connection is to close."""
        parser, s, fe = self.parser, self.session, self.fe
        out: list[bytes] = []
        size = 0
        while True:
            try:
                argv = parser.next()
            except ProtocolError as exc:
                out.append(exc.reply)
                await self._send(out)
                return False
            if argv is None:
                break
            reply = dispatch(s, argv)
            if fe.ks.ready:
                fe.blocking.serve_ready()
            if type(reply) is Block:
                await self._send(out)
                size = 0
                answer = await self._block(reply)
                if answer is None:
                    return False
                reply = answer
            out.append(reply)  # type: ignore[arg-type]
            size += len(reply)  # type: ignore[arg-type]
            if s.close_after:
                await self._send(out)
                return False
            if size >= OUT_FLUSH:
                await self._send(out)
                size = 0
        await self._send(out)
        return True

    async def _block(self, blk: Block) -> bytes | None:
        """Wait for the waiter, its timeout or the client's going away (None)."""
        fe, waiter = self.fe, blk.waiter
        fe.blocking.add(waiter)
        closed = False
        try:
            fe.bridge.watch(waiter, self.remote)
        except ReplyError as exc:
            fe.blocking.remove(waiter)
            fe.bridge.unwatch(waiter)
            return exc.reply
        self.blocked = True
        try:
            if not waiter.done:
                async with trio.open_nursery() as nursery:
                    if blk.timeout > 0:
                        nursery.cancel_scope.deadline = trio.current_time() + blk.timeout

                    async def served() -> None:
                        await waiter.event.wait()
                        nursery.cancel_scope.cancel()

                    async def watch_socket() -> None:
                        nonlocal closed
                        while True:
                            data = await self.io.receive(READ_SIZE)
                            if not data or self._overflow(data):
                                closed = True
                                nursery.cancel_scope.cancel()
                                return
                            # fed, not run: what it pipelined behind the block runs after

                    nursery.start_soon(served)
                    nursery.start_soon(watch_socket)
        except (trio.BrokenResourceError, trio.ClosedResourceError):
            closed = True
        finally:
            self.blocked = False
            fe.blocking.remove(waiter)
            fe.bridge.unwatch(waiter)
        if fe.ks.ready:
            fe.blocking.serve_ready()  # a move served from a channel pushed onto a list
        if closed:
            return None
        return waiter.reply if waiter.done else blk.on_timeout
