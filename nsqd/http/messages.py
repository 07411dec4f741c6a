"""Seeing and taking a channel's messages over HTTP (ours; nsqd has none of it):

    GET  /channel/peek?topic=T&channel=C&n=N&state=queued|in_flight|deferred
    POST /channel/receive?topic=T&channel=C&n=N&vt=MS    in flight under an HTTP lease
         [&lease=NAME] [&max_bytes=B] [&again=true]
    POST /channel/pop?topic=T&channel=C&n=N              received and finished at once
    POST /message/fin?topic=T&channel=C&id=ID
    POST /message/req?topic=T&channel=C&id=ID&delay=MS
    POST /message/touch?topic=T&channel=C&id=ID&vt=MS

Peek, receive and pop answer `{"messages": [{"id", "timestamp" (ns), "attempts", "body"
(base64), "due" (unix ms; in flight or deferred), "expires" (unix ms, when a TTL applies)}]}`,
oldest first; receive and pop answer nsqd's own message frames back to back instead when the
request accepts `application/octet-stream`. fin/req/touch take one `id` in the query (`OK`, or 404
MESSAGE_NOT_IN_FLIGHT with nsqd's reason as `detail`) or many in the body, one per line
(`{"ok": N, "failed": [{"id", "error"}]}`: every id not listed succeeded). A lease is the
channel's, not a connection's: any HTTP caller may finish what any HTTP caller received, never
what a TCP consumer holds. `lease=NAME` on receive puts what it takes under a named lease, and
fin/req without ids then act on everything that lease holds (one caller receives, another
finishes the batch: a Spark driver after its commit). `max_bytes=B` on receive stops taking
once the bodies reach B (the last chunk may pass it: engine/leases.receive). `again=true` on
receive with a named lease gives back first what that lease already holds (touched for `vt`,
attempts unchanged), then queued messages up to n: a retried reader (a Spark task run again, a
batch replayed from a checkpoint) gets the same messages instead of a second set while the
first stays leased. Engine side: engine/leases.py, Channel.lend."""

from __future__ import annotations

import base64
import re
from collections.abc import Callable
from typing import TYPE_CHECKING, Any

from protocol.v2 import NSQError
from protocol.v2.message import append_message_frames
from protocol.v2.names import is_valid_name

from ..engine import leases
from ..gocompat.json import go_json
from .v1 import BinaryBody, HTTPError, JSONBody, Request, parse_int64

if TYPE_CHECKING:
    from ..engine.broker import Broker
    from ..engine.channel import Channel
    from ..engine.message import Message
    from ..node import Node

_ID = re.compile(rb"[0-9a-f]{16}")
MAX_N = 1_000_000  # messages per peek, receive or pop


