"""Helpers for the HTTP API tests: an nsqd subprocess (ours or the Go reference) on free
127.0.0.1 ports, and a tiny blocking V2 TCP client. Every wait is bounded."""

from __future__ import annotations

import functools
import re
import shutil
import socket
import struct
import subprocess
import sys
import tempfile
import time
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import httpx

sys.path.append(str(Path(__file__).resolve().parents[2] / "scripts"))
import nsqd_process
import v2client

from protocol.v2 import encoders

REPO_ROOT = Path(__file__).resolve().parents[2]
HOST = nsqd_process.HOST
START_TIMEOUT = 15.0
STOP_TIMEOUT = 5.0
IO_TIMEOUT = 5.0


class ReferenceUnavailable(RuntimeError):
    pass


def reference_nsqd() -> Path:
    try:
        return nsqd_process.reference_dir() / "nsqd"
    except nsqd_process.ReferenceInstallError as exc:
        raise ReferenceUnavailable(str(exc)) from exc


@dataclass
class Daemon(nsqd_process.LoggedProcess):
    kind: str
    proc: subprocess.Popen[bytes]
    tcp_port: int
    http_port: int
    tmp: Path

    @property
    def url(self) -> str:
        return f"http://{HOST}:{self.http_port}"

    @property
    def tcp_addr(self) -> tuple[str, int]:
        return (HOST, self.tcp_port)

    @property
    def log_path(self) -> Path:
        return self.tmp / "nsqd.log"

    def stop(self) -> int | None:
        """SIGTERM; the exit status (None if it had to be killed)."""
        rc = nsqd_process.terminate(self.proc, STOP_TIMEOUT)
        shutil.rmtree(self.tmp, ignore_errors=True)
        return rc


def _answers_http(port: int) -> bool:
    """GET /ping gets an HTTP/1.1 answer (any status)."""
    try:
        with socket.create_connection((HOST, port), timeout=0.5) as s:
            s.settimeout(1.0)
            s.sendall(b"GET /ping HTTP/1.1\r\nHost: x\r\nConnection: close\r\n\r\n")
            return s.recv(64).startswith(b"HTTP/1.1 ")
    except OSError:
        return False


def start(kind: str, *args: str) -> Daemon:
    command = [str(reference_nsqd())] if kind == "reference" else nsqd_process.ours_command()
    env = nsqd_process.pythonpath_env()
    last = ""
    for _ in range(3):
        tmp = Path(tempfile.mkdtemp(prefix=f"nsqd-http-{kind}-"))
        (tmp / "data").mkdir()
        tcp_port, http_port = nsqd_process.free_ports(2)
        flags = nsqd_process.address_flags(tcp_port, http_port, tmp / "data", https_port=0)
        proc = nsqd_process.launch([*command, *flags, *args], tmp / "nsqd.log", env=env)
        daemon = Daemon(kind, proc, tcp_port, http_port, tmp)
        answers = functools.partial(_answers_http, http_port)
        if nsqd_process.wait_until_ready(proc, answers, START_TIMEOUT, interval=0.03):
            return daemon
        last = daemon.log()
        daemon.stop()
    raise RuntimeError(f"{kind} nsqd did not start:\n{last}")


def https_port(daemon: Daemon) -> int:
    """The bound --https-address port, from the `HTTPS: listening on host:port` log line."""

    def logged() -> int:
        match = re.search(r"HTTPS: listening on \S+:(\d+)", daemon.log())
        return int(match.group(1)) if match else 0

    return wait_until(logged)


# -- a minimal V2 TCP client ---------------------------------------------------------------------


class TCPClient(v2client.BlockingV2):
    """A V2 connection (optionally IDENTIFYed) for the HTTP tests' publishers and consumers."""

    def __init__(self, addr: tuple[str, int], **identify: Any) -> None:
        super().__init__(addr, IO_TIMEOUT)
        if identify:
            self.send(encoders.identify(identify))
            self.expect_response()

    def __enter__(self) -> TCPClient:
        return self

    def expect_response(self) -> bytes:
        kind, data = self.frame()
        assert kind == 0, (kind, data)
        return data

    def message(self) -> tuple[bytes, int, bytes]:
        """(id, attempts, body) of the next message frame."""
        kind, data = self.frame()
        assert kind == 2, (kind, data)
        _, attempts = struct.unpack(">qH", data[:10])
        return data[10:26], attempts, data[26:]


