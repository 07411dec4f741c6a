"""Registration with nsqlookupd: one task per --lookupd-tcp-address.

Each peer task connects, IDENTIFYs, REGISTERs every topic and channel, then sends the
register/unregister notifications as topics and channels come and go, and a PING every 15 s.
When the connection breaks (a lookupd restart) it reconnects with backoff and replays the
whole state, since nsqlookupd forgets a connection's registrations when it closes.

`Peers` is that set of connections, for whoever registers a node: a lone nsqd (its broker's
topics), or a group's supervisor (the union of its workers', nsqd.group.lookupd). `Lookupd`
is the broker's side, a Hooks listener that reports through a `Registrar`: the `Peers`
themselves in a lone nsqd, the supervisor in a group's worker."""

from __future__ import annotations

import json
import math
import socket
import urllib.parse
from collections.abc import Callable, Iterable, Mapping
from typing import TYPE_CHECKING, Protocol

import trio

from protocol.lookup import (
    MAGIC_V1,
    PING,
    ResponseDecoder,
    encode_identify,
    encode_register,
    encode_unregister,
    is_error,
)

from ..log import log
from ..version import VERSION

if TYPE_CHECKING:
    from ..engine.broker import Broker
    from ..engine.channel import Channel
    from ..engine.topic import Topic
    from ..node import Node

PING_INTERVAL = 15.0
IO_TIMEOUT = 1.0  # nsqd's dial and per-command deadline
MAX_BACKOFF = 15.0

Info = dict[str, object]  # what an nsqlookupd said about itself in answer to IDENTIFY


def announce(broadcast_address: str, http_port: int, tcp_port: int) -> bytes:
    """The IDENTIFY a node sends: where clients reach it."""
    return encode_identify(broadcast_address, socket.gethostname(), http_port, tcp_port, VERSION)


def replay(topics: Mapping[str, Iterable[str]]) -> list[bytes]:
    """The REGISTERs that give a new connection a node's topics and channels (a topic with
    channels is registered by its channels' REGISTERs, as nsqd does)."""
    commands = []
    for topic, channels in topics.items():
        names = list(channels)
        if not names:
            commands.append(encode_register(topic))
        commands.extend(encode_register(topic, c) for c in names)
    return commands


def broker_state(broker: Broker) -> dict[str, list[str]]:
    """A broker's topics and their channels, as registered."""
    return {t.name: list(t.channels) for t in list(broker.topics.values())}


class Registrar(Protocol):
    """Where a node's Lookupd reports: the nsqlookupd peers, or a group's supervisor."""

    async def run(self, *, task_status: trio.TaskStatus[None] = ...) -> None: ...
    def set_addresses(self, addresses: list[str]) -> None: ...
    def register(self, topic: str, channel: str | None = None) -> None: ...
    def unregister(self, topic: str, channel: str | None = None) -> None: ...
    def infos(self) -> list[tuple[str, Info]]: ...


