"""The Redis bridge's asks of the group's other workers (resp/bridge.py's `Peers`). Worker 0
holds every Redis key, but a channel key's messages are in every worker's partition: a pop
that does not block, a move from a channel key and LLEN ask the peers' private HTTP for what
worker 0's partition lacked, as the HTTP message endpoints do (messages.py):

- a pop: `POST /channel/receive` for what is still wanted, one peer after another, then
  `/message/fin` of what came (its ids in the body). Not `/channel/pop`: a peer that answers
  after ASK_TIMEOUT (stopped, swapped out, busy) has still taken what it was asked for, and a
  pop's messages, finished there and left out here, were lost; a receive's go back to the
  channel when their lease ends. A FIN that is not answered leaves the messages the client's
  anyway: at worst the peer delivers them again (a duplicate, never a loss);
- a move: `POST /channel/receive` of one message, held in flight in its peer until the move
  has put it where it goes, then finished there (`/message/fin`), or given back
  (`/message/req`) when it could not be put;
- a depth: every peer's `/stats` of the topic or channel, summed.

Each ask starts with the peer after the one the last ask started with, so that no
partition's messages wait behind another's. A peer that does not answer within ASK_TIMEOUT is
left out and logged, as the HTTP endpoints leave it."""

from __future__ import annotations

import json
from typing import TYPE_CHECKING

import trio

from protocol.v2.message import DecodedMessage, decode_message

from ..http.v1 import query_string
from ..log import log
from .asking import ASK_TIMEOUT
from .kept import ASK_ERRORS
from .messages import finish_at, split_messages

if TYPE_CHECKING:
    from .fanout import FanOut

Address = tuple[str, int]
_FRAMES = b"Accept: application/octet-stream\r\n"  # nsqd's message frames, back to back


class PeerLists:
    def __init__(self, fanout: FanOut) -> None:
        self._fanout = fanout
        self._turn = 0  # which peer an ask starts with

    async def pop(self, topic: str, channel: str, n: int) -> list[bytes]:
        bodies: list[bytes] = []
        for address in self._in_turn():
            query = {"topic": topic, "channel": channel, "n": str(n - len(bodies))}
            msgs = await self._messages(address, b"/channel/receive", query)
            if msgs:
                names = {"topic": topic, "channel": channel}
                await finish_at(self._fanout, address, names, [m.id for m in msgs])
                bodies += [m.body for m in msgs]
            if len(bodies) >= n:
                break
        return bodies

    async def take(self, topic: str, channel: str) -> PeerMessage | None:
        for address in self._in_turn():
            query = {"topic": topic, "channel": channel, "n": "1"}
            for msg in await self._messages(address, b"/channel/receive", query):
                return PeerMessage(self._fanout, address, topic, channel, msg)
        return None

    async def depth(self, topic: str, channel: str | None) -> int:
        query = {"format": "json", "topic": topic, "include_clients": "false"}
        if channel is not None:
            query["channel"] = channel
        target = b"/stats?" + query_string(query)
        total = 0
        for status, body in await self._fanout.ask_all("GET", target):
            if status != 200:
                continue
            for found in json.loads(body).get("topics") or ():
                if found["topic_name"] != topic:
                    continue
                if channel is None:
                    total += found["depth"]
                    continue
                for c in found["channels"] or ():
                    if c["channel_name"] == channel:
                        total += c["depth"]
        return total

    def _in_turn(self) -> list[Address]:
        peers = self._fanout.peers()
        if not peers:
            return []
        k = self._turn % len(peers)
        self._turn += 1
        return peers[k:] + peers[:k]

    async def _messages(
        self, address: Address, path: bytes, query: dict[str, str]
    ) -> list[DecodedMessage]:
        """A peer's answer to a pop or receive: its messages (none when it has none, lacks
        the channel, or did not answer)."""
        target = path + b"?" + query_string(query)
        try:
            with trio.fail_after(ASK_TIMEOUT):
                status, body = await self._fanout.ask(address, "POST", target, _FRAMES)
        except ASK_ERRORS as exc:
            log.warning("group: peer %s:%d did not answer %s - %s", *address, target, exc)
            return []
        if status != 200:  # 404: the channel is not there (made while it was down)
            return []
        return [decode_message(frame[8:]) for frame in split_messages(body, binary=True)]


class PeerMessage:
    """A message a peer holds in flight for a move (resp/bridge.py's `Taken`)."""

    def __init__(
        self, fanout: FanOut, address: Address, topic: str, channel: str, msg: DecodedMessage
    ) -> None:
        self._fanout = fanout
        self._address = address
        self._query = {"topic": topic, "channel": channel, "id": msg.id.decode()}
        self.body = msg.body

    async def settle(self, done: bool) -> None:
        """FIN it at its peer (done), or REQ it there. A peer that does not answer keeps it
        in flight until its timeout, then delivers it again: a move may then be made twice,
        never lost."""
        path = b"/message/fin?" if done else b"/message/req?"
        target = path + query_string(self._query)
        try:
            with trio.fail_after(ASK_TIMEOUT):
                status, body = await self._fanout.ask(self._address, "POST", target)
        except ASK_ERRORS as exc:
            status, body = 0, str(exc).encode()
        if status != 200:
            where = f"{self._address[0]}:{self._address[1]}"
            log.warning("group: peer %s did not settle %s - %s", where, target, body[:200])