class MessageHandlers:
    def __init__(self, node: Node, broker: Broker) -> None:
        opts = node.options
        self.broker = broker
        self.msg_timeout_ms = round(opts.msg_timeout * 1000)
        self.max_msg_timeout_ms = round(opts.max_msg_timeout * 1000)
        self.max_req_timeout_ms = round(opts.max_req_timeout * 1000)
        self.max_body_size = opts.max_body_size

    def _existing_channel(self, req: Request) -> Channel:
        """nsqd's checks of topic and channel arguments (the body is left unread: it may
        hold ids)."""
        query = req.query()
        names = []
        for key, what in (("topic", "TOPIC"), ("channel", "CHANNEL")):
            values = query.get(key)
            if not values:
                raise HTTPError(400, f"MISSING_ARG_{what}")
            if not is_valid_name(values[0].encode("utf-8", "surrogateescape")):
                raise HTTPError(400, f"INVALID_ARG_{what}")
            names.append(values[0])
        topic = self.broker.topics.get(names[0])
        if topic is None:
            raise HTTPError(404, "TOPIC_NOT_FOUND")
        channel = topic.channels.get(names[1])
        if channel is None:
            raise HTTPError(404, "CHANNEL_NOT_FOUND")
        return channel

    # -- peek, receive, pop ------------------------------------------------------------------

    async def peek(self, req: Request) -> JSONBody:
        channel = self._existing_channel(req)
        state = (req.query().get("state") or ["queued"])[0]
        if state not in leases.STATES:
            raise HTTPError(400, "INVALID_STATE")
        return _json(leases.peek(channel, state, self._n(req)), channel)

    async def receive(self, req: Request) -> JSONBody | BinaryBody:
        channel = self._existing_channel(req)
        n, vt_ms = self._n(req), self._vt(req, channel)
        lease = self._lease(req, channel)
        query = req.query()
        again = (query.get("again") or ["false"])[0]
        if again not in ("true", "false", "1", "0"):
            raise HTTPError(400, "INVALID_AGAIN")
        max_bytes = self._ms(req, "max_bytes", 0, 1 << 62, "INVALID_MAX_BYTES")
        msgs = leases.receive(channel, lease, n, vt_ms / 1000, max_bytes, again in ("true", "1"))
        if _binary(req):  # no (message, due) pairs: a Spark task takes tens of thousands
            return BinaryBody(_frames(msgs))
        due = leases.due_ms(msgs[0].deadline) if msgs else 0
        return self._answer(req, channel, [(m, due) for m in msgs])

    async def pop(self, req: Request) -> JSONBody | BinaryBody:
        channel = self._existing_channel(req)
        lease = self._lease(req, channel)
        msgs = channel.lend(lease, self._n(req), self.max_msg_timeout_ms / 1000)
        if msgs:
            channel.finish(lease, [m.id for m in msgs])
        return self._answer(req, channel, [(m, None) for m in msgs])

    def _answer(
        self, req: Request, channel: Channel, msgs: list[tuple[Message, int | None]]
    ) -> JSONBody | BinaryBody:
        if _binary(req):
            return BinaryBody(_frames([m for m, _ in msgs]))
        return _json(msgs, channel)

    def _lease(self, req: Request, channel: Channel) -> leases.Lease:
        name = (req.query().get("lease") or [""])[0]
        if len(name) > 256:
            raise HTTPError(400, "INVALID_LEASE")
        return leases.lease_of(channel, self.msg_timeout_ms / 1000, name)

    def _n(self, req: Request) -> int:
        values = req.query().get("n")
        if not values:
            return 1
        n = parse_int64(values[0])
        if n is None or not 1 <= n <= MAX_N:
            raise HTTPError(400, "INVALID_N")
        return n

    def _vt(self, req: Request, channel: Channel) -> int:
        values = req.query().get("vt")
        if not values:
            return channel.attributes.msg_timeout or self.msg_timeout_ms
        vt = parse_int64(values[0])
        if vt is None or not 1 <= vt <= self.max_msg_timeout_ms:
            raise HTTPError(400, "INVALID_VT")
        return vt

    # -- fin, req, touch by id -----------------------------------------------------------------

    async def fin(self, req: Request) -> Any:
        channel, ids, single = await self._ids(req)
        errors: dict[str, NSQError] = {}
        for lease, group in self._holders(req, channel, ids).items():
            for err in channel.finish(lease, group):
                errors[err.desc.split()[1]] = err  # type: ignore[union-attr]
        return self._results(ids, errors, single)

    def _holders(self, req: Request, channel: Channel, ids: list[bytes]) -> dict[Any, list[bytes]]:
        """Ids grouped by the lease they act through: the named one (`lease=`), else the HTTP
        lease that holds each (a message held by a TCP consumer fails with nsqd's reason)."""
        if req.query().get("lease"):
            return {self._lease(req, channel): ids}
        default = self._lease(req, channel)
        by_id = channel.in_flight.by_id
        groups: dict[Any, list[bytes]] = {}
        for msg_id in ids:
            msg = by_id.get(msg_id)
            owner = msg.owner if msg is not None and isinstance(msg.owner, leases.Lease) else None
            groups.setdefault(owner or default, []).append(msg_id)
        return groups

    async def req(self, req: Request) -> Any:
        delay = self._ms(req, "delay", 0, self.max_req_timeout_ms, "INVALID_DELAY")
        return await self._each(req, lambda c, lease, i: c.requeue(lease, i, delay))

    async def touch(self, req: Request) -> Any:
        channel = self._existing_channel(req)
        vt = self._vt(req, channel) / 1000
        return await self._each(req, lambda c, lease, i: c.touch(lease, i, vt))

    async def _each(self, req: Request, act: Callable[[Any, Any, bytes], None]) -> Any:
        channel, ids, single = await self._ids(req)
        errors = {}
        for lease, group in self._holders(req, channel, ids).items():
            for msg_id in group:
                try:
                    act(channel, lease, msg_id)
                except NSQError as exc:
                    errors[msg_id.decode()] = exc
        return self._results(ids, errors, single)

    @staticmethod
    def _results(ids: list[bytes], errors: dict[str, NSQError], single: bool) -> Any:
        if single:
            if errors:
                (error,) = errors.values()
                raise HTTPError(404, "MESSAGE_NOT_IN_FLIGHT", {"detail": error.desc})
            return "OK"
        failed = [{"id": i, "error": str(e)} for i, e in errors.items()]
        return _json_doc({"ok": len(ids) - len(failed), "failed": failed})

    async def _ids(self, req: Request) -> tuple[Any, list[bytes], bool]:
        """The channel, the ids (query `id`, the body's lines, or with `lease=NAME` and
        neither, all that lease holds) and whether it was one."""
        channel = self._existing_channel(req)
        query = req.query()
        values = query.get("id")
        if values:
            raw = values[0].encode()
            if not _ID.fullmatch(raw):
                raise HTTPError(400, "INVALID_ID")
            return channel, [raw], True
        body = await req.read(self.max_body_size + 1)
        if not body.strip() and query.get("lease"):
            return channel, leases.held_by(channel, self._lease(req, channel)), False
        if len(body) > self.max_body_size:
            raise HTTPError(413, "BODY_TOO_BIG")
        ids = body.split()
        if not ids:
            raise HTTPError(400, "MISSING_ARG_ID")
        if not all(_ID.fullmatch(i) for i in ids):
            raise HTTPError(400, "INVALID_ID")
        return channel, ids, False

    @staticmethod
    def _ms(req: Request, name: str, low: int, high: int, error: str) -> int:
        values = req.query().get(name)
        if not values:
            return 0
        ms = parse_int64(values[0])
        if ms is None or not low <= ms <= high:
            raise HTTPError(400, error)
        return ms


def _binary(req: Request) -> bool:
    return b"application/octet-stream" in (req.header(b"accept") or b"")


def _frames(msgs: list[Message]) -> bytes:
    """nsqd's message frames back to back, each body copied once, by the join (a Spark task
    receives tens of thousands at a time)."""
    parts: list[bytes] = []
    append_message_frames(parts, msgs)
    return b"".join(parts)


def _json(msgs: list[tuple[Message, int | None]], channel: Channel) -> JSONBody:
    policy = channel.policy
    ttl_ns = policy.ttl_ns if policy is not None else 0
    out = []
    for m, due in msgs:
        entry: dict[str, Any] = {
            "id": m.id.decode(),
            "timestamp": m.timestamp,
            "attempts": m.attempts,
            "body": base64.b64encode(m.body).decode(),
        }
        if due is not None:
            entry["due"] = due
        expiry = [e for e in (getattr(m, "expires", 0), ttl_ns and m.timestamp + ttl_ns) if e]
        if expiry:
            entry["expires"] = min(expiry) // 1_000_000  # unix ms (a TTL: policies)
        out.append(entry)
    return _json_doc({"messages": out})


def _json_doc(doc: dict[str, Any]) -> JSONBody:
    return JSONBody(go_json(doc))
