"""A topic a worker makes at run time takes the group's pause (--workers).

One nsqd's paused topic keeps every message published into it until the unpause. A group's
pause is made in every worker that has the topic; one that lacked it then and makes it later
(a client's PUB or SUB lands there, a peer's link subscribes, an admin create) made it
unpaused, and a channel of it there took and delivered what that worker got. So a topic made
here at run time is held (Topic.hold: what is published stays in its queue, as a paused
topic's does; a PUB's OK waits on nothing) until the peers have said whether they have it
paused, and since when (GET /group/paused, a peer's only): the newest word wins, paused here
if it is a pause, then released. A peer holding it (asking too) answers that it has no such
topic: its copy is as new as this one, so it is no word on the pause (the topics made at once
in two workers, never paused, both flow; and a pause refused by every worker for want of the
topic a moment before is no word either: nsqd's 404, nothing paused).

Newest, not any: a pause or unpause fans out to every worker at once, and one peer may answer
before it served the change that another peer, or this worker, already served. With any
peer's pause winning, an unpause that reached this worker before it had the topic (a 404:
nothing to unpause) and a peer that answered still paused left the topic paused here alone,
for good. So each worker keeps when a topic's pause last changed here (pause_clock.py:
the stamp of the word it served, CLOCK_MONOTONIC, one clock for every worker of a host), and
for a short while the last pause or unpause it was asked of a topic it lacked (`_words`): the
group's newest word on it, which peers that have not served it yet cannot outvote. Where no
peer has the topic it is a new one, unpaused since it was made here (a word refused
everywhere before that, and what this worker was told of a topic the group since deleted, is
no word on this one).

A pause or unpause of the topic made here meanwhile (an admin request: newer than the
question) settles it instead, and the answer that comes after is dropped. A peer that does not
answer within ASK_TIMEOUT (down, hung) is left out, as in every fan-out: a topic that only it
has paused flows here (held until it came back, the topic would keep its messages from every
consumer for as long as a worker is down). Topics made at start are the catch-up's
(catchup.py), which takes the peers' paused flags itself."""

from __future__ import annotations

import json
import time
from typing import TYPE_CHECKING, Any

import trio

from ..http.v1 import V1, JSONBody, Request, query_string, read_params
from ..log import log
from .asking import ASK_TIMEOUT
from .pause_clock import WORD

if TYPE_CHECKING:
    from ..engine.channel import Channel
    from ..engine.topic import Topic
    from ..http.routes import API
    from .fanout import FanOut
    from .missed import Change

# a peer's paused flag of one topic and when it last changed there (asked by peers only)
PAUSED = "/group/paused"
# how long a word on a topic this worker lacks counts: a peer that has not served a change
# sent that long ago is one the fan-out left out (hung)
WORD_TTL = 2 * ASK_TIMEOUT
_WORDS = {"pause": True, "unpause": False}  # the admin actions that are a word on a pause

View = tuple[float, bool]  # when the pause last changed (0: not known), paused


class NewTopics:
    def __init__(self, fanout: FanOut) -> None:
        self._fanout = fanout  # asks the peers' private HTTP listeners
        self._asking: dict[str, Topic] = {}  # held until the peers answer
        self._words: dict[str, View] = {}  # a pause or unpause asked here of a topic not here
        fanout.lacked = self.lacked

    def install(self, api: API) -> None:
        """Answer a peer's question about a topic it made (GET /group/paused, a peer's only)."""
        api.routes[PAUSED] = {"GET": (self._answer, True, V1)}
        api.peer_only.add(PAUSED)

    def made(self, topic: Topic, nursery: trio.Nursery) -> None:
        """`topic` was made here at run time: held while the peers are asked."""
        topic.hold()
        self._asking[topic.name] = topic
        try:
            nursery.start_soon(self._ask, topic, time.monotonic())
        except RuntimeError:  # the worker is closing: nothing may stay held
            self._settle(topic, (0.0, False))

    def changed(self, topic: Topic, channel: Channel | None) -> None:
        """The topic or channel was paused or unpaused here: the newest word, which settles a
        held topic (made already: nothing more to pause)."""
        now = self._fanout.clock.changed(topic if channel is None else channel)
        if channel is None:
            self._settle(topic, (now, False))

    def lacked(self, change: Change) -> None:
        """An admin change was asked here (by a client or a peer) and failed: of a pause or
        unpause of a topic not here, the word is kept a while (newer than any peer's answer
        that comes before the peer served it)."""
        action, name, channel = change
        paused = _WORDS.get(action)
        if paused is None or channel is not None or name in self._fanout.broker.topics:
            return
        now = time.monotonic()
        self._words = {k: v for k, v in self._words.items() if now - v[0] < WORD_TTL}
        self._words[name] = (WORD.get() or now, paused)  # the word's stamp, from its origin

    async def _ask(self, topic: Topic, made: float) -> None:
        views: list[View] = []
        try:
            target = PAUSED.encode() + b"?" + query_string({"topic": topic.name})
            for status, body in await self._fanout.ask_all("GET", target):
                views.extend(_view(status, body, topic.name))
        finally:
            word = self._words.get(topic.name)
            if views and word is not None and time.monotonic() - word[0] < WORD_TTL:
                views.append(word)
            # the newest (a tie: paused, as when nobody knows when); none: a new topic,
            # unpaused since it was made (a word stamped after that still wins: pause_clock.py;
            # one from before, refused everywhere, is none on this topic)
            self._settle(topic, max(views, default=(made, False)))

    def _settle(self, topic: Topic, view: View) -> None:
        if self._asking.get(topic.name) is not topic:
            return  # settled already (a pause or unpause here came first), or deleted
        del self._asking[topic.name]
        self._words.pop(topic.name, None)
        since, paused = view
        if paused and not topic.deleted:
            self._fanout.broker.set_paused(topic, None, True)  # nsqd.dat and the hooks too
        self._fanout.clock.settled(topic, since)  # the word it took, not when it took it
        topic.release()

    async def _answer(self, req: Request) -> Any:
        """A peer's question: this worker's paused flag of the topic and when it last changed
        here (0: not since it was loaded), or null where it has no such topic."""
        await read_params(req)
        topic = self._fanout.broker.topics.get(req.arg("topic") or "")
        view: View | None = None  # none here, or one held: as new as the peer's
        if topic is not None and self._asking.get(topic.name) is not topic:
            view = (self._fanout.clock.since(topic), topic.paused)
        return JSONBody(json.dumps(view).encode())


def _view(status: int, body: bytes, name: str) -> list[View]:
    """A peer's answer about a topic: [(since, paused)], or [] where it has none."""
    try:
        view = json.loads(body) if status == 200 else None
        return [] if view is None else [(float(view[0]), bool(view[1]))]
    except (ValueError, IndexError, TypeError) as exc:  # not expected of a peer
        log.warning("group: a peer's pause of %s unreadable - %s", name, exc)
        return []
