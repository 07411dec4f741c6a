"""A starting worker's catch-up (--workers): the durable topics and channels its peers have,
made here before it listens on the shared ports, with their paused flags and attributes where
the peers agree, and the log level a PUT /config/log_level set since the group started; and
the answer to a starting peer's same ask (GET /group/queues, a peer's only). Only where the
daemon serves HTTP: the peers are asked over their private HTTP listeners (fanout.py's
`FanOut`)."""

from __future__ import annotations

import json
from typing import TYPE_CHECKING, Any

import trio

from ..engine.api import Refused
from ..http.v1 import V1, JSONBody, Request, read_params
from ..log import LEVELS, log
from .asking import ASK_TIMEOUT
from .kept import ASK_ERRORS

if TYPE_CHECKING:
    from ..http.routes import API
    from ..node import Node
    from .fanout import FanOut

Queue = tuple[str, str | None, bool, dict[str, Any]]  # topic, channel, paused, attributes
# a peer's durable queues and log level, for a starting worker (asked by peers only)
CATCH_UP = "/group/queues"


class CatchUp:
    def __init__(self, fanout: FanOut, node: Node) -> None:
        self.broker = fanout.broker
        self._fanout = fanout  # the peers' private HTTP listeners, asked on kept connections
        self._node = node

    def install(self, api: API) -> None:
        """Answer a starting peer's catch-up (GET /group/queues) from this worker."""
        api.routes[CATCH_UP] = {"GET": (self._queues, True, V1)}
        api.peer_only.add(CATCH_UP)

    async def run(self) -> None:
        """Make here the durable topics and channels that the peers up now have: one made
        while this worker was starting or down was made in the peers whose link files were
        there then, not here, and what is published here must reach it too (nsqd's promise).
        A peer that starts after this worker's link file was written asks it in turn; one
        that makes a channel from now on finds that file and asks this worker."""
        found: list[Queue] = []
        levels: set[str] = set()

        async def one(address: tuple[str, int]) -> None:
            try:
                with trio.fail_after(ASK_TIMEOUT):
                    target = CATCH_UP.encode()
                    status, _, body = await self._fanout.connections.request(address, "GET", target)
                if status == 200:
                    doc = json.loads(body)
                    found.extend(tuple(q) for q in doc["queues"])
                    levels.add(doc["log_level"])
            except ASK_ERRORS as exc:
                log.warning("group: peer %s:%d gave no topics at start - %s", *address, exc)

        async with trio.open_nursery() as nursery:
            for address in self._fanout.peers():
                nursery.start_soon(one, address)
        paused: dict[tuple[str, str | None], set[bool]] = {}
        attributes: dict[tuple[str, str | None], list[dict[str, Any]]] = {}
        for topic, channel, is_paused, attrs in found:
            if channel is None:
                self.broker.create_topic(topic)
            else:
                self.broker.channel(topic, channel)
            paused.setdefault((topic, channel), set()).add(is_paused)
            attributes.setdefault((topic, channel), []).append(attrs)
        # a pause or unpause, or attributes set, while this worker was down reached only the
        # peers: theirs is the group's state when they agree (this worker's files have the old)
        for (topic, channel), states in paused.items():
            if len(states) == 1:
                self.broker.pause(topic, channel, states.pop())
        for (topic, channel), views in attributes.items():
            if all(view == views[0] for view in views):
                self._take_attributes(topic, channel, views[0])
        if len(levels) == 1:  # a PUT /config/log_level made since the group started
            self._set_log_level(levels.pop())

    def _set_log_level(self, level: str) -> None:
        if level in LEVELS:
            self._fanout.api.admin.set_log_level(level)

    def _take_attributes(self, topic: str, channel: str | None, view: dict[str, Any]) -> None:
        queue = self.broker.topics[topic]
        mine = (queue if channel is None else queue.channels[channel]).attributes.to_json()
        if view == mine:
            return
        params = {name: str(value) for name, value in view.items()}
        try:
            if channel is None:
                self.broker.configure_topic(topic, params)
            else:
                self.broker.configure_channel(topic, channel, params)
        except Refused as exc:  # the peers' limits are this worker's: not expected
            log.error("group: attributes of %s/%s from the peers refused - %s", topic, channel, exc)

    async def _queues(self, req: Request) -> Any:
        """A starting peer's catch-up: this worker's durable topics and channels, each with
        its paused flag and attributes, and its log level; asked by a peer only (a client
        gets nsqd's 404: API.peer_only)."""
        await read_params(req)
        queues: list[Queue] = []
        for topic in list(self.broker.topics.values()):
            if topic.ephemeral:  # ephemeral ones live as long as their consumers, the peer's
                continue
            queues.append((topic.name, None, topic.paused, topic.attributes.to_json()))
            for channel in list(topic.channels.values()):
                if not channel.ephemeral:
                    attrs = channel.attributes.to_json()
                    queues.append((topic.name, channel.name, channel.paused, attrs))
        level = self._node.options.log_level
        return JSONBody(json.dumps({"queues": queues, "log_level": level}).encode())
