"""Operations tests: processes (our nsqd, the real nsqd/nsqlookupd/nsqadmin v1.3.0) on free
127.0.0.1 ports, every wait bounded, every process stopped at teardown."""

from __future__ import annotations

import json
import shutil
import signal
import socket
import subprocess
import sys
import tempfile
import time
import urllib.error
import urllib.request
import zlib
from collections.abc import Callable, Iterator
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import pytest

sys.path.append(str(Path(__file__).resolve().parents[2] / "scripts"))
import nsqd_process
import v2client
from nsqd_process import free_port, free_ports, port_open

REPO_ROOT = Path(__file__).resolve().parents[2]
# tests/protocol (no __init__.py) would shadow the real `protocol` package: checkout first.
if sys.path[:1] != [str(REPO_ROOT)]:
    sys.path.insert(0, str(REPO_ROOT))
if getattr(sys.modules.get("protocol"), "__file__", "") is None:
    del sys.modules["protocol"]
HOST = nsqd_process.HOST
START_TIMEOUT = 15.0
STOP_TIMEOUT = 5.0
OURS = nsqd_process.ours_command()

_ref_dir: Path | None = None


def reference_bin(tool: str) -> Path:
    """A real NSQ v1.3.0 tool, installed into .reference/bin first if missing."""
    global _ref_dir
    if _ref_dir is None:
        try:
            _ref_dir = nsqd_process.reference_dir()
        except nsqd_process.ReferenceInstallError as exc:
            pytest.fail(f"reference NSQ tools could not be installed: {exc}", pytrace=False)
    return _ref_dir / tool


def wait_until(check: Callable[[], Any], timeout: float, what: str, step: float = 0.1) -> Any:
    """Poll `check` until it returns something truthy; fail with `what` after `timeout` s."""
    deadline = time.monotonic() + timeout
    last: Any = None
    while True:
        try:
            last = check()
        except Exception as exc:  # keep polling; shown if it never succeeds
            last = exc
        else:
            if last:
                return last
        if time.monotonic() >= deadline:
            raise AssertionError(f"timed out after {timeout:.0f}s waiting for {what}: {last!r}")
        time.sleep(step)


def http_get(url: str, timeout: float = 5.0) -> tuple[int, bytes]:
    req = urllib.request.Request(url, headers={"Accept": "application/vnd.nsq; version=1.0"})
    try:
        with urllib.request.urlopen(req, timeout=timeout) as resp:
            return resp.status, resp.read()
    except urllib.error.HTTPError as exc:
        return exc.code, exc.read()


def http_json(url: str, timeout: float = 5.0) -> Any:
    status, body = http_get(url, timeout)
    assert status == 200, (url, status, body)
    return json.loads(body)


def stats_channel(stats: dict[str, Any], topic: str, channel: str) -> dict[str, Any]:
    """One channel's entry in a /stats?format=json document."""
    t = next(t for t in stats["topics"] if t["topic_name"] == topic)
    return next(c for c in t["channels"] if c["channel_name"] == channel)


def http_post(url: str, body: bytes = b"", timeout: float = 5.0) -> tuple[int, bytes]:
    req = urllib.request.Request(url, data=body, method="POST")
    try:
        with urllib.request.urlopen(req, timeout=timeout) as resp:
            return resp.status, resp.read()
    except urllib.error.HTTPError as exc:
        return exc.code, exc.read()


@dataclass
class Proc(nsqd_process.LoggedProcess):
    name: str
    proc: subprocess.Popen[bytes]
    workdir: Path
    ports: dict[str, int] = field(default_factory=dict)
    argv: list[str] = field(default_factory=list)

    @property
    def log_path(self) -> Path:
        return self.workdir / f"{self.name}.log"

    def addr(self, which: str) -> str:
        return f"{HOST}:{self.ports[which]}"

    def stop(self) -> int | None:
        """SIGTERM (SIGKILL after STOP_TIMEOUT); the exit status, None if it had to be killed."""
        return nsqd_process.terminate(self.proc, STOP_TIMEOUT)


