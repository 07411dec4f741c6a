"""Group-wide answers over HTTP: the worker that gets a request answers for the group.

- /stats and /metrics: this worker's snapshot and each peer's (/stats?format=json over the
  peer's private HTTP listener), merged into one nsqd's shape (merged.py).
- topic/channel create, delete, empty, pause, unpause: done here, then asked of every peer;
  the answer is this worker's, or a success when it failed here (not found) but a peer did it
  or a down peer's partition holds it (missed.py); a refusal for a queue missing everywhere
  is the most precise one (refusals.py). A channel create makes its topic in every worker
  too, with the group's pause. A delete or an empty waits for every peer that is up, however
  long it takes (PATIENT): served late, after the answer, it would remove what a client of
  that peer published after the answer, which one nsqd keeps.
- PUT /config/<option>: set here (a bad value is refused here, and asked of no peer), then the
  value now in effect is put in every peer (the nsqlookupd addresses are the group's).
- the message endpoints (receive, pop, peek; fin, req, touch, cancel, defer by id): messages.py.

A request from a peer carries PEER_HEADER and is answered by that worker alone (`req.peer`,
set on the private listener only: on a public port the header is a client's, and ignored)."""

from __future__ import annotations

import json
from collections.abc import Awaitable, Callable
from contextvars import ContextVar
from typing import TYPE_CHECKING, Any

import trio

from protocol.v2.names import is_valid_name

from ..engine.api import Refused
from ..gocompat.json import go_json
from ..http.v1 import (
    HTTPError,
    Request,
    as_http_error,
    json_headers,
    query_string,
    raw_headers,
    read_params,
    render_v1,
)
from ..log import log
from ..metrics import render, snapshot
from ..metrics.memory import add_memory, memory_stats
from .asking import Asker
from .kept import KeptConnections
from .merged import merge
from .missed import change_of
from .pause_clock import (
    CREATES,
    DELETES,
    STAMPED,
    WORD,
    WORDS,
    Deletions,
    PauseClock,
    header,
    stamp_of,
)
from .pull import is_link
from .refusals import refusal

if TYPE_CHECKING:
    from ..engine.broker import Broker
    from ..engine.channel import Channel
    from ..engine.topic import Topic
    from ..http.routes import API
    from .missed import Change, Missed, Peer

# set while an admin request is served: what it makes here is made in the peers by that
# request's own fan-out (or was asked by a peer), so the worker's hooks ask no peer again
# (that was N^2 requests a channel create)
ASKED: ContextVar[bool] = ContextVar("group_asked", default=False)
# the admin changes a peer that is up must have made before the group answers: a late one
# would remove messages its clients published after the answer. Their fan-out waits for each
# peer until it answers or is known down (its connection broken or refused: its file then
# holds the change, missed.py); a hung worker is ended by the supervisor's watchdog
# (--worker-timeout), and with --worker-timeout=0 the wait is as long as the hang, as one
# nsqd's. A late create, pause or unpause removes nothing (a pause word carries its stamp).
PATIENT = frozenset(f"/{k}/{a}" for k in ("topic", "channel") for a in ("delete", "empty"))
ADMIN = [f"/{k}/{a}" for k in ("topic", "channel") for a in ("create", "delete", "empty")]
ADMIN += sorted(WORDS)  # pause, unpause
_BOOL = {"true": True, "1": True, "false": False, "0": False}
Handler = Callable[[Request], Awaitable[Any]]


