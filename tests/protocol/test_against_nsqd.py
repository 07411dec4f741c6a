"""Replay the byte tables of nsq_cases.py (and negotiate_cases.py, goquote_cases.py) against
the real nsqd v1.3.0 and check that it answers what the tables say (so the tables, and the
parser tests built on them, describe the real thing). Skipped when the reference binary is
absent (scripts/install_reference.sh).

Each case is sent on a fresh connection followed by a half-close; nsqd's frames up to its
close are compared with the frames the case's commands call for: OK for SUB/PUB/MPUB/DPUB and
IDENTIFY, CLOSE_WAIT for CLS, the non-fatal `E_FIN_FAILED ... ID not in flight` (and REQ/TOUCH
alike) for ids nsqd never sent, `E_AUTH_DISABLED AUTH disabled` for AUTH, then the case's
error frame if any."""

from __future__ import annotations

import os
import socket
import struct
import subprocess
import time
from collections.abc import Iterator
from dataclasses import fields
from pathlib import Path
from typing import Any

import pytest
from goquote_cases import GO_QUOTE_CASES
from negotiate_cases import NEGOTIATE_CASES, reply
from nsq_cases import (
    IDENTIFY_JSON_CASES,
    LINE_LIMIT_CASES,
    MAGIC_CASES,
    STATE_CASES,
    STREAM_CASES,
    TLS_CASES,
)
from v2wire import MAGIC, Case, Err, identify

from protocol.v2 import (
    Auth,
    ClientSettings,
    Cls,
    DPub,
    Fin,
    Identify,
    Limits,
    MPub,
    Pub,
    Req,
    ServerFeatures,
    Sub,
    Touch,
    is_valid_name,
)
from tests.ops.conftest import free_ports

REPO = Path(__file__).resolve().parents[2]
NSQD = Path(os.environ.get("NSQD_REFERENCE_BIN", REPO / ".reference" / "bin" / "nsqd"))

if not NSQD.is_file():
    # Install it (scripts/install_reference.sh); an install failure fails this module loudly.
    import importlib.util

    _spec = importlib.util.spec_from_file_location("reference", REPO / "scripts" / "reference.py")
    assert _spec is not None and _spec.loader is not None
    _reference = importlib.util.module_from_spec(_spec)
    _spec.loader.exec_module(_reference)
    NSQD = Path(_reference.ensure_reference()) / "nsqd"

Frame = tuple[int, bytes]

_LIMIT_FLAGS = {  # Limits field -> nsqd flag (durations in ms)
    "max_msg_size": ("--max-msg-size", ""),
    "max_body_size": ("--max-body-size", ""),
    "max_rdy_count": ("--max-rdy-count", ""),
    "max_req_timeout_ms": ("--max-req-timeout", "ms"),
    "msg_timeout_ms": ("--msg-timeout", "ms"),
    "max_msg_timeout_ms": ("--max-msg-timeout", "ms"),
    "max_heartbeat_interval_ms": ("--max-heartbeat-interval", "ms"),
    "max_output_buffer_size": ("--max-output-buffer-size", ""),
    "min_output_buffer_timeout_ms": ("--min-output-buffer-timeout", "ms"),
    "max_output_buffer_timeout_ms": ("--max-output-buffer-timeout", "ms"),
}


def nsqd_flags(limits: Limits, server: ServerFeatures, tls_required: bool) -> tuple[str, ...]:
    default = Limits()
    flags = []
    for f in fields(Limits):
        value = getattr(limits, f.name)
        if value == getattr(default, f.name):
            continue
        assert f.name in _LIMIT_FLAGS, f"nsqd has no flag for Limits.{f.name}"
        flag, unit = _LIMIT_FLAGS[f.name]
        flags.append(f"{flag}={value}{unit}")
    if not server.deflate:
        flags.append("--deflate=false")
    if not server.snappy:
        flags.append("--snappy=false")
    if server.max_deflate_level != 6:
        flags.append(f"--max-deflate-level={server.max_deflate_level}")
    if server.auth_required:
        flags.append("--auth-http-address=127.0.0.1:1")  # never contacted by these cases
    if server.tls or tls_required:
        flags.append("TLS")
    if tls_required:
        flags.append("--tls-required=true")
    return tuple(flags)


