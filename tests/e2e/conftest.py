"""End-to-end fixtures: a real nsqd process (ours, or the Go reference) on free 127.0.0.1 ports.

Every daemon fixture is parametrized over ``ours`` (``python -m nsqd``) and ``reference`` (the
Go nsqd v1.3.0 binary from ``scripts/reference.py``): the reference run proves the test itself
is right. ``E2E_DAEMONS=ours`` (comma separated) narrows the set; ``E2E_OURS_ROOT`` runs
``python -m nsqd`` from another tree.

Every daemon is stopped with SIGTERM and must exit 0 within a few seconds: a per-test daemon
(`daemon`, `make_daemon`) fails that test's teardown otherwise; the shared ones (`DaemonPool`:
`shared_daemon`, `limited_daemon`, ...) are checked at the end of the session."""

from __future__ import annotations

import os
import re
import shutil
import socket
import subprocess
import sys
import tempfile
import time
from collections.abc import Callable, Iterator
from dataclasses import dataclass, field
from pathlib import Path

import pytest

sys.path.append(str(Path(__file__).resolve().parents[2] / "scripts"))
import nsqd_process

REPO_ROOT = Path(__file__).resolve().parents[2]
# This folder is a package, so pytest puts tests/ on sys.path, where tests/protocol/ (no
# __init__.py) would shadow the real `protocol` package as a namespace package under a bare
# `pytest` run. Make the checkout come first.
if sys.path[:1] != [str(REPO_ROOT)]:
    sys.path.insert(0, str(REPO_ROOT))
if getattr(sys.modules.get("protocol"), "__file__", "") is None:
    del sys.modules["protocol"]
# Where `python -m nsqd` runs from (default: this checkout; point it at a snapshot to test a
# fixed version while the working tree changes).
OURS_ROOT = Path(os.environ.get("E2E_OURS_ROOT") or REPO_ROOT)
KINDS = [k.strip() for k in os.environ.get("E2E_DAEMONS", "ours,reference").split(",") if k]
START_TIMEOUT = 15.0
STOP_TIMEOUT = 5.0

# The limits used by the error-code tests (nsqd's own tests use the same numbers), and a
# default msg timeout to see in IDENTIFY's answer.
SMALL_LIMITS = (
    "--max-msg-size=100",
    "--max-body-size=1000",
    "--max-rdy-count=50",
    "--msg-timeout=45s",
)


_reference_bin: Path | None = None


def reference_binary() -> Path:
    global _reference_bin
    if _reference_bin is None:
        try:
            _reference_bin = nsqd_process.reference_dir() / "nsqd"
        except nsqd_process.ReferenceInstallError as exc:  # the suite needs it: fail, never skip
            pytest.fail(f"reference nsqd could not be installed: {exc}", pytrace=False)
    return _reference_bin


@dataclass
class Daemon(nsqd_process.LoggedProcess):
    TAIL_LINES = 40
    kind: str  # "ours" or "reference"
    proc: subprocess.Popen[bytes]
    host: str
    tcp_port: int
    http_port: int
    data_path: Path
    log_path: Path
    args: list[str] = field(default_factory=list)
    ready_at: float = field(default_factory=time.monotonic)  # when the TCP port answered

    @property
    def tcp_address(self) -> str:
        return f"{self.host}:{self.tcp_port}"

    @property
    def addr(self) -> tuple[str, int]:
        return (self.host, self.tcp_port)

    def terminate(self, timeout: float = STOP_TIMEOUT) -> tuple[int | None, float]:
        """SIGTERM; the exit status (None if it did not exit in time, then it is killed)."""
        start = time.monotonic()
        rc = nsqd_process.terminate(self.proc, timeout, kill_timeout=5)
        return rc, time.monotonic() - start

    def cleanup(self) -> None:
        shutil.rmtree(self.data_path, ignore_errors=True)


def command_for(kind: str) -> list[str]:
    if kind == "ours":
        return nsqd_process.ours_command()
    if kind == "reference":
        return [str(reference_binary())]
    raise ValueError(kind)


def command_cwd(kind: str) -> Path:
    return OURS_ROOT if kind == "ours" else REPO_ROOT


def start_daemon(kind: str, extra_args: tuple[str, ...] | list[str] = ()) -> Daemon:
    """Start a daemon on free ports (retrying if a port was taken meanwhile)."""
    data_path = Path(tempfile.mkdtemp(prefix=f"nsqd-e2e-{kind}-"))
    log_path = data_path / "daemon.log"
    last = ""
    for _ in range(3):
        host = nsqd_process.HOST
        tcp_port, http_port = nsqd_process.free_ports(2)
        args = [*nsqd_process.address_flags(tcp_port, http_port, data_path), *extra_args]
        argv = [*command_for(kind), *args]
        proc = nsqd_process.launch(argv, log_path, cwd=command_cwd(kind), append=True)
        daemon = Daemon(kind, proc, host, tcp_port, http_port, data_path, log_path, args)
        if nsqd_process.wait_accepting(proc, tcp_port, START_TIMEOUT):
            daemon.ready_at = time.monotonic()
            return daemon
        daemon.terminate(2)
        last = daemon.log_tail()
        log_path.unlink(missing_ok=True)
    shutil.rmtree(data_path, ignore_errors=True)
    raise RuntimeError(f"{kind} nsqd did not start listening:\n{last}")


