"""NSQD: the registry of topics and clients, and the root of the task tree.

trio.run(NSQD.run)
└── root nursery
    ├── signal watcher (SIGINT/SIGTERM -> shutdown)
    ├── TCP listener(s) -> one Client.run per connection (clients nursery)
    ├── scanner (in-flight timeouts and deferred messages, every 100 ms)
    ├── storage: disk-queue syncer, nsqd.dat writer
    └── short-lived helpers (topic pumps)"""

from __future__ import annotations

import signal
import time
from collections.abc import Awaitable, Callable
from typing import Any

import trio

from protocol import Limits

from . import statsd
from .backlog import Overflow
from .channel import Channel
from .client import Client
from .http_api import HTTPServer
from .log import log
from .lookupd import Lookupd
from .options import Options
from .server import open_listeners, serve_tcp
from .storage import Storage
from .tls import server_context
from .topic import Topic

VERSION = "1.3.0"
SCAN_INTERVAL = 0.1


def limits_from(opts: Options) -> Limits:
    def ms(seconds: float) -> int:
        return round(seconds * 1000)

    return Limits(
        max_msg_size=opts.max_msg_size,
        max_body_size=opts.max_body_size,
        max_rdy_count=opts.max_rdy_count,
        max_req_timeout_ms=ms(opts.max_req_timeout),
        msg_timeout_ms=ms(opts.msg_timeout),
        max_msg_timeout_ms=ms(opts.max_msg_timeout),
        max_heartbeat_interval_ms=ms(opts.max_heartbeat_interval),
        max_output_buffer_size=opts.max_output_buffer_size,
        output_buffer_timeout_ms=ms(opts.output_buffer_timeout),
        min_output_buffer_timeout_ms=ms(opts.min_output_buffer_timeout),
        max_output_buffer_timeout_ms=ms(opts.max_output_buffer_timeout),
    )


class NSQD:
    def __init__(self, options: Options) -> None:
        self.options = options
        self.limits = limits_from(options)
        self.topics: dict[str, Topic] = {}
        self.clients: dict[int, Client] = {}
        self._client_seq = 0
        self.start_time = int(time.time())
        self.tcp_address: tuple[str, int] | None = None
        self._nursery: trio.Nursery | None = None
        self._stopping = trio.Event()
        self.storage = Storage(self)
        self.tls_context = server_context(options)
        self.lookupd = Lookupd(self)

    # -- registry --------------------------------------------------------------------------

    def get_topic(self, name: str) -> Topic:
        topic = self.topics.get(name)
        if topic is None:
            topic = Topic(self, name)
            self.topics[name] = topic
            log.info("TOPIC(%s): created", name)
            if self.lookupd.peers and not self.storage.loading:
                topic.awaiting_lookup = True
                self.spawn(lambda: self._precreate_channels(topic))
            self.lookupd.register(name)
            if not topic.ephemeral:
                self.storage.metadata_changed()
        return topic

    async def _precreate_channels(self, topic: Topic) -> None:
        try:
            for name in await self.lookupd.channels_for(topic.name):
                if not name.endswith("#ephemeral") and not topic.deleted:
                    topic.get_channel(name)
        finally:
            topic.lookup_done()

    def delete_topic(self, name: str) -> None:
        topic = self.topics.pop(name, None)
        if topic is not None:
            log.info("TOPIC(%s): deleting", name)
            topic.delete()
            self.lookupd.unregister(name)
            if not topic.ephemeral:
                self.storage.metadata_changed()

    def new_overflow(self, queue_name: str, ephemeral: bool) -> Overflow:
        return self.storage.new_overflow(queue_name, ephemeral)

    def notify_channel_created(self, topic: Topic, channel: Channel) -> None:
        log.info("TOPIC(%s): new channel(%s)", topic.name, channel.name)
        self.lookupd.register(topic.name, channel.name)
        if not channel.ephemeral:
            self.storage.metadata_changed()

    def notify_channel_deleted(self, topic: Topic, channel: Channel) -> None:
        log.info("CHANNEL(%s): deleting", channel.name)
        self.lookupd.unregister(topic.name, channel.name)
        if not channel.ephemeral:
            self.storage.metadata_changed()

    def new_client(self, stream: trio.abc.Stream, remote: tuple[str, int]) -> Client:
        self._client_seq += 1
        client = Client(self, self._client_seq, stream, remote)
        self.clients[client.id] = client
        return client

    def remove_client(self, client: Client) -> None:
        self.clients.pop(client.id, None)

    @property
    def broadcast_tcp_port(self) -> int:
        return self.options.broadcast_tcp_port or (self.tcp_address[1] if self.tcp_address else 0)

    @property
    def broadcast_http_port(self) -> int:
        http = getattr(self, "http_address", None)
        return self.options.broadcast_http_port or (http[1] if http else 0)

    def spawn(self, fn: Callable[[], Awaitable[Any]]) -> None:
        assert self._nursery is not None
        self._nursery.start_soon(fn)

    # -- running ---------------------------------------------------------------------------

    async def run(self, *, task_status: trio.TaskStatus[NSQD] = trio.TASK_STATUS_IGNORED) -> None:
        self.storage.lock()
        tcp_listeners = await open_listeners(self.options.tcp_address)
        self.tcp_address = tcp_listeners[0].socket.getsockname()[:2]
        log.info("TCP: listening on %s:%d", *self.tcp_address)
        http = HTTPServer(self) if self.options.http_address else None
        self.http_address = await http.bind() if http is not None else None
        if http is not None:
            log.info("HTTP: listening on %s:%d", *self.http_address)
        async with trio.open_nursery() as root:
            self._nursery = root
            self.storage.load()
            root.start_soon(self._watch_signals)
            root.start_soon(self._scanner)
            root.start_soon(self.storage.syncer)
            root.start_soon(self.storage.metadata_writer)
            root.start_soon(statsd.run, self)
            await root.start(self.lookupd.run)
            if http is not None:
                await root.start(http.serve)
            async with trio.open_nursery() as clients:
                accepting = trio.CancelScope()
                clients.start_soon(serve_tcp, self, tcp_listeners, clients, accepting)
                task_status.started(self)
                await self._stopping.wait()
                log.info("TCP: closing %s", self.tcp_address)
                accepting.cancel()
                for listener in tcp_listeners:
                    await listener.aclose()
                if http is not None:
                    http.close()
                for client in list(self.clients.values()):
                    client.close()
                clients.cancel_scope.deadline = trio.current_time() + 5
            root.cancel_scope.cancel()
        self.storage.close()
        auth_http = getattr(self, "_auth_http", None)  # created by nsqd.auth on first use
        if auth_http is not None:
            with trio.move_on_after(1):
                await auth_http.aclose()
        log.info("exiting")

    def stop(self) -> None:
        self._stopping.set()

    async def _watch_signals(self) -> None:
        with trio.open_signal_receiver(signal.SIGINT, signal.SIGTERM) as signals:
            async for signum in signals:
                log.info("received signal: %s", signal.Signals(signum).name)
                self.stop()

    async def _scanner(self) -> None:
        # nsqd samples channels every 100 ms; one sweep of every channel costs little here.
        while True:
            await trio.sleep(SCAN_INTERVAL)
            now = trio.current_time()
            for topic in list(self.topics.values()):
                for channel in list(topic.channels.values()):
                    channel.scan(now)
