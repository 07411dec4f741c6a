"""HTTP's message endpoints for a group (ours: docs/http-access.md). A queue, a lease and a
message in flight or deferred are one worker's, and a request reaches the one worker that
accepted its connection; that worker acts on what it holds and asks its peers for the rest, so
that a reader sees one nsqd:

- receive, pop and peek: this worker's messages first; while fewer than `n` came and their
  bodies hold less than `max_bytes`, each peer in turn for what is still wanted (the rest of
  `n` and of `max_bytes`). One answer: the JSON `{"messages": [...]}` (oldest first within a
  worker; NSQ orders nothing across partitions), or the frames back to back. A worker that
  lacks the topic or channel (made while it was down, before it caught up, or a topic
  published in one worker alone) asks its peers all the same; its 404 is the answer only when
  no peer has it either.
- fin, req, touch, cancel and defer of one id: here; where it is not held here (404), every
  peer at once, and the one that holds it answers (else this worker's 404). Of many ids: here,
  then the ids that failed here are asked of the peers; an id fails when it failed everywhere,
  with this worker's reason.
- fin and req with `lease=NAME` and no ids: every worker acts on what the lease holds there;
  the counts are summed.
- a receive under a named lease is finished whole by a later caller (`fin?lease=`, a Spark
  driver after its commit), so nothing the lease took may be left out of its answer: with
  `again=true` what the lease holds in every worker comes first (`again=held` here, then at
  each peer), and only then new messages; a peer that does not answer in time refuses the
  receive (503 PEER_UNAVAILABLE, the caller asks again) rather than being left out while it
  may still take under the lease. A peer that is down took nothing (or lost it with its
  in-flight state: the journal puts it back in the queue).
- pop asks its peers with `/channel/receive` and then finishes what came (`finish_at`), not
  with `/channel/pop`: a peer that answers after ASK_TIMEOUT (stopped, busy) has taken what it
  was asked for all the same, and a pop's messages, finished there and left out of the answer
  here, were lost; a receive's go back to the channel when their lease ends. A FIN the peer
  does not confirm leaves them the caller's anyway: at worst delivered again, never lost.
- A worker that lacks the queue cannot judge the request's other arguments (its handler stops
  at the missing queue): then a peer that has the queue judges them, and its refusal (a 400
  INVALID_N, a 404 MESSAGE_NOT_FOUND) is the answer, as one nsqd would give it.

A request from a peer (`req.peer`: PEER_HEADER on the private listener) is answered by that
worker alone."""

from __future__ import annotations

import base64
import json
from typing import TYPE_CHECKING, Any

import trio

from ..engine.api import Refused
from ..gocompat.json import go_json
from ..http.messages import accepts_frames
from ..http.v1 import (
    BinaryBody,
    HTTPError,
    JSONBody,
    Request,
    as_http_error,
    query_string,
    refused,
)
from ..log import log
from .asking import ASK_TIMEOUT
from .kept import ASK_ERRORS
from .refusals import peer_error, queue_missing, refusal

if TYPE_CHECKING:
    from .fanout import FanOut, Handler

GATHERED = (("GET", "/channel/peek"), ("POST", "/channel/receive"), ("POST", "/channel/pop"))
BY_ID = ["/message/fin", "/message/req", "/message/touch", "/message/cancel", "/message/defer"]
_BINARY = b"Accept: application/octet-stream\r\n"
_POP, _RECEIVE = b"/channel/pop", b"/channel/receive"
_AGAIN = ("true", "1")  # a receive's `again` values that give back what its lease holds
# seconds a peer has for its part of a receive under a named lease (up to a Spark partition's
# 8 MiB of frames): one that does not answer fails the receive (503), and a loaded peer that
# needs more than ASK_TIMEOUT for such a part would fail each retry too (each asks for it again)
LEASED_ASK_TIMEOUT = 10.0
_FRAME_ID = 18  # a message frame: size, type, timestamp, attempts, then the id
Address = tuple[str, int]