class Nsqds:
    """One nsqd per distinct set of flags, started on first use."""

    def __init__(self, tmp: Path) -> None:
        self._https = 0  # the HTTPS port of the daemon being started (with its TCP and HTTP)
        self.tmp = tmp
        self.running: dict[tuple[str, ...], tuple[subprocess.Popen[bytes], int]] = {}
        self.cert: tuple[str, str] | None = None

    def _tls_flags(self) -> list[str]:
        if self.cert is None:
            import trustme

            issued = trustme.CA().issue_cert("localhost", "127.0.0.1")
            cert, key = self.tmp / "cert.pem", self.tmp / "key.pem"
            issued.cert_chain_pems[0].write_to_path(str(cert))
            issued.private_key_pem.write_to_path(str(key))
            self.cert = (str(cert), str(key))
        return [
            f"--tls-cert={self.cert[0]}",
            f"--tls-key={self.cert[1]}",
            f"--https-address=127.0.0.1:{self._https}",  # TLS also starts an HTTPS listener
        ]

    def port(self, flags: tuple[str, ...]) -> int:
        if flags not in self.running:
            tcp, http, self._https = free_ports(3)
            data = self.tmp / f"data{len(self.running)}"
            data.mkdir()
            argv = [
                str(NSQD),
                f"--tcp-address=127.0.0.1:{tcp}",
                f"--http-address=127.0.0.1:{http}",
                f"--data-path={data}",
                "--log-level=fatal",
            ]
            for flag in flags:
                argv.extend(self._tls_flags() if flag == "TLS" else [flag])
            proc = subprocess.Popen(argv, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
            self.running[flags] = (proc, tcp)
            deadline = time.monotonic() + 10
            while True:
                try:
                    socket.create_connection(("127.0.0.1", tcp), timeout=1).close()
                    break
                except OSError:
                    if proc.poll() is not None or time.monotonic() > deadline:
                        raise RuntimeError(f"nsqd did not start: {argv}") from None
                    time.sleep(0.02)
        return self.running[flags][1]

    def stop(self) -> None:
        for proc, _ in self.running.values():
            proc.terminate()
        for proc, _ in self.running.values():
            proc.wait(timeout=10)


@pytest.fixture(scope="module")
def nsqds(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Nsqds]:
    servers = Nsqds(tmp_path_factory.mktemp("nsqd"))
    yield servers
    servers.stop()


def exchange(port: int, data: bytes) -> tuple[list[Frame], bytes]:
    """Send data, half-close, read until nsqd closes; return its frames and any leftover."""
    with socket.create_connection(("127.0.0.1", port), timeout=5) as sock:
        try:
            sock.sendall(data)
            sock.shutdown(socket.SHUT_WR)
        except OSError:  # EPIPE, ECONNRESET, ENOTCONN
            pass  # nsqd hung up before reading everything: what it sent is still readable
        received = bytearray()
        try:
            while chunk := sock.recv(65536):
                received += chunk
        except ConnectionResetError:
            pass
    frames, pos = [], 0
    while len(received) - pos >= 8:
        size, frame_type = struct.unpack_from(">ii", received, pos)
        if size < 4:
            break  # not frames any more: a compressed or TLS stream after an upgrade
        frames.append((frame_type, bytes(received[pos + 8 : pos + 4 + size])))
        pos += 4 + size
    return frames, bytes(received[pos:])


def negotiation_reply(s: ClientSettings, limits: Limits, server: ServerFeatures) -> bytes:
    assert not (s.tls_v1 and server.tls), "an upgrade would follow: use NEGOTIATE_CASES"
    assert not (s.deflate and server.deflate), "an upgrade would follow: use NEGOTIATE_CASES"
    assert not (s.snappy and server.snappy), "an upgrade would follow: use NEGOTIATE_CASES"
    return reply(
        max_rdy_count=limits.max_rdy_count,
        max_msg_timeout=limits.max_msg_timeout_ms,
        msg_timeout=s.msg_timeout_ms,
        deflate_level=min(6, server.max_deflate_level),
        max_deflate_level=server.max_deflate_level,
        sample_rate=s.sample_rate,
        auth_required=server.auth_required,
        output_buffer_size=s.output_buffer_size,
        output_buffer_timeout=s.output_buffer_timeout_ms,
    )


def expected_frames(case: Case) -> list[Frame]:
    frames: list[Frame] = []
    for event in case.events:
        match event:
            case Sub() | Pub() | MPub() | DPub():
                frames.append((0, b"OK"))
            case Cls():
                frames.append((0, b"CLOSE_WAIT"))
            case Fin(msg_ids=[msg_id]):
                frames.append((1, b"E_FIN_FAILED FIN " + msg_id + b" failed ID not in flight"))
            case Req(msg_id=msg_id):
                frames.append((1, b"E_REQ_FAILED REQ " + msg_id + b" failed ID not in flight"))
            case Touch(msg_id=msg_id):
                frames.append((1, b"E_TOUCH_FAILED TOUCH " + msg_id + b" failed ID not in flight"))
            case Auth():
                return [*frames, (1, b"E_AUTH_DISABLED AUTH disabled")]  # fatal: nsqd closes
            case Identify(settings=s) if s.feature_negotiation:
                frames.append((0, negotiation_reply(s, case.limits, case.server)))
            case Identify():
                frames.append((0, b"OK"))
    if isinstance(case.end, Err):
        frames.append((1, case.end.text))
    return frames


def answered(nsqds: Nsqds, case: Case) -> tuple[list[Frame], bytes]:
    port = nsqds.port(nsqd_flags(case.limits, case.server, case.tls_required))
    frames, rest = exchange(port, case.wire)
    # Messages and heartbeats are not part of any case (no case publishes to "t").
    return [f for f in frames if f[0] != 2 and f != (0, b"_heartbeat_")], rest


ORACLE_CASES = [
    case
    for case in (
        *STATE_CASES,
        *TLS_CASES,
        *STREAM_CASES,
        *MAGIC_CASES,
        *LINE_LIMIT_CASES,
        *IDENTIFY_JSON_CASES,
    )
    if case.oracle
]


@pytest.mark.parametrize("case", ORACLE_CASES, ids=lambda c: c.id)
def test_nsqd_answers_as_the_table_says(nsqds: Nsqds, case: Case) -> None:
    assert answered(nsqds, case) == (expected_frames(case), b"")


@pytest.mark.parametrize(
    ("body", "server", "limits", "expected"),
    [case[1:] for case in NEGOTIATE_CASES],
    ids=[case[0] for case in NEGOTIATE_CASES],
)
def test_nsqd_negotiation_reply(
    nsqds: Nsqds,
    body: dict[str, Any],
    server: ServerFeatures,
    limits: Limits,
    expected: bytes | str,
) -> None:
    case = Case(
        "negotiate",
        identify({**body, "feature_negotiation": True}),
        (),
        Err(b""),
        limits,
        server=server,
    )
    frames, _ = answered(nsqds, case)
    if isinstance(expected, str):
        assert frames == [(1, expected.encode())]
    else:
        # an upgrade (TLS, snappy, deflate) starts right after this frame
        assert frames[0] == (0, expected)


# Characters newer than Python 3.11's Unicode tables: nsqd prints them, we escape them.
NEWER_UNICODE = {"\U0001fae8".encode()}
QUOTABLE = [
    (raw, quoted)
    for raw, quoted in GO_QUOTE_CASES
    if b" " not in raw and b"\n" not in raw and not is_valid_name(raw) and raw not in NEWER_UNICODE
]


@pytest.mark.parametrize("raw", sorted(NEWER_UNICODE))
def test_nsqd_prints_newer_unicode_that_we_escape(nsqds: Nsqds, raw: bytes) -> None:
    frames, _ = exchange(nsqds.port(()), MAGIC + b"PUB " + raw + b" x\n")
    assert frames == [(1, b'E_BAD_TOPIC PUB topic name "' + raw + b'" is not valid')]


@pytest.mark.parametrize(("raw", "quoted"), QUOTABLE, ids=[repr(r) for r, _ in QUOTABLE])
def test_nsqd_quotes_names_as_the_table_says(nsqds: Nsqds, raw: bytes, quoted: str) -> None:
    frames, _ = exchange(nsqds.port(()), MAGIC + b"PUB " + raw + b" x\n")
    assert frames == [(1, f"E_BAD_TOPIC PUB topic name {quoted} is not valid".encode())]
