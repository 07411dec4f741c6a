"""A group of workers (`nsqd --workers=2`) on free 127.0.0.1 ports, with a way to reach one
worker in particular: each writes the address of its private V2 link to worker-K.link in
--data-path (users have the same file), and a connection there stays in that worker."""

from __future__ import annotations

import json
import os
import re
import shutil
import signal
import subprocess
import tempfile
import urllib.error
import urllib.request
from collections.abc import Iterator
from pathlib import Path

import pytest

from tests.ops.conftest import (
    OURS,
    REPO_ROOT,
    START_TIMEOUT,
    STOP_TIMEOUT,
    V2,
    free_ports,
    nsqd_process,
    port_open,
    wait_until,
)

PEER_HEADER = "X-Trio-Nsqd-Group-Peer"
_STARTED = re.compile(rb"group: worker (\d+) started \(pid (\d+)\)")
_LISTENS = re.compile(rb"group: worker (\d+) listens on the shared ports")


def run_to_exit(*flags: str, timeout: float = START_TIMEOUT) -> subprocess.CompletedProcess[str]:
    """Our nsqd with `flags`, run until it exits (a start it refuses): its status and output."""
    return subprocess.run(
        [*OURS, *flags],
        cwd=REPO_ROOT,
        env=nsqd_process.pythonpath_env(),
        capture_output=True,
        text=True,
        timeout=timeout,
        check=False,
    )


class Group:
    """One `nsqd --workers=N` (the supervisor process) and its workers."""

    def __init__(self, workdir: Path, count: int = 2) -> None:
        self.workdir, self.count = workdir, count
        self.data = workdir / "data"
        self.data.mkdir(parents=True, exist_ok=True)
        self.tcp, self.http = free_ports(2)
        self.proc: nsqd_process.subprocess.Popen[bytes] | None = None
        self.log = workdir / "group.log"

    def start(self, *flags: str) -> Group:
        for stale in self.data.glob("worker-*.link"):  # a killed group's: wait for the new ones
            stale.unlink()
        argv = [*OURS, f"--workers={self.count}"]
        argv += nsqd_process.address_flags(self.tcp, self.http, self.data)
        before = [self.listened(k) if self.log.exists() else 0 for k in range(self.count)]
        self.proc = nsqd_process.launch(argv + list(flags), self.log, append=True)
        wait_until(lambda: all(self.link(k) for k in range(self.count)), START_TIMEOUT, "links")
        wait_until(lambda: port_open(self.tcp) and port_open(self.http), START_TIMEOUT, "ports")

        def every() -> bool:  # not only the first: one killed before it caught up never would
            return all(self.listened(k) > before[k] for k in range(self.count))

        wait_until(every, START_TIMEOUT, "every worker listening on the shared ports")
        return self

    def link(self, k: int) -> int:
        """The port of worker k's private V2 link (0 until it listens)."""
        try:
            line = (self.data / f"worker-{k}.link").read_text().split()[0]
            port = int(line.rpartition(":")[2])
        except (OSError, ValueError):
            return 0
        return port if port_open(port) else 0

    def private_http(self, k: int) -> str:
        """Worker k's private HTTP address (its second line in worker-k.link)."""
        return (self.data / f"worker-{k}.link").read_text().split()[1]

    def worker_stats(self, k: int, query: str = "", mark: str = "1") -> dict:
        """Worker k's own /stats (JSON), asked as its peers ask: for that worker alone (`mark`:
        the peer header's value; the group's secret under --tls-required)."""
        url = f"http://{self.private_http(k)}/stats?format=json{query}"
        req = urllib.request.Request(url, headers={PEER_HEADER: mark})
        with urllib.request.urlopen(req, timeout=5) as resp:
            return json.loads(resp.read())

    def post(self, k: int, target: str, *, peer: bool = True, stamp: float | None = None) -> int:
        """`POST /target` (an admin path and query) to worker k's private HTTP: as a peer asks
        it, for that worker alone, or (`peer=False`) as a client, the group's request made in
        that worker first; `stamp`: the peer fan-out's stamp (pause_clock.SINCE_HEADER). The
        answer's status."""
        headers = {PEER_HEADER: "1"} if peer else {}
        if stamp is not None:
            headers["X-Trio-Nsqd-Group-Since"] = repr(stamp)
        url = f"http://{self.private_http(k)}/{target}"
        req = urllib.request.Request(url, data=b"", headers=headers)
        try:
            with urllib.request.urlopen(req, timeout=10) as resp:
                return resp.status
        except urllib.error.HTTPError as err:
            return err.code

    def pin(self, k: int) -> V2:
        """A V2 connection that lands in worker k."""
        return V2(self.link(k))

    def pids(self) -> dict[int, int]:
        """The latest pid of each worker, from the supervisor's log."""
        return {int(k): int(p) for k, p in _STARTED.findall(self.log.read_bytes())}

    def listened(self, k: int) -> int:
        """How many times worker k (any of its processes) began to listen on the shared
        ports: after it caught up its peers' topics and channels."""
        return sum(int(m) == k for m in _LISTENS.findall(self.log.read_bytes()))

    def log_text(self) -> str:
        return self.log.read_text(errors="replace")

    def kill(self) -> None:
        """SIGKILL to every worker and the supervisor (stopped first: it restarts nobody)."""
        assert self.proc is not None
        self.proc.send_signal(signal.SIGSTOP)
        for pid in self.pids().values():
            os.kill(pid, signal.SIGKILL)
        self.proc.kill()
        self.proc.wait(10)
        self.proc = None

    def stop(self) -> int | None:
        if self.proc is None:
            return None
        status = nsqd_process.terminate(self.proc, STOP_TIMEOUT * 2)
        self.proc = None
        return status


@pytest.fixture
def workdir() -> Iterator[Path]:
    path = Path(tempfile.mkdtemp(prefix="nsqd-group-"))
    yield path
    shutil.rmtree(path, ignore_errors=True)


@pytest.fixture
def group(workdir: Path) -> Iterator[Group]:
    g = Group(workdir)
    yield g
    status = g.stop()
    if g.log.exists():  # pytest shows a teardown's output only for a test that failed
        print(g.log_text()[-8000:])
    assert status in (None, 0, -signal.SIGTERM), g.log_text()[-3000:]
