"""One worker pulling one channel from one peer, over the peer's private V2 link.

The link is an NSQ consumer of the peer's channel (IDENTIFY, SUB, RDY: the peer's own channel
keeps its timeouts, attempts, deferral and pause). Its RDY is what this worker's consumers of
the channel have credit for right now (spread over the peers, as go-nsq spreads max-in-flight
over nsqds), so nothing is pulled that no consumer here could take: a lower credit is sent at
once, ahead of the FINs of what was moved (`rdy_due`); a higher one once it grew by a quarter
(`wants_rdy`), since every FIN here moves the credit by one and each RDY wakes the peer. What
arrives is moved (`move`): put into this worker's channel (attempts, timestamp and id kept; a
disk write first where this worker's channel writes to disk; not counted in its
message_count, nor its delivery to the link in its delivery_count: the peer's counted them),
then FIN'd at the peer. From then
on it is this worker's message: FIN/REQ/TOUCH of its consumers stay here, and a crash loses what
one nsqd would.

A Pull's task connects (again after a pause when the peer went away) and greets the peer; the
session's reads and writes are the loop's (links.py)."""

from __future__ import annotations

import math
import struct
from collections.abc import Callable, Iterator
from itertools import chain
from typing import TYPE_CHECKING

import trio

from protocol.v2 import encoders
from protocol.v2.bodies import uniform_heads
from protocol.v2.frames import FRAME_HEADER, Frame, FrameType
from protocol.v2.message import MESSAGE_FRAME_HEAD

from ..engine.message import Message, records
from ..engine.ports import StoreError
from ..log import log
from .identity import LINK_AGENT
from .links import Link

if TYPE_CHECKING:
    from ..engine.api import WriteBatch
    from ..engine.broker import Broker
    from ..engine.channel import Channel
    from ..engine.ports import Consumer
    from .links import Links

MAGIC = b"  V2"
READ_SIZE = 256 * 1024
FIRST_PAUSE = 0.05  # before connecting again after a failed link; doubles up to 2 s


_MESSAGE = FrameType.MESSAGE
_HEAD = MESSAGE_FRAME_HEAD.size  # a message frame up to its body: 34 bytes


Fields = tuple[int, int, bytes, bytes]  # a message frame's timestamp, attempts, id and body


def _uniform_messages(buf: bytes) -> tuple[Iterator[Fields], int]:
    """The message frames of one size that `buf` holds, when every whole frame in it is one
    (the common read of a busy link), cut by struct in C, and the bytes they take; nothing
    otherwise (the frame loop reads them)."""
    n = len(buf)
    if n < _HEAD:
        return iter(()), 0
    size, frame_type = FRAME_HEADER.unpack_from(buf, 0)
    stride = size + 4
    k = n // stride
    if frame_type != _MESSAGE or size < _HEAD - 4 or k < 2:
        return iter(()), 0
    if not uniform_heads(buf, 0, k * stride, stride, 8):  # every frame's size and type
        return iter(()), 0
    frames = memoryview(buf)[: k * stride]
    return struct.Struct(f">8xqH16s{size - _HEAD + 4}s").iter_unpack(frames), k * stride


def _frames(buf: bytes, pos: int) -> tuple[list[Fields], list[Frame], int]:
    """The whole frames of `buf` from `pos` on, one at a time: the messages' fields, the
    other frames, and where the first frame not whole starts."""
    fields: list[Fields] = []
    others: list[Frame] = []
    head, frame_head = MESSAGE_FRAME_HEAD.unpack_from, FRAME_HEADER.unpack_from
    n = len(buf)
    while n - pos >= 8:
        if n - pos >= _HEAD:  # a message's whole head in one unpack (others use two fields)
            size, frame_type, ts, attempts, msg_id = head(buf, pos)
        else:
            size, frame_type = frame_head(buf, pos)
        end = pos + 4 + size
        if size < 4:
            raise ValueError(f"invalid frame size {size}")
        if end > n:
            break
        if frame_type == _MESSAGE:
            if size < _HEAD - 4:
                raise ValueError(f"message too short: {size - 4} bytes")
            fields.append((ts, attempts, msg_id, buf[pos + _HEAD : end]))
        else:
            others.append(Frame(frame_type, buf[pos + 8 : end]))
        pos = end
    return fields, others, pos


class LinkDecoder:
    """The link's frames, message frames read straight into this worker's records (a Frame
    and a decoded message object per message were a third of a moving worker's CPU)."""

    def __init__(self) -> None:
        self._rest = b""  # a frame cut by the end of the last read

    def feed(self, data: bytes) -> tuple[list[Message], list[Frame]]:
        """The messages (attempts as the peer counted them, less its delivery to the link,
        which this worker's will count again) and the other frames that `data` completes."""
        buf = self._rest + data if self._rest else data
        uniform, pos = _uniform_messages(buf)
        fields, others, pos = _frames(buf, pos)
        msgs = records(chain(uniform, fields), less=1)
        self._rest = buf[pos:]
        return msgs, others


class LinkError(Exception):
    """The peer refused the link (an error frame during the handshake)."""


def is_link(consumer: object) -> bool:
    """Whether a consumer of a channel is a peer's link (not one of this worker's clients)."""
    settings = getattr(consumer, "settings", None)
    return getattr(settings, "user_agent", "") == LINK_AGENT


def _own(consumer: Consumer) -> bool:
    return not is_link(consumer)


def local_credit(channel: Channel) -> int:
    """What this worker's own consumers of `channel` may be sent right now."""
    return sum(c.credit() for c in channel.consumers.values() if not is_link(c))


