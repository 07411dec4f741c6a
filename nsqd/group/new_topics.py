"""A topic a worker makes at run time takes the group's pause (--workers).

One nsqd's paused topic keeps every message published into it until the unpause. A group's
pause is made in every worker that has the topic; one that lacked it then and makes it later
(a client's PUB or SUB lands there, a peer's link subscribes, an admin create) made it
unpaused, and a channel of it there took and delivered what that worker got. So a topic made
here at run time is held (Topic.hold: what is published stays in its queue, as a paused
topic's does; a PUB's OK waits on nothing) until the peers have said whether they have it
paused: paused here if one of them has, then released. A peer holding it still answers that
it is not (it asks too: the topics made at once in two workers, never paused, both flow).

A pause or unpause of the topic made here meanwhile (an admin request: newer than the
question) settles it instead, and the answer that comes after is dropped. A peer that does not
answer within ASK_TIMEOUT (down, hung) is left out, as in every fan-out: a topic that only it
has paused flows here (held until it came back, the topic would keep its messages from every
consumer for as long as a worker is down). Topics made at start are the catch-up's
(catchup.py), which takes the peers' paused flags itself."""

from __future__ import annotations

import json
from typing import TYPE_CHECKING

import trio

from ..http.v1 import query_string
from ..log import log

if TYPE_CHECKING:
    from ..engine.topic import Topic
    from .fanout import FanOut


class NewTopics:
    def __init__(self, fanout: FanOut) -> None:
        self._fanout = fanout  # asks the peers' private HTTP listeners
        self._asking: dict[str, Topic] = {}  # held until the peers answer

    def made(self, topic: Topic, nursery: trio.Nursery) -> None:
        """`topic` was made here at run time: held while the peers are asked."""
        topic.hold()
        self._asking[topic.name] = topic
        try:
            nursery.start_soon(self._ask, topic)
        except RuntimeError:  # the worker is closing: nothing may stay held
            self._settle(topic, False)

    def changed(self, topic: Topic) -> None:
        """The topic was paused or unpaused here: that settles a held one."""
        self._settle(topic, False)

    async def _ask(self, topic: Topic) -> None:
        paused = False
        try:
            query = {"format": "json", "topic": topic.name, "include_clients": "false"}
            target = b"/stats?" + query_string({**query, "include_mem": "false"})
            for status, body in await self._fanout.ask_all("GET", target):
                paused = paused or (status == 200 and _paused(body, topic.name))
        finally:
            self._settle(topic, paused)

    def _settle(self, topic: Topic, paused: bool) -> None:
        if self._asking.get(topic.name) is not topic:
            return  # settled already (a pause or unpause here came first), or deleted
        del self._asking[topic.name]
        if paused and not topic.deleted:
            self._fanout.broker.set_paused(topic, None, True)  # nsqd.dat and the hooks too
        topic.release()


def _paused(body: bytes, name: str) -> bool:
    """Whether a peer's /stats of one topic says it has that topic paused."""
    try:
        topics = json.loads(body)["topics"] or ()
        return any(t["topic_name"] == name and t["paused"] for t in topics)
    except (ValueError, KeyError, TypeError) as exc:  # not expected of a peer
        log.warning("group: a peer's /stats of %s unreadable - %s", name, exc)
        return False