class GroupMessages:
    def __init__(self, fanout: FanOut, max_body: int) -> None:
        self._fanout = fanout
        self._max_body = max_body  # the handlers' limit on a body of ids

    def install(self, routes: dict[str, dict[str, Any]]) -> None:
        """Put the group's handlers in place of the lone ones (in the API's route table)."""
        for method, path in GATHERED:
            handler, logged, rendering = routes[path][method]
            routes[path][method] = (self._gathered(handler), logged, rendering)
        for path in BY_ID:
            handler, logged, rendering = routes[path]["POST"]
            routes[path]["POST"] = (self._by_id(handler), logged, rendering)

    # -- receive, pop, peek -------------------------------------------------------------------

    def _gathered(self, local: Handler) -> Handler:
        async def handle(req: Request) -> Any:
            if req.peer:
                return await local(req)
            if req.raw_path == _RECEIVE and req.arg("again") in _AGAIN:
                return await self._again(local, req)
            return await self._gather(local, req)

        return handle

    async def _again(self, local: Handler, req: Request) -> Any:
        """A receive with `again`: what the lease holds in every worker (`again=held`), and
        only then new messages for the rest (`again=false`). Asked as one, the worker that got
        it would fill `n` with its own new messages before asking a peer for what the lease
        holds there, and those, finished with the lease, were never read (a Spark task whose
        retry reached another worker than its first run)."""
        held = await self._gather(local, req.with_args(again="held"), by_bytes=False)
        binary = type(held) is BinaryBody
        got = split_messages(held, binary)
        wanted, limit = _wanted(req)
        taken = _bytes(got, binary)
        if len(got) >= wanted or (limit and taken >= limit):
            return held
        rest = {"again": "false", "n": str(wanted - len(got))}
        if limit:
            rest["max_bytes"] = str(limit - taken)
        more = await self._gather(local, req.with_args(**rest))
        return _joined(got + split_messages(more, binary), binary)

    async def _gather(self, local: Handler, req: Request, by_bytes: bool = True) -> Any:
        """This worker's answer, then the peers' for what is still wanted (`by_bytes`: whether
        `max_bytes` bounds it, else `n` alone: a lease's held messages are given back whole)."""
        missing: HTTPError | None = None
        try:
            answer = await local(req)  # every argument checked here first
            binary = type(answer) is BinaryBody
            parts = [split_messages(answer, binary)]
        except Refused as exc:
            if exc.http_status != 404:
                raise
            # a topic or channel this worker lacks (made while it was down, not yet
            # caught up): a peer may have it
            missing, binary, parts = refused(exc), accepts_frames(req), [[]]
        # where the queue is missing here, the first peer that has it judges the arguments
        # (asked them as they came); after that, each is asked for what is still wanted
        judged = missing is None
        wanted, limit = _wanted(req) if judged else (0, 0)
        got, taken = len(parts[0]), _bytes(parts[0], binary)
        headers = _BINARY if binary else b""
        refusals: list[tuple[int, bytes]] = []  # the peers' that lack the queue too
        pop = req.raw_path == _POP
        leased = req.raw_path == _RECEIVE and bool(req.arg("lease"))
        for address in self._fanout.peers():
            if judged and (got >= wanted or (by_bytes and limit and taken >= limit)):
                break
            target = req.target
            if judged:
                rest = {"n": str(wanted - got)}
                if limit:
                    rest["max_bytes"] = str(limit - taken)
                target = _with(req, **rest)
            if pop:  # received, then finished (the docstring says why)
                target = _RECEIVE + target[len(_POP) :]
            try:
                with trio.fail_after(LEASED_ASK_TIMEOUT if leased else ASK_TIMEOUT):
                    status, body = await self._fanout.ask(address, req.method, target, headers)
            except ASK_ERRORS as exc:
                log.warning("group: peer %s:%d did not answer %s - %s", *address, target, exc)
                if leased and isinstance(exc, trio.TooSlowError):
                    # it lives, and may take under the lease after all: left out, those
                    # would be finished with the lease unread; the caller asks again
                    raise HTTPError(503, "PEER_UNAVAILABLE") from None
                continue  # down: what it held under the lease went with it
            if status == 200:
                parts.append(split_messages(body, binary))
                if pop:
                    await self._popped(address, req, parts[-1], binary)
                got += len(parts[-1])
                taken += _bytes(parts[-1], binary)
                if not judged:
                    judged, (wanted, limit) = True, _wanted(req)
            elif not judged:
                refusals.append((status, body))
                if not queue_missing(status, body):  # judged where the queue is
                    raise peer_error(status, body)
        if len(parts) == 1:
            if missing is not None:
                raise refusal(missing, refusals)
            return answer
        return _joined([m for part in parts for m in part], binary)

    async def _popped(
        self, address: Address, req: Request, messages: list[Any], binary: bool
    ) -> None:
        """A pop's receive at a peer (its split answer), finished there, and made a pop's
        answer (no `due`) in place."""
        if binary:
            ids = [frame[_FRAME_ID : _FRAME_ID + 16] for frame in messages]
        else:
            ids = [m["id"].encode() for m in messages]
            for m in messages:
                m.pop("due", None)
        if ids:
            names = {"topic": req.arg("topic") or "", "channel": req.arg("channel") or ""}
            await finish_at(self._fanout, address, names, ids)

    # -- by id ----------------------------------------------------------------------------------

    def _by_id(self, local: Handler) -> Handler:
        async def handle(req: Request) -> Any:
            if req.peer:
                return await local(req)
            if req.arg("id") is not None:
                return await self._one(local, req)
            body = await req.read(self._max_body + 1)
            req.put_back(body)  # the handler reads it (and refuses it) as it would alone
            try:
                answer = await local(req)
            except Refused as exc:
                if exc.http_status != 404:
                    raise
                # the queue is not here (a topic published in one worker alone): the ids, or
                # the lease, are the peers' alone
                return await self._elsewhere(req, body, refused(exc))
            if not body.strip():  # a lease's messages: each worker acts on what it holds
                return _summed(answer, await self._fanout.ask_all(req.method, req.target))
            return await self._rest(answer, req)

        return handle

    async def _one(self, local: Handler, req: Request) -> Any:
        try:
            return await local(req)
        except (HTTPError, Refused) as exc:
            err = as_http_error(exc)
            if err.status != 404:
                raise err from None
            answers = await self._fanout.ask_all(req.method, req.target)
            if any(status == 200 for status, _ in answers):
                return "OK"
            raise refusal(err, answers) from None

    async def _elsewhere(self, req: Request, body: bytes, missing: HTTPError) -> Any:
        """Many ids, or a lease, where this worker lacks the queue: the peers' answers
        combined (counts summed; an id failed when it failed in every peer that has the
        queue), or, when none has it, a refusal of the request judged there."""
        answers = await self._fanout.ask_all(req.method, req.target, body)
        docs = [json.loads(text) for status, text in answers if status == 200]
        if not docs:
            raise refusal(missing, answers)
        ok = sum(doc["ok"] for doc in docs)
        if not body.strip():  # a lease's messages: each worker's failures are its own
            return JSONBody(go_json({"ok": ok, "failed": [f for d in docs for f in d["failed"]]}))
        retry = set.intersection(*({f["id"] for f in doc["failed"]} for doc in docs))
        return JSONBody(
            go_json({"ok": ok, "failed": [f for f in docs[0]["failed"] if f["id"] in retry]})
        )

    async def _rest(self, answer: JSONBody, req: Request) -> Any:
        """Many ids: those that failed here asked of the peers."""
        doc = json.loads(answer)
        failed = doc["failed"]
        if not failed:
            return answer
        retry = {f["id"] for f in failed}
        body = "\n".join(sorted(retry)).encode()
        ok = doc["ok"]
        for status, text in await self._fanout.ask_all(req.method, req.target, body):
            if status != 200:
                continue
            there = json.loads(text)
            ok += there["ok"]
            retry &= {f["id"] for f in there["failed"]}  # what failed there too
        return JSONBody(go_json({"ok": ok, "failed": [f for f in failed if f["id"] in retry]}))


