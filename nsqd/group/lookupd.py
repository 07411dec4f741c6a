"""nsqlookupd registration for a group: once, by the supervisor, as one nsqd.

The supervisor holds the group's connections to the nsqlookupds (nsqd.cluster.lookupd.Peers):
one IDENTIFY with the group's one address, so nsqlookupd lists one producer. Each worker
reports its topics and channels to the supervisor over a socket pair made at the worker's
start (its end's descriptor in identity.LOOKUPD_FD_ENV): first its whole state, then each
register and unregister as they come. The group registers the union (`Registry`): a topic or
channel is registered when the first worker has it and unregistered when the last one lost it.

A worker that dies keeps its registrations: its partition is still on disk and its next start
replaces them with the state it loaded. The supervisor tells every worker the nsqlookupds it
knows and what each said about itself (a new topic asks them for its channels, as in nsqd),
and a PUT /config/nsqlookupd_tcp_addresses in any worker changes the group's set.

Messages are JSON arrays, one a line. Worker to supervisor: ["state", {topic: [channel...]}],
["register", topic, channel-or-null], ["unregister", topic, channel-or-null],
["addresses", [address...]]. Supervisor to worker: ["lookupd", [[address, info]...], set],
`set` true when the group's address set changed (a PUT in some worker): a worker that no PUT
has reached since its start takes the addresses then (it was started again while the PUT's
fan-out went round, and may have taken the old set at its start, before the supervisor read
the PUT's report); one a PUT reached keeps that PUT's value, which the supervisor's word can
only repeat or precede (a null stays a null)."""

from __future__ import annotations

import json
import math
import os
import socket
from collections import Counter
from collections.abc import Callable
from typing import TYPE_CHECKING, Any

import trio

from protocol.lookup import encode_register, encode_unregister

from ..cluster.lookupd import Info, Peers, announce, broker_state, replay
from ..log import log
from .identity import LOOKUPD_FD_ENV, LOOKUPD_HELLO_ENV

if TYPE_CHECKING:
    from ..config.options import Options
    from ..engine.broker import Broker

State = dict[str, set[str]]  # topic -> its channels
HELLO_WAIT = 2.0  # seconds a starting worker waits for the supervisor's first word


class Registry:
    """Each worker's topics and channels; what the group registers is their union. Every
    change answers with the commands that bring nsqlookupd from the old union to the new."""

    def __init__(self) -> None:
        self._workers: dict[int, State] = {}
        self._topics: Counter[str] = Counter()  # how many workers have each topic
        self._channels: Counter[tuple[str, str]] = Counter()

    def union(self) -> dict[str, list[str]]:
        found: dict[str, list[str]] = {topic: [] for topic in self._topics}
        for topic, channel in self._channels:
            found[topic].append(channel)
        return found

    def register(self, worker: int, topic: str, channel: str | None = None) -> list[bytes]:
        state = self._workers.setdefault(worker, {})
        commands = []
        if topic not in state:  # a channel's topic is the worker's too (nsqd registers both)
            state[topic] = set()
            self._topics[topic] += 1
            if self._topics[topic] == 1:
                commands.append(encode_register(topic))
        if channel is not None and channel not in state[topic]:
            state[topic].add(channel)
            self._channels[topic, channel] += 1
            if self._channels[topic, channel] == 1:
                commands.append(encode_register(topic, channel))
        return commands

    def unregister(self, worker: int, topic: str, channel: str | None = None) -> list[bytes]:
        state = self._workers.get(worker, {})
        if topic not in state:
            return []
        if channel is not None:
            if channel not in state[topic]:
                return []
            state[topic].discard(channel)
            return [encode_unregister(topic, channel)] if self._drop(topic, channel) else []
        gone = [c for c in sorted(state.pop(topic)) if self._drop(topic, c)]
        self._topics[topic] -= 1
        if self._topics[topic] == 0:
            del self._topics[topic]
            return [encode_unregister(topic)]  # nsqlookupd drops the topic's channels with it
        return [encode_unregister(topic, c) for c in gone]

    def replace(self, worker: int, new: State) -> list[bytes]:
        """A worker's whole state (its start): only the difference is registered, so a
        restarted worker's topics stay registered throughout."""
        old = {topic: set(channels) for topic, channels in self._workers.get(worker, {}).items()}
        commands = []
        for topic, channels in new.items():
            commands += self.register(worker, topic)
            for channel in sorted(channels):
                commands += self.register(worker, topic, channel)
        for topic, channels in list(old.items()):
            if topic not in new:
                commands += self.unregister(worker, topic)
                continue
            for channel in sorted(channels - new[topic]):
                commands += self.unregister(worker, topic, channel)
        return commands

    def _drop(self, topic: str, channel: str) -> bool:
        """One worker fewer has the channel; True when none has it now."""
        self._channels[topic, channel] -= 1
        if self._channels[topic, channel]:
            return False
        del self._channels[topic, channel]
        return True