def spawn(
    name: str,
    argv: list[str],
    workdir: Path,
    ports: dict[str, int],
    wait_for: str | None = "tcp",
    cwd: Path = REPO_ROOT,
) -> Proc:
    """Start `argv`; returns once ports[wait_for] accepts connections (unless None)."""
    workdir.mkdir(parents=True, exist_ok=True)
    proc = nsqd_process.launch(argv, workdir / f"{name}.log", cwd=cwd, append=True)
    p = Proc(name, proc, workdir, ports, argv)
    if wait_for is not None and not nsqd_process.wait_accepting(
        proc, ports[wait_for], START_TIMEOUT
    ):
        p.stop()
        raise AssertionError(f"{name} did not start ({argv}):\n{p.log_tail()}")
    return p


class Launcher:
    """Starts processes for one test and stops them all at its end."""

    def __init__(self, workdir: Path) -> None:
        self.workdir = workdir
        self.procs: list[Proc] = []

    def nsqd(self, kind: str = "ours", *args: str, name: str | None = None) -> Proc:
        tcp, http, https = free_ports(3)  # distinct: two free_port() calls may agree
        name = name or f"nsqd-{kind}-{len(self.procs)}"
        data = self.workdir / f"{name}-data"
        data.mkdir(parents=True, exist_ok=True)
        argv = [*(OURS if kind == "ours" else [str(reference_bin("nsqd"))])]
        argv += [*nsqd_process.address_flags(tcp, http, data, https_port=https), *args]
        p = spawn(name, argv, self.workdir, {"tcp": tcp, "http": http})
        self.procs.append(p)
        wait_until(lambda: port_open(http), START_TIMEOUT, f"{name} HTTP")
        return p

    def nsqlookupd(self, *args: str, tcp: int = 0, http: int = 0) -> Proc:
        any_tcp, any_http = free_ports(2)
        tcp, http = tcp or any_tcp, http or any_http
        argv = [
            str(reference_bin("nsqlookupd")),
            f"--tcp-address={HOST}:{tcp}",
            f"--http-address={HOST}:{http}",
            f"--broadcast-address={HOST}",
            *args,
        ]
        p = spawn(f"nsqlookupd-{len(self.procs)}", argv, self.workdir, {"tcp": tcp, "http": http})
        wait_until(lambda: port_open(http), START_TIMEOUT, "nsqlookupd HTTP")
        self.procs.append(p)
        return p

    def nsqadmin(self, lookupd: Proc) -> Proc:
        http = free_port()
        argv = [
            str(reference_bin("nsqadmin")),
            f"--http-address={HOST}:{http}",
            f"--lookupd-http-address={lookupd.addr('http')}",
        ]
        p = spawn(f"nsqadmin-{len(self.procs)}", argv, self.workdir, {"http": http}, "http")
        self.procs.append(p)
        return p

    def stop_all(self) -> list[str]:
        problems = []
        for p in reversed(self.procs):
            rc = p.stop()
            if rc not in (0, -signal.SIGTERM):
                problems.append(f"{p.name} exited {rc}:\n{p.log_tail()}")
        self.procs.clear()
        return problems


@pytest.fixture
def launcher() -> Iterator[Launcher]:
    workdir = Path(tempfile.mkdtemp(prefix="nsqd-ops-"))
    la = Launcher(workdir)
    try:
        yield la
    finally:
        problems = la.stop_all()
        shutil.rmtree(workdir, ignore_errors=True)
    assert not problems, "\n".join(problems)


# -- a minimal synchronous V2 client ----------------------------------------------------------


class V2(v2client.BlockingV2):
    def __init__(self, port: int, timeout: float = 5.0) -> None:
        super().__init__((HOST, port), timeout)

    def message(self) -> tuple[bytes, bytes]:
        """(id, body) of the next message."""
        kind, data = self.frame()
        assert kind == 2, (kind, data)
        return data[10:26], data[26:]


class Deflated:
    """A socket as a client sees it once IDENTIFY negotiated deflate (raw, as nsqd's flate)."""

    def __init__(self, sock: socket.socket) -> None:
        self.sock = sock
        self._out = zlib.compressobj(6, zlib.DEFLATED, -15)
        self._in = zlib.decompressobj(-15)

    def sendall(self, data: bytes) -> None:
        self.sock.sendall(self._out.compress(data) + self._out.flush(zlib.Z_SYNC_FLUSH))

    def recv(self, size: int) -> bytes:
        while True:
            chunk = self.sock.recv(size)
            if not chunk:
                return b""
            data = self._in.decompress(chunk)
            if data:
                return data

    def settimeout(self, timeout: float) -> None:
        self.sock.settimeout(timeout)

    def close(self) -> None:
        self.sock.close()