def wait_until(predicate: Any, timeout: float = IO_TIMEOUT, interval: float = 0.02) -> Any:
    """Poll predicate() until it returns something truthy (bounded)."""
    deadline = time.monotonic() + timeout
    while True:
        value = predicate()
        if value:
            return value
        if time.monotonic() > deadline:
            raise TimeoutError(f"condition not met within {timeout}s")
        time.sleep(interval)


# -- comparing bodies with the reference -----------------------------------------------------------

_MASKS = [
    (re.compile(rb'"start_time":\d+'), b'"start_time":T'),
    (re.compile(rb'"connect_ts":\d+'), b'"connect_ts":T'),
    (re.compile(rb'"remote_address":"[^"]*"'), b'"remote_address":A'),
    (re.compile(rb'"(http_port|tcp_port)":\d+'), rb'"\1":P'),
    (re.compile(rb'"memory":\{[^}]*\}'), b'"memory":M'),
    (re.compile(rb'"(hostname|broadcast_address)":"[^"]*"'), rb'"\1":H'),
]


def mask(body: bytes) -> bytes:
    for pattern, repl in _MASKS:
        body = pattern.sub(repl, body)
    return body


def key_paths(value: Any, prefix: str = "") -> list[str]:
    """Every key path with its position, e.g. `topics[].channels[].clients[].state`."""
    out: list[str] = []
    if isinstance(value, dict):
        for key, sub in value.items():
            out.append(f"{prefix}.{key}")
            out.extend(key_paths(sub, f"{prefix}.{key}"))
    elif isinstance(value, list):
        for sub in value:
            for path in key_paths(sub, f"{prefix}[]"):
                if path not in out:
                    out.append(path)
    return out


CONTENT_HEADERS = ("content-type", "x-nsq-content-type", "location", "allow")


def normalize(daemon: Daemon, body: bytes) -> bytes:
    """A body with what differs between two daemons by nature masked: its temp path, ports,
    times, the build string and the figures of the text page's Memory block."""
    body = body.replace(str(daemon.tmp).encode(), b"TMP")
    for port, name in ((daemon.http_port, b"HTTP_PORT"), (daemon.tcp_port, b"TCP_PORT")):
        body = re.sub(rb"(?<![0-9])%d(?![0-9])" % port, name, body)
    body = re.sub(rb"(?m)^uptime .*$", b"uptime U", body)
    body = re.sub(rb"(?m)^nsqd v1\.3\.0 \(built w/.*\)$", b"nsqd v1.3.0 (built w/X)", body)
    body = re.sub(rb"(?m)^start_time .*$", b"start_time T", body)
    body = re.sub(rb"connected: \S+", b"connected: C", body)
    body = re.sub(rb":\d+ ", b":PORT ", body)  # client ports in the text page
    body = re.sub(rb"(?m)^(   \w+ +\t)\d+$", rb"\1N", body)  # the text page's Memory figures
    return mask(body)


# -- what the API tests read back (nsqd's V1 rendering) ------------------------------------------

JSON = "application/json; charset=utf-8"
TEXT = "text/plain; charset=utf-8"
V1 = "nsq; version=1.0"


def stats(http: httpx.Client, **params: str) -> dict[str, Any]:
    r = http.get("/stats", params={"format": "json", "include_mem": "false", **params})
    assert r.status_code == 200
    return r.json()


def topic_stats(http: httpx.Client, topic: str) -> dict[str, Any]:
    return stats(http, topic=topic)["topics"][0]


def channel_stats(http: httpx.Client, topic: str, channel: str) -> dict[str, Any]:
    chans = topic_stats(http, topic)["channels"]
    return next(c for c in chans if c["channel_name"] == channel)


def binary_mpub(*bodies: bytes, count: int | None = None) -> bytes:
    n = len(bodies) if count is None else count
    return struct.pack(">i", n) + b"".join(struct.pack(">i", len(b)) + b for b in bodies)
