"""Start and stop an nsqd (the Go reference or ours) on free loopback ports, fresh data path."""

from __future__ import annotations

import http.client
import json
import os
import shutil
import subprocess
import sys
import tempfile
import time
import urllib.request
from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Final, NamedTuple

sys.path.append(str(Path(__file__).resolve().parent.parent / "scripts"))
import nsqd_process
from nsqd_process import free_ports

REPO_ROOT: Final = nsqd_process.REPO_ROOT
HOST: Final = nsqd_process.HOST
START_TIMEOUT_S: Final = 20.0
STOP_TIMEOUT_S: Final = 10.0
TARGETS: Final = ("reference", "ours")
_TICK: Final = os.sysconf("SC_CLK_TCK")


class DaemonError(RuntimeError):
    """The daemon could not be started (or died)."""


class ChannelStats(NamedTuple):
    """One channel's counters from /stats (depth counts memory and disk, as nsqd's does)."""

    depth: int
    backend_depth: int
    in_flight: int
    message_count: int


OURS_COMMAND: Final = tuple(nsqd_process.ours_command())


def daemon_command(target: str, bin_dir: Path | None, ours_cmd: tuple[str, ...]) -> list[str]:
    if target == "reference":
        if bin_dir is None:
            raise DaemonError("the reference nsqd is not installed")
        return [str(bin_dir / "nsqd")]
    if target == "ours":
        return list(ours_cmd)
    raise ValueError(f"unknown target {target!r}")


@dataclass
class Daemon:
    """A running nsqd subprocess; use as a context manager (killed and cleaned up on exit)."""

    target: str
    proc: subprocess.Popen[bytes]
    tcp_port: int
    http_port: int
    data_path: Path
    log_path: Path

    @property
    def tcp_addr(self) -> tuple[str, int]:
        return (HOST, self.tcp_port)

    @property
    def tcp_address(self) -> str:
        return f"{HOST}:{self.tcp_port}"

    @property
    def http_addr(self) -> tuple[str, int]:
        return (HOST, self.http_port)

    def __enter__(self) -> Daemon:
        return self

    def __exit__(self, *exc: object) -> None:
        self.stop()

    def alive(self) -> bool:
        return self.proc.poll() is None

    def check_alive(self) -> None:
        if not self.alive():
            raise DaemonError(
                f"{self.target} nsqd exited with {self.proc.returncode}:\n{self.log_tail()}"
            )

    def pids(self) -> list[int]:
        """The daemon's process and its children (ours with --workers: the supervisor's
        workers, whose figures are the group's)."""
        pids = [self.proc.pid]
        for task in Path(f"/proc/{self.proc.pid}/task").glob("*/children"):
            try:
                pids += [int(p) for p in task.read_text().split()]
            except OSError:
                continue  # a thread that ended meanwhile
        return pids

    def cpu_seconds(self) -> float:
        """utime + stime of the daemon's processes, in seconds."""
        return sum(process_cpu_seconds(pid) for pid in self.pids())

    def rss_kib(self) -> int:
        """Resident set size (VmRSS) of the daemon's processes, in KiB."""
        return sum(read_status_kib(pid, "VmRSS") for pid in self.pids())

    def peak_rss_kib(self) -> int:
        """The processes' peaks (VmHWM), summed: the group's at most."""
        return sum(read_status_kib(pid, "VmHWM") for pid in self.pids())

    def stats(self, topic: str | None = None) -> dict[str, Any] | None:
        """GET /stats?format=json (None if the daemon does not answer it)."""
        url = f"http://{HOST}:{self.http_port}/stats?format=json&include_clients=false"
        if topic:
            url += f"&topic={topic}"
        try:
            with urllib.request.urlopen(url, timeout=5.0) as resp:
                return json.loads(resp.read())
        except (OSError, ValueError):
            return None

    def http_post(self, path: str) -> None:
        """POST an admin endpoint such as /channel/create?topic=t&channel=c (raise unless 200)."""
        request = urllib.request.Request(f"http://{HOST}:{self.http_port}{path}", method="POST")
        with urllib.request.urlopen(request, timeout=10.0) as resp:
            resp.read()

    def create_channel(self, topic: str, channel: str) -> None:
        """The topic and its channel, before anything is published (so the channel gets it all)."""
        self.http_post(f"/topic/create?topic={topic}")  # /channel/create wants the topic to exist
        self.http_post(f"/channel/create?topic={topic}&channel={channel}")

    def topic_message_count(self, topic: str) -> int:
        """Messages the topic accepted (/stats message_count); raise if /stats has no such topic."""
        return self.topic_counts(topic)[0]

    def topic_counts(self, topic: str) -> tuple[int, int]:
        """The topic's (message_count, backend_depth) from /stats."""
        for t in self._stats_topics(topic):
            if t["topic_name"] == topic:
                return int(t["message_count"]), int(t["backend_depth"])
        raise DaemonError(f"{self.target} nsqd: no topic {topic!r} in /stats")

    def channel_stats(self, topic: str, channel: str) -> ChannelStats:
        for t in self._stats_topics(topic):
            for c in t["channels"] or []:
                if t["topic_name"] == topic and c["channel_name"] == channel:
                    return ChannelStats(
                        int(c["depth"]),
                        int(c["backend_depth"]),
                        int(c["in_flight_count"]),
                        int(c["message_count"]),
                    )
        raise DaemonError(f"{self.target} nsqd: no channel {topic}/{channel} in /stats")

    def _stats_topics(self, topic: str) -> list[dict[str, Any]]:
        stats = self.stats(topic)
        if stats is None:
            self.check_alive()
            raise DaemonError(f"{self.target} nsqd: /stats did not answer")
        return stats.get("topics") or []

    def log_tail(self, max_bytes: int = 2000) -> str:
        return nsqd_process.log_tail(self.log_path, max_bytes=max_bytes)

    def stop(self) -> None:
        """Kill the daemon (SIGKILL: the data path is thrown away, no flush wanted); clean up."""
        nsqd_process.kill(self.proc, STOP_TIMEOUT_S)
        shutil.rmtree(self.data_path.parent, ignore_errors=True)


