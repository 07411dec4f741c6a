"""nsqd's administrative endpoints: POST /topic/{create,delete,empty,pause,unpause},
POST /channel/{create,delete,empty,pause,unpause}, and GET/PUT /config/:opt."""

from __future__ import annotations

import json
from typing import TYPE_CHECKING, Any

from protocol.v2.names import is_valid_name

from ..log import LEVELS, log
from .v1 import HTTPError, Request, config_value, read_params, topic_from_query

if TYPE_CHECKING:
    from collections.abc import Callable

    from ..engine.broker import Broker
    from ..engine.handle import ChannelHandle
    from ..node import Node


class AdminHandlers:
    """Topics, channels and the two options nsqd lets /config change at run time."""

    def __init__(
        self, node: Node, broker: Broker, set_lookupd: Callable[[list[str]], None]
    ) -> None:
        self.node = node
        self.broker = broker
        self._set_lookupd = set_lookupd  # nsqlookupd peers reconciled at once, as nsqd
        self.max_msg_size: int = node.options.max_msg_size

    # -- topics (a missing one: the broker's Refused, 404 TOPIC_NOT_FOUND) ---------------------

    async def _topic_arg(self, req: Request, validate: bool) -> str:
        await read_params(req)
        name = req.arg("topic")
        if name is None:
            raise HTTPError(400, "MISSING_ARG_TOPIC")
        if validate and not is_valid_name(name.encode("utf-8", "surrogateescape")):
            raise HTTPError(400, "INVALID_TOPIC")
        return name

    async def topic_create(self, req: Request) -> None:
        name, _ = topic_from_query(req)
        self.broker.create_topic(name)

    async def topic_delete(self, req: Request) -> None:
        self.broker.remove_topic(await self._topic_arg(req, validate=False))

    async def topic_empty(self, req: Request) -> None:
        self.broker.empty(await self._topic_arg(req, validate=True))

    async def topic_pause(self, req: Request) -> None:
        self.broker.pause(await self._topic_arg(req, validate=False), None, True)

    async def topic_unpause(self, req: Request) -> None:
        self.broker.pause(await self._topic_arg(req, validate=False), None, False)

    # -- channels ----------------------------------------------------------------------------

    async def _topic_channel_args(self, req: Request) -> tuple[str, str]:
        """getExistingTopicFromQuery: (existing topic, validated channel name)."""
        await read_params(req)
        topic_name = req.arg("topic")
        if topic_name is None:
            raise HTTPError(400, "MISSING_ARG_TOPIC")
        if not is_valid_name(topic_name.encode("utf-8", "surrogateescape")):
            raise HTTPError(400, "INVALID_ARG_TOPIC")
        channel_name = req.arg("channel")
        if channel_name is None:
            raise HTTPError(400, "MISSING_ARG_CHANNEL")
        if not is_valid_name(channel_name.encode("utf-8", "surrogateescape")):
            raise HTTPError(400, "INVALID_ARG_CHANNEL")
        self.broker.require_topic(topic_name)
        return topic_name, channel_name

    async def existing_channel(self, req: Request) -> ChannelHandle:
        return self.broker.existing_channel(*await self._topic_channel_args(req))

    async def channel_create(self, req: Request) -> None:
        self.broker.create_channel(*await self._topic_channel_args(req))

    async def channel_delete(self, req: Request) -> None:
        self.broker.remove_channel(*await self._topic_channel_args(req))

    async def channel_empty(self, req: Request) -> None:
        self.broker.empty(*await self._topic_channel_args(req))

    async def channel_pause(self, req: Request) -> None:
        self.broker.pause(*await self._topic_channel_args(req), True)

    async def channel_unpause(self, req: Request) -> None:
        self.broker.pause(*await self._topic_channel_args(req), False)

    # -- /config/:opt ------------------------------------------------------------------------

    def set_log_level(self, level: str) -> None:
        """--log-level from now on (a PUT /config/log_level, or a group's peers' at a start)."""
        self.node.options.values["log_level"] = level
        log.setLevel(LEVELS[level])

    async def config(self, req: Request) -> Any:
        name = req.params
        if req.method == "PUT":
            read_max = self.max_msg_size + 1
            body = await req.read(read_max)
            if len(body) == read_max or not body:
                raise HTTPError(413, "INVALID_VALUE")
            opts = self.node.options
            if name == "nsqlookupd_tcp_addresses":
                try:
                    value = json.loads(body.decode("utf-8", "replace"))
                except ValueError:
                    raise HTTPError(400, "INVALID_VALUE") from None
                if value is not None and not (
                    isinstance(value, list) and all(isinstance(v, str) for v in value)
                ):
                    raise HTTPError(400, "INVALID_VALUE")
                opts.values["lookupd_tcp_address"] = value
                self._set_lookupd(value or [])
            elif name == "log_level":
                level = body.decode("utf-8", "replace").lower()
                if level not in LEVELS:
                    raise HTTPError(400, "INVALID_VALUE")
                self.set_log_level(level)
            else:
                raise HTTPError(400, "INVALID_OPTION")
        return config_value(self.node, name)
