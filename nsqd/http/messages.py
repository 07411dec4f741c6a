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
first stays leased; `again=held` gives back what the lease holds and nothing else. Engine side:
engine/leases.py, Channel.lend.

A large answer is taken (receive, pop) and encoded in chunks of `CHUNK` messages with a turn
of the loop between them, so other clients are served meanwhile: a pop of 100,000 held every
client for over a second, two thirds of it in the JSON."""

from __future__ import annotations

import base64
import re
from collections.abc import Callable
from typing import TYPE_CHECKING, Any

import trio

from protocol.v2.names import is_valid_name

from ..engine.api import STATES
from ..gocompat.json import go_json
from ..gocompat.strconv import parse_int64
from .v1 import BinaryBody, HTTPError, JSONBody, Request

if TYPE_CHECKING:
    from ..engine.api import Deliveries, Delivery, Outcome
    from ..engine.broker import Broker
    from ..engine.handle import ChannelHandle
    from ..node import Node

_ID = re.compile(rb"[0-9a-f]{16}")
# receive's `again`: "held" gives back what the lease holds and takes nothing new (a group's
# worker gathers that from every worker first: group/messages.py)
_AGAIN = ("true", "false", "1", "0", "held")
MAX_N = 1_000_000  # messages per peek, receive or pop
CHUNK = 2048  # messages taken or encoded between two turns of the loop (~10-20 ms)


class MessageHandlers:
    def __init__(self, node: Node, broker: Broker) -> None:
        opts = node.options
        self.broker = broker
        self.msg_timeout_ms = round(opts.msg_timeout * 1000)
        self.max_msg_timeout_ms = round(opts.max_msg_timeout * 1000)
        self.max_req_timeout_ms = round(opts.max_req_timeout * 1000)
        self.max_body_size = opts.max_body_size

    def _existing_channel(self, req: Request) -> ChannelHandle:
        """nsqd's checks of topic and channel arguments (the body is left unread: it may
        hold ids); a missing topic or channel is the broker's Refused (404)."""
        query = req.query()
        names = []
        for key, what in (("topic", "TOPIC"), ("channel", "CHANNEL")):
            values = query.get(key)
            if not values:
                raise HTTPError(400, f"MISSING_ARG_{what}")
            if not is_valid_name(values[0].encode("utf-8", "surrogateescape")):
                raise HTTPError(400, f"INVALID_ARG_{what}")
            names.append(values[0])
        return self.broker.existing_channel(names[0], names[1])

    # -- peek, receive, pop ------------------------------------------------------------------

    async def peek(self, req: Request) -> JSONBody:
        channel = self._existing_channel(req)
        state = (req.query().get("state") or ["queued"])[0]
        if state not in STATES:
            raise HTTPError(400, "INVALID_STATE")
        parts: list[Deliveries] = []
        for part in channel.peek(state, self._n(req), CHUNK):  # read part by part
            parts.append(part)
            await trio.lowlevel.checkpoint()
        return await _encoded(False, parts)

    async def receive(self, req: Request) -> JSONBody | BinaryBody:
        channel = self._existing_channel(req)
        n, vt_ms = self._n(req), self._vt(req, channel)
        lease = self._lease(req)
        query = req.query()
        again = (query.get("again") or ["false"])[0]
        if again not in _AGAIN:
            raise HTTPError(400, "INVALID_AGAIN")
        max_bytes = self._ms(req, "max_bytes", 0, 1 << 62, "INVALID_MAX_BYTES")
        if again not in ("false", "0"):  # what the lease holds comes first, whole: one take
            held_only = again == "held"
            parts = [channel.receive(lease, n, vt_ms / 1000, max_bytes, True, held_only)]
        else:
            parts = await _taken(
                lambda k, room: channel.receive(lease, k, vt_ms / 1000, room), n, max_bytes
            )
        return await _encoded(accepts_frames(req), parts)

    async def pop(self, req: Request) -> JSONBody | BinaryBody:
        channel = self._existing_channel(req)
        lease, timeout = self._lease(req), self.max_msg_timeout_ms / 1000
        parts = await _taken(lambda k, _: channel.pop(lease, k, timeout), self._n(req), 0)
        return await _encoded(accepts_frames(req), parts)

    @staticmethod
    def _lease(req: Request) -> str:
        name = (req.query().get("lease") or [""])[0]
        if len(name) > 256:
            raise HTTPError(400, "INVALID_LEASE")
        return name

    def _n(self, req: Request) -> int:
        values = req.query().get("n")
        if not values:
            return 1
        n = parse_int64(values[0])
        if n is None or not 1 <= n <= MAX_N:
            raise HTTPError(400, "INVALID_N")
        return n

    def _vt(self, req: Request, channel: ChannelHandle) -> int:
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
        return _results(channel.finish(ids, self._lease(req) or None), single)

    async def req(self, req: Request) -> Any:
        delay = self._ms(req, "delay", 0, self.max_req_timeout_ms, "INVALID_DELAY")
        channel, ids, single = await self._ids(req)
        return _results(channel.requeue(ids, delay, self._lease(req) or None), single)

    async def touch(self, req: Request) -> Any:
        vt = self._vt(req, self._existing_channel(req)) / 1000
        channel, ids, single = await self._ids(req)
        return _results(channel.touch(ids, vt, self._lease(req) or None), single)

    async def _ids(self, req: Request) -> tuple[ChannelHandle, list[bytes], bool]:
        """The channel, the ids (query `id`, the body's lines, or with `lease=NAME` and
        neither, all that lease holds) and whether it was one. A bad line refuses the whole
        request, naming the line (1-based) and what it holds."""
        channel = self._existing_channel(req)
        query = req.query()
        values = query.get("id")
        if values:
            raw = values[0].encode("utf-8", "surrogateescape")
            if not _ID.fullmatch(raw):
                raise HTTPError(400, "INVALID_ID")
            return channel, [raw], True
        body = await req.read(self.max_body_size + 1)
        if not body.strip() and query.get("lease"):
            return channel, channel.held(self._lease(req)), False
        if len(body) > self.max_body_size:
            raise HTTPError(413, "BODY_TOO_BIG")
        ids = body.split()
        if not ids:
            raise HTTPError(400, "MISSING_ARG_ID")
        if not all(map(_ID.fullmatch, ids)):
            raise _bad_line(body)
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


