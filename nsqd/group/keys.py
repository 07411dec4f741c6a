"""De-duplication keys in a group (--dedupe-window with --workers): a window must see every
key of its topic, so each topic's keys have one owner, the worker `crc32(topic) % N`, and a
/pub or /mpub with a `dedupe_key` is made there. The worker that gets such a request and does
not own its topic sends it, body and all, to the owner's private HTTP listener (on kept
connections: a forwarded /pub costs ~0.2 ms more, not ~1 ms), and gives the client the owner's
answer as it came (status, headers, body). Publishes without a key are made where they arrive,
as always.

The owner is the same after a restart of any worker, so its partition's key file
(`trio-nsqd.dedupe`) is the one consulted; a group started with another worker count has
other owners, whose files do not have the keys seen before (docs/workers.md). When the owner
does not answer (down, restarting) the publish is refused with a 503 and nothing is made: a
client retries it with the same key, and the window stays exact."""

from __future__ import annotations

import zlib
from collections.abc import Callable
from typing import TYPE_CHECKING

import trio

from ..http.v1 import HTTPError, parse_query, render_v1
from ..log import log
from .kept import ASK_ERRORS, KeptConnections

if TYPE_CHECKING:
    from ..http.routes import API
    from ..http.v1 import Request, Response
    from .identity import Identity

FORWARD_TIMEOUT = 10.0  # seconds the owner has to answer a publish (a body of up to 5 MiB)
UNAVAILABLE = "DEDUPE_OWNER_UNAVAILABLE"


def owner(topic: str, count: int) -> int:
    """The worker that owns `topic`'s keys (stable across processes and restarts)."""
    return zlib.crc32(topic.encode("utf-8", "surrogateescape")) % count


class KeyOwners:
    """The API's Relay (nsqd/http/routes.py) in a worker of a group with --dedupe-window."""

    def __init__(
        self,
        api: API,
        identity: Identity,
        address: Callable[[int], tuple[str, int] | None],
        connections: KeptConnections,
    ) -> None:
        self._identity = identity
        self._address = address  # a peer's private HTTP address (read at each forward)
        self._connections = connections  # the worker's (its FanOut's)
        publish = api.publish
        # what the handlers read of a body, and one byte more (so the owner refuses it alike)
        self._limits = {"/pub": publish.max_msg_size + 1, "/mpub": publish.max_body_size + 1}

    def elsewhere(self, query_string: bytes) -> bool:
        if b"dedupe" not in query_string and b"%" not in query_string:
            return False  # the publishes without a key, at the cost of one search
        try:
            query = parse_query(query_string)
        except HTTPError:
            return False  # refused here, as alone
        topics = query.get("topic")
        if "dedupe_key" not in query or not topics:
            return False
        me = self._identity
        return owner(topics[0], me.count) != me.index

    async def forward(self, req: Request) -> Response:
        topic = req.query()["topic"][0]
        index = owner(topic, self._identity.count)
        body = await req.read(self._limits[req.path])
        address = self._address(index)
        try:
            if address is None:
                raise OSError(f"worker {index} has no link file")
            with trio.fail_after(FORWARD_TIMEOUT):
                return await self._connections.request(
                    address, req.method, req.target, body, again=True
                )
        except ASK_ERRORS as exc:
            log.warning("group: worker %d (%s's keys) did not answer - %s", index, topic, exc)
            return 503, *render_v1(503, UNAVAILABLE)
