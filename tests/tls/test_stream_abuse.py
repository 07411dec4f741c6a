"""Hostile compressed streams, side by side with the Go nsqd: a snappy chunk longer than the
format allows and a snappy stream without its identifier close the connection at once (after
the upgrade's OK, as Go's reader fails there), nothing is buffered for them; a deflate bomb
does not make the daemon hold what it inflates to."""

from __future__ import annotations

import socket
import time
import zlib
from collections.abc import Iterator

import pytest
from tls_support import Closed, Daemon, RawClient, negotiate, start_daemon


def rss_mib(daemon: Daemon) -> float:
    with open(f"/proc/{daemon.proc.pid}/status") as f:
        return int(f.read().split("VmRSS:")[1].split()[0]) / 1024


@pytest.fixture(params=["ours", "reference"])
def daemon(request: pytest.FixtureRequest) -> Iterator[Daemon]:
    d = start_daemon(request.param)
    yield d
    d.stop()


def closed_within(sock: socket.socket, seconds: float) -> bool:
    """True once the daemon closes (EOF or reset) within `seconds`; what it sends is drained."""
    sock.settimeout(seconds)
    end = time.monotonic() + seconds
    try:
        while time.monotonic() < end:
            if not sock.recv(65536):
                return True
    except (ConnectionResetError, BrokenPipeError):
        return True
    except TimeoutError:
        return False
    return False


def snappy_client(daemon: Daemon) -> RawClient:
    client = RawClient(daemon.tcp_port)
    reply = client.identify(feature_negotiation=True, snappy=True)
    assert b'"snappy":true' in reply.data
    return client


def test_oversized_snappy_chunks_close_at_once_and_hold_nothing(daemon: Daemon) -> None:
    before = rss_mib(daemon)
    socks = []
    for _ in range(10):
        client = snappy_client(daemon)
        # the stream identifier, then a compressed chunk declaring 16 MiB - 1 bytes, then 4 MiB
        client.sock.sendall(b"\xff\x06\x00\x00sNaPpY" + b"\x00\xff\xff\xff")
        try:
            client.sock.sendall(b"\x00" * (4 << 20))
        except OSError:
            pass  # already closed: fine
        socks.append(client.sock)
    assert all(closed_within(s, 3.0) for s in socks)
    grew = rss_mib(daemon) - before
    assert grew < 16, f"{daemon.kind}: RSS grew {grew:.1f} MiB for 10 refused chunks"


def test_snappy_stream_without_identifier_is_refused_after_ok(daemon: Daemon) -> None:
    client = snappy_client(daemon)
    client.sock.sendall(b"NOP\n")  # plain bytes where a snappy stream must start
    got = bytes(client._buf)  # what came behind the IDENTIFY reply
    client.sock.settimeout(3)
    try:
        while chunk := client.sock.recv(65536):
            got += chunk
    except ConnectionResetError:
        pass
    # the upgrade's OK (snappy-framed: identifier, one uncompressed chunk), then the close
    assert got.startswith(b"\xff\x06\x00\x00sNaPpY\x01"), got
    assert got.endswith(b"\x00\x00\x00\x06\x00\x00\x00\x00OK"), got


def test_deflate_bomb_is_not_held(daemon: Daemon) -> None:
    client = RawClient(daemon.tcp_port)
    negotiate(client, None, deflate=True)
    before = rss_mib(daemon)
    bomb = zlib.compressobj(6, zlib.DEFLATED, -zlib.MAX_WBITS)
    payload = bomb.compress(b"\x00" * (256 << 20)) + bomb.flush(zlib.Z_SYNC_FLUSH)
    try:
        client.sock.sendall(payload)  # 256 MiB of zeros in ~256 KiB: no newline, no command
    except OSError:
        pass
    with pytest.raises(Closed):
        for _ in range(100):
            client.read_frame()
    grew = rss_mib(daemon) - before
    assert grew < 64, f"{daemon.kind}: RSS grew {grew:.1f} MiB for a 256 MiB deflate bomb"
