"""A worker of a group (--workers): what it adds to a whole nsqd.

- a private link: a V2 listener on 127.0.0.1 (any port), served as the public TCP port is,
  and an HTTP one answering for this worker alone; their addresses are the two lines of
  `worker-K.link` in the group's --data-path, for its peers;
- group-wide HTTP answers (fanout.py, messages.py, attributes.py) in the API's route table,
  and at start what the peers made while it was starting or down (catchup.py) and what the
  group deleted, emptied, paused or unpaused meanwhile (missed.py), and with
  --dedupe-window the keyed publishes made by their topic's owner (keys.py);
- its pulls: for each channel that has consumers here, one Pull per peer (pull.py), started
  or woken when a consumer's credit changes (the channel's `starved` port), stopped when the
  channel's consumers here left;
- as a Hooks listener of the broker: a durable channel made here is made in every peer, and a
  topic made here at run time takes the group's pause (new_topics.py)."""

from __future__ import annotations

import os
import time
from collections.abc import Callable
from functools import partial
from typing import TYPE_CHECKING, Any

import trio

from protocol.v2 import encoders

from ..http import server as http_server
from ..http.v1 import Request, query_string
from ..log import log
from ..net import listeners
from . import missed, partition
from .asking import ASK_TIMEOUT
from .attributes import GroupAttributes
from .bridge import PeerLists
from .catchup import CatchUp
from .fanout import ASKED, FanOut
from .identity import Identity, link_address
from .kept import ASK_ERRORS, PEER_HEADER, KeptConnections
from .keys import KeyOwners
from .links import Links
from .messages import GroupMessages
from .new_topics import NewTopics
from .pause_clock import header
from .pull import Pull, is_link

if TYPE_CHECKING:
    from ..engine.broker import Broker
    from ..engine.channel import Channel
    from ..engine.ports import Consumer
    from ..engine.topic import Topic
    from ..http.routes import Handler, HTTPServer
    from ..metrics.statsd import Topics
    from ..net.reactor import Loop

PEERS_WAIT = 10.0  # seconds a starting worker waits for its peers' links before it listens
SCAN = 0.1  # seconds between looks for channels that gained or lost consumers here
LINGER = 2.0  # seconds a pull outlives the channel's last consumer here (a reconnect keeps it)
GREETED = 1.0  # seconds the pulls a SUB started keep before its consumer is counted


