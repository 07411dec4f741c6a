"""Helpers for the TLS / compression / AUTH tests: certificates, nsqd processes (ours and the
reference v1.3.0), a blocking raw V2 client that can upgrade to TLS, snappy and deflate, and
a real HTTP auth server on 127.0.0.1. Every wait here is bounded."""

from __future__ import annotations

import json
import shutil
import socket
import ssl
import struct
import subprocess
import sys
import tempfile
import threading
import time
import zlib
from collections.abc import Callable
from dataclasses import dataclass, field
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path
from typing import Any
from urllib.parse import parse_qs, urlsplit

import snappy

from nsqd.certs import CertFiles, issue, make_ca, write_all
from protocol.v2 import FrameType
from protocol.v2.frames import Frame

sys.path.append(str(Path(__file__).resolve().parents[2] / "scripts"))
import nsqd_process
from nsqd_process import free_ports

REPO_ROOT = Path(__file__).resolve().parents[2]
HOST = nsqd_process.HOST
START_TIMEOUT = 15.0
STOP_TIMEOUT = 5.0
IO_TIMEOUT = 5.0
_I32 = struct.Struct(">i")
MAGIC = b"  V2"


# -- certificates ----------------------------------------------------------------------------


@dataclass
class Certs:
    files: CertFiles
    rogue_cert: Path  # a client certificate from another CA
    rogue_key: Path

    @property
    def ca(self) -> str:
        return str(self.files.ca)

    @property
    def server_args(self) -> list[str]:
        return [f"--tls-cert={self.files.server_cert}", f"--tls-key={self.files.server_key}"]

    def client_context(self, *, with_cert: bool = False, rogue: bool = False) -> ssl.SSLContext:
        ctx = ssl.create_default_context(cafile=self.ca)  # verify on, against the test CA
        if rogue:
            ctx.load_cert_chain(self.rogue_cert, self.rogue_key)
        elif with_cert:
            ctx.load_cert_chain(self.files.client_cert, self.files.client_key)
        return ctx


def make_certs(directory: Path) -> Certs:
    files = write_all(directory, client_cn="tls-test-client")
    other_ca = make_ca("some other CA")
    rogue = issue(other_ca, "rogue-client", server=False)
    rogue_cert, rogue_key = directory / "rogue.pem", directory / "rogue.key"
    rogue_cert.write_bytes(rogue.cert_pem())
    rogue_key.write_bytes(rogue.key_pem())
    return Certs(files, rogue_cert, rogue_key)


# -- daemons ---------------------------------------------------------------------------------


def reference_binary() -> Path | None:
    path = REPO_ROOT / ".reference" / "bin" / "nsqd"
    if path.exists():
        return path
    try:
        return nsqd_process.reference_dir() / "nsqd"
    except nsqd_process.ReferenceInstallError:
        return None


@dataclass
class Daemon(nsqd_process.LoggedProcess):
    kind: str
    proc: subprocess.Popen[bytes]
    tcp_port: int
    http_port: int
    https_port: int
    workdir: Path

    @property
    def tcp_address(self) -> str:
        return f"{HOST}:{self.tcp_port}"

    @property
    def log_path(self) -> Path:
        return self.workdir / "nsqd.log"

    def stop(self) -> int | None:
        rc = nsqd_process.terminate(self.proc, STOP_TIMEOUT)
        shutil.rmtree(self.workdir, ignore_errors=True)
        return rc


def command(kind: str) -> list[str]:
    if kind == "ours":
        return nsqd_process.ours_command()
    ref = reference_binary()
    if ref is None:
        import pytest

        pytest.fail("reference nsqd unavailable", pytrace=False)
    return [str(ref)]


def start_daemon(kind: str, args: list[str] | tuple[str, ...] = ()) -> Daemon:
    argv0 = command(kind)
    last = ""
    for _ in range(3):
        tcp, http, https = free_ports(3)
        workdir = Path(tempfile.mkdtemp(prefix=f"nsqd-tls-{kind}-"))
        flags = nsqd_process.address_flags(tcp, http, workdir, https_port=https)
        env = nsqd_process.pythonpath_env()
        proc = nsqd_process.launch([*argv0, *flags, *args], workdir / "nsqd.log", env=env)
        daemon = Daemon(kind, proc, tcp, http, https, workdir)
        if nsqd_process.wait_accepting(proc, tcp, START_TIMEOUT):
            return daemon
        last = daemon.log_tail()
        daemon.stop()
    raise RuntimeError(f"{kind} nsqd did not start:\n{last}")


