"""Queue attributes in a group (POST/GET /topic/config and /channel/config, http/attributes.py):
set in every worker, read as the group's.

A POST is made here first: a refusal (400, a bad name or value) is the same in every worker, so
nothing is asked of the peers and nothing changes anywhere. Made here, it is made in every peer,
whose answers (each its view after the change) make the group's answer with this worker's. A
GET asks every peer as well, and a queue this worker lacks is answered from the peers that have
it (404 when none has). The group's view: the attributes (the same in every worker) and what the
policies did, summed (expired, dropped, dead-lettered), and for a channel RSMQ's queue figures,
the counts summed, `created` the earliest and `modified` the latest."""

from __future__ import annotations

import json
from typing import TYPE_CHECKING, Any

from ..gocompat.json import go_json
from ..http.v1 import JSONBody, Request
from ..log import log
from .fanout import made_here

if TYPE_CHECKING:
    from ..http.routes import Handler
    from .fanout import FanOut

PATHS = ("/topic/config", "/channel/config")
_QUEUE_SUMS = ("totalrecv", "totalsent", "msgs", "hiddenmsgs")


class GroupAttributes:
    def __init__(self, fanout: FanOut) -> None:
        self._fanout = fanout

    def install(self, routes: dict[str, dict[str, Any]]) -> None:
        """Put the group's handlers in the API's route table, in place of the lone ones."""
        for path in PATHS:
            for method, (handler, logged, rendering) in list(routes[path].items()):
                routes[path][method] = (self._group(handler), logged, rendering)

    def _group(self, local: Handler) -> Handler:
        async def handle(req: Request) -> Any:
            if req.peer:
                return await local(req)
            answer, failed = await made_here(local, req)  # a 400 changed nothing anywhere
            views = [json.loads(answer)] if failed is None else []
            # setting the same attributes twice sets them once
            answers = await self._fanout.ask_all(req.method, req.target, again=True)
            for status, body in answers:
                if status == 200:
                    views.append(json.loads(body))
                elif req.method == "POST":
                    log.warning("group: a peer refused POST %s - %r", req.target, body[:200])
            if not views:
                assert failed is not None
                raise failed
            return JSONBody(go_json(combine(views)))

        return handle


def combine(views: list[dict[str, Any]]) -> dict[str, Any]:
    """The workers' views of one queue as one nsqd's (the first one's attributes)."""
    first = views[0]
    out: dict[str, Any] = {"attributes": first["attributes"], "counts": {}}
    for key in first["counts"]:
        out["counts"][key] = sum(view["counts"][key] for view in views)
    if "queue" in first:
        queue = dict(first["queue"])
        for key in _QUEUE_SUMS:
            queue[key] = sum(view["queue"][key] for view in views)
        queue["created"] = min(view["queue"]["created"] for view in views)
        queue["modified"] = max(view["queue"]["modified"] for view in views)
        out["queue"] = queue
    return out
