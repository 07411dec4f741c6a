"""A minimal RESP client side for the suite: blocking sockets, one whole reply read at a time
(raw bytes kept for the byte-for-byte comparison), every wait bounded."""

from __future__ import annotations

import socket
import time

CLOSED = b"<closed>"
NO_REPLY = b"<no reply>"


class Conn:
    def __init__(self, port: int, host: str = "127.0.0.1", timeout: float = 5.0) -> None:
        self.sock = socket.create_connection((host, port), timeout=timeout)
        self.sock.setsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)
        self.buf = b""
        self.eof = False

    def send(self, data: bytes) -> None:
        try:
            self.sock.sendall(data)
        except OSError:
            self.eof = True

    def _fill(self, deadline: float) -> bool:
        if self.eof:
            return False
        left = deadline - time.monotonic()
        if left <= 0:
            return False
        self.sock.settimeout(left)
        try:
            data = self.sock.recv(65536)
        except TimeoutError:
            return False
        except OSError:
            data = b""
        if not data:
            self.eof = True
            return False
        self.buf += data
        return True

    def _line_end(self, pos: int, deadline: float) -> int:
        while True:
            end = self.buf.find(b"\r\n", pos)
            if end >= 0:
                return end
            if not self._fill(deadline):
                return -1

    def _one(self, pos: int, deadline: float) -> int:
        """The end offset of the reply starting at `pos`, or -1."""
        end = self._line_end(pos, deadline)
        if end < 0:
            return -1
        kind, head = self.buf[pos : pos + 1], self.buf[pos + 1 : end]
        nxt = end + 2
        if kind in (b"+", b"-", b":", b"_", b",", b"#", b"("):  # RESP3 adds null, double...
            return nxt
        if kind in (b"$", b"=", b"!"):  # bulk, RESP3's verbatim text and bulk error
            n = int(head)
            if n < 0:
                return nxt
            while len(self.buf) < nxt + n + 2:
                if not self._fill(deadline):
                    return -1
            return nxt + n + 2
        if kind in (b"*", b"%", b"~", b">", b"|"):  # array, map, set, push, attribute
            n = int(head) * (2 if kind in (b"%", b"|") else 1)
            for _ in range(max(n, 0)):
                nxt = self._one(nxt, deadline)
                if nxt < 0:
                    return -1
            return self._one(nxt, deadline) if kind == b"|" else nxt  # attributes precede
        return end + 2  # not RESP: the line as it came

    def reply(self, timeout: float = 2.0) -> bytes:
        """One whole reply's raw bytes; NO_REPLY when none came in time, CLOSED at EOF."""
        deadline = time.monotonic() + timeout
        if not self.buf and not self._fill(deadline):
            return CLOSED if self.eof else NO_REPLY
        end = self._one(0, deadline)
        if end < 0:
            return CLOSED if self.eof and not self.buf else NO_REPLY
        out, self.buf = self.buf[:end], self.buf[end:]
        return out

    def until_closed(self, timeout: float = 2.0) -> bytes:
        """Everything until the server closes (or the timeout: then NO_REPLY is appended)."""
        deadline = time.monotonic() + timeout
        while self._fill(deadline):
            pass
        out, self.buf = self.buf, b""
        return out + (CLOSED if self.eof else NO_REPLY)

    def close(self) -> None:
        self.sock.close()


def encode(args: list[bytes]) -> bytes:
    return b"*%d\r\n" % len(args) + b"".join(b"$%d\r\n%b\r\n" % (len(a), a) for a in args)
