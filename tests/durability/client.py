"""A blocking raw-socket V2 client for the durability tests: it encodes commands itself and
reads server frames with ``protocol.FrameDecoder`` and message bodies with
``protocol.decode_message``. Every read has a deadline, so no test can hang on a silent
daemon."""

from __future__ import annotations

import contextlib
import json
import socket
import struct
import time
from collections import deque
from collections.abc import Iterable

from protocol.v2 import FrameDecoder, FrameType, decode_message
from protocol.v2.frames import Frame
from protocol.v2.message import DecodedMessage
from tests.e2e.wire import HEARTBEAT, command, mpub_body
from tests.ops.conftest import Deflated

# -- commands (client side): the e2e wire's encoders --------------------------------------


def mpub_command(topic: str, bodies: list[bytes]) -> bytes:
    return command(f"MPUB {topic}", mpub_body(bodies))


class ConnectionClosed(Exception):
    """The daemon closed the connection."""


class ErrorFrame(Exception):
    """The daemon answered with an error frame."""


class Client:
    """One blocking V2 connection. Heartbeats are answered with NOP and never returned."""

    def __init__(self, addr: tuple[str, int], *, connect_timeout: float = 5.0) -> None:
        self.sock = socket.create_connection(addr, timeout=connect_timeout)
        self.sock.setsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)
        self.decoder = FrameDecoder()
        self.pending: deque[Frame] = deque()
        self.send(b"  V2")

    def __enter__(self) -> Client:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()

    def close(self) -> None:
        with contextlib.suppress(OSError):
            self.sock.close()

    def send(self, data: bytes) -> None:
        self.sock.settimeout(10.0)
        self.sock.sendall(data)

    def _fill(self, deadline: float) -> None:
        remaining = deadline - time.monotonic()
        if remaining <= 0:
            raise TimeoutError("no frame from the daemon in time")
        self.sock.settimeout(remaining)
        try:
            data = self.sock.recv(1 << 20)
        except ConnectionResetError as exc:
            raise ConnectionClosed from exc
        if not data:
            raise ConnectionClosed
        for frame in self.decoder.feed(data):
            if frame.frame_type == FrameType.RESPONSE and frame.data == HEARTBEAT:
                self.send(b"NOP\n")
            else:
                self.pending.append(frame)

    def deflate(self) -> None:
        """IDENTIFY with deflate: from its answer on the connection is compressed both ways,
        and the daemon serves it in tasks of its own (not in the loop's passes)."""
        body = json.dumps({"feature_negotiation": True, "deflate": True}).encode()
        self.send(command("IDENTIFY", body))
        size = struct.unpack(">i", self._exactly(4))[0]
        answer = self._exactly(size)  # plain: read no further, what follows is compressed
        assert answer[:4] == b"\0\0\0\0" and json.loads(answer[4:])["deflate"], answer
        self.sock = Deflated(self.sock)  # type: ignore[assignment]
        self.expect_ok()

    def _exactly(self, n: int) -> bytes:
        data = b""
        while len(data) < n:
            chunk = self.sock.recv(n - len(data))
            if not chunk:
                raise ConnectionClosed
            data += chunk
        return data

    def read_frame(self, timeout: float = 5.0) -> Frame:
        deadline = time.monotonic() + timeout
        while not self.pending:
            self._fill(deadline)
        return self.pending.popleft()

    def expect_ok(self, timeout: float = 10.0) -> None:
        frame = self.read_frame(timeout)
        if frame.frame_type == FrameType.ERROR:
            raise ErrorFrame(frame.data.decode("utf-8", "replace"))
        assert (frame.frame_type, frame.data) == (FrameType.RESPONSE, b"OK"), frame

    def expect_error(self, timeout: float = 5.0) -> str:
        frame = self.read_frame(timeout)
        assert frame.frame_type == FrameType.ERROR, frame
        return frame.data.decode("utf-8", "replace")

    # -- publishing ------------------------------------------------------------------------

    def pub(self, topic: str, body: bytes) -> None:
        self.send(command(f"PUB {topic}", body))
        self.expect_ok()

    def mpub(self, topic: str, bodies: list[bytes]) -> None:
        self.send(mpub_command(topic, bodies))
        self.expect_ok()

    def mpub_many(self, topic: str, batches: Iterable[list[bytes]], window: int = 8) -> int:
        """MPUB every batch, up to ``window`` unanswered at a time; the number of OKs."""
        outstanding = oks = 0
        for batch in batches:
            if outstanding >= window:
                self.expect_ok(30.0)
                outstanding -= 1
                oks += 1
            self.send(mpub_command(topic, batch))
            outstanding += 1
        for _ in range(outstanding):
            self.expect_ok(30.0)
            oks += 1
        return oks

    # -- consuming -------------------------------------------------------------------------

    def identify(self, **fields: object) -> dict[str, object] | None:
        self.send(command("IDENTIFY", json.dumps(fields).encode()))
        frame = self.read_frame()
        assert frame.frame_type == FrameType.RESPONSE, frame
        return json.loads(frame.data) if frame.data != b"OK" else None

    def sub(self, topic: str, channel: str, rdy: int | None = None) -> None:
        self.send(command(f"SUB {topic} {channel}"))
        self.expect_ok()
        if rdy is not None:
            self.rdy(rdy)

    def rdy(self, n: int) -> None:
        self.send(command(f"RDY {n}"))

    def fin(self, msg_id: bytes) -> None:
        self.send(b"FIN " + msg_id + b"\n")

    def fin_many(self, msg_ids: Iterable[bytes]) -> None:
        data = b"".join(b"FIN " + i + b"\n" for i in msg_ids)
        if data:
            self.send(data)

    def req(self, msg_id: bytes, delay_ms: int = 0) -> None:
        self.send(b"REQ " + msg_id + b" %d\n" % delay_ms)

    def barrier(self) -> None:
        """Wait until the daemon has handled every command sent so far: a FIN for an id never
        delivered answers E_FIN_FAILED (non-fatal), after the commands before it."""
        self.send(b"FIN " + b"0" * 16 + b"\n")
        deadline = time.monotonic() + 10.0
        while True:
            frame = self.read_frame(max(deadline - time.monotonic(), 0.001))
            if frame.frame_type == FrameType.MESSAGE:
                self.pending.appendleft(frame)  # keep the order for a later read
                raise AssertionError("a message arrived while waiting for the barrier")
            assert frame.frame_type == FrameType.ERROR, frame
            assert frame.data.startswith(b"E_FIN_FAILED"), frame
            return

    def message(self, timeout: float = 5.0) -> DecodedMessage:
        frame = self.read_frame(timeout)
        if frame.frame_type == FrameType.ERROR:
            raise ErrorFrame(frame.data.decode("utf-8", "replace"))
        assert frame.frame_type == FrameType.MESSAGE, frame
        return decode_message(frame.data)

    def messages(self, n: int, timeout: float = 10.0) -> list[DecodedMessage]:
        """Exactly the next ``n`` frames, all messages, within ``timeout`` in total."""
        deadline = time.monotonic() + timeout
        return [self.message(max(deadline - time.monotonic(), 0.001)) for _ in range(n)]

    def consume(
        self,
        expected: int,
        *,
        timeout: float = 30.0,
        quiet: float = 0.3,
        idle: float = 3.0,
        fin: bool = True,
    ) -> list[DecodedMessage]:
        """Read messages (FINing them) until ``expected`` arrived, then ``quiet`` seconds more
        to catch extra ones; everything received, so a caller can count duplicates or gaps.
        Gives up early when nothing arrives for ``idle`` seconds (messages are missing)."""
        out: list[DecodedMessage] = []
        deadline = time.monotonic() + timeout
        quiet_until: float | None = None
        while True:
            now = time.monotonic()
            if quiet_until is None and len(out) >= expected:
                quiet_until = now + quiet
            end = min(deadline, now + idle) if quiet_until is None else min(deadline, quiet_until)
            if now >= end:
                return out
            try:
                while not self.pending:
                    self._fill(end)
            except TimeoutError:
                return out
            ids = []
            while self.pending:
                frame = self.pending.popleft()
                if frame.frame_type != FrameType.MESSAGE:
                    raise AssertionError(f"unexpected frame while consuming: {frame}")
                msg = decode_message(frame.data)
                out.append(msg)
                ids.append(msg.id)
            if fin:
                self.fin_many(ids)
