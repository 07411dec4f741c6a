"""Helpers for the hostile-client tests (test_hostile.py, test_fuzz.py): a daemon of either kind
with TLS on its TCP and HTTPS ports, raw V2 connections upgraded to TLS / snappy / deflate (the
blocking RawClient of tests/tls), and the liveness check every hostile stream is followed by:
/ping answers and a fresh client can PUB, SUB and FIN. Every wait here is bounded."""

from __future__ import annotations

import http.client
import socket
import ssl
import sys
import time
from pathlib import Path

from protocol.v2 import FrameType

from .conftest import Daemon

sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "tls"))
from tls_support import (
    Certs,
    Closed,
    RawClient,
    command_bytes,
    make_certs,
    negotiate,
)

sys.path.append(str(Path(__file__).resolve().parents[2] / "scripts"))
from nsqd_process import HOST, free_ports, wait_accepting

__all__ = [
    "Certs",
    "Closed",
    "RawClient",
    "closed_within",
    "daemon_flags",
    "free_ports",
    "https_port",
    "liveness",
    "make_certs",
    "negotiate",
    "upgraded",
    "wait_accepting",
]


def daemon_flags(certs: Certs) -> tuple[str, ...]:
    """TLS on the TCP port (negotiated in IDENTIFY) and an HTTPS listener on a free port."""
    return (*certs.server_args, f"--https-address={HOST}:{free_ports(1)[0]}")


def https_port(daemon: Daemon) -> int:
    flag = next(a for a in daemon.args if a.startswith("--https-address="))
    return int(flag.rsplit(":", 1)[1])


def upgraded(daemon: Daemon, certs: Certs, layers: str) -> RawClient:
    """A V2 connection with `layers` negotiated ("" plain; "tls", "snappy", "deflate",
    "tls+snappy", "tls+deflate") and every upgrade's OK read."""
    client = RawClient(daemon.tcp_port)
    if layers:
        parts = layers.split("+")
        reply = negotiate(
            client,
            certs,
            tls="tls" in parts,
            snappy_="snappy" in parts,
            deflate="deflate" in parts,
        )
        for part in parts:
            assert reply.get("tls_v1" if part == "tls" else part), (layers, reply)
    return client


def closed_within(sock: socket.socket | ssl.SSLSocket, seconds: float) -> tuple[bool, bytes]:
    """Whether the daemon closes (EOF, reset, a TLS alert) within `seconds`, and what it sent
    meanwhile (raw, below any layer the caller did not decode)."""
    got = b""
    end = time.monotonic() + seconds
    try:
        while (left := end - time.monotonic()) > 0:
            sock.settimeout(left)
            data = sock.recv(65536)
            if not data:
                return True, got
            got += data
    except (ConnectionResetError, BrokenPipeError, ssl.SSLError):
        return True, got
    except TimeoutError:
        pass
    return False, got


def ping(port: int, *, tls: ssl.SSLContext | None = None) -> str:
    conn: http.client.HTTPConnection
    if tls is None:
        conn = http.client.HTTPConnection(HOST, port, timeout=5)
    else:
        conn = http.client.HTTPSConnection(HOST, port, timeout=5, context=tls)
    try:
        conn.request("GET", "/ping")
        resp = conn.getresponse()
        return f"{resp.status} {resp.read().decode(errors='replace')}"
    finally:
        conn.close()


def liveness(daemon: Daemon, topic: str = "hostile_liveness") -> None:
    """The daemon is up, answers /ping, and a fresh client can PUB, SUB and FIN."""
    assert daemon.proc.poll() is None, f"{daemon.kind} nsqd exited:\n{daemon.log_tail()}"
    assert ping(daemon.http_port) == "200 OK"
    body = f"alive {time.monotonic_ns()}".encode()
    with RawClient(daemon.tcp_port) as pub:
        pub.send(command_bytes(f"PUB {topic}", body))
        ok = pub.read_response()
        assert (ok.frame_type, ok.data) == (FrameType.RESPONSE, b"OK"), ok
    with RawClient(daemon.tcp_port) as sub:
        sub.send(command_bytes(f"SUB {topic} live"))
        ok = sub.read_response()
        assert (ok.frame_type, ok.data) == (FrameType.RESPONSE, b"OK"), ok
        sub.send(b"RDY 100\n")
        while True:  # earlier checks' messages may come first: FIN each until ours
            frame = sub.read_response()
            assert frame.frame_type == FrameType.MESSAGE, frame
            msg_id, payload = frame.data[10:26], frame.data[26:]
            sub.send(b"FIN " + msg_id + b"\n")
            if payload == body:
                break
        try:  # a FIN that failed would answer E_FIN_FAILED: none may come
            extra = sub.read_frame(0.2)
        except TimeoutError:
            return
        assert extra.frame_type != FrameType.ERROR, extra
