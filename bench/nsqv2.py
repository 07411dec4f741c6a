"""A small blocking NSQ V2 client on raw sockets, just enough for the benchmark.

Wire format: the client sends the magic b"  V2", then text commands ("PUB t\\n" followed by
[int32 size][body]); the server answers with frames [int32 size][int32 type][data] where
size = 4 + len(data) and type 0 = response, 1 = error, 2 = message. A message frame's data is
[int64 timestamp ns][uint16 attempts][16-byte id][body].
"""

from __future__ import annotations

import json
import socket
import struct
import time
from collections.abc import Iterator
from typing import Final

MAGIC: Final = b"  V2"
FRAME_RESPONSE: Final = 0
FRAME_ERROR: Final = 1
FRAME_MESSAGE: Final = 2
HEARTBEAT: Final = b"_heartbeat_"
OK: Final = b"OK"

FRAME_HEADER: Final = struct.Struct(">ii")
INT32: Final = struct.Struct(">i")
MESSAGE_HEADER: Final = struct.Struct(">qH16s")
MESSAGE_ID: Final = slice(10, 26)
RECV_SIZE: Final = 1 << 18


class ProtocolError(RuntimeError):
    """The daemon answered with an error frame or broke the protocol."""


class Timeout(RuntimeError):
    """A bounded wait ran out."""


def pub_command(topic: str, body: bytes) -> bytes:
    return b"PUB %s\n%s%s" % (topic.encode(), INT32.pack(len(body)), body)


def mpub_command(topic: str, bodies: list[bytes]) -> bytes:
    parts = [INT32.pack(len(b)) + b for b in bodies]
    payload = INT32.pack(len(bodies)) + b"".join(parts)
    return b"MPUB %s\n%s%s" % (topic.encode(), INT32.pack(len(payload)), payload)


def identify_command(config: dict[str, object]) -> bytes:
    body = json.dumps(config).encode()
    return b"IDENTIFY\n" + INT32.pack(len(body)) + body


def fin_commands(ids: list[bytes]) -> bytes:
    return b"".join([b"FIN " + i + b"\n" for i in ids])


class Connection:
    """One blocking V2 connection with a frame reader; every wait takes an absolute deadline."""

    def __init__(self, addr: tuple[str, int], connect_timeout: float = 5.0) -> None:
        self.sock = socket.create_connection(addr, timeout=connect_timeout)
        self.sock.setsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)
        self.sock.setsockopt(socket.SOL_SOCKET, socket.SO_RCVBUF, 1 << 20)
        self._buf = bytearray()
        self._pending: list[tuple[int, bytes]] = []
        self.send(MAGIC)

    def close(self) -> None:
        self.sock.close()

    def __enter__(self) -> Connection:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()

    def send(self, data: bytes) -> None:
        self.sock.settimeout(10.0)
        self.sock.sendall(data)

    def recv_frames(self, deadline: float) -> list[tuple[int, bytes]]:
        """Block until whole frames arrived (or the deadline passed: []); return them all."""
        if self._pending:
            frames, self._pending = self._pending, []
            return frames
        while True:
            frames = list(self._split_frames())
            if frames:
                return frames
            remaining = deadline - time.monotonic()
            if remaining <= 0:
                return []
            self.sock.settimeout(remaining)
            try:
                chunk = self.sock.recv(RECV_SIZE)
            except TimeoutError:
                return []
            if not chunk:
                raise ProtocolError("connection closed by the daemon")
            self._buf += chunk

    def _split_frames(self) -> Iterator[tuple[int, bytes]]:
        buf = self._buf
        end = len(buf)
        off = 0
        while end - off >= 8:
            size, ftype = FRAME_HEADER.unpack_from(buf, off)
            if end - off < 4 + size:
                break
            yield ftype, bytes(buf[off + 8 : off + 4 + size])
            off += 4 + size
        if off:
            del buf[:off]

    def next_frame(self, deadline: float) -> tuple[int, bytes] | None:
        """The next frame, or None if none arrived before the deadline."""
        if not self._pending:
            self._pending = self.recv_frames(deadline)
        return self._pending.pop(0) if self._pending else None

    def expect_response(self, deadline: float, expected: bytes = OK) -> bytes:
        """Wait for the next non-heartbeat response (any if expected is b""); raise otherwise."""
        while (frame := self.next_frame(deadline)) is not None:
            ftype, data = frame
            if ftype == FRAME_ERROR:
                raise ProtocolError(data.decode(errors="replace"))
            if ftype == FRAME_RESPONSE and data == HEARTBEAT:
                self.send(b"NOP\n")
                continue
            if ftype == FRAME_RESPONSE and (not expected or data == expected):
                return data
            raise ProtocolError(f"unexpected frame type {ftype}: {data[:80]!r}")
        raise Timeout(f"no response {expected!r} before the deadline")

    def identify(self, config: dict[str, object], deadline: float) -> bytes:
        self.send(identify_command(config))
        return self.expect_response(deadline, expected=b"")

    def subscribe(self, topic: str, channel: str, rdy: int, deadline: float) -> None:
        self.send(b"SUB %s %s\n" % (topic.encode(), channel.encode()))
        self.expect_response(deadline)
        if rdy:
            self.send(b"RDY %d\n" % rdy)
