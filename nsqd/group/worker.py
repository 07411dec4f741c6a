"""A worker of a group (--workers): what it adds to a whole nsqd.

- a private link: a V2 listener on 127.0.0.1 (any port), served as the public TCP port is,
  whose address it writes to `worker-K.link` in the group's --data-path for its peers;
- its pulls: for each channel that has consumers here, one Pull per peer (pull.py), woken
  when a consumer's credit changes (the channel's `starved` port), stopped a while after the
  channel's last consumer here left."""

from __future__ import annotations

import os
from typing import TYPE_CHECKING

import trio

from ..log import log
from .identity import Identity
from .pull import Pull, is_link

if TYPE_CHECKING:
    from ..engine.broker import Broker
    from ..engine.channel import Channel

SCAN = 0.1  # seconds between looks for channels that gained or lost consumers here
LINGER = 2.0  # seconds a pull outlives the channel's last consumer here (a reconnect keeps it)


class Worker:
    def __init__(self, broker: Broker, identity: Identity) -> None:
        self.broker = broker
        self.identity = identity
        self._pulls: dict[tuple[str, str], list[Pull]] = {}
        self._idle_since: dict[tuple[str, str], float] = {}
        self._addresses: dict[int, tuple[str, int]] = {}

    async def open_link(self) -> trio.SocketListener:
        """The private listener, its address published for the peers (written whole, then
        renamed: a peer never reads half of it)."""
        (listener,) = await trio.open_tcp_listeners(0, host="127.0.0.1")
        host, port = listener.socket.getsockname()[:2]
        _write_whole(self.identity.link_file(self.identity.index), f"{host}:{port}\n")
        me = self.identity
        log.info("group: worker %d/%d, link on %s:%d", me.index, me.count, host, port)
        return listener

    def _address(self, peer: int) -> tuple[str, int] | None:
        """Where `peer`'s link listens (read again each time: a restarted peer moves)."""
        try:
            with open(self.identity.link_file(peer)) as f:
                host, _, port = f.read().strip().rpartition(":")
            return host, int(port)
        except (OSError, ValueError):
            return None

    def _starved(self, channel: Channel) -> None:
        for pull in self._pulls.get((channel.topic_name, channel.name), ()):
            pull.wake()

    async def run(self) -> None:
        async with trio.open_nursery() as nursery:
            while True:
                self._scan(nursery, trio.current_time())
                await trio.sleep(SCAN)

    def _scan(self, nursery: trio.Nursery, now: float) -> None:
        wanted = set()
        for topic in list(self.broker.topics.values()):
            for channel in list(topic.channels.values()):
                if any(not is_link(c) for c in channel.consumers.values()):
                    key = (topic.name, channel.name)
                    wanted.add(key)
                    channel.starved = self._starved  # (a channel made again is a new object)
                    if key not in self._pulls:
                        self._start(nursery, key)
        for key in list(self._pulls):
            if key in wanted:
                self._idle_since.pop(key, None)
            elif now - self._idle_since.setdefault(key, now) >= LINGER:
                for pull in self._pulls.pop(key):
                    pull.scope.cancel()
                del self._idle_since[key]

    def _start(self, nursery: trio.Nursery, key: tuple[str, str]) -> None:
        ident = self.identity
        pulls = []
        for peer in ident.peers:
            pull = Pull(
                self.broker,
                key[0],
                key[1],
                lambda peer=peer: self._address(peer),
                len(ident.peers),
                f"worker-{ident.index}",
            )
            pulls.append(pull)
            nursery.start_soon(pull.run)
        self._pulls[key] = pulls


def _write_whole(path: str, text: str) -> None:
    with open(path + ".tmp", "w") as f:
        f.write(text)
    os.replace(path + ".tmp", path)