def _bad_line(body: bytes) -> HTTPError:
    """400 INVALID_ID naming the first line whose id is not 16 hex digits."""
    for number, line in enumerate(body.splitlines(), 1):
        for word in line.split():
            if not _ID.fullmatch(word):
                shown = word[:64].decode("utf-8", "replace")
                return HTTPError(400, "INVALID_ID", {"line": number, "id": shown})
    return HTTPError(400, "INVALID_ID")  # pragma: no cover - a bad id is on some line


def _results(outcome: Outcome, single: bool) -> Any:
    """One id: OK, or 404 with nsqd's reason. Several: how many took effect (each distinct
    id counted once) and each that failed, once."""
    if single:
        if outcome.failed:
            raise HTTPError(404, "MESSAGE_NOT_IN_FLIGHT", {"detail": outcome.failed[0].reason})
        return "OK"
    failed = [{"id": f.id.decode(), "error": str(f)} for f in outcome.failed]
    return _json_doc({"ok": outcome.done, "failed": failed})


async def _taken(
    take: Callable[[int, int], Deliveries], n: int, max_bytes: int
) -> list[Deliveries]:
    """Up to n messages by `take(k, bytes left)`, CHUNK at a time with a turn of the loop
    between: it stops at n, when a take gives fewer than asked, or when the bodies reach
    `max_bytes` (0: no limit)."""
    parts: list[Deliveries] = []
    room = max_bytes
    while n > 0:
        if parts:
            await trio.lowlevel.checkpoint()
        asked = min(n, CHUNK)
        part = take(asked, room)
        parts.append(part)
        n -= len(part)
        if len(part) < asked:
            break
        if max_bytes:
            room -= part.nbytes
            if room <= 0:
                break
    return parts


async def _encoded(binary: bool, parts: list[Deliveries]) -> JSONBody | BinaryBody:
    """The answer: nsqd's frames (no value per message: a Spark task takes 10,000s) or the
    JSON document, encoded CHUNK messages at a time with a turn of the loop between."""
    out: list[bytes] = []
    for part in parts:
        for a in range(0, len(part), CHUNK):
            if out:
                await trio.lowlevel.checkpoint()
            if binary:
                out.append(part.frames(a, a + CHUNK))
            else:
                out.append(go_json(_entries(part[a : a + CHUNK]))[1:-1])  # no brackets
    if binary:
        return BinaryBody(b"".join(out))
    return JSONBody(b'{"messages":[' + b",".join(out) + b"]}")


def accepts_frames(req: Request) -> bool:
    return b"application/octet-stream" in (req.header(b"accept") or b"")


def _entries(msgs: list[Delivery]) -> list[dict[str, Any]]:
    out = []
    for m in msgs:
        entry: dict[str, Any] = {
            "id": m.id.decode(),
            "timestamp": m.timestamp,
            "attempts": m.attempts,
            "body": base64.b64encode(m.body).decode(),
        }
        if m.due is not None:
            entry["due"] = m.due
        if m.expires:
            entry["expires"] = m.expires  # unix ms (a TTL: policies)
        out.append(entry)
    return out


def _json_doc(doc: dict[str, Any]) -> JSONBody:
    return JSONBody(go_json(doc))