class FanOut(Asker):
    def __init__(
        self,
        broker: Broker,
        api: API,
        peers: Callable[[], list[tuple[str, int]]],
        connections: KeptConnections,
    ) -> None:
        super().__init__(peers, connections)
        self.broker = broker
        self.api = api
        # told of a deletion, an empty, a pause or an unpause made here, the peers that
        # answered it and those that refused the connection: who missed it makes it at its
        # next start, and a down peer's partition counts as the group's (missed.py)
        self.missed: Missed | None = None
        # told of an admin change asked here that failed here (a pause or unpause of a topic
        # this worker lacks is the newest word on it when it makes the topic: new_topics.py)
        self.lacked: Callable[[Change], None] = _nothing
        # when each queue's pause last changed here: a peer's older word is overruled
        self.clock = PauseClock()
        # when each queue was last deleted here: a peer's create older than that is moot
        self.deletions = Deletions()

    def install(self) -> None:
        """Put the group's handlers in the API's route table, in place of the lone ones."""
        routes = self.api.routes
        for path in ADMIN:
            handler, logged, rendering = routes[path]["POST"]
            routes[path]["POST"] = (self._admin(handler), logged, rendering)
        handler, logged, rendering = routes["/channel/create"]["POST"]
        routes["/channel/create"]["POST"] = (self._channel_create(handler), logged, rendering)
        config = self.api.param_routes["/config/"]
        handler, logged, rendering = config["PUT"]
        config["PUT"] = (self._config(handler), logged, rendering)
        handler, logged, rendering = routes["/stats"]["GET"]
        routes["/stats"]["GET"] = (self._local_or(handler, self._stats), logged, rendering)
        handler, logged, rendering = routes["/ping"]["GET"]
        routes["/ping"]["GET"] = (self._local_or(handler, self._ping(handler)), logged, rendering)
        _, logged, rendering = routes["/metrics"]["GET"]
        handler = self._local_or(self._peer_metrics, self._metrics)
        routes["/metrics"]["GET"] = (handler, logged, rendering)

    @staticmethod
    def _local_or(local: Handler, group: Handler) -> Handler:
        async def handle(req: Request) -> Any:
            return await (local if req.peer else group)(req)

        return handle

    # -- admin ------------------------------------------------------------------------------

    def _admin(self, local: Handler) -> Handler:
        async def handle(req: Request) -> Any:
            stamp = stamp_of(req) if req.path in STAMPED else None
            word = stamp if req.path in WORDS else None
            if stamp is not None and req.peer and await self._overruled(req, stamp, word):
                # served, and overruled here by a newer change: one nsqd's 200; a line its
                # asker wrote here for it meanwhile (its wait ran out) is as moot as the word,
                # and left, this worker's next start made the word again
                if (change := change_of(req)) is not None and self.missed is not None:
                    await self.missed.served(change)
                return None
            token, stamped = ASKED.set(True), WORD.set(word)
            try:
                answer, failed = await made_here(local, req)
            finally:
                ASKED.reset(token)
                WORD.reset(stamped)
            change = change_of(req)  # its arguments were read and judged good
            if failed is None and stamp is not None and req.path in DELETES:
                self.deletions.deleted(*_names(req), stamp)
            if failed is not None and change is not None:
                self.lacked(change)
            if req.peer:  # asked by a peer: this worker alone
                if change is not None and self.missed is not None:
                    await self.missed.served(change)
                if failed is not None:
                    raise failed
                return answer
            # made twice is made once (create, delete, pause...) but for an empty, which would
            # drop what was published in between
            again = not req.path.endswith("/empty")
            patient = req.path in PATIENT
            answered: set[Peer] = set()
            unreachable: set[Peer] = set()
            # made here already: it is made (or written down) in every peer too, whatever the
            # client does meanwhile (a client that gives up cancels nothing half-done)
            with trio.CancelScope(shield=patient):
                answers = await self.ask_all(
                    req.method,
                    req.target,
                    headers=b"" if stamp is None else header(stamp),
                    again=again,
                    patient=patient,
                    answered=answered,
                    unreachable=unreachable,
                )
                held = failed is None or any(status == 200 for status, _ in answers)
                if change is not None and self.missed is not None:
                    request = (req.method, req.target)
                    held = await self.missed.written(
                        change, request, held, answered, unreachable, patient=patient
                    )
            if failed is not None and not held:
                raise refusal(failed, answers)
            return answer

        return handle

    async def _overruled(self, req: Request, stamp: float, word: float | None) -> bool:
        """Whether a peer's stamped change is older than what it would undo here: a pause
        word than the queue's last pause change, a create or a word than its last deletion."""
        await read_params(req)
        if word is not None and self.clock.stale(self._queue(req), word):
            return True
        # a create, or a word, older than the last deletion of its queue: that queue is gone
        # (a word's queue made again since was made unpaused after it)
        overtaken = word is not None or req.path in CREATES
        return overtaken and self.deletions.overtaken(*_names(req), stamp)

    def _queue(self, req: Request) -> Topic | Channel | None:
        """The topic or channel a pause word names, if here."""
        name, channel = _names(req)
        topic = self.broker.topics.get(name)
        return topic if topic is None or channel is None else topic.channels.get(channel)

    def _channel_create(self, admin: Handler) -> Handler:
        """A channel made in the group is made in every worker, as a SUB's is (worker.py): a
        worker that lacked its topic (published in another worker alone) refused the create,
        and what it took later missed the channel. So the topic is made first in every
        worker that lacks it, and paused in each if the group's is (a copy made since the
        pause takes it too, new_topics.py, once its peers have answered: here, before the
        create is answered)."""

        async def handle(req: Request) -> Any:
            if not req.peer:
                await self._topic_everywhere(req, stamp_of(req))
            return await admin(req)

        return handle

    async def _topic_everywhere(self, req: Request, stamp: float) -> None:
        await read_params(req)
        topic, channel = req.arg("topic"), req.arg("channel")
        if not (topic and channel and all(map(_valid, (topic, channel)))):
            return  # refused by the handler, as one nsqd
        merged, _, docs = await self._gather(b"/stats", topic)
        if merged is None:
            return  # no worker has it: the handler's 404
        named = b"?" + query_string({"topic": topic})
        self.broker.create_topic(topic)
        if len(docs) < len(self.peers()) or any(doc["topics"] is None for doc in docs):
            await self.ask_all("POST", b"/topic/create" + named, headers=header(stamp))
        if merged[0]["paused"]:
            self.broker.pause(topic, None, True)
            await self.ask_all("POST", b"/topic/pause" + named)

    def _config(self, local: Handler) -> Handler:
        async def handle(req: Request) -> Any:
            answer = await local(req)
            if not req.peer:
                name = req.params
                body = _CONFIG_BODIES[name](self.api.admin.node.options.values)
                for status, text in await self.ask_all("PUT", req.target, body, again=True):
                    if status != 200:
                        log.warning("group: a peer refused PUT /config/%s - %r", name, text[:200])
            return answer

        return handle

    def _ping(self, local: Handler) -> Handler:
        """The group's health: this worker's when it is not OK, else the first peer's that is
        not (a peer that does not answer, one being started again, is passed over)."""

        async def handle(req: Request) -> Any:
            answer = await local(req)  # HTTPError 500 when this worker is not healthy
            for status, body in await self.ask_all("GET", b"/ping"):
                if status != 200:
                    raise HTTPError(status, body.decode(errors="replace"))
            return answer

        return handle

    # -- /stats, /metrics -------------------------------------------------------------------

    async def _stats(self, req: Request) -> Any:
        await read_params(req)
        first, topics, producers, memory, docs = await self._snapshot(req, b"/stats")
        # the group's health is its worst worker's (a store error in one partition)
        healths = [self.broker.health, *(doc.get("health", "OK") for doc in docs)]
        health = next((h for h in healths if h != "OK"), "OK")
        if first("format") == "json":
            return snapshot.stats_json(self.broker, topics, producers, memory, health)
        return render.stats_text(self.broker, topics, producers, memory, health)

    async def _metrics(self, req: Request) -> Any:
        from ..metrics import prometheus

        try:
            await read_params(req)
            _, topics, producers, memory, docs = await self._snapshot(req, b"/metrics")
        except HTTPError as err:
            return err.status, *render_v1(err.status, err.message)
        counted = self._counts(topics)
        for doc in docs:
            prometheus.add_counts(counted, doc["counts"])
        body = prometheus.metrics_text(self.broker, topics, producers, memory, counted)
        return 200, raw_headers(prometheus.CONTENT_TYPE, body), body

    async def _peer_metrics(self, req: Request) -> Any:
        """A peer's /metrics: this worker's snapshot, as /stats gives it, and what /metrics
        reads beside it (prometheus.counts), in one JSON document."""
        await read_params(req)
        query = req.query()
        topic, channel = (query.get(name, [""])[0] for name in ("topic", "channel"))
        topics, producers = snapshot.snapshot(self.broker, topic, channel, True)
        counted = self._counts(topics)
        memory = memory_stats()
        body = go_json(
            {"topics": topics, "producers": producers, "counts": counted, "memory": memory}
        )
        return 200, json_headers(body), body

    def _counts(self, topics: Any) -> dict[str, Any]:
        """This worker's prometheus.counts: its own clients only (a peer's link is none)."""
        from ..metrics import prometheus

        clients = sum(not is_link(c) for c in self.broker.clients.values())
        lists = self.api.info.node.resp_list_lengths()
        return prometheus.counts(self.broker, topics, lists, clients)

    async def _snapshot(
        self, req: Request, path: bytes
    ) -> tuple[Callable[[str], str], Any, Any, Any, list[dict[str, Any]]]:
        """The group's topics and producers (with /stats' filters), the memory figures and
        the peers' documents (what each peer's `path` gave: their snapshot and more)."""
        query = req.query()

        def first(name: str) -> str:
            values = query.get(name)
            return values[0] if values else ""

        topic, channel = first("topic"), first("channel")
        with_memory = _BOOL.get(first("include_mem"), True)
        topics, producers, docs = await self._gather(path, topic, channel, with_memory)
        for doc in docs:
            producers = (producers or []) + (doc.get("producers") or []) or None
        if not _BOOL.get(first("include_clients"), True):
            producers = None
            for t in topics or ():
                for c in t["channels"]:
                    c["clients"] = None
        memory = None
        if with_memory:  # every worker's process
            theirs = [doc["memory"] for doc in docs if doc.get("memory")]
            memory = add_memory([memory_stats(), *theirs])
        return first, topics, producers, memory, docs

    async def _gather(
        self, path: bytes, topic: str = "", channel: str = "", memory: bool = False
    ) -> tuple[list[dict[str, Any]] | None, Any, list[dict[str, Any]]]:
        """The group's topics merged (links left out), this worker's producers and the peers'
        documents (what each peer's `path` gave, with its memory figures if `memory`)."""
        mine, producers = snapshot.snapshot(self.broker, topic, channel, True)
        with_memory = "true" if memory else "false"
        ask = {"format": "json", "topic": topic, "channel": channel, "include_mem": with_memory}
        target = path + b"?" + query_string({k: v for k, v in ask.items() if v})
        docs = []
        for status, body in await self.ask_all("GET", target):
            if status == 200:
                docs.append(json.loads(body))
        return merge([mine, *(doc.get("topics") for doc in docs)]), producers, docs

    async def topics(self) -> list[dict[str, Any]]:
        """The group's topics, as its /stats gives them (statsd's source in worker 0)."""
        return (await self._gather(b"/stats"))[0] or []

    def index_of(self, address: tuple[str, int]) -> int | None:
        return None if self.missed is None else self.missed.index_of(address)


async def made_here(local: Handler, req: Request) -> tuple[Any, HTTPError | None]:
    """`local`'s answer to a request the group makes everywhere, or the error it gave when
    the queue is not here (a 404: it may be in a peer, a topic published in one worker alone);
    a bad request (400) is bad everywhere and raised at once, nothing asked of the peers."""
    try:
        return await local(req), None
    except (HTTPError, Refused) as exc:
        err = as_http_error(exc)
        if err.status == 400:
            raise err from None
        return None, err


# PUT /config/<option>'s body for the value now in effect (the options PUT can set)
_CONFIG_BODIES: dict[str, Callable[[dict[str, Any]], bytes]] = {
    "nsqlookupd_tcp_addresses": lambda values: json.dumps(values["lookupd_tcp_address"]).encode(),
    "log_level": lambda values: str(values["log_level"]).encode(),
}


def _nothing(change: Change) -> None:
    pass


def _names(req: Request) -> tuple[str, str | None]:
    """The topic and (for a /channel/ path) the channel an admin request names."""
    channel = req.arg("channel") if req.path.startswith("/channel/") else None
    return req.arg("topic") or "", channel


def _valid(name: str) -> bool:
    return is_valid_name(name.encode("utf-8", "surrogateescape"))
