"""NSQD: the composition root. Builds the broker, the store, the front-ends and the cluster
and metrics tasks, wires them together, and owns the task tree. Nothing imports it but cli.

trio.run(NSQD.run)
└── root nursery
    ├── signal watcher (SIGINT/SIGTERM -> shutdown)
    ├── TCP listener(s) -> one Client.run per connection (clients nursery)
    ├── HTTP(S) listener(s)
    ├── RESP listener (--resp-address; a group's worker 0) -> the Redis connections, expiry
    ├── scanner (in-flight timeouts and deferred messages, every 100 ms)
    ├── storage: the syncer (disk queues, record logs), nsqd.dat writer
    ├── nsqlookupd peers, statsd pusher
    └── short-lived helpers (topic pumps, lookupd channel queries)"""

from __future__ import annotations

import signal
from collections.abc import AsyncIterator, Awaitable, Callable
from typing import Any

import trio

from .cluster.lookupd import Lookupd, Registrar, own_peers
from .config.options import Options
from .engine import scanner
from .engine.broker import Broker
from .engine.settings import Settings
from .http.routes import HTTPServer
from .log import log
from .net.listeners import open_listeners
from .net.reactor import Loop
from .node import Node
from .storage.store import Storage
from .tcp.connection import Client
from .tcp.reactor import Reactor
from .tcp.server import serve_tcp
from .tls import server_context


def engine_settings(opts: Options) -> Settings:
    return Settings(
        mem_queue_size=opts.mem_queue_size,
        node_id=opts.node_id,
        msg_timeout=opts.msg_timeout,
        max_msg_timeout=opts.max_msg_timeout,
        max_channel_consumers=opts.max_channel_consumers,
        e2e_window=opts.e2e_processing_latency_window_time,
        e2e_percentiles=list(opts.e2e_processing_latency_percentile),
        max_msg_size=opts.max_msg_size,
        max_req_timeout=opts.max_req_timeout,
    )


def _deduper(opts: Options) -> Any:
    """The /pub and /mpub de-duplication of --dedupe-window (its module only when set)."""
    if opts.dedupe_window <= 0:
        return None
    from .engine.dedupe import Deduper

    return Deduper(opts.dedupe_window)


