"""Start and stop one nsqd for the client checks: the real v1.3.0 or ours, on free 127.0.0.1
ports with a fresh data path, its output kept in a log file for diagnosis."""

from __future__ import annotations

import os
import shutil
import signal
import socket
import subprocess
import sys
import tempfile
import time
from dataclasses import dataclass
from pathlib import Path
from typing import Final

REPO_ROOT: Final = Path(__file__).resolve().parents[2]
HOST: Final = "127.0.0.1"
TARGETS: Final = ("reference", "ours")
START_TIMEOUT_S: Final = 20.0
STOP_TIMEOUT_S: Final = 5.0


class DaemonError(RuntimeError):
    """An nsqd could not be found, installed or started."""


def reference_nsqd() -> Path:
    """The real nsqd v1.3.0, installed into .reference/bin first if missing."""
    sys.path.insert(0, str(REPO_ROOT / "scripts"))
    try:
        from reference import ReferenceInstallError, ensure_reference
    finally:
        sys.path.pop(0)
    try:
        return ensure_reference() / "nsqd"
    except ReferenceInstallError as exc:
        raise DaemonError(f"the reference nsqd could not be installed: {exc}") from exc


def describe(target: str) -> str:
    if target == "reference":
        return "reference: .reference/bin/nsqd (NSQ v1.3.0)"
    return "ours: python -m nsqd"


def command(target: str) -> list[str]:
    if target == "reference":
        return [str(reference_nsqd())]
    if target == "ours":
        return [sys.executable, "-m", "nsqd"]
    raise ValueError(f"unknown target {target!r}")


def free_ports(count: int) -> list[int]:
    """``count`` distinct ports free on HOST right now."""
    socks: list[socket.socket] = []
    try:
        for _ in range(count):
            s = socket.socket()
            s.bind((HOST, 0))
            socks.append(s)
        return [s.getsockname()[1] for s in socks]
    finally:
        for s in socks:
            s.close()


@dataclass
class Daemon:
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

    def alive(self) -> bool:
        return self.proc.poll() is None

    def log_tail(self, lines: int = 15) -> str:
        try:
            text = self.log_path.read_text(errors="replace")
        except OSError:
            return ""
        return "\n".join(text.splitlines()[-lines:])

    def stop(self) -> int | None:
        """Stop the daemon (SIGTERM, then SIGKILL), remove its files; returns the exit code it
        had already exited with on its own, else None."""
        died = self.proc.poll()
        if died is None:
            self.proc.send_signal(signal.SIGTERM)
            try:
                self.proc.wait(timeout=STOP_TIMEOUT_S)
            except subprocess.TimeoutExpired:
                self.proc.kill()
                self.proc.wait(timeout=STOP_TIMEOUT_S)
        shutil.rmtree(self.workdir, ignore_errors=True)
        return died


def start(target: str) -> Daemon:
    """Start ``target``'s nsqd; returns once its TCP port accepts connections."""
    argv0 = command(target)
    tcp_port, http_port = free_ports(2)
    workdir = Path(tempfile.mkdtemp(prefix=f"nsq-clients-{target}-"))
    data = workdir / "data"
    data.mkdir()
    argv = [
        *argv0,
        f"--tcp-address={HOST}:{tcp_port}",
        f"--http-address={HOST}:{http_port}",
        f"--data-path={data}",
    ]
    env = dict(os.environ)
    env["PYTHONPATH"] = os.pathsep.join(filter(None, [str(REPO_ROOT), env.get("PYTHONPATH")]))
    with (workdir / "nsqd.log").open("wb") as log:
        proc = subprocess.Popen(
            argv, cwd=REPO_ROOT, env=env, stdin=subprocess.DEVNULL, stdout=log, stderr=log
        )
    daemon = Daemon(target, proc, tcp_port, workdir)
    deadline = time.monotonic() + START_TIMEOUT_S
    while time.monotonic() < deadline:
        if not daemon.alive():
            tail = daemon.log_tail()
            daemon.stop()
            raise DaemonError(f"{describe(target)} exited with {proc.returncode}:\n{tail}")
        try:
            with socket.create_connection((HOST, tcp_port), timeout=0.5):
                return daemon
        except OSError:
            time.sleep(0.05)
    tail = daemon.log_tail()
    daemon.stop()
    raise DaemonError(f"{describe(target)} did not accept on port {tcp_port} in time:\n{tail}")