def _port(address: str) -> int:
    return int(address.rpartition(":")[2]) if address else 0


class GroupLookupd:
    """The supervisor's side: the nsqlookupd connections, fed by every worker's reports."""

    def __init__(self, opts: Options) -> None:
        self.registry = Registry()
        http_port = opts.broadcast_http_port or _port(opts.http_address)
        tcp_port = opts.broadcast_tcp_port or _port(opts.tcp_address)
        self.peers = Peers(
            opts.lookupd_tcp_address,
            lambda: announce(opts.broadcast_address, http_port, tcp_port),
            lambda: replay(self.registry.union()),
            opts.max_body_size,
            self._tell_workers,
        )
        self._workers: dict[int, trio.MemorySendChannel[bytes]] = {}  # to each worker's socket

    async def run(self, *, task_status: trio.TaskStatus[None] = trio.TASK_STATUS_IGNORED) -> None:
        await self.peers.run(task_status=task_status)

    async def serve(
        self, index: int, sock: socket.socket, reported: Callable[[], None] = lambda: None
    ) -> None:
        """One start of worker `index`: its reports until it exits (`reported` told of the
        first: the worker has loaded its data and is to serve)."""
        stream = trio.SocketStream(trio.socket.from_stdlib_socket(sock))
        send, receive = trio.open_memory_channel[bytes](math.inf)
        self._workers[index] = send
        send.send_nowait(self._lookupd_message())
        async with trio.open_nursery() as nursery:
            nursery.start_soon(_write, stream, receive)
            reader = _Reader(stream)
            while (message := await reader.message()) is not None:
                reported()
                try:
                    self._take(index, message)
                except (IndexError, KeyError, TypeError, AttributeError, ValueError) as exc:
                    log.error("group: worker %d sent a bad lookupd report - %r", index, exc)
            nursery.cancel_scope.cancel()
        if self._workers.get(index) is send:
            del self._workers[index]
        await stream.aclose()

    def _take(self, index: int, message: list[Any]) -> None:
        kind, registry = message[0], self.registry
        if kind == "state":
            commands = registry.replace(index, {t: set(cs) for t, cs in message[1].items()})
        elif kind == "register":
            commands = registry.register(index, message[1], message[2])
        elif kind == "unregister":
            commands = registry.unregister(index, message[1], message[2])
        elif kind == "addresses":
            if message[1] != self.peers.addresses:
                self.peers.set_addresses(message[1])
                self._tell_workers(changed=True)
            return
        else:
            log.error("group: worker %d sent an unknown lookupd report %r", index, kind)
            return
        for command in commands:
            self.peers.send(command)

    def _lookupd_message(self, changed: bool = False) -> bytes:
        return _line(["lookupd", self.peers.infos(), changed])

    def _tell_workers(self, changed: bool = False) -> None:
        message = self._lookupd_message(changed)
        for send in self._workers.values():
            send.send_nowait(message)


