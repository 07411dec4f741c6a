"""A small blocking NSQ TCP client on top of `protocol` (frames and messages), and a publisher.

One `Connection` is used either request/response style (`request`), or, once subscribed, by
one reader thread calling `recv_frames` while other threads `send` (sends are serialized)."""

from __future__ import annotations

import json
import socket
import struct
import threading
from collections import deque
from collections.abc import Sequence
from typing import Any

from protocol.v2 import MAGIC_V2, ErrorCode, Frame, FrameDecoder, FrameType, NSQError
from protocol.v2 import encoders as commands
from protocol.v2.frames import HEARTBEAT, OK

from .addresses import Address

USER_AGENT = "pyspark_nsq/0.1"
_RECV_SIZE = 1 << 18
_SEND_TIMEOUT = struct.pack("ll", 30, 0)  # struct timeval: 30 s


class ConnectionClosed(ConnectionError):
    """nsqd closed the connection (or it broke)."""


def parse_error(data: bytes) -> NSQError:
    """An error frame's body, e.g. b"E_FIN_FAILED FIN failed ...", as protocol's NSQError."""
    text = data.decode("utf-8", "replace")
    code_text, _, desc = text.partition(" ")
    try:
        code = ErrorCode(code_text)
    except ValueError:
        return NSQError(ErrorCode.E_INVALID, text, fatal=True)
    return NSQError(code, desc or None)


class Connection:
    def __init__(self, address: Address, *, timeout: float = 5.0) -> None:
        self.address = address
        self.timeout = timeout
        self._sock: socket.socket | None = None
        self._decoder = FrameDecoder()
        self._frames: deque[Frame] = deque()
        self._send_lock = threading.Lock()
        self.closed = False

    def __repr__(self) -> str:
        return f"<Connection {self.address}>"

    def connect(self, identify: dict[str, Any] | None = None) -> dict[str, Any]:
        """Open, send the magic, then IDENTIFY if asked: returns nsqd's negotiated settings
        (an empty dict unless `feature_negotiation` was asked for)."""
        sock = socket.create_connection((self.address.host, self.address.port), self.timeout)
        sock.setsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)
        # No send blocks for ever on an nsqd that stopped reading (the socket is in blocking
        # mode while a reader thread owns it).
        sock.setsockopt(socket.SOL_SOCKET, socket.SO_SNDTIMEO, _SEND_TIMEOUT)
        self._sock = sock
        try:
            sock.sendall(MAGIC_V2)
            if identify is None:
                return {}
            frame = self.request(commands.identify(identify))
        except BaseException:
            self.close()
            raise
        if frame.data == OK:
            return {}
        return dict(json.loads(frame.data))

    def send(self, data: bytes) -> None:
        sock = self._sock
        if sock is None or self.closed:
            raise ConnectionClosed(f"{self.address}: not connected")
        with self._send_lock:
            try:
                sock.sendall(data)
            except OSError as exc:
                raise ConnectionClosed(f"{self.address}: {exc}") from exc

    def recv_frames(self, timeout: float | None = None) -> list[Frame]:
        """Block until at least one whole frame arrived (heartbeats included)."""
        if self._frames:
            frames = list(self._frames)
            self._frames.clear()
            return frames
        sock = self._sock
        if sock is None:
            raise ConnectionClosed(f"{self.address}: not connected")
        while True:
            sock.settimeout(timeout)
            try:
                data = sock.recv(_RECV_SIZE)
            except TimeoutError:
                raise
            except OSError as exc:
                raise ConnectionClosed(f"{self.address}: {exc}") from exc
            if not data:
                raise ConnectionClosed(f"{self.address}: closed by nsqd")
            frames = self._decoder.feed(data)
            if frames:
                return frames

    def request(self, data: bytes) -> Frame:
        """Send a command answered by a response or an error, answering heartbeats meanwhile.
        Only while no reader thread owns the connection."""
        self.send(data)
        while True:
            if not self._frames:
                self._frames.extend(self.recv_frames(self.timeout))
            frame = self._frames.popleft()
            if frame.frame_type == FrameType.RESPONSE and frame.data == HEARTBEAT:
                self.send(commands.NOP)
                continue
            if frame.frame_type == FrameType.ERROR:
                raise parse_error(frame.data)
            if frame.frame_type == FrameType.MESSAGE:
                raise ConnectionError(f"{self.address}: unexpected message frame")
            return frame

    def shutdown_write(self) -> None:
        sock = self._sock
        if sock is not None:
            with self._send_lock:
                try:
                    sock.shutdown(socket.SHUT_WR)
                except OSError:
                    pass

    def close(self) -> None:
        self.closed = True
        sock, self._sock = self._sock, None
        if sock is None:
            return
        try:
            sock.shutdown(socket.SHUT_RDWR)
        except OSError:
            pass
        sock.close()


class Publisher:
    """PUB/MPUB to one nsqd, waiting for each OK (errors raise protocol's NSQError)."""

    def __init__(self, address: Address, *, timeout: float = 30.0) -> None:
        self._conn = Connection(address, timeout=timeout)
        self._conn.connect()

    def publish(self, topic: str, body: bytes) -> None:
        self._conn.request(commands.pub(topic, body))

    def mpub(self, topic: str, bodies: Sequence[bytes]) -> None:
        if bodies:
            self._conn.request(commands.mpub(topic, bodies))

    def publish_many(
        self,
        topic: str,
        bodies: Sequence[bytes],
        *,
        batch_size: int = 1000,
        max_body_bytes: int = 5 * 1024 * 1024,
    ) -> int:
        """MPUB in chunks of at most `batch_size` messages and `max_body_bytes` per command."""
        chunk: list[bytes] = []
        size = 4
        for body in bodies:
            if chunk and (len(chunk) >= batch_size or size + 4 + len(body) > max_body_bytes):
                self.mpub(topic, chunk)
                chunk, size = [], 4
            chunk.append(body)
            size += 4 + len(body)
        self.mpub(topic, chunk)
        return len(bodies)

    def close(self) -> None:
        self._conn.close()

    def __enter__(self) -> Publisher:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()
