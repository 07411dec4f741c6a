"""One client's bytes never stop the daemon (issue 30): hostile streams on every layer a V2
connection can negotiate, side by side with the Go nsqd. Each closes that one connection the
way Go does (with the same error frame, or none), and afterwards the daemon still answers /ping
and a fresh client can PUB, SUB and FIN.

The case that stopped ours: a snappy chunk with a wrong checksum. The decompressor's error was
raised in the connection task the TCP reactor starts for an upgrading IDENTIFY, outside any
guard, and reached the daemon's task tree."""

from __future__ import annotations

import gc
import math
import os
import socket
import struct
import time
import weakref
import zlib
from collections.abc import Callable
from pathlib import Path

import pytest
import snappy

from nsqd.net.reactor import EpollReactor
from protocol.v2 import FrameType

from .conftest import Daemon, DaemonPool
from .hostile_wire import (
    Certs,
    Closed,
    RawClient,
    daemon_flags,
    liveness,
    make_certs,
    upgraded,
)

SNAPPY_ID = b"\xff\x06\x00\x00sNaPpY"
WAIT = 3.0  # for the daemon to answer and close; nsqd's own read deadline is far longer


def crc_of(data: bytes) -> bytes:
    """The snappy framing format's checksum of `data`: CRC-32C, masked."""
    crc = 0xFFFFFFFF
    for byte in data:
        crc ^= byte
        for _ in range(8):
            crc = (crc >> 1) ^ (0x82F63B78 & -(crc & 1))
    crc ^= 0xFFFFFFFF
    masked = (((crc >> 15) | (crc << 17)) + 0xA282EAD8) & 0xFFFFFFFF
    return struct.pack("<I", masked)


def chunk(kind: int, body: bytes) -> bytes:
    return bytes([kind]) + len(body).to_bytes(3, "little") + body


def plain_chunk(data: bytes, crc: bytes | None = None) -> bytes:
    return chunk(0x01, (crc_of(data) if crc is None else crc) + data)


def deflated(data: bytes) -> bytes:
    c = zlib.compressobj(6, zlib.DEFLATED, -zlib.MAX_WBITS)
    return c.compress(data) + c.flush(zlib.Z_SYNC_FLUSH)


# -- what a case does on the connection ---------------------------------------------------------


def raw(data: bytes, *, then_eof: bool = False) -> Callable[[RawClient], None]:
    """Send `data` below the negotiated compression (above TLS), maybe then half-close."""

    def act(client: RawClient) -> None:
        client._io.sendall(data)
        if then_eof:
            client._io.shutdown(socket.SHUT_WR)

    return act


def framed(data: bytes) -> Callable[[RawClient], None]:
    """Send `data` through every negotiated layer (a well-formed stream)."""

    def act(client: RawClient) -> None:
        client.send(data)

    return act


def below_tls(data: bytes) -> Callable[[RawClient], None]:
    """Write `data` on the TCP socket under the TLS layer (not a record the TLS layer made)."""

    def act(client: RawClient) -> None:
        os.write(client._io.fileno(), data)

    return act


def tls_refused(data: bytes) -> Callable[[RawClient], None]:
    """IDENTIFY with TLS, then `data` where the client's TLS handshake belongs."""

    def act(client: RawClient) -> None:
        reply = client.identify(feature_negotiation=True, tls_v1=True)
        assert b'"tls_v1":true' in reply.data, reply
        client.sock.sendall(data)

    return act


def _identify_body(body: bytes) -> bytes:
    return b"IDENTIFY\n" + struct.pack(">i", len(body)) + body


CORRUPT_BLOCK = b"\xff\xff\xff\xff\x0f\x00\x01\x02"  # a snappy block whose length varint lies
COMPRESSED_NOP = snappy.compress(b"NOP\n")
_DEFLATED = deflated(b"PUB hostile\n" + struct.pack(">i", 5) + b"hello")

