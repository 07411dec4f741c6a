"""A small Trio client for nsqd's V2 protocol, for the raw-socket tests.

Commands are encoded here (client side, as pynsq and go-nsq write them); server frames are read
with ``protocol.FrameDecoder`` and message bodies with ``protocol.decode_message``. Every read
takes a timeout, so no test can hang on a silent daemon."""

from __future__ import annotations

import json
import struct
from typing import Any

import trio

from protocol.v2 import FrameDecoder, FrameType, decode_message
from protocol.v2.frames import Frame
from protocol.v2.message import DecodedMessage

MAGIC = b"  V2"
HEARTBEAT = b"_heartbeat_"
PROBE_TOPIC = "e2e_probe"  # published to, never subscribed
_I32 = struct.Struct(">i")


# -- client-side encoders ------------------------------------------------------------------


def command(line: bytes | str, body: bytes | None = None) -> bytes:
    if isinstance(line, str):
        line = line.encode()
    data = line + b"\n"
    if body is not None:
        data += _I32.pack(len(body)) + body
    return data


def mpub_body(bodies: list[bytes]) -> bytes:
    return _I32.pack(len(bodies)) + b"".join(_I32.pack(len(b)) + b for b in bodies)


def identify_cmd(**fields: Any) -> bytes:
    return command("IDENTIFY", json.dumps(fields).encode())


# -- the connection --------------------------------------------------------------------------


class ConnectionClosed(Exception):
    """The daemon closed the connection."""


class Conn:
    """One client connection. By default heartbeats are answered with NOP and not returned."""

    def __init__(self, stream: trio.SocketStream, *, answer_heartbeats: bool = True) -> None:
        self.stream = stream
        self.decoder = FrameDecoder()
        self.pending: list[Frame] = []
        self.answer_heartbeats = answer_heartbeats
        self.heartbeats = 0
        self.eof = False

    @classmethod
    async def open(
        cls, addr: tuple[str, int], *, magic: bool = True, answer_heartbeats: bool = True
    ) -> Conn:
        with trio.fail_after(5):
            stream = await trio.open_tcp_stream(*addr)
        conn = cls(stream, answer_heartbeats=answer_heartbeats)
        if magic:
            await conn.send(MAGIC)
        return conn

    async def aclose(self) -> None:
        with trio.move_on_after(1):
            await self.stream.aclose()

    async def __aenter__(self) -> Conn:
        return self

    async def __aexit__(self, *exc: object) -> None:
        await self.aclose()

    # -- sending -----------------------------------------------------------------------------

    async def send(self, data: bytes) -> None:
        with trio.fail_after(5):
            await self.stream.send_all(data)

    async def cmd(self, line: bytes | str, body: bytes | None = None) -> None:
        await self.send(command(line, body))

    # -- receiving ---------------------------------------------------------------------------

    async def _fill(self) -> None:
        if self.eof:
            raise ConnectionClosed
        try:
            data = await self.stream.receive_some(65536)
        except (trio.BrokenResourceError, trio.ClosedResourceError) as exc:
            self.eof = True
            raise ConnectionClosed from exc
        if not data:
            self.eof = True
            raise ConnectionClosed
        self.pending.extend(self.decoder.feed(data))

    async def read_frame(self, within: float = 3.0) -> Frame:
        """The next frame (heartbeats handled as configured); TooSlowError after `within` s."""
        with trio.fail_after(within):
            while True:
                while self.pending:
                    frame = self.pending.pop(0)
                    if frame.frame_type == FrameType.RESPONSE and frame.data == HEARTBEAT:
                        self.heartbeats += 1
                        if self.answer_heartbeats:
                            await self.cmd("NOP")
                            continue
                    return frame
                await self._fill()

    async def frames_for(self, seconds: float) -> list[Frame]:
        """Every frame arriving within `seconds` (stops early if the daemon closes)."""
        frames: list[Frame] = []
        with trio.move_on_after(seconds):
            try:
                while True:
                    frames.append(await self.read_frame(seconds + 1))
            except ConnectionClosed:
                pass
        return frames

    async def expect_response(self, data: bytes = b"OK", within: float = 3.0) -> None:
        frame = await self.read_frame(within)
        assert (frame.frame_type, frame.data) == (FrameType.RESPONSE, data), frame

    async def expect_error(self, within: float = 3.0) -> str:
        frame = await self.read_frame(within)
        assert frame.frame_type == FrameType.ERROR, frame
        return frame.data.decode("utf-8", "replace")

    async def expect_closed(self, within: float = 3.0) -> None:
        """The daemon closes the connection within `within` s without sending anything else."""
        try:
            frame = await self.read_frame(within)
        except ConnectionClosed:
            return
        except trio.TooSlowError:
            raise AssertionError(f"connection still open after {within}s") from None
        raise AssertionError(f"expected the connection to close, got {frame}")

    async def expect_open(self) -> None:
        """The connection still works: a PUB to a topic nobody reads gets its OK."""
        await self.pub(PROBE_TOPIC, b"probe")

    async def expect_message(self, within: float = 3.0) -> DecodedMessage:
        frame = await self.read_frame(within)
        assert frame.frame_type == FrameType.MESSAGE, frame
        return decode_message(frame.data)

    async def messages(self, n: int, within: float = 5.0) -> list[DecodedMessage]:
        """Exactly the next `n` frames, all messages, within `within` s in total."""
        out: list[DecodedMessage] = []
        with trio.fail_after(within):
            while len(out) < n:
                out.append(await self.expect_message(within))
        return out

    async def messages_for(self, seconds: float) -> list[DecodedMessage]:
        """Every message arriving within `seconds`; any other frame fails the test."""
        frames = await self.frames_for(seconds)
        for f in frames:
            assert f.frame_type == FrameType.MESSAGE, f
        return [decode_message(f.data) for f in frames]

    # -- commands ------------------------------------------------------------------------

    async def identify(self, **fields: Any) -> dict[str, Any]:
        """IDENTIFY with feature negotiation; the daemon's JSON answer."""
        await self.send(identify_cmd(feature_negotiation=True, **fields))
        frame = await self.read_frame()
        assert frame.frame_type == FrameType.RESPONSE, frame
        return json.loads(frame.data)

    async def sub(self, topic: str, channel: str, rdy: int | None = None) -> None:
        await self.cmd(f"SUB {topic} {channel}")
        await self.expect_response()
        if rdy is not None:
            await self.rdy(rdy)

    async def rdy(self, n: int) -> None:
        await self.cmd(f"RDY {n}")

    async def fin(self, msg_id: bytes) -> None:
        await self.cmd(b"FIN " + msg_id)

    async def req(self, msg_id: bytes, delay_ms: int = 0) -> None:
        await self.cmd(b"REQ " + msg_id + b" %d" % delay_ms)

    async def touch(self, msg_id: bytes) -> None:
        await self.cmd(b"TOUCH " + msg_id)

    async def pub(self, topic: str, body: bytes) -> None:
        await self.cmd(f"PUB {topic}", body)
        await self.expect_response()

    async def mpub(self, topic: str, bodies: list[bytes]) -> None:
        await self.cmd(f"MPUB {topic}", mpub_body(bodies))
        await self.expect_response()

    async def dpub(self, topic: str, delay_ms: int, body: bytes) -> None:
        await self.cmd(f"DPUB {topic} {delay_ms}", body)
        await self.expect_response()


async def publish(addr: tuple[str, int], topic: str, bodies: list[bytes]) -> None:
    """Publish on a short-lived connection (MPUB)."""
    async with await Conn.open(addr) as conn:
        await conn.mpub(topic, bodies)
