"""A hostile nsqlookupd: answers nsqd would fail to unmarshal (IDENTIFY's info not an object,
GET /channels not {"channels": [strings]}) are logged and ignored; the daemon keeps running and
keeps answering PUB, as nsqd does. Served by a scripted fake peer on 127.0.0.1."""

from __future__ import annotations

import json
import socket
import struct
import threading
import time
from collections.abc import Callable, Iterator

import pytest

from .conftest import V2, Launcher

SETTLE = 1.0  # for the daemon's lookupd tasks to connect and query


class FakeLookupd:
    """nsqlookupd's TCP side (OK to everything, `info` to IDENTIFY) and its HTTP side (the
    same `channels` body for every request), each a thread with bounded waits."""

    def __init__(self, info: bytes | None, channels: bytes) -> None:
        self.tcp = self._listen()
        self.http = self._listen()
        port = self.http.getsockname()[1]
        self.info = (
            info
            if info is not None
            else json.dumps(
                {"broadcast_address": "127.0.0.1", "http_port": port, "tcp_port": 1}
            ).encode()
        )
        self.channels = channels
        self.done = threading.Event()
        self.threads = [
            threading.Thread(target=self._accept, args=(self.tcp, self._serve_tcp), daemon=True),
            threading.Thread(target=self._accept, args=(self.http, self._serve_http), daemon=True),
        ]
        for t in self.threads:
            t.start()

    @property
    def tcp_address(self) -> str:
        return f"127.0.0.1:{self.tcp.getsockname()[1]}"

    @staticmethod
    def _listen() -> socket.socket:
        s = socket.socket()
        s.bind(("127.0.0.1", 0))
        s.listen(16)
        s.settimeout(0.2)
        return s

    def _accept(self, listener: socket.socket, serve: Callable[[socket.socket], None]) -> None:
        while not self.done.is_set():
            try:
                conn, _ = listener.accept()
            except TimeoutError:
                continue
            conn.settimeout(5.0)
            threading.Thread(target=serve, args=(conn,), daemon=True).start()

    def _serve_tcp(self, conn: socket.socket) -> None:
        with conn, conn.makefile("rb") as f:
            try:
                f.read(4)  # "  V1"
                while line := f.readline():
                    answer = b"OK"
                    if line.startswith(b"IDENTIFY"):
                        (size,) = struct.unpack(">i", f.read(4))
                        f.read(size)
                        answer = self.info
                    conn.sendall(struct.pack(">i", len(answer)) + answer)
            except OSError:
                pass

    def _serve_http(self, conn: socket.socket) -> None:
        with conn:
            try:
                conn.recv(65536)
                head = b"HTTP/1.1 200 OK\r\nContent-Length: %d\r\nConnection: close\r\n\r\n"
                conn.sendall(head % len(self.channels) + self.channels)
            except OSError:
                pass

    def close(self) -> None:
        self.done.set()
        for t in self.threads:
            t.join(2.0)
        self.tcp.close()
        self.http.close()


ANSWERS = {
    "info-list": (b"[1,2,3]", b'{"channels":[]}'),
    "channels-list": (None, b"[1,2]"),
    "channels-int": (None, b'{"channels":5}'),
    "channels-nested": (None, b"[" * 100_000),
}


@pytest.fixture(params=sorted(ANSWERS))
def fake(request: pytest.FixtureRequest) -> Iterator[FakeLookupd]:
    info, channels = ANSWERS[request.param]
    peer = FakeLookupd(info, channels)
    yield peer
    peer.close()


@pytest.mark.parametrize(
    ("kind", "args"), [("ours", ()), ("ours", ("--workers=2",)), ("reference", ())]
)
def test_hostile_answers_are_logged_not_fatal(
    launcher: Launcher, fake: FakeLookupd, kind: str, args: tuple[str, ...]
) -> None:
    nsqd = launcher.nsqd(kind, f"--lookupd-tcp-address={fake.tcp_address}", *args)
    time.sleep(SETTLE)  # connected, IDENTIFY answered: new topics now ask for their channels
    pub = V2(nsqd.ports["tcp"])
    for i in range(3):
        pub.pub(f"hostile_{i}", b"x")  # asserts OK
    time.sleep(SETTLE)
    assert nsqd.proc.poll() is None, nsqd.log_tail()
    pub.pub("hostile_after", b"x")
    # the launcher fixture asserts a clean exit at SIGTERM