class Uplink:
    """A worker's side (its Lookupd's Registrar): what its broker registers goes to the
    supervisor; what the supervisor says of the nsqlookupds is kept for a new topic's channel
    query, and its first word's addresses become this worker's nsqlookupd_tcp_addresses (a
    worker started again learns a PUT /config made while it was down)."""

    def __init__(self, fd: int, opts: Options, broker: Broker, hello: bool = False) -> None:
        self._fd, self._opts, self._broker = fd, opts, broker
        self._hello = hello  # started again: the supervisor's first word is awaited
        self._send, self._receive = trio.open_memory_channel[bytes](math.inf)
        self._open = False  # what comes before the state is in it
        self._put = False  # a PUT /config/nsqlookupd_tcp_addresses reached this worker
        self._infos: list[tuple[str, Info]] = []

    @classmethod
    def from_environment(cls, opts: Options, broker: Broker) -> Uplink | None:
        text = os.environ.get(LOOKUPD_FD_ENV)
        hello = os.environ.get(LOOKUPD_HELLO_ENV) == "1"
        return cls(int(text), opts, broker, hello) if text else None

    async def run(self, *, task_status: trio.TaskStatus[None] = trio.TASK_STATUS_IGNORED) -> None:
        """Started before the worker listens: its state goes first; a worker started again
        takes the supervisor's first word (the nsqlookupd addresses in effect: a PUT made
        while it was down) before any client can PUT here (HELLO_WAIT at most). At the
        group's start the addresses are the command line's, this worker's own."""
        stream = trio.SocketStream(trio.socket.from_stdlib_socket(socket.socket(fileno=self._fd)))
        self._send.send_nowait(_line(["state", broker_state(self._broker)]))
        self._open = True
        reader = _Reader(stream)
        async with trio.open_nursery() as nursery:
            nursery.start_soon(_write, stream, self._receive)
            if self._hello:
                with trio.move_on_after(HELLO_WAIT):
                    first = await reader.message()
                    if first is not None:
                        self._take(first, hello=True)
            task_status.started()
            while (message := await reader.message()) is not None:
                self._take(message, hello=False)
            # the supervisor is gone: this worker is being stopped (PR_SET_PDEATHSIG)
            nursery.cancel_scope.cancel()

    def _take(self, message: list[Any], hello: bool) -> None:
        if message[0] != "lookupd":
            return
        self._infos = [(address, info) for address, info in message[1]]
        addresses = [address for address, _ in self._infos]
        changed = len(message) > 2 and message[2] is True and not self._put
        # a PUT's fan-out sets each worker's value itself (and keeps a null, as nsqd does:
        # hence the comparison); a worker started while it went round takes it from here
        if (hello or changed) and list(self._opts.lookupd_tcp_address or ()) != addresses:
            self._opts.values["lookupd_tcp_address"] = addresses

    def set_addresses(self, addresses: list[str]) -> None:
        self._put = True
        self._report(["addresses", addresses])

    def register(self, topic: str, channel: str | None = None) -> None:
        self._report(["register", topic, channel])

    def unregister(self, topic: str, channel: str | None = None) -> None:
        self._report(["unregister", topic, channel])

    def infos(self) -> list[tuple[str, Info]]:
        return self._infos

    def _report(self, message: list[Any]) -> None:
        if self._open:
            self._send.send_nowait(_line(message))


def _line(message: list[Any]) -> bytes:
    return json.dumps(message, separators=(",", ":")).encode() + b"\n"


async def _write(stream: trio.SocketStream, receive: trio.MemoryReceiveChannel[bytes]) -> None:
    try:
        async for line in receive:
            await stream.send_all(line)
    except (trio.BrokenResourceError, trio.ClosedResourceError, OSError):
        pass  # the other side is gone; the reader sees it


class _Reader:
    """The JSON arrays the other side sends, one at a time; None once it closed. A receive
    cancelled in a wait loses nothing (trio gives the bytes to no one)."""

    def __init__(self, stream: trio.SocketStream) -> None:
        self._stream = stream
        self._pending = b""
        self._ready: list[list[Any]] = []

    async def message(self) -> list[Any] | None:
        while not self._ready:
            try:
                data = await self._stream.receive_some(65536)
            except (trio.BrokenResourceError, OSError):
                return None
            if not data:
                return None
            *lines, self._pending = (self._pending + data).split(b"\n")
            for line in lines:
                try:
                    message = json.loads(line)
                except ValueError:
                    log.error("group: a lookupd report that is not JSON: %r", line[:100])
                    continue
                if isinstance(message, list) and message:
                    self._ready.append(message)
        return self._ready.pop(0)
