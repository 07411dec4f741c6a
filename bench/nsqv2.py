"""A small blocking NSQ V2 client on raw sockets, just enough for the benchmark.

Wire format: the client sends the magic b"  V2", then text commands ("PUB t\\n" followed by
[int32 size][body]); the server answers with frames [int32 size][int32 type][data] where
size = 4 + len(data) and type 0 = response, 1 = error, 2 = message. A message frame's data is
[int64 timestamp ns][uint16 attempts][16-byte id][body].

`Connection.upgrade` negotiates TLS and/or snappy in IDENTIFY (nsqd's order: TLS, then
compression, each confirmed by an OK frame); afterwards every send and receive goes through them.
"""

from __future__ import annotations

import json
import socket
import ssl
import struct
import time
from collections.abc import Callable, Iterator
from typing import Any, Final

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
THROUGHPUT_CLIENT: Final = {"client_id": "bench", "hostname": "bench"}


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
        self._io: socket.socket = self.sock  # the TLS socket once upgraded
        self._compress: Callable[[bytes], bytes] | None = None
        self._decompress: Callable[[bytes], bytes] | None = None
        self._buf = bytearray()
        self._pending: list[tuple[int, bytes]] = []
        self.send(MAGIC)

    def close(self) -> None:
        if self._io is not self.sock:
            self._io.close()
        self.sock.close()

    def __enter__(self) -> Connection:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()

    def send(self, data: bytes) -> None:
        if self._compress is not None:
            data = self._compress(data)
        self._io.settimeout(10.0)
        self._io.sendall(data)

    def recv_frames(self, deadline: float, limit: int = -1) -> list[tuple[int, bytes]]:
        """Block until whole frames arrived (or the deadline passed: []); return them all (at
        most `limit` if >= 0: bytes behind them stay unparsed, they may be the next layer's)."""
        if self._pending:
            frames, self._pending = self._pending, []
            return frames
        while True:
            frames = list(self._split_frames(limit))
            if frames:
                return frames
            remaining = deadline - time.monotonic()
            if remaining <= 0:
                return []
            self._io.settimeout(remaining)
            try:
                chunk = self._io.recv(RECV_SIZE)
            except TimeoutError:
                return []
            if not chunk:
                raise ProtocolError("connection closed by the daemon")
            self._buf += self._decompress(chunk) if self._decompress is not None else chunk

    def _split_frames(self, limit: int = -1) -> Iterator[tuple[int, bytes]]:
        """Whole frames at the head of the buffer (at most `limit` of them if >= 0), removed."""
        buf = self._buf
        end = len(buf)
        off = 0
        while end - off >= 8 and limit != 0:
            limit -= 1
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

    def upgrade(
        self, deadline: float, *, tls: ssl.SSLContext | None = None, snappy: bool = False
    ) -> dict[str, Any]:
        """IDENTIFY with feature negotiation, then TLS and/or snappy; raise if one is refused."""
        config = {"feature_negotiation": True, "tls_v1": tls is not None, "snappy": snappy}
        self.send(identify_command({**THROUGHPUT_CLIENT, **config}))
        reply = json.loads(self._one_response(deadline, "IDENTIFY"))
        if tls is not None:
            if not reply.get("tls_v1"):
                raise ProtocolError(f"TLS refused: {reply}")
            if self._buf:
                raise ProtocolError("bytes arrived before the TLS handshake")
            self.sock.settimeout(max(deadline - time.monotonic(), 0.1))
            self._io = tls.wrap_socket(self.sock, server_hostname=self.sock.getpeername()[0])
            self._one_response(deadline, "TLS", OK)
        if snappy:
            if not reply.get("snappy"):
                raise ProtocolError(f"snappy refused: {reply}")
            import snappy as snappy_codec  # only runs that measure snappy need it

            compressor = snappy_codec.StreamCompressor()
            decompressor = snappy_codec.StreamDecompressor()
            self._compress, self._decompress = compressor.add_chunk, decompressor.decompress
            # bytes already received behind the IDENTIFY answer belong to the snappy stream
            leftover, self._buf = bytes(self._buf), bytearray()
            if leftover:
                self._buf += decompressor.decompress(leftover)
            self._one_response(deadline, "snappy", OK)
        return reply

    def _one_response(self, deadline: float, what: str, expected: bytes = b"") -> bytes:
        """Exactly one response frame (the bytes behind it may belong to the next layer)."""
        frames = self.recv_frames(deadline, limit=1)
        if not frames or frames[0][0] != FRAME_RESPONSE or expected not in (b"", frames[0][1]):
            raise ProtocolError(f"{what}: unexpected answer {frames[:1]!r}")
        return frames[0][1]

    def subscribe(self, topic: str, channel: str, rdy: int, deadline: float) -> None:
        self.send(b"SUB %s %s\n" % (topic.encode(), channel.encode()))
        self.expect_response(deadline)
        if rdy:
            self.send(b"RDY %d\n" % rdy)