def shutdown(daemon: Daemon) -> str | None:
    """SIGTERM, remove the data dir; a failure text unless it exited 0 within STOP_TIMEOUT."""
    rc, elapsed = daemon.terminate()
    report = None
    if rc != 0:
        report = (
            f"{daemon.kind} nsqd {'did not exit' if rc is None else f'exited {rc}'} "
            f"{elapsed:.1f}s after SIGTERM (want 0 within {STOP_TIMEOUT:.0f}s); log tail:\n"
            f"{daemon.log_tail()}"
        )
    daemon.cleanup()
    return report


@pytest.fixture(params=KINDS)
def daemon_kind(request: pytest.FixtureRequest) -> str:
    if request.param == "reference":
        reference_binary()  # fails if it cannot be installed
    return request.param


@pytest.fixture
def make_daemon(daemon_kind: str) -> Iterator[Callable[..., Daemon]]:
    """Factory: ``make_daemon("--msg-timeout=1s")`` starts one more daemon of this run's kind;
    each is SIGTERMed at teardown and must exit 0."""
    started: list[Daemon] = []

    def make(*extra_args: str) -> Daemon:
        d = start_daemon(daemon_kind, extra_args)
        started.append(d)
        return d

    yield make
    reports = [r for r in map(shutdown, started) if r]
    if reports:
        pytest.fail("\n\n".join(reports), pytrace=False)


@pytest.fixture
def daemon(make_daemon: Callable[..., Daemon]) -> Daemon:
    """A daemon with default options (function scope)."""
    return make_daemon()


class DaemonPool:
    """Daemons shared by many tests (each test uses its own topics), one per kind, flags and
    setup, started on first use and stopped at the end of the session, where each must exit
    0 like any other. (A module-scoped parametrized fixture would report an unclean exit as
    a setup error of the next test, which then never runs.)"""

    def __init__(self) -> None:
        self._daemons: dict[tuple[str, tuple[str, ...], str], Daemon] = {}

    def get(
        self,
        kind: str,
        flags: tuple[str, ...] = (),
        setup: Callable[[Daemon], None] | None = None,
    ) -> Daemon:
        key = (kind, flags, getattr(setup, "__qualname__", ""))
        daemon = self._daemons.get(key)
        if daemon is None:
            daemon = start_daemon(kind, flags)
            self._daemons[key] = daemon
            if setup is not None:
                setup(daemon)
        return daemon

    def close(self) -> list[str]:
        reports = [shutdown(d) for d in self._daemons.values()]
        self._daemons.clear()
        return [r for r in reports if r]


@pytest.fixture(scope="session")
def daemon_pool() -> Iterator[DaemonPool]:
    pool = DaemonPool()
    yield pool
    reports = pool.close()
    if reports:
        pytest.fail("shared daemons:\n" + "\n\n".join(reports), pytrace=False)


@pytest.fixture
def shared_daemon(daemon_pool: DaemonPool, daemon_kind: str) -> Daemon:
    """A daemon with default options, shared with other tests."""
    return daemon_pool.get(daemon_kind)


@pytest.fixture
def limited_daemon(daemon_pool: DaemonPool, daemon_kind: str) -> Daemon:
    """A shared daemon with small limits (see SMALL_LIMITS)."""
    return daemon_pool.get(daemon_kind, SMALL_LIMITS)


# nsqd's queue scanner (in-flight timeouts, deferred messages) works on a channel list it
# refreshes only every 5 s, so a channel created after the last refresh sees no timeouts or
# DPUB/REQ-delay releases for up to 5 s. Timing tests use channels created up front and wait
# for that refresh once per daemon. Ours scans every channel every 100 ms.
SCAN_REFRESH = 5.0


def create_channels(addr: tuple[str, int], channels: list[tuple[str, str]]) -> None:
    """SUB each (topic, channel) once and leave: the channels stay (unless ephemeral)."""
    for topic, channel in channels:
        with socket.create_connection(addr, timeout=5) as s:
            s.sendall(b"  V2" + f"SUB {topic} {channel}\n".encode())
            data = b""
            while len(data) < 10:
                chunk = s.recv(64)
                assert chunk, f"SUB {topic} {channel}: connection closed"
                data += chunk
            assert data == b"\x00\x00\x00\x06\x00\x00\x00\x00OK", data


def wait_for_scan_refresh(daemon: Daemon) -> None:
    if daemon.kind == "reference":
        time.sleep(max(0.0, daemon.ready_at + SCAN_REFRESH + 0.5 - time.monotonic()))


@pytest.fixture
def topic(request: pytest.FixtureRequest) -> str:
    """A topic name unique to the test (module-scoped daemons are shared)."""
    name = re.sub(r"[^.a-zA-Z0-9_-]", "-", request.node.name.removeprefix("test_"))
    return f"{name[:40]}-{time.monotonic_ns() % 10**9}"
