"""Endpoints nsqd does not have, on a channel's messages by id (nsqd's HTTP style: snake_case
query parameters, `OK` or a JSON message, nsqd-like error names):

    POST /message/cancel?topic=T&channel=C&id=ID         drop a deferred message
    POST /message/defer?topic=T&channel=C&id=ID&ms=N     its due time becomes now + N ms

404 MESSAGE_NOT_FOUND when no deferred message of that channel has the id (one in flight is not
deferred); 400 for a missing or invalid topic, channel, id or ms. Peek and receive over HTTP
belong here too."""

from __future__ import annotations

import re
from collections.abc import Awaitable, Callable
from typing import TYPE_CHECKING

from ..gocompat.strconv import parse_int64
from .v1 import HTTPError, Request

if TYPE_CHECKING:
    from ..engine.handle import ChannelHandle

_ID = re.compile(r"[0-9a-f]{16}")


class QueueHandlers:
    def __init__(
        self,
        existing_channel: Callable[[Request], Awaitable[ChannelHandle]],
        max_req_timeout: float,
    ) -> None:
        self._existing_channel = existing_channel  # admin's: nsqd's topic/channel checks
        self._max_ms = round(max_req_timeout * 1000)

    async def _channel_and_id(self, req: Request) -> tuple[ChannelHandle, bytes]:
        channel = await self._existing_channel(req)
        values = req.query().get("id")
        if not values:
            raise HTTPError(400, "MISSING_ARG_ID")
        if not _ID.fullmatch(values[0]):
            raise HTTPError(400, "INVALID_ID")
        return channel, values[0].encode()

    async def cancel(self, req: Request) -> str:
        channel, msg_id = await self._channel_and_id(req)
        if not channel.cancel_deferred(msg_id):
            raise HTTPError(404, "MESSAGE_NOT_FOUND")
        return "OK"

    async def defer(self, req: Request) -> str:
        channel, msg_id = await self._channel_and_id(req)
        values = req.query().get("ms")
        if not values:
            raise HTTPError(400, "MISSING_ARG_MS")
        ms = parse_int64(values[0])
        if ms is None or not 0 <= ms <= self._max_ms:
            raise HTTPError(400, "INVALID_MS")
        if not channel.reschedule_deferred(msg_id, ms):
            raise HTTPError(404, "MESSAGE_NOT_FOUND")
        return "OK"