# -- a blocking raw V2 client ----------------------------------------------------------------


class Closed(Exception):
    """The daemon closed the connection."""


def command_bytes(line: str | bytes, body: bytes | None = None) -> bytes:
    data = (line.encode() if isinstance(line, str) else line) + b"\n"
    if body is not None:
        data += _I32.pack(len(body)) + body
    return data


def mpub_body(bodies: list[bytes]) -> bytes:
    return _I32.pack(len(bodies)) + b"".join(_I32.pack(len(b)) + b for b in bodies)


class RawClient:
    """One V2 connection on a blocking socket. `wire` records every byte received on the TCP
    socket before TLS (and, when no TLS, everything): the byte-level differential tests
    compare it between the two daemons."""

    def __init__(self, port: int, timeout: float = IO_TIMEOUT) -> None:
        self.sock = socket.create_connection((HOST, port), timeout=timeout)
        self.sock.settimeout(timeout)
        self.tls: ssl.SSLSocket | None = None
        self._buf = bytearray()
        self.raw_received: list[bytes] = []  # bytes below the compression layer, per read
        self._compress: Callable[[bytes], bytes] | None = None
        self._decompress: Callable[[bytes], bytes] | None = None
        self.sock.sendall(MAGIC)

    # layers
    @property
    def _io(self) -> socket.socket:
        return self.tls if self.tls is not None else self.sock

    def send(self, data: bytes) -> None:
        if self._compress is not None:
            data = self._compress(data)
        self._io.sendall(data)

    def _recv_raw(self) -> bytes:
        try:
            data = self._io.recv(65536)
        except (ConnectionResetError, ssl.SSLError) as exc:
            raise Closed(str(exc)) from exc
        if not data:
            raise Closed("EOF")
        self.raw_received.append(data)
        return data

    def _next_frame(self) -> Frame | None:
        buf = self._buf
        if len(buf) < 8:
            return None
        size, frame_type = struct.unpack_from(">ii", buf)
        if size < 4:
            raise AssertionError(f"invalid frame size {size}")
        if len(buf) < 4 + size:
            return None
        frame = Frame(frame_type, bytes(buf[8 : 4 + size]))
        del buf[: 4 + size]
        return frame

    def read_frame(self, timeout: float = IO_TIMEOUT) -> Frame:
        """Exactly one frame; bytes behind it stay unparsed (they may be the next layer's)."""
        deadline = time.monotonic() + timeout
        while (frame := self._next_frame()) is None:
            remaining = deadline - time.monotonic()
            if remaining <= 0:
                raise TimeoutError("no frame in time")
            self._io.settimeout(remaining)
            data = self._recv_raw()
            if self._decompress is not None:
                data = self._decompress(data)
            self._buf += data
        return frame

    def read_response(self, timeout: float = IO_TIMEOUT) -> Frame:
        """The next non-heartbeat frame (heartbeats answered with NOP)."""
        while True:
            frame = self.read_frame(timeout)
            if frame.frame_type == FrameType.RESPONSE and frame.data == b"_heartbeat_":
                self.send(b"NOP\n")
                continue
            return frame

    def expect_closed(self, timeout: float = IO_TIMEOUT) -> None:
        deadline = time.monotonic() + timeout
        try:
            while time.monotonic() < deadline:
                self.read_frame(max(deadline - time.monotonic(), 0.01))
        except Closed:
            return
        except TimeoutError:
            pass
        raise AssertionError("connection still open")

    def identify(self, **fields: Any) -> Frame:
        self.send(command_bytes("IDENTIFY", json.dumps(fields).encode()))
        return self.read_frame()

    def start_tls(self, ctx: ssl.SSLContext, server_hostname: str | None = HOST) -> None:
        assert not self._buf, "bytes arrived before the TLS handshake"
        self.sock.settimeout(IO_TIMEOUT)
        self.tls = ctx.wrap_socket(self.sock, server_hostname=server_hostname)

    def _switch(
        self, compress: Callable[[bytes], bytes], decompress: Callable[[bytes], bytes]
    ) -> None:
        # bytes that arrived behind the last plain frame already belong to the new layer
        leftover = bytes(self._buf)
        self._buf.clear()
        self._compress, self._decompress = compress, decompress
        self.raw_received = [leftover] if leftover else []
        if leftover:
            self._buf += decompress(leftover)

    def start_snappy(self) -> None:
        comp, decomp = snappy.StreamCompressor(), snappy.StreamDecompressor()
        self._switch(comp.add_chunk, decomp.decompress)

    def start_deflate(self, level: int = 6) -> None:
        comp = zlib.compressobj(level, zlib.DEFLATED, -zlib.MAX_WBITS)
        decomp = zlib.decompressobj(-zlib.MAX_WBITS)
        self._switch(lambda d: comp.compress(d) + comp.flush(zlib.Z_SYNC_FLUSH), decomp.decompress)

    def close(self) -> None:
        try:
            self._io.close()
        except OSError:
            pass
        self.sock.close()

    def __enter__(self) -> RawClient:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()