def read_status_kib(pid: int, key: str) -> int:
    """A /proc/PID/status figure in KiB; 0 for a process that ended meanwhile."""
    try:
        text = Path(f"/proc/{pid}/status").read_text()
    except OSError:
        return 0
    for line in text.splitlines():
        if line.startswith(key + ":"):
            return int(line.split()[1])
    raise DaemonError(f"no {key} in /proc/{pid}/status")


def process_cpu_seconds(pid: int) -> float:
    """utime + stime of one process, in seconds (0 for one that ended meanwhile)."""
    try:
        fields = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()
    except OSError:
        return 0.0
    return (int(fields[11]) + int(fields[12])) / _TICK  # utime, stime (fields 14 and 15)


def wait_for_port(daemon: Daemon, timeout: float) -> None:
    """Wait until the daemon's TCP port accepts a connection and its HTTP port answers /ping
    (bounded by timeout): the TCP listener is bound before the HTTP one, and a row's first
    step is often an HTTP call."""
    deadline = time.monotonic() + timeout
    if nsqd_process.wait_accepting(daemon.proc, daemon.tcp_port, timeout):
        while time.monotonic() < deadline and daemon.alive():
            if ping_ok(daemon.http_port):
                return
            time.sleep(0.005)
    daemon.check_alive()
    raise DaemonError(
        f"{daemon.target} nsqd did not accept on {daemon.tcp_address} within {timeout:.0f}s:\n"
        f"{daemon.log_tail()}"
    )


def launch_daemon(
    target: str,
    mem_queue_size: int | None,
    bin_dir: Path | None = None,
    ours_cmd: tuple[str, ...] = OURS_COMMAND,
    extra_flags: Sequence[str] = (),
) -> Daemon:
    """Start `target` ("reference" or "ours") with the same flags; returns at once (not ready).
    `mem_queue_size` None: the daemon's own default."""
    tmp = Path(tempfile.mkdtemp(prefix=f"nsqbench-{target}-"))
    data_path = tmp / "data"
    data_path.mkdir()
    log_path = tmp / "nsqd.log"
    tcp_port, http_port = free_ports(2)
    argv = [
        *daemon_command(target, bin_dir, ours_cmd),
        *nsqd_process.address_flags(tcp_port, http_port, data_path),
        *([] if mem_queue_size is None else [f"--mem-queue-size={mem_queue_size}"]),
        *extra_flags,
    ]
    proc = nsqd_process.launch(argv, log_path, env=nsqd_process.pythonpath_env())
    return Daemon(target, proc, tcp_port, http_port, data_path, log_path)