class Worker:
    def __init__(
        self,
        broker: Broker,
        identity: Identity,
        http: HTTPServer | None,
        max_rdy: int,
        loop: Loop,
        auth: bool = False,
    ) -> None:
        self.broker = broker
        # with --auth-http-address the peers ask their links to AUTH, with the group's secret
        self._auth = encoders.auth(identity.secret) if auth else b""
        self._links = Links(loop, broker.commit)  # the pulls' sessions, served in the loop
        self.identity = identity
        self._missed_file = missed.file_of(identity.group_path, identity.index)
        self._max_rdy = max_rdy
        self._pulls: dict[tuple[str, str], list[Pull]] = {}
        self._idle_since: dict[tuple[str, str], float] = {}
        self._http = http
        self._http_listener: trio.SocketListener | None = None
        self._nursery: trio.Nursery | None = None  # run()'s, for pulls and peer requests
        self._connections = KeptConnections()  # every ask of a peer's private HTTP
        self._fanout: FanOut | None = None
        self._catch_up: CatchUp | None = None  # with HTTP, where the peers can be asked
        self._new_topics: NewTopics | None = None  # likewise
        if http is not None:
            fanout = self._fanout = FanOut(broker, http.api, self._peer_http, self._connections)
            fanout.missed = missed.Missed(identity, fanout.ask, ASK_TIMEOUT)
            fanout.install()
            GroupAttributes(fanout).install(http.api.routes)
            catch_up = self._catch_up = CatchUp(fanout, http.node)
            catch_up.install(http.api)
            self._new_topics = NewTopics(fanout)
            self._new_topics.install(http.api)
            GroupMessages(fanout, http.api.messages.max_body_size).install(http.api.routes)
            if broker.deduper is not None:  # --dedupe-window: a topic's keys have one owner
                peer_http = partial(self._address, line=1)
                http.api.relay = KeyOwners(http.api, identity, peer_http, self._connections)

    def bridge_peers(self) -> PeerLists | None:
        """What worker 0's Redis bridge asks of its peers (group/bridge.py); None without
        HTTP, where no peer can be asked (a pop then sees this partition alone)."""
        return None if self._fanout is None else PeerLists(self._fanout)

    def statsd_topics(self) -> Topics | None:
        """What this worker pushes to statsd: the group's figures from worker 0 alone (a gauge
        pushed by every worker would be the last one's); without HTTP, where no peer can be
        asked, each worker its own."""
        if self._fanout is None:
            from ..metrics.statsd import broker_topics

            return broker_topics(self.broker)
        return self._fanout.topics if self.identity.index == 0 else None

    async def open_link(self) -> trio.SocketListener:
        """The private listeners (V2, and HTTP when the daemon serves HTTP), their addresses
        published for the peers (written whole, then renamed: a peer never reads half)."""
        (listener,) = await trio.open_tcp_listeners(0, host="127.0.0.1")
        lines = [_address_text(listener)]
        if self._http is not None:
            (self._http_listener,) = await trio.open_tcp_listeners(0, host="127.0.0.1")
            lines.append(_address_text(self._http_listener))
        _write_whole(self.identity.link_file(self.identity.index), "\n".join(lines) + "\n")
        me = self.identity
        log.info("group: worker %d/%d, link on %s", me.index, me.count, " and ".join(lines))
        return listener

    def _address(self, peer: int, line: int = 0) -> tuple[str, int] | None:
        """Where `peer`'s link (line 0) or private HTTP (line 1) listens."""
        return link_address(self.identity.link_file(peer), line)

    def _peer_http(self) -> list[tuple[str, int]]:
        found = (self._address(peer, 1) for peer in self.identity.peers)
        return [address for address in found if address is not None]

    def make_missed(self, persist: Callable[[], None]) -> None:
        """Once the partition is loaded, before the state goes to the supervisor: the disk
        queues nsqd.dat does not list are made (partition.py: made just before a kill -9),
        then what the group deleted, emptied, paused or unpaused while this worker was down is
        made here too, and nsqd.dat written (`persist`) before its lines go (missed.py)."""
        adopted = partition.adopt(self.broker, self.identity.data_path)
        if not missed.make(self._missed_file, self.broker, persist) and adopted:
            persist()

    def _remade(self, topic: str, channel: str | None) -> None:
        """A queue made here while running: the pending deletion of it in this worker's own
        file goes (missed.remade); restored ones (its start) are the partition's own."""
        if self.broker.loading:
            return
        try:
            missed.remade(self._missed_file, topic, channel)
        except OSError as exc:  # the line stays: its next start deletes the queue again
            log.error("group: %s: %s", self._missed_file, exc)

    # -- the broker's Hooks -------------------------------------------------------------------

    def channel_created(self, topic: Topic, channel: Channel) -> None:
        """Every channel tells this worker when its consumers' credit changes; a new one is
        made in every peer as well before its SUB is answered (a channel gets what is
        published after it was made, in whichever worker: nsqd's promise), unless restored at
        start (the peers restore their own) or made by an admin request (whose fan-out asks
        the peers itself)."""
        channel.starved = self._starved
        self._remade(topic.name, channel.name)
        nursery = self._nursery
        if self.broker.loading or nursery is None or ASKED.get():
            return
        if not (channel.ephemeral or topic.ephemeral):
            made = self.broker.making(topic.name, channel.name)  # its SUB answers after
            work = partial(self._make_in_peers, topic.name, channel.name, made)
        else:
            # an ephemeral one is made in a peer by this worker's pull link (and goes when it
            # leaves): for a SUB of a client here the links start now, and the SUB answers
            # once they have subscribed (not for a peer's link: the peers would wait on each
            # other)
            subscriber = self.broker.subscribing
            if subscriber is None or is_link(subscriber):
                return
            key = (topic.name, channel.name)
            made = self.broker.making(*key)
            if key not in self._pulls:
                self._start(nursery, key)
            self._idle_since[key] = trio.current_time() + GREETED  # kept till the SUB runs
            work = partial(self._greeted, self._pulls[key], made)
        try:
            nursery.start_soon(work)
        except RuntimeError:  # the worker is closing: no SUB may wait for ever
            made()
            raise

    def channel_deleted(self, topic: Topic, channel: Channel) -> None:
        """Its pulls stop at once: an ephemeral channel of a peer that only the link held
        goes with them, as the channel went here."""
        self._stop((topic.name, channel.name))

    def topic_created(self, topic: Topic) -> None:
        """One made at run time takes the group's pause (at start the catch-up's does)."""
        self._remade(topic.name, None)
        new_topics, nursery = self._new_topics, self._nursery
        if new_topics is not None and nursery is not None and not self.broker.loading:
            new_topics.made(topic, nursery)

    def topic_deleted(self, topic: Topic) -> None:
        for name in list(topic.channels):
            self._stop((topic.name, name))

    def paused_changed(self, topic: Topic, channel: Channel | None) -> None:
        if self._new_topics is not None:
            self._new_topics.changed(topic, channel)

    async def _make_in_peers(self, topic: str, channel: str, made: Callable[[], None]) -> None:
        """/topic/create then /channel/create in each peer, all at once (nsqd makes no topic
        for the latter); then `made()`, whatever the peers answered: one that is down makes
        it when it starts again (its catch-up), one that does not answer within ASK_TIMEOUT is
        logged and left."""
        targets = (
            b"/topic/create?" + query_string({"topic": topic}),
            b"/channel/create?" + query_string({"topic": topic, "channel": channel}),
        )
        # stamped when the SUB made it here: a peer that serves it after a later delete of
        # the topic or channel makes nothing (pause_clock.Deletions)
        stamped = header(time.monotonic())

        async def one(address: tuple[str, int]) -> None:
            try:
                with trio.fail_after(ASK_TIMEOUT):
                    for target in targets:
                        await self._connections.request(address, "POST", target, b"", stamped)
            except ASK_ERRORS as exc:
                where = f"{address[0]}:{address[1]}"
                log.warning("group: peer %s did not make %s:%s - %s", where, topic, channel, exc)

        try:
            async with trio.open_nursery() as nursery:
                for address in self._peer_http():
                    nursery.start_soon(one, address)
        finally:
            made()

    async def _greeted(self, pulls: list[Pull], made: Callable[[], None]) -> None:
        """`made()` once every pull's first try has ended (subscribed at its peer, or failed:
        a peer that is down makes the channel when its link comes), or after ASK_TIMEOUT."""
        try:
            with trio.move_on_after(ASK_TIMEOUT):
                for pull in pulls:
                    await pull.greeted.wait()
        finally:
            made()

    # -- pulls ---------------------------------------------------------------------------------

    def _starved(self, channel: Channel, consumer: Consumer) -> None:
        """A consumer's credit changed: wake the channel's pulls, or start them. Not for a
        peer's link (its FINs, one per message moved, do not change what the pulls here ask
        for; looking for consumers of our own on each cost ~1.2 us with 15 links)."""
        if is_link(consumer):
            return
        key = (channel.topic_name, channel.name)
        pulls = self._pulls.get(key)
        if pulls is None:
            if self._nursery is not None and _has_own_consumers(channel):
                self._start(self._nursery, key)
            return
        want = pulls[0].want()  # the same for each peer's link of the channel
        for pull in pulls:
            pull.nudge(want)

    async def run(self, *, task_status: trio.TaskStatus[None] = trio.TASK_STATUS_IGNORED) -> None:
        """Started after the partition is loaded and before any listener accepts: the shared
        ports listen from now on (the kernel gives this worker connections only when it can
        take them)."""
        async with trio.open_nursery() as nursery:
            nursery.start_soon(self._links.run)
            if self._http is not None and self._http_listener is not None:
                tls_required = self._http.api.tls_required
                handle = _from_peers(self._http.api.handle, self.identity.secret, tls_required)
                server = http_server.Server(handle, request_class=Request)
                nursery.start_soon(server.serve, [(self._http_listener, None)])
            await self._await_peers()
            if self._catch_up is not None:
                await self._catch_up.run()
            listeners.listen_now()
            log.info("group: worker %d listens on the shared ports", self.identity.index)
            self._nursery = nursery
            task_status.started()
            while True:
                self._scan(nursery, trio.current_time())
                await trio.sleep(SCAN)

    async def _await_peers(self) -> None:
        """Listen on the shared ports only once every peer has its link up (or PEERS_WAIT
        passed: a peer that cannot start does not keep the group shut). The kernel gives a
        connection only to a worker that listens: those a client opens while the group is
        starting went all to the first worker up, and stayed there (a bench's 32 keep-alive
        publishers on 2 of 16 workers). A worker started again finds its peers up at once."""
        with trio.move_on_after(PEERS_WAIT):
            # the links are files of other processes: no event of this one says they came
            while not all(self._address(peer) for peer in self.identity.peers):  # noqa: ASYNC110
                await trio.sleep(0.01)

    def _scan(self, nursery: trio.Nursery, now: float) -> None:
        """Start the pulls a channel with consumers here lacks; stop those of a channel whose
        consumers here left (a durable one's after LINGER: a client that reconnects keeps
        them; an ephemeral one's at once: the peer's copy must go as this one will)."""
        wanted = set()
        for topic in list(self.broker.topics.values()):
            for channel in list(topic.channels.values()):
                if _has_own_consumers(channel):
                    key = (topic.name, channel.name)
                    wanted.add(key)
                    if key not in self._pulls:
                        self._start(nursery, key)
        for key in list(self._pulls):
            if key in wanted:
                self._idle_since.pop(key, None)
                continue
            linger = 0.0 if key[1].endswith("#ephemeral") else LINGER
            if now - self._idle_since.setdefault(key, now) >= linger:
                self._stop(key)

    def _stop(self, key: tuple[str, str]) -> None:
        for pull in self._pulls.pop(key, ()):
            pull.scope.cancel()
        self._idle_since.pop(key, None)

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
                self._max_rdy,
                self._links,
                self._auth,
            )
            pulls.append(pull)
            nursery.start_soon(pull.run)
        self._pulls[key] = pulls


def _from_peers(handle: Handler, secret: bytes, tls_required: bool) -> Handler:
    """The private HTTP listener's handler: a request with PEER_HEADER is a peer's, answered
    by this worker alone (the header on a public port is a client's, and ignored). Under
    --tls-required, one whose PEER_HEADER holds the group's secret counts as secure (it came
    from a peer over loopback); any other is refused as on a plain port (403 TLS_REQUIRED)."""

    async def from_peer(req: Request) -> Any:
        mark = req.header(PEER_HEADER)
        req.peer = mark is not None
        if tls_required and secret and mark == secret:
            req.tls = True
        return await handle(req)

    return from_peer


def _has_own_consumers(channel: Channel) -> bool:
    """Whether a consumer of `channel` is this worker's own client (not a peer's link)."""
    return any(not is_link(c) for c in channel.consumers.values())


def _write_whole(path: str, text: str) -> None:
    with open(path + ".tmp", "w") as f:
        f.write(text)
    os.replace(path + ".tmp", path)


def _address_text(listener: trio.SocketListener) -> str:
    host, port = listener.socket.getsockname()[:2]
    return f"{host}:{port}"