# name -> (layers, what the client sends, how it ends: "closed", "closed E_CODE" or "open")
CASES: dict[str, tuple[str, Callable[[RawClient], None], str]] = {
    # plain V2
    "plain-truncated-body": (
        "",
        raw(b"PUB t\n\x00\x00\x00\x64abc", then_eof=True),
        "closed E_BAD_MESSAGE",
    ),
    "plain-truncated-line": ("", raw(b"PUB hostile", then_eof=True), "closed"),
    "plain-huge-body": ("", raw(b"PUB t\n\x7f\xff\xff\xff"), "closed E_BAD_MESSAGE"),
    "plain-junk": ("", raw(b"\x00\xff\x01junk\n"), "closed E_INVALID"),
    "plain-deep-identify": (
        "",
        raw(_identify_body(b'{"a":' * 9_999 + b"1" + b"}" * 9_999)),
        "open OK",
    ),
    "plain-deeper-identify": ("", raw(_identify_body(b"[" * 200_000)), "closed E_BAD_BODY"),
    # snappy
    "snappy-bad-crc": ("snappy", raw(SNAPPY_ID + plain_chunk(b"NOP\n", b"\0\0\0\0")), "closed"),
    "snappy-bad-crc-compressed": (
        "snappy",
        raw(SNAPPY_ID + chunk(0x00, b"\0\0\0\0" + COMPRESSED_NOP)),
        "closed",
    ),
    "snappy-reserved-unskippable": ("snappy", raw(SNAPPY_ID + chunk(0x02, b"abcd")), "closed"),
    "snappy-reserved-skippable": (
        "snappy",
        raw(SNAPPY_ID + chunk(0x80, b"skip me") + plain_chunk(b"PUB hostile\n\0\0\0\x01x")),
        "open OK",
    ),
    "snappy-padding": (
        "snappy",
        raw(SNAPPY_ID + chunk(0xFE, b"\0" * 16) + plain_chunk(b"PUB hostile\n\0\0\0\x01x")),
        "open OK",
    ),
    "snappy-chunk-over-limit": ("snappy", raw(SNAPPY_ID + b"\x01\x05\x00\x01abcd"), "closed"),
    "snappy-compressed-over-limit": ("snappy", raw(SNAPPY_ID + b"\x00\xff\xff\xff"), "closed"),
    "snappy-short-chunk": ("snappy", raw(SNAPPY_ID + chunk(0x01, b"ab")), "closed"),
    "snappy-bad-identifier": ("snappy", raw(b"\xff\x06\x00\x00sNaPpX"), "closed"),
    "snappy-no-identifier": ("snappy", raw(plain_chunk(b"NOP\n")), "closed"),
    "snappy-corrupt-compressed": (
        "snappy",
        raw(SNAPPY_ID + chunk(0x00, crc_of(b"NOP\n") + CORRUPT_BLOCK)),
        "closed",
    ),
    "snappy-truncated-chunk": (
        "snappy",
        raw(SNAPPY_ID + b"\x01\x20\x00\x00abcd", then_eof=True),
        "closed",
    ),
    "snappy-deflate-junk": ("snappy", raw(SNAPPY_ID + _DEFLATED), "closed"),
    "snappy-bad-command": ("snappy", framed(b"\x00\xff\x01junk\n"), "closed E_INVALID"),
    # deflate
    "deflate-junk": ("deflate", raw(b"\xff" * 64), "closed"),
    "deflate-snappy-junk": ("deflate", raw(SNAPPY_ID + plain_chunk(b"NOP\n")), "closed"),
    "deflate-corrupt": ("deflate", raw(_DEFLATED[:3] + b"\xff\xff\xff" + _DEFLATED[6:]), "closed"),
    "deflate-truncated": (
        "deflate",
        raw(_DEFLATED[:-6], then_eof=True),
        "closed E_BAD_MESSAGE",  # the PUB line came whole, its body was cut
    ),
    "deflate-bad-command": ("deflate", framed(b"\x00\xff\x01junk\n"), "closed E_INVALID"),
    # TLS
    "tls-junk-handshake": ("", tls_refused(b"\x16\x03\x01\x00\x05junk!"), "closed"),
    "tls-plain-handshake": ("", tls_refused(b"NOP\n" * 8), "closed E_IDENTIFY_FAILED"),
    "tls-junk-below": ("tls", below_tls(b"\x17\x03\x03\x00\x10" + b"\xab" * 16), "closed"),
    "tls-truncated-record": ("tls", below_tls(b"\x17\x03\x03\x40\x00abc"), "open"),
    "tls-bad-command": ("tls", framed(b"\x00\xff\x01junk\n"), "closed E_INVALID"),
    "tls-snappy-bad-crc": (
        "tls+snappy",
        raw(SNAPPY_ID + plain_chunk(b"NOP\n", b"\0\0\0\0")),
        "closed",
    ),
    "tls-deflate-junk": ("tls+deflate", raw(b"\xff" * 64), "closed"),
}