class LookupPeer:
    def __init__(
        self,
        address: str,
        identify: Callable[[], bytes],
        registrations: Callable[[], list[bytes]],
        max_body_size: int,
        learned: Callable[[], None],
    ) -> None:
        self.address = address
        self._identify = identify  # the IDENTIFY to send (the node's ports, once bound)
        self._registrations = registrations  # the REGISTERs that replay the node's state
        self._max_body_size = max_body_size
        self._learned = learned  # told when `info` changed
        self._send, self._receive = trio.open_memory_channel[bytes](math.inf)
        self.info: Info = {}
        self.scope = trio.CancelScope()
        self.connected = False

    def notify(self, command: bytes) -> None:
        # Disconnected, it is dropped (as nsqd drops a command its lookupPeer cannot send):
        # the replay on connecting covers it. Queued, an nsqlookupd down for a month kept
        # every topic and channel made and deleted meanwhile in memory.
        if self.connected:
            self._send.send_nowait(command)

    async def run(self) -> None:
        backoff = 1.0
        with self.scope:
            while True:
                self.connected = False
                try:
                    await self._session()
                except (OSError, trio.BrokenResourceError, trio.TooSlowError, ValueError) as exc:
                    log.error("LOOKUPD(%s): %s", self.address, exc)
                backoff = 1.0 if self.connected else min(backoff * 2, MAX_BACKOFF)
                await trio.sleep(backoff)

    async def _session(self) -> None:
        host, _, port = self.address.rpartition(":")
        with trio.fail_after(IO_TIMEOUT):
            stream = await trio.open_tcp_stream(host.strip("[]"), int(port))
        log.info("LOOKUPD(%s): peer connected", self.address)
        decoder = ResponseDecoder(self._max_body_size)
        async with stream:
            await stream.send_all(MAGIC_V1)
            await self._command(stream, decoder, self._identify())
            self.connected = True
            while True:  # drop notifications queued while disconnected: the replay covers them
                try:
                    self._receive.receive_nowait()
                except trio.WouldBlock:
                    break
            for command in self._registrations():
                await self._command(stream, decoder, command)
            next_ping = trio.current_time() + PING_INTERVAL
            while True:
                command = await self._next_command(stream, next_ping)
                if command is None:
                    command = PING
                    next_ping = trio.current_time() + PING_INTERVAL
                await self._command(stream, decoder, command)

    async def _next_command(self, stream: trio.SocketStream, deadline: float) -> bytes | None:
        """The next notification, or None when it is time to PING; meanwhile watch the
        connection so a restarted nsqlookupd is noticed at once, not at the next PING."""
        found: list[bytes] = []
        broken: list[bool] = []

        async def take(cancel: trio.CancelScope) -> None:
            found.append(await self._receive.receive())
            cancel.cancel()

        async def watch(cancel: trio.CancelScope) -> None:
            try:
                await stream.receive_some(1)  # nsqlookupd never speaks unasked
            except (trio.BrokenResourceError, OSError):
                pass
            broken.append(True)
            cancel.cancel()

        with trio.move_on_at(deadline):
            async with trio.open_nursery() as nursery:
                nursery.start_soon(take, nursery.cancel_scope)
                nursery.start_soon(watch, nursery.cancel_scope)
        if found:
            return found[0]
        if broken:
            raise trio.BrokenResourceError("nsqlookupd closed the connection")
        return None

    async def _command(
        self, stream: trio.SocketStream, decoder: ResponseDecoder, command: bytes
    ) -> bytes:
        with trio.fail_after(IO_TIMEOUT):
            await stream.send_all(command)
            while True:
                data = await stream.receive_some(65536)
                if not data:
                    raise trio.BrokenResourceError("nsqlookupd closed the connection")
                responses = decoder.feed(data)
                if responses:
                    break
        response = responses[0]
        verb = command.split(b"\n", 1)[0].decode()
        if is_error(response):
            log.error("LOOKUPD(%s): %s - %s", self.address, verb, response.decode())
        elif command.startswith(b"IDENTIFY"):
            self._remember(response)
        return response

    def _remember(self, response: bytes) -> None:
        info = parse_info(response)
        if info != self.info:
            self.info = info
            self._learned()


def parse_info(response: bytes) -> Info:
    """nsqlookupd's answer to IDENTIFY, kept only if it is a JSON object (nsqd unmarshals it
    into a struct and logs anything else): a list or a scalar here would break every later
    reader of the info (channels_for, the group's supervisor)."""
    try:
        info = json.loads(response)
    except (ValueError, RecursionError):  # RecursionError: deeply nested arrays
        return {}
    return info if isinstance(info, dict) else {}


def parse_channels(body: bytes) -> list[str]:
    """GET /channels' answer as nsqd's struct{Channels []string}: ValueError for any other
    shape, so a hostile nsqlookupd is only logged, never an exception in a broker task."""
    try:
        doc = json.loads(body)
    except RecursionError:
        raise ValueError("channels answer nested too deeply") from None
    if doc is None:
        return []
    if not isinstance(doc, dict):
        raise ValueError(f"channels answer is not an object: {bytes(body[:100])!r}")
    channels = doc.get("channels")
    if channels is None:
        return []
    if not isinstance(channels, list) or not all(isinstance(c, str) for c in channels):
        raise ValueError(f"channels is not a list of strings: {bytes(body[:100])!r}")
    return channels


class Peers:
    """The nsqlookupds a node registers with, one LookupPeer each: a Registrar. Runtime
    changes come from PUT /config/nsqlookupd_tcp_addresses."""

    def __init__(
        self,
        addresses: list[str],
        identify: Callable[[], bytes],
        registrations: Callable[[], list[bytes]],
        max_body_size: int,
        learned: Callable[[], None] = lambda: None,
    ) -> None:
        self.addresses = list(addresses)
        self.peers: dict[str, LookupPeer] = {}
        self._peer_args = (identify, registrations, max_body_size, learned)
        self._nursery: trio.Nursery | None = None

    async def run(self, *, task_status: trio.TaskStatus[None] = trio.TASK_STATUS_IGNORED) -> None:
        async with trio.open_nursery() as nursery:
            self._nursery = nursery
            self.set_addresses(self.addresses)
            task_status.started()
            await trio.sleep_forever()

    def set_addresses(self, addresses: list[str]) -> None:
        assert self._nursery is not None
        self.addresses = list(addresses)
        for address in list(self.peers):
            if address not in addresses:
                self.peers.pop(address).scope.cancel()
        for address in addresses:
            if address not in self.peers:
                peer = LookupPeer(address, *self._peer_args)
                self.peers[address] = peer
                self._nursery.start_soon(peer.run)

    def send(self, command: bytes) -> None:
        for peer in self.peers.values():
            peer.notify(command)

    def register(self, topic: str, channel: str | None = None) -> None:
        self.send(encode_register(topic, channel))

    def unregister(self, topic: str, channel: str | None = None) -> None:
        self.send(encode_unregister(topic, channel))

    def infos(self) -> list[tuple[str, Info]]:
        return [(address, peer.info) for address, peer in self.peers.items()]