def negotiate(
    client: RawClient,
    certs: Certs | None,
    *,
    tls: bool = False,
    snappy_: bool = False,
    deflate: bool = False,
    client_cert: bool = False,
    **identify: Any,
) -> dict[str, Any]:
    """IDENTIFY with feature negotiation and run the upgrades; returns the JSON reply."""
    frame = client.identify(
        feature_negotiation=True, tls_v1=tls, snappy=snappy_, deflate=deflate, **identify
    )
    assert frame.frame_type == FrameType.RESPONSE, frame
    reply = json.loads(frame.data)
    if reply.get("tls_v1"):
        assert certs is not None
        client.start_tls(certs.client_context(with_cert=client_cert))
        ok = client.read_frame()
        assert (ok.frame_type, ok.data) == (FrameType.RESPONSE, b"OK")
    if reply.get("snappy"):
        client.start_snappy()
        ok = client.read_frame()
        assert (ok.frame_type, ok.data) == (FrameType.RESPONSE, b"OK")
    if reply.get("deflate"):
        client.start_deflate(reply["deflate_level"])
        ok = client.read_frame()
        assert (ok.frame_type, ok.data) == (FrameType.RESPONSE, b"OK")
    return reply


# -- the auth server -------------------------------------------------------------------------


@dataclass
class AuthRequest:
    path: str  # with the raw query string
    query: dict[str, list[str]]
    headers: dict[str, str]


@dataclass
class AuthServer:
    """A real HTTP auth server. `policy(secret, query)` returns (status, JSON-able or bytes);
    it can be swapped while running. `requests` records what nsqd sent."""

    policy: Callable[[str, dict[str, list[str]]], tuple[int, Any]]
    requests: list[AuthRequest] = field(default_factory=list)
    server: ThreadingHTTPServer | None = None
    thread: threading.Thread | None = None

    @property
    def address(self) -> str:
        assert self.server is not None
        return f"{HOST}:{self.server.server_address[1]}"

    def start(self) -> AuthServer:
        owner = self

        class Handler(BaseHTTPRequestHandler):
            protocol_version = "HTTP/1.1"

            def do_GET(self) -> None:
                query = parse_qs(urlsplit(self.path).query, keep_blank_values=True)
                owner.requests.append(AuthRequest(self.path, query, dict(self.headers.items())))
                status, payload = owner.policy(query.get("secret", [""])[0], query)
                body = payload if isinstance(payload, bytes) else json.dumps(payload).encode()
                self.send_response(status)
                self.send_header("Content-Type", "application/json")
                self.send_header("Content-Length", str(len(body)))
                self.end_headers()
                self.wfile.write(body)

            def log_message(self, format: str, *args: Any) -> None:
                pass

        self.server = ThreadingHTTPServer((HOST, 0), Handler)
        self.server.daemon_threads = True
        self.thread = threading.Thread(target=self.server.serve_forever, daemon=True)
        self.thread.start()
        return self

    def stop(self) -> None:
        if self.server is not None:
            self.server.shutdown()
            self.server.server_close()
            assert self.thread is not None
            self.thread.join(STOP_TIMEOUT)