@pytest.fixture(scope="session")
def hostile_certs(tmp_path_factory: pytest.TempPathFactory) -> Certs:
    return make_certs(Path(tmp_path_factory.mktemp("hostile-certs")))


@pytest.fixture
def tls_daemon(daemon_pool: DaemonPool, daemon_kind: str, hostile_certs: Certs) -> Daemon:
    """A shared daemon with TLS on its TCP and HTTPS ports."""
    return daemon_pool.get(daemon_kind, _session_flags(hostile_certs, daemon_kind))


_flags: dict[tuple[str, str], tuple[str, ...]] = {}


def _session_flags(certs: Certs, kind: str) -> tuple[str, ...]:
    """The same flags (the same free HTTPS port) for every test of a session and kind: the
    pool shares one daemon per kind and flag set."""
    return _flags.setdefault((certs.ca, kind), daemon_flags(certs))


def outcome(client: RawClient, seconds: float = WAIT) -> str:
    """How the connection went on: "closed", "closed E_CODE" (its error frame), "open", "open
    OK" (answers only)."""
    answers: list[str] = []
    end = time.monotonic() + seconds
    try:
        while (left := end - time.monotonic()) > 0:
            frame = client.read_frame(left)
            if frame.frame_type == FrameType.ERROR:
                answers.append(frame.data.split(b" ", 1)[0].decode())
            elif frame.data != b"_heartbeat_":
                answers.append(frame.data.decode(errors="replace"))
    except Closed:
        return " ".join(["closed", *answers])
    except TimeoutError:
        pass
    return " ".join(["open", *answers])


@pytest.mark.parametrize("case", CASES)
def test_hostile_stream_closes_one_connection_only(
    tls_daemon: Daemon, hostile_certs: Certs, case: str
) -> None:
    layers, act, expected = CASES[case]
    logged_before = tls_daemon.log_path.stat().st_size  # an earlier case may have had this port
    client = upgraded(tls_daemon, hostile_certs, layers)
    me = f"127.0.0.1:{client._io.getsockname()[1]}"
    try:
        act(client)
        got = outcome(client)
    finally:
        client.close()
    liveness(tls_daemon)
    assert got == expected, f"{tls_daemon.kind}: {case}"
    if tls_daemon.kind == "ours":  # logged once, as what it is (nothing unexpected)
        with open(tls_daemon.log_path, "rb") as f:
            f.seek(logged_before)
            lines = f.read().decode(errors="replace").splitlines()
        errors = [line for line in lines if me in line and "ERR" in line]
        assert len(errors) <= 1, errors
        assert not any("unexpected error" in line for line in errors), errors


def test_the_reactor_timers_let_closed_connections_go() -> None:
    """What the fuzz's memory came from: a reactor's timer heap kept an entry, and with it the
    connection (its buffers, its codec state), until the entry's time, seconds after the
    connection closed. Compacted, the heap holds at most a bounded number of dead ones."""

    class Socket:
        def __init__(self, fd: int) -> None:
            self.fd = fd

    class Conn:
        due = math.inf

        def __init__(self, fd: int) -> None:
            self.socket = Socket(fd)  # what the loop reads of a connection

    reactor = EpollReactor()
    refs = []
    for i in range(500):
        here, there = socket.socketpair()
        conn = Conn(here.fileno())
        reactor.watch(conn)
        reactor.schedule(conn, 1e9 + i)  # a heartbeat far away
        reactor.unwatch(conn)
        here.close()
        there.close()
        refs.append(weakref.ref(conn))
        del conn
    gc.collect()
    assert sum(ref() is not None for ref in refs) <= 65