class NSQD:
    def __init__(self, options: Options) -> None:
        self.options = options
        self.node = Node(options, server_context(options))
        self._nursery: trio.Nursery | None = None
        self._tcp_reactor: Reactor | None = None  # publishers served without a task each
        self._stopping = trio.Event()
        self.storage = Storage(options)
        self.broker = Broker(
            engine_settings(options),
            self.storage.new_overflow,
            self.spawn,
            self.storage.new_journal if options.durable_inflight else None,
            _deduper(options),
        )
        self.storage.attach(self.broker)
        self.lookupd = Lookupd(self.node, self.broker, self._registrar())
        self.resp: Any = None  # the Redis front-end (nsqd.resp.server.Frontend) when enabled
        self.broker.hooks.append(self.lookupd)

    def _registrar(self) -> Registrar:
        """A lone nsqd registers with nsqlookupd itself; a group's worker reports its topics
        and channels to the supervisor, which registers the group once (nsqd.group.lookupd)."""
        if self.options.workers > 1:
            from .group.lookupd import Uplink

            uplink = Uplink.from_environment(self.options, self.broker)
            if uplink is not None:
                return uplink
        return own_peers(self.node, self.broker)

    # what tests and tools reach through the daemon
    @property
    def topics(self) -> dict[str, Any]:
        return self.broker.topics

    @property
    def tcp_address(self) -> tuple[str, int] | None:
        return self.node.tcp_address

    @property
    def http_address(self) -> tuple[str, int] | None:
        return self.node.http_address

    def new_client(
        self, stream: trio.abc.Stream, remote: tuple[str, int], private: bool = False
    ) -> Client:
        client = Client(
            self.node, self.broker, stream, remote, self._tcp_reactor, self.broker.commit, private
        )
        self.broker.add_client(client)
        return client

    def _new_link_client(self, stream: trio.abc.Stream, remote: tuple[str, int]) -> Client:
        """A connection on a group worker's private link listener (its peers' pull links)."""
        return self.new_client(stream, remote, private=True)

    def spawn(self, fn: Callable[[], Awaitable[Any]]) -> None:
        assert self._nursery is not None
        self._nursery.start_soon(fn)

    # -- running ---------------------------------------------------------------------------

    async def run(self, *, task_status: trio.TaskStatus[NSQD] = trio.TASK_STATUS_IGNORED) -> None:
        # SIGINT/SIGTERM are caught from before the listeners open (as nsqd's signal.Notify
        # before Main): a signal sent as soon as the port accepts still ends in a clean exit.
        with trio.open_signal_receiver(signal.SIGINT, signal.SIGTERM) as signals:
            await self._run(signals, task_status)

    async def _run(self, signals: AsyncIterator[int], task_status: trio.TaskStatus[NSQD]) -> None:
        node, broker = self.node, self.broker
        self.storage.lock()
        tcp_listeners = await open_listeners(self.options.tcp_address)
        node.tcp_address = tcp_listeners[0].socket.getsockname()[:2]
        log.info("TCP: listening on %s:%d", *node.tcp_address)
        # one reactor loop serves the plain connections of every front-end (net/reactor.py)
        loop = Loop()
        http = (
            HTTPServer(node, broker, self.lookupd.set_addresses, loop, broker.commit)
            if self.options.http_address
            else None
        )
        node.http_address = await http.bind() if http is not None else None
        if http is not None:
            log.info("HTTP: listening on %s:%d", *node.http_address)
        group, link_listeners = await self._join_group(http, loop)
        resp, resp_listeners = await self._open_resp(loop, group)
        async with trio.open_nursery() as root:
            self._nursery = root
            root.start_soon(loop.run)
            self.storage.load()
            if group is not None:  # before its state reaches the supervisor (and nsqlookupd)
                group.make_missed(self.storage.persist_now)
            if resp is not None:
                resp.load()
            root.start_soon(self._watch_signals, signals)
            root.start_soon(scanner.run, broker)
            # a group's worker: its registrations and the group's nsqlookupd addresses are
            # settled with the supervisor before it listens
            await root.start(self.lookupd.run)
            if group is not None:  # before any accept: the worker's shared ports listen then
                await root.start(group.run)
            if resp is not None:  # a group's worker 0: once caught up with its peers' channels
                await root.start(resp.serve, resp_listeners)
            root.start_soon(self.storage.syncer)
            root.start_soon(self.storage.metadata_writer)
            if self.options.durable_inflight:
                root.start_soon(self.storage.journal_flusher)
            if self.options.statsd_address:  # its module only then (start time, memory)
                from .metrics import statsd

                topics = statsd.broker_topics(broker) if group is None else group.statsd_topics()
                if topics is not None:  # a group's worker 0 pushes the group's
                    root.start_soon(statsd.run, node, topics)
            if http is not None:
                await root.start(http.serve)
            async with trio.open_nursery() as clients:
                accepting = trio.CancelScope()
                reactor = self._tcp_reactor = Reactor(clients.start_soon, broker.commit, loop)
                clients.start_soon(reactor.run)
                served = [(listener, self.new_client) for listener in tcp_listeners]
                served += [(listener, self._new_link_client) for listener in link_listeners]
                clients.start_soon(serve_tcp, served, clients, accepting)
                task_status.started(self)
                await self._stopping.wait()
                log.info("TCP: closing %s", node.tcp_address)
                accepting.cancel()
                for listener in tcp_listeners + link_listeners:
                    await listener.aclose()
                if http is not None:
                    http.close()
                for client in list(broker.clients.values()):
                    client.close()
                reactor.close()
                clients.cancel_scope.deadline = trio.current_time() + 5
            root.cancel_scope.cancel()
        if resp is not None:
            resp.close()
        self.storage.close()
        auth_http = node.auth_http  # created by nsqd.auth on first use
        if auth_http is not None:
            with trio.move_on_after(1):
                await auth_http.aclose()
        log.info("exiting")

    async def _join_group(
        self, http: HTTPServer | None, loop: Loop
    ) -> tuple[Any, list[trio.SocketListener]]:
        """One worker of --workers=N: its private link's listener (served beside the TCP
        listeners, its connections `private`), its pulls and private HTTP
        (nsqd.group.worker.Worker) run beside the scanner, and its HTTP answers for the group.
        With an auth server or --tls-required the peers' links AUTH with the group's secret.
        (None, []) (nothing imported) alone."""
        if self.options.workers <= 1:
            return None, []
        from .group.identity import CURRENT
        from .group.worker import Worker

        identity, opts = CURRENT[0], self.options
        if identity.started:  # the group's start, whichever worker answers
            self.broker.start_time = identity.started
        auth = bool(opts.auth_http_address) or opts.tls_required_tcp
        if auth and identity.secret:
            self.node.trusted_secrets = frozenset({identity.secret})
        worker = Worker(self.broker, identity, http, opts.max_rdy_count, loop, auth)
        link = await worker.open_link()
        self.broker.hooks.append(worker)
        return worker, [link]

    async def _open_resp(self, loop: Loop, group: Any) -> tuple[Any, list[trio.SocketListener]]:
        """The Redis front-end, imported only when --resp-address is set (idle memory) and
        this process serves it: alone, or a group's worker 0. A Redis key has one owner, so
        one worker holds the keyspace (its resp.log in worker-0/) and listens on the port, at
        once and alone (no SO_REUSEPORT); the others open nothing and import none of it."""
        if not self.options.resp_address or not self._serves_resp():
            return None, []
        from .resp.server import Frontend

        listeners = await open_listeners(self.options.resp_address, shared=False)
        peers = None if group is None else group.bridge_peers()  # a group's other workers
        self.resp = Frontend(self.options, self.broker, self.storage.new_resp_log(), loop, peers)
        self.node.resp_list_lengths = self.resp.list_lengths  # for /metrics
        address = listeners[0].socket.getsockname()[:2]
        log.info("RESP: listening on %s:%d", *address)
        return self.resp, listeners

    def _serves_resp(self) -> bool:
        if self.options.workers <= 1:
            return True
        from .group.identity import CURRENT

        return CURRENT[0].index == 0

    def stop(self) -> None:
        self._stopping.set()

    async def _watch_signals(self, signals: AsyncIterator[int]) -> None:
        async for signum in signals:
            log.info("received signal: %s", signal.Signals(signum).name)
            self.stop()
