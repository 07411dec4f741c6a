"""A minimal blocking V2 client for tests and tools: frames in through protocol.FrameDecoder,
commands out through protocol.encoders. Heartbeats are answered with NOP and never returned.

Import it like nsqd_process: put scripts/ on sys.path, then `import v2client`."""

from __future__ import annotations

import socket

from protocol.v2 import FrameDecoder, encoders

HOST = "127.0.0.1"


class BlockingV2:
    def __init__(self, addr: tuple[str, int], timeout: float = 5.0) -> None:
        self.sock = socket.create_connection(addr, timeout=timeout)
        # as Go's net (go-nsq): each command leaves at once, not held by Nagle's algorithm
        # until the daemon's delayed ACK of the one before (up to 40 ms on Linux)
        self.sock.setsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)
        self.sock.settimeout(timeout)
        self.sock.sendall(b"  V2")
        self._decoder = FrameDecoder()
        self._frames: list[tuple[int, bytes]] = []

    def close(self) -> None:
        self.sock.close()

    def __enter__(self) -> BlockingV2:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()

    def send(self, data: bytes) -> None:
        self.sock.sendall(data)

    def frame(self) -> tuple[int, bytes]:
        """The next frame that is not a heartbeat, as (frame type, data)."""
        while True:
            while self._frames:
                kind, data = self._frames.pop(0)
                if kind == 0 and data == b"_heartbeat_":
                    self.sock.sendall(encoders.NOP)
                    continue
                return kind, data
            chunk = self.sock.recv(65536)
            if not chunk:
                raise ConnectionError("nsqd closed the connection")
            self._frames.extend((f.frame_type, f.data) for f in self._decoder.feed(chunk))

    def expect_ok(self) -> None:
        frame = self.frame()
        assert frame == (0, b"OK"), frame

    def pub(self, topic: str, body: bytes) -> None:
        self.send(encoders.pub(topic, body))
        self.expect_ok()

    def sub(self, topic: str, channel: str) -> None:
        self.send(encoders.sub(topic, channel))
        self.expect_ok()

    def rdy(self, count: int) -> None:
        self.send(encoders.rdy(count))

    def fin(self, msg_id: bytes) -> None:
        self.send(encoders.fin(msg_id))

    def req(self, msg_id: bytes, delay_ms: int = 0) -> None:
        self.send(encoders.req(msg_id, delay_ms))

    def nop(self) -> None:
        self.send(encoders.NOP)
