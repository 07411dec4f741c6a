"""Start and stop one nsqd for the client checks: the real v1.3.0 or ours, on free 127.0.0.1
ports with a fresh data path, its output kept in a log file for diagnosis."""

from __future__ import annotations

import shutil
import subprocess
import sys
import tempfile
from dataclasses import dataclass
from pathlib import Path
from typing import Final

sys.path.append(str(Path(__file__).resolve().parents[2] / "scripts"))
import nsqd_process
from nsqd_process import free_ports

REPO_ROOT: Final = nsqd_process.REPO_ROOT
HOST: Final = nsqd_process.HOST
TARGETS: Final = ("reference", "ours")
START_TIMEOUT_S: Final = 20.0
STOP_TIMEOUT_S: Final = 5.0


class DaemonError(RuntimeError):
    """An nsqd could not be found, installed or started."""


def reference_nsqd() -> Path:
    """The real nsqd v1.3.0, installed into .reference/bin first if missing."""
    try:
        return nsqd_process.reference_dir() / "nsqd"
    except nsqd_process.ReferenceInstallError as exc:
        raise DaemonError(f"the reference nsqd could not be installed: {exc}") from exc


def describe(target: str) -> str:
    if target == "reference":
        return "reference: .reference/bin/nsqd (NSQ v1.3.0)"
    return "ours: python -m nsqd"


# flags given to ours only (--ours-flags: e.g. --workers=2, to run the checks against a group)
OURS_FLAGS: list[str] = []


def command(target: str) -> list[str]:
    if target == "reference":
        return [str(reference_nsqd())]
    if target == "ours":
        return [*nsqd_process.ours_command(), *OURS_FLAGS]
    raise ValueError(f"unknown target {target!r}")


@dataclass
class Daemon(nsqd_process.LoggedProcess):
    TAIL_LINES = 15
    target: str
    proc: subprocess.Popen[bytes]
    tcp_port: int
    workdir: Path

    @property
    def address(self) -> str:
        return f"{HOST}:{self.tcp_port}"

    @property
    def log_path(self) -> Path:
        return self.workdir / "nsqd.log"

    def stop(self) -> int | None:
        """Stop the daemon (SIGTERM, then SIGKILL), remove its files; returns its exit status:
        the one it had already exited with on its own, else SIGTERM's (None if it had to be
        killed). Anything but 0 means the daemon failed the run."""
        status = self.proc.poll()
        if status is None:
            status = nsqd_process.terminate(self.proc, STOP_TIMEOUT_S)
        shutil.rmtree(self.workdir, ignore_errors=True)
        return status


def start(target: str) -> Daemon:
    """Start ``target``'s nsqd; returns once its TCP port accepts connections."""
    argv0 = command(target)
    tcp_port, http_port = free_ports(2)
    workdir = Path(tempfile.mkdtemp(prefix=f"nsq-clients-{target}-"))
    data = workdir / "data"
    data.mkdir()
    argv = [*argv0, *nsqd_process.address_flags(tcp_port, http_port, data)]
    proc = nsqd_process.launch(argv, workdir / "nsqd.log", env=nsqd_process.pythonpath_env())
    daemon = Daemon(target, proc, tcp_port, workdir)
    if nsqd_process.wait_accepting(proc, tcp_port, START_TIMEOUT_S):
        return daemon
    tail = daemon.log_tail()
    exited = daemon.stop()  # the exit code if it died on its own
    if exited is not None:
        raise DaemonError(f"{describe(target)} exited with {exited}:\n{tail}")
    raise DaemonError(f"{describe(target)} did not accept on port {tcp_port} in time:\n{tail}")