def start_daemon(
    target: str,
    mem_queue_size: int | None,
    bin_dir: Path | None = None,
    ours_cmd: tuple[str, ...] = OURS_COMMAND,
    extra_flags: Sequence[str] = (),
) -> Daemon:
    """launch_daemon, then wait until its TCP port accepts (DaemonError if it does not)."""
    daemon = launch_daemon(target, mem_queue_size, bin_dir, ours_cmd, extra_flags)
    try:
        wait_for_port(daemon, START_TIMEOUT_S)
    except BaseException:
        daemon.stop()
        raise
    return daemon


def ping_ok(port: int) -> bool:
    """Whether GET /ping on 127.0.0.1:port answers 200 OK right now."""
    conn = http.client.HTTPConnection(HOST, port, timeout=1.0)
    try:
        conn.request("GET", "/ping")
        resp = conn.getresponse()
        return resp.status == 200 and resp.read() == b"OK"
    except OSError:
        return False
    finally:
        conn.close()


def seconds_to_first_ping(
    target: str,
    mem_queue_size: int,
    bin_dir: Path | None,
    ours_cmd: tuple[str, ...],
) -> float:
    """Seconds from starting the process to its first answered /ping (polled every ms)."""
    started = time.perf_counter()
    daemon = launch_daemon(target, mem_queue_size, bin_dir, ours_cmd)
    with daemon:
        deadline = started + START_TIMEOUT_S
        while time.perf_counter() < deadline:
            if ping_ok(daemon.http_port):
                return time.perf_counter() - started
            daemon.check_alive()
            time.sleep(0.001)
    raise DaemonError(f"{target} nsqd answered no /ping within {START_TIMEOUT_S:.0f}s")


@dataclass
class Lookupd:
    """The real nsqlookupd on free ports; a context manager (killed on exit)."""

    proc: subprocess.Popen[bytes]
    tcp_port: int
    http_port: int
    workdir: Path

    def __enter__(self) -> Lookupd:
        return self

    def __exit__(self, *exc: object) -> None:
        nsqd_process.kill(self.proc, STOP_TIMEOUT_S)
        shutil.rmtree(self.workdir, ignore_errors=True)

    def producers(self, topic: str) -> list[str]:
        """host:tcp_port of the nsqds /lookup?topic= names ([] if none or not answering)."""
        url = f"http://{HOST}:{self.http_port}/lookup?topic={topic}"
        try:
            with urllib.request.urlopen(url, timeout=5.0) as resp:
                doc = json.loads(resp.read())
        except (OSError, ValueError):
            return []
        doc = doc.get("data", doc)  # pre-1.0 answers wrapped it
        return [f"{p['broadcast_address']}:{p['tcp_port']}" for p in doc.get("producers") or []]


def start_lookupd(bin_dir: Path) -> Lookupd:
    workdir = Path(tempfile.mkdtemp(prefix="nsqbench-lookupd-"))
    tcp_port, http_port = free_ports(2)
    argv = [
        str(bin_dir / "nsqlookupd"),
        f"--tcp-address={HOST}:{tcp_port}",
        f"--http-address={HOST}:{http_port}",
    ]
    proc = nsqd_process.launch(argv, workdir / "nsqlookupd.log")
    lookupd = Lookupd(proc, tcp_port, http_port, workdir)
    if not nsqd_process.wait_accepting(proc, http_port, START_TIMEOUT_S):
        tail = nsqd_process.log_tail(workdir / "nsqlookupd.log", max_bytes=1000)
        lookupd.__exit__()
        raise DaemonError(f"nsqlookupd did not start:\n{tail}")
    return lookupd


def reference_version(bin_dir: Path) -> str:
    out = subprocess.run(
        [str(bin_dir / "nsqd"), "--version"],
        capture_output=True,
        text=True,
        timeout=10,
        check=False,
    )
    return (out.stdout or out.stderr).strip()