def _wanted(req: Request) -> tuple[int, int]:
    """A gathered request's n and max_bytes (checked already by a handler)."""
    return int(req.arg("n") or 1), int(req.arg("max_bytes") or 0)


def _summed(answer: JSONBody, answers: list[tuple[int, bytes]]) -> JSONBody:
    doc = json.loads(answer)
    for status, text in answers:
        if status == 200:
            there = json.loads(text)
            doc["ok"] += there["ok"]
            doc["failed"] += there["failed"]
    return JSONBody(go_json(doc))


async def finish_at(
    fanout: FanOut, address: Address, names: dict[str, str], ids: list[bytes]
) -> None:
    """FIN at a peer what was received there for a pop (`names`: topic and channel); one it
    does not confirm is logged (it comes back when its lease ends: twice, never lost)."""
    target = b"/message/fin?" + query_string(names)
    try:
        with trio.fail_after(ASK_TIMEOUT):
            status, body = await fanout.ask(address, "POST", target, body=b"\n".join(ids))
        if status == 200 and not json.loads(body).get("failed"):
            return
    except ASK_ERRORS as exc:
        body = str(exc).encode()
    log.warning("group: peer %s:%d did not finish %s - %s", *address, target, body[:200])


def _joined(messages: list[Any], binary: bool) -> Any:
    """One answer of split messages: the frames back to back, or the JSON."""
    if binary:
        return BinaryBody(b"".join(messages))
    return JSONBody(go_json({"messages": messages}))


def split_messages(body: bytes, binary: bool) -> list[Any]:
    """An answer's messages: JSON objects, or nsqd's frames (each with its size)."""
    if not binary:
        return list(json.loads(body)["messages"])
    frames, pos = [], 0
    while pos + 4 <= len(body):
        end = pos + 4 + int.from_bytes(body[pos : pos + 4], "big")
        frames.append(body[pos:end])
        pos = end
    return frames


def _bytes(messages: list[Any], binary: bool) -> int:
    """What the bodies of an answer's messages hold (a frame: 34 bytes of head, then it)."""
    if binary:
        return sum(len(frame) - 34 for frame in messages)
    return sum(len(base64.b64decode(m["body"])) for m in messages)


def _with(req: Request, **changed: str) -> bytes:
    """The request's target with some query values changed."""
    query = {**req.query(), **{k: [v] for k, v in changed.items()}}
    return req.raw_path + b"?" + query_string(query, doseq=True)
