"""The pulls' links, served in the daemon's loop (nsqd/net/reactor.py) as its front-ends'
connections are: a link's socket is in the loop's epoll set, what it brings is moved into this
worker's channel in the pass that read it (and so reaches a consumer here in that pass), and the
link's FINs, NOPs and RDYs are written from the pass too.

A Pull (pull.py) connects and greets its peer in its own task, then hands the link here
(`serve`) and waits until it ends (the peer closed it, a write failed, a frame was malformed,
the loop stopped) or its task is cancelled (the channel's last consumer here left).

Each link in a task of its own (trio's stream, a task for its reads and one for its RDYs) was
a message's slowest step across workers: on 2 cores, it reached the pulling worker's pull task
a median 300-400 us after the peer wrote it, while the loop's spin, which polled only the
loop's set, went on beside it; a message between two connections of one worker took ~200 us
in all."""

from __future__ import annotations

import math
import select
from typing import TYPE_CHECKING

import trio

from protocol.v2 import encoders
from protocol.v2.frames import HEARTBEAT, FrameType

from ..engine.api import WriteBatch
from ..log import log
from ..net.reactor import EpollReactor, Loop
from ..net.transport import SocketTransport

if TYPE_CHECKING:
    from .pull import LinkDecoder, Pull

READ_SIZE = 256 * 1024
RDY_CHECK = 1.0  # seconds between looks at a credit that changed unreported (a consumer left)
_OUT = select.EPOLLOUT


class Link:
    """One session of a Pull with its peer, while it is in the loop."""

    __slots__ = ("decoder", "due", "ended", "error", "out", "owed", "pull", "socket")

    def __init__(self, pull: Pull, stream: trio.SocketStream, decoder: LinkDecoder) -> None:
        self.pull = pull
        self.socket = SocketTransport(stream)
        self.decoder = decoder  # holds what the greeting's last read cut short
        self.due = math.inf  # the loop's timer entry (RDY_CHECK)
        self.out: list[bytes] = []  # what the socket did not take yet
        self.owed = False  # a RDY is due at the end of the pass
        self.ended = trio.Event()
        self.error: Exception | None = None

    def __repr__(self) -> str:
        return f"link {self.pull.topic}:{self.pull.channel}"


class Links(EpollReactor):
    """The pulls' links' part of the loop."""

    def __init__(self, loop: Loop, commit: WriteBatch) -> None:
        super().__init__(loop)
        self.commit = commit  # held by the pass: what a link moves is written before its FINs
        self._owed: list[Link] = []
        self._in_pass = False

    async def serve(self, link: Link) -> None:
        """Serve `link` until it ends: normally at the end of the peer's stream; its error
        (OSError, ValueError for a malformed frame) otherwise."""
        self.watch(link)
        try:
            self._send(link, b"")  # the session's first RDY
            if self.watching(link):
                self.schedule(link, trio.current_time() + RDY_CHECK)
            await link.ended.wait()
        finally:
            self._end(link)
        if link.error is not None:
            raise link.error

    def owe(self, link: Link) -> None:
        """`link`'s RDY must change: sent at the end of this pass, or of one run soon."""
        if not link.owed:
            link.owed = True
            self._owed.append(link)
            if not self._in_pass:
                self.wake()

    # -- the loop's calls ---------------------------------------------------------------------

    def _passing(self) -> None:
        self._in_pass = True

    def _passed(self) -> None:
        self._in_pass = False
        owed, self._owed = self._owed, []
        for link in owed:
            link.owed = False
            if self.watching(link):
                self._send(link, b"")

    def _ready(self, link: Link, events: int) -> None:
        if events & _OUT:
            self._drain(link)
            if not events & ~_OUT or not self.watching(link):  # only that, or its write failed
                return
        data = link.socket.read_now(READ_SIZE)
        if data is None:
            return
        if not data:
            self._end(link)
            return
        try:
            msgs, others = link.decoder.feed(data)
        except ValueError as exc:
            self._end(link, exc)
            return
        reply = []
        for frame in others:
            if frame.data == HEARTBEAT:
                reply.append(encoders.NOP)
            elif frame.frame_type == FrameType.ERROR:
                log.warning("group: %s - %s", link, frame.data)
        if msgs:
            reply.append(link.pull.move(msgs, self.commit))
        if reply:
            self._send(link, b"".join(reply))  # the credit the messages took goes with them

    def _expire(self, link: Link, now: float) -> None:
        if not self.watching(link):  # ended since (its fd may be another's already)
            return
        self._send(link, b"")
        if self.watching(link):
            self.schedule(link, now + RDY_CHECK)

    def _fail(self, link: Link) -> None:
        self._end(link)

    def _shutdown(self) -> None:
        for link in list(self.conns.values()):
            self._end(link)

    # -- output ---------------------------------------------------------------------------------

    def _send(self, link: Link, data: bytes) -> None:
        """`data` (FINs, REQs, NOPs, or nothing) with the RDY that is due now ahead of it.
        Ahead: the FINs of messages a consumer here still holds would free the peer to send
        the link as many again before a later RDY 0 came."""
        data = link.pull.rdy_due() + data
        if not data:
            return
        if link.out:  # behind what the socket did not take yet
            link.out.append(data)
        elif self._write(link, data) is False:
            self.want_output(link, True)

    def _drain(self, link: Link) -> None:
        data = b"".join(link.out)
        link.out.clear()
        if self._write(link, data):
            self.want_output(link, False)

    def _write(self, link: Link, data: bytes) -> bool | None:
        """One non-blocking write of `data`: True when all of it went, False when the rest
        waits in `link.out`, None when the write failed (the link has ended)."""
        try:
            sent = link.socket.write_now(data)
        except trio.BrokenResourceError as exc:
            self._end(link, exc)
            return None
        if sent < len(data):
            link.out.append(data[sent:])
            return False
        return True

    def _end(self, link: Link, error: Exception | None = None) -> None:
        if self.unwatch(link):
            link.error = error
            link.ended.set()
