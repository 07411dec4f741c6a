"""Queue attributes over HTTP (ours, not nsqd's; the policies of engine/policies/):

    POST /topic/config?topic=T&ttl=60000&max_depth=1000...     set (the topic made if missing)
    GET  /topic/config?topic=T                                 read
    POST /channel/config?topic=T&channel=C&max_attempts=5...   set (topic and channel made)
    GET  /channel/config?topic=T&channel=C                     read, with RSMQ's queue figures

Both answer `{"attributes": {...every attribute...}, "counts": {...}}` (what the policies did:
expired, dropped, and a channel's dead_lettered); a channel also `"queue": {...}`, RSMQ's
getQueueAttributes figures. An empty value turns an attribute off. Errors in nsqd's words:
400 MISSING_ARG_TOPIC / INVALID_TOPIC / MISSING_ARG_CHANNEL / INVALID_CHANNEL, 400
INVALID_ATTRIBUTE (an unknown name) or INVALID_VALUE (with `"attribute"` naming it), 404
TOPIC_NOT_FOUND / CHANNEL_NOT_FOUND for a GET of a queue that does not exist."""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

from protocol.v2.names import is_valid_name

from ..gocompat.json import go_json
from .v1 import HTTPError, JSONBody, Request, read_params

if TYPE_CHECKING:
    from ..engine.api import ChannelAttributes, ChannelFigures, TopicAttributes
    from ..engine.broker import Broker
    from ..node import Node


class AttributeHandlers:
    def __init__(self, node: Node, broker: Broker) -> None:
        self.broker = broker
        self.msg_timeout_ms = round(node.options.msg_timeout * 1000)
        self.max_msg_size = node.options.max_msg_size

    async def _names(self, req: Request, *, channel: bool) -> tuple[str, str, dict[str, str]]:
        await read_params(req)
        query = req.query()
        topic = _name(query, "topic", "TOPIC")
        name = _name(query, "channel", "CHANNEL") if channel else ""
        params = {k: v[0] for k, v in query.items() if k not in ("topic", "channel")}
        return topic, name, params

    async def topic_config(self, req: Request) -> JSONBody:
        topic_name, _, params = await self._names(req, channel=False)
        if req.method == "POST":
            self.broker.configure_topic(topic_name, params)  # Refused: 400, nothing changed
        attributes, counts = self.broker.topic_view(topic_name)  # Refused: 404 on a GET
        return _json({"attributes": attributes.to_json(), "counts": counts})

    async def channel_config(self, req: Request) -> JSONBody:
        topic_name, name, params = await self._names(req, channel=True)
        if req.method == "POST":
            self.broker.configure_channel(topic_name, name, params)
        channel = self.broker.existing_channel(topic_name, name)
        topic_attributes, _ = self.broker.topic_view(topic_name)
        f = channel.figures()
        counts = {
            "dead_lettered": f.dead_letter_count,
            "expired": f.expired_count,
            "dropped": f.dropped_count,
        }
        return _json(
            {
                "attributes": channel.attributes.to_json(),
                "counts": counts,
                "queue": self._rsmq(topic_attributes, channel.attributes, f),
            }
        )

    def _rsmq(
        self, topic: TopicAttributes, channel: ChannelAttributes, f: ChannelFigures
    ) -> dict[str, Any]:
        """RSMQ's getQueueAttributes figures for this channel (times in unix seconds)."""
        hidden = f.in_flight + f.deferred
        return {
            "vt": channel.msg_timeout or self.msg_timeout_ms,
            "delay": channel.delay or topic.delay,
            "maxsize": topic.max_msg_size or self.max_msg_size,
            "totalrecv": f.delivery_count,
            "totalsent": f.message_count,
            "created": f.created_at // 1000,
            "modified": f.modified_at // 1000,
            "msgs": f.depth + hidden,
            "hiddenmsgs": hidden,
        }


def _name(query: dict[str, list[str]], key: str, what: str) -> str:
    values = query.get(key)
    if not values:
        raise HTTPError(400, f"MISSING_ARG_{what}")
    if not is_valid_name(values[0].encode("utf-8", "surrogateescape")):
        raise HTTPError(400, f"INVALID_{what}")
    return values[0]


def _json(data: dict[str, Any]) -> JSONBody:
    return JSONBody(go_json(data))
