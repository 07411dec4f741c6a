"""Start and stop an nsqd (the Go reference or ours) on free loopback ports, fresh data path."""

from __future__ import annotations

import json
import shutil
import subprocess
import sys
import tempfile
import urllib.request
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Final

sys.path.append(str(Path(__file__).resolve().parent.parent / "scripts"))
import nsqd_process
from nsqd_process import free_ports

REPO_ROOT: Final = nsqd_process.REPO_ROOT
HOST: Final = nsqd_process.HOST
START_TIMEOUT_S: Final = 20.0
STOP_TIMEOUT_S: Final = 10.0
TARGETS: Final = ("reference", "ours")


class DaemonError(RuntimeError):
    """The daemon could not be started (or died)."""


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

    def rss_kib(self) -> int:
        """Resident set size (VmRSS) of the daemon process, in KiB."""
        return read_status_kib(self.proc.pid, "VmRSS")

    def peak_rss_kib(self) -> int:
        return read_status_kib(self.proc.pid, "VmHWM")

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

    def log_tail(self, max_bytes: int = 2000) -> str:
        return nsqd_process.log_tail(self.log_path, max_bytes=max_bytes)

    def stop(self) -> None:
        """Kill the daemon (SIGKILL: the data path is thrown away, no flush wanted); clean up."""
        nsqd_process.kill(self.proc, STOP_TIMEOUT_S)
        shutil.rmtree(self.data_path.parent, ignore_errors=True)


def read_status_kib(pid: int, key: str) -> int:
    for line in Path(f"/proc/{pid}/status").read_text().splitlines():
        if line.startswith(key + ":"):
            return int(line.split()[1])
    raise DaemonError(f"no {key} in /proc/{pid}/status")


def wait_for_port(daemon: Daemon, timeout: float) -> None:
    """Wait until the daemon's TCP port accepts a connection (bounded by timeout)."""
    if nsqd_process.wait_accepting(daemon.proc, daemon.tcp_port, timeout):
        return
    daemon.check_alive()
    raise DaemonError(
        f"{daemon.target} nsqd did not accept on {daemon.tcp_address} within {timeout:.0f}s:\n"
        f"{daemon.log_tail()}"
    )


def start_daemon(
    target: str,
    mem_queue_size: int,
    bin_dir: Path | None = None,
    ours_cmd: tuple[str, ...] = OURS_COMMAND,
) -> Daemon:
    """Start `target` ("reference" or "ours") with the same flags; returns once TCP accepts."""
    tmp = Path(tempfile.mkdtemp(prefix=f"nsqbench-{target}-"))
    data_path = tmp / "data"
    data_path.mkdir()
    log_path = tmp / "nsqd.log"
    tcp_port, http_port = free_ports(2)
    argv = [
        *daemon_command(target, bin_dir, ours_cmd),
        *nsqd_process.address_flags(tcp_port, http_port, data_path),
        f"--mem-queue-size={mem_queue_size}",
    ]
    proc = nsqd_process.launch(argv, log_path, env=nsqd_process.pythonpath_env())
    daemon = Daemon(target, proc, tcp_port, http_port, data_path, log_path)
    try:
        wait_for_port(daemon, START_TIMEOUT_S)
    except BaseException:
        daemon.stop()
        raise
    return daemon


def reference_version(bin_dir: Path) -> str:
    out = subprocess.run(
        [str(bin_dir / "nsqd"), "--version"],
        capture_output=True,
        text=True,
        timeout=10,
        check=False,
    )
    return (out.stdout or out.stderr).strip()