def wants_rdy(want: int, sent: int) -> bool:
    """Whether a link that last sent RDY `sent` must send `want`: a lower one at once (nothing
    is pulled that no consumer here could take), a higher one once it is a quarter more (or
    any from 0: one consumer's RDY 1 is exact). Without the step every FIN, and every message
    moved, sent a RDY to each peer at 10k msgs/s: a task switch here and a wake-up there."""
    return want < sent or want >= sent + max(1, sent >> 2)


class Pull:
    def __init__(
        self,
        broker: Broker,
        topic: str,
        channel: str,
        address: Callable[[], tuple[str, int] | None],
        peers: int,
        name: str,
        max_rdy: int,
        links: Links,
        auth: bytes = b"",
    ) -> None:
        self.broker = broker
        self._auth = auth  # the AUTH command sent before SUB (with --auth-http-address), or b""
        self.topic, self.channel = topic, channel
        self._address = address  # where the peer's link listens now (None: not up yet)
        self._peers = peers
        self._name = name  # this worker, as the peer's /stats shows the link
        self._max_rdy = max_rdy  # the peer's --max-rdy-count (the group's)
        self._links = links  # the loop's part that serves a session's link
        self._link: Link | None = None  # the session now in the loop
        self.sent = -1  # the RDY the peer has now (-1: none sent on this session yet)
        self.scope = trio.CancelScope()
        self.greeted = trio.Event()  # its first try ended: subscribed at the peer, or failed

    def nudge(self, want: int) -> None:
        """The channel's credit changed and `want` is what this link should ask for now: its
        RDY goes at the end of the pass if that calls for one."""
        link = self._link
        if link is not None and wants_rdy(want, self.sent):
            self._links.owe(link)

    def _local(self) -> Channel | None:
        topic = self.broker.topics.get(self.topic)
        return None if topic is None else topic.channels.get(self.channel)

    def want(self) -> int:
        """What this link asks of its peer: this worker's consumers' credit, spread over the
        peers, within the peer's --max-rdy-count (the same for each link of a channel)."""
        channel = self._local()
        if channel is None or channel.paused or channel.deleted:
            return 0
        return min(math.ceil(local_credit(channel) / self._peers), self._max_rdy)

    async def run(self) -> None:
        pause = FIRST_PAUSE
        with self.scope:
            while True:
                address = self._address()
                if address is not None:
                    try:
                        stream = await trio.open_tcp_stream(*address)
                        async with stream:
                            await self._session(stream)
                        pause = FIRST_PAUSE
                    # a peer that went away (killed, restarting): try again after a pause;
                    # except* also takes them out of the session's nursery's exception group
                    except* (OSError, trio.BrokenResourceError, LinkError, ValueError) as exc:
                        where = f"{self.topic}:{self.channel} {address}"
                        log.debug("group: link %s - %s", where, exc.exceptions[0])
                self.greeted.set()
                await trio.sleep(pause)
                pause = min(pause * 2, 2.0)

    async def _session(self, stream: trio.SocketStream) -> None:
        decoder = LinkDecoder()
        # no output buffering at the peer: what the link takes is delivered again here, through
        # the consumer's own output buffer; buffering it twice held each message up to 16 KiB
        # of the stream (4 ms at 10k msgs/s) before it crossed
        hello = {
            "client_id": self._name,
            "hostname": self._name,
            "user_agent": LINK_AGENT,
            "output_buffer_timeout": -1,
        }
        await stream.send_all(
            MAGIC + encoders.identify(hello) + self._auth + encoders.sub(self.topic, self.channel)
        )
        self.sent = -1
        answers = 0
        while answers < (3 if self._auth else 2):  # IDENTIFY's OK, AUTH's, SUB's OK
            data = await stream.receive_some(READ_SIZE)
            if not data:
                raise LinkError("closed during the handshake")
            for frame in decoder.feed(data)[1]:  # no message comes before the link's RDY
                if frame.frame_type == FrameType.ERROR:
                    raise LinkError(frame.data.decode(errors="replace"))
                answers += 1
        self.greeted.set()
        self._link = link = Link(self, stream, decoder)
        try:
            await self._links.serve(link)  # the loop reads and writes it from now on
        finally:
            self._link = None

    def rdy_due(self) -> bytes:
        """The RDY this link must send now (b"" when the peer's is still right)."""
        want = self.want()
        if wants_rdy(want, self.sent):
            self.sent = want
            return encoders.rdy(want)
        return b""

    def move(self, msgs: list[Message], commit: WriteBatch) -> bytes:
        """Take `msgs` into this worker's channel, written to its disk queue first where it
        writes to disk: FIN them at the peer, or give them back (REQ) when the channel is gone
        here or its store refused them."""
        channel = self._local()
        if channel is not None and not channel.deleted:
            try:
                channel.put_moved(msgs, _own)  # to this worker's consumers, not a link
                # counted once, in the worker whose topic put it into the channel: the peer's
                # link that took it may be gone by the time /stats sums the workers (its
                # consumers here left, or the message went back there after a timeout)
                channel.message_count -= len(msgs)
                channel.delivery_count -= len(msgs)  # the peer counted its delivery to the link
                error = commit.flush() if commit.buffered else None  # the pass holds it
                if error is None:
                    return b"FIN " + b"\nFIN ".join([m.id for m in msgs]) + b"\n"
                raise StoreError(error)
            except StoreError as exc:  # this worker's disk refused them: the peer keeps them
                where = f"{self.topic}:{self.channel}"
                log.error("group: link %s could not take messages - %s", where, exc)
        return b"".join(encoders.req(m.id) for m in msgs)