def own_peers(node: Node, broker: Broker) -> Peers:
    """A lone nsqd's registrar: its own connections, replaying its broker's state."""
    opts = node.options
    return Peers(
        opts.lookupd_tcp_address,
        lambda: announce(opts.broadcast_address, node.broadcast_http_port, node.broadcast_tcp_port),
        lambda: replay(broker_state(broker)),
        opts.max_body_size,
    )


class Lookupd:
    """A Hooks listener of the broker: topics and channels are (un)registered through the
    registrar as they come and go, and a new topic first learns the cluster's channels for it
    from the nsqlookupds the registrar knows."""

    def __init__(self, node: Node, broker: Broker, registrar: Registrar) -> None:
        self.node = node
        self.broker = broker
        self.registrar = registrar

    async def run(self, *, task_status: trio.TaskStatus[None] = trio.TASK_STATUS_IGNORED) -> None:
        await self.registrar.run(task_status=task_status)

    def set_addresses(self, addresses: list[str]) -> None:
        self.registrar.set_addresses(addresses)

    async def channels_for(self, topic: str) -> list[str]:
        """Every channel the known nsqlookupds list for `topic` (errors are only logged)."""
        opts = self.node.options
        names: list[str] = []
        for address, info in self.registrar.infos():
            host, port = info.get("broadcast_address"), info.get("http_port")
            if not host or not port:
                continue
            try:
                found = await _get_channels(
                    str(host),
                    int(str(port)),
                    topic,
                    opts.http_client_connect_timeout,
                    opts.http_client_request_timeout,
                )
            except (OSError, trio.TooSlowError, trio.BrokenResourceError, ValueError) as exc:
                log.error("LOOKUPD(%s): failed to query channels of %s - %s", address, topic, exc)
                continue
            names.extend(c for c in found if c not in names)
        return names

    # -- Hooks ---------------------------------------------------------------------------------

    def topic_created(self, topic: Topic) -> None:
        if self.registrar.infos() and not self.broker.loading:
            # A new topic waits for nsqlookupd's list of its channels before fanning out, so
            # the first messages reach every channel the cluster knows (nsqd's GetTopic).
            topic.hold()
            self.broker.spawn(lambda: self._precreate_channels(topic))
        self.registrar.register(topic.name)

    async def _precreate_channels(self, topic: Topic) -> None:
        try:
            for name in await self.channels_for(topic.name):
                if not name.endswith("#ephemeral") and not topic.deleted:
                    topic.get_channel(name)
        finally:
            topic.release()

    def topic_deleted(self, topic: Topic) -> None:
        self.registrar.unregister(topic.name)

    def channel_created(self, topic: Topic, channel: Channel) -> None:
        self.registrar.register(topic.name, channel.name)

    def channel_deleted(self, topic: Topic, channel: Channel) -> None:
        self.registrar.unregister(topic.name, channel.name)

    def paused_changed(self, topic: Topic, channel: Channel | None) -> None:
        pass


async def _get_channels(
    host: str, port: int, topic: str, connect_timeout: float, request_timeout: float
) -> list[str]:
    """GET /channels?topic=... from one nsqlookupd over plain HTTP/1.1, parsed by h11 (already
    loaded by the HTTP server): no HTTP client library is imported or set up on the event loop,
    so the first new topic registers as fast as the later ones."""
    import h11

    with trio.fail_after(connect_timeout):
        stream = await trio.open_tcp_stream(host.strip("[]"), port)
    async with stream:
        with trio.fail_after(request_timeout):
            conn = h11.Connection(h11.CLIENT)
            target = "/channels?topic=" + urllib.parse.quote(topic, safe="")
            request = h11.Request(
                method="GET",
                target=target,
                headers=[
                    ("Host", f"{host}:{port}"),
                    ("Accept", "application/vnd.nsq; version=1.0"),
                    ("Connection", "close"),
                ],
            )
            await stream.send_all(conn.send(request) + conn.send(h11.EndOfMessage()))
            status, body = 0, bytearray()
            while True:
                try:
                    event = conn.next_event()
                except h11.ProtocolError as exc:  # not an HTTP answer, or cut short
                    raise ValueError(str(exc)) from None
                if event is h11.NEED_DATA:
                    conn.receive_data(await stream.receive_some(65536))
                elif isinstance(event, h11.Response):
                    status = event.status_code
                elif isinstance(event, h11.Data):
                    body += event.data
                elif isinstance(event, (h11.EndOfMessage, h11.ConnectionClosed)):
                    break
    if status != 200:
        raise ValueError(f"HTTP {status} from http://{host}:{port}{target}")
    return parse_channels(body)
