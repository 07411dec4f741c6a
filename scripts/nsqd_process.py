"""Start and stop nsqd processes for the tests, the conformance suites and the benchmark: ours
(`python -m nsqd`) or the real NSQ v1.3.0 tools from .reference/bin, on free 127.0.0.1 ports,
output into a log file, every wait bounded.

Stdlib only, imported like reference.py beside it::

    sys.path.append(str(REPO_ROOT / "scripts"))
    import nsqd_process

The mechanics live here; each caller keeps its own policy: its flags, timeouts and temp
directories, whether a failed start is retried, what an unclean exit means."""

from __future__ import annotations

import os
import signal
import socket
import subprocess
import sys
import time
from collections.abc import Callable, Sequence
from pathlib import Path

from reference import ReferenceInstallError, ensure_reference

REPO_ROOT = Path(__file__).resolve().parent.parent
HOST = "127.0.0.1"
SIGTERM_AFTER_S = 0.25  # see terminate()

__all__ = [
    "HOST",
    "REPO_ROOT",
    "LoggedProcess",
    "ReferenceInstallError",
    "address_flags",
    "free_port",
    "free_ports",
    "kill",
    "launch",
    "log_tail",
    "ours_command",
    "port_open",
    "pythonpath_env",
    "reference_dir",
    "terminate",
    "wait_accepting",
    "wait_until_ready",
]


# -- ports ---------------------------------------------------------------------------------------


def free_ports(count: int, kind: int = socket.SOCK_STREAM, host: str = HOST) -> list[int]:
    """``count`` distinct ports free on ``host`` right now (all bound together, then released)."""
    socks: list[socket.socket] = []
    try:
        for _ in range(count):
            s = socket.socket(socket.AF_INET, kind)
            s.bind((host, 0))
            socks.append(s)
        return [s.getsockname()[1] for s in socks]
    finally:
        for s in socks:
            s.close()


def free_port(kind: int = socket.SOCK_STREAM, host: str = HOST) -> int:
    """One port free on ``host`` right now (TCP unless ``kind`` says otherwise)."""
    return free_ports(1, kind, host)[0]


def port_open(port: int, host: str = HOST, timeout: float = 0.5) -> bool:
    """Whether something accepts a TCP connection on ``host:port``."""
    try:
        with socket.create_connection((host, port), timeout=timeout):
            return True
    except OSError:
        return False


# -- command lines -------------------------------------------------------------------------------


def ours_command() -> list[str]:
    """Our nsqd: the package run from the working directory (or PYTHONPATH)."""
    return [sys.executable, "-m", "nsqd"]


def reference_dir() -> Path:
    """.reference/bin with the real NSQ v1.3.0 tools, installed first if missing (raises
    ReferenceInstallError when that fails)."""
    return Path(ensure_reference())


def address_flags(
    tcp_port: int,
    http_port: int,
    data_path: Path | str,
    *,
    https_port: int | None = None,
    host: str = HOST,
) -> list[str]:
    """nsqd's listener flags on ``host`` (HTTPS only when given a port) and its --data-path."""
    flags = [f"--tcp-address={host}:{tcp_port}", f"--http-address={host}:{http_port}"]
    if https_port is not None:
        flags.append(f"--https-address={host}:{https_port}")
    flags.append(f"--data-path={data_path}")
    return flags


def pythonpath_env(root: Path = REPO_ROOT) -> dict[str, str]:
    """This process's environment with ``root`` first on PYTHONPATH."""
    env = dict(os.environ)
    env["PYTHONPATH"] = os.pathsep.join(filter(None, [str(root), env.get("PYTHONPATH")]))
    return env


# -- running -------------------------------------------------------------------------------------


def launch(
    argv: Sequence[str],
    log_path: Path,
    *,
    cwd: Path = REPO_ROOT,
    env: dict[str, str] | None = None,
    append: bool = False,
) -> subprocess.Popen[bytes]:
    """Start ``argv`` with no stdin, its stdout and stderr written to ``log_path``."""
    with open(log_path, "ab" if append else "wb") as log:
        return subprocess.Popen(
            list(argv), cwd=cwd, env=env, stdin=subprocess.DEVNULL, stdout=log, stderr=log
        )


def wait_until_ready(
    proc: subprocess.Popen[bytes],
    ready: Callable[[], object],
    timeout: float,
    interval: float = 0.05,
) -> bool:
    """Poll ``ready()`` until it is true: True then; False once ``proc`` has exited or
    ``timeout`` seconds have passed."""
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        if proc.poll() is not None:
            return False
        if ready():
            return True
        time.sleep(interval)
    return False


def wait_accepting(
    proc: subprocess.Popen[bytes], port: int, timeout: float, host: str = HOST
) -> bool:
    """Wait until ``host:port`` accepts connections (see wait_until_ready)."""
    return wait_until_ready(proc, lambda: port_open(port, host), timeout)


def terminate(
    proc: subprocess.Popen[bytes], timeout: float, kill_timeout: float | None = None
) -> int | None:
    """SIGTERM and wait up to ``timeout`` seconds: the exit status, or None when it had to be
    killed (then waited for up to ``kill_timeout``, default ``timeout``).

    Not before the process has run SIGTERM_AFTER_S: the Go nsqd listens before it handles
    SIGTERM (go-svc's Run calls Start, which opens the listeners, and only then
    signal.Notify), so a SIGTERM as soon as its port answers could kill it with the signal's
    default action (exit -15, nothing persisted): seen once beside CPU hogs."""
    if proc.poll() is None:
        early = SIGTERM_AFTER_S - _running_for(proc.pid)
        if early > 0:
            time.sleep(early)
        proc.send_signal(signal.SIGTERM)
    try:
        return proc.wait(timeout)
    except subprocess.TimeoutExpired:
        proc.kill()
        proc.wait(timeout if kill_timeout is None else kill_timeout)
        return None


def _running_for(pid: int) -> float:
    """Seconds since the process started (/proc: its start time in clock ticks since boot)."""
    try:
        started = int(Path(f"/proc/{pid}/stat").read_text().rpartition(")")[2].split()[19])
        uptime = float(Path("/proc/uptime").read_text().split()[0])
    except (OSError, ValueError, IndexError):
        return SIGTERM_AFTER_S  # gone or unreadable: no wait
    return uptime - started / os.sysconf("SC_CLK_TCK")


def kill(proc: subprocess.Popen[bytes], timeout: float) -> None:
    """SIGKILL (a crash: nothing flushed) and wait up to ``timeout`` seconds for the exit."""
    if proc.poll() is None:
        proc.send_signal(signal.SIGKILL)
    try:
        proc.wait(timeout)
    except subprocess.TimeoutExpired:
        pass


def log_tail(path: Path, lines: int | None = None, max_bytes: int | None = None) -> str:
    """The end of a log file: its last ``lines`` lines, or last ``max_bytes`` bytes ("" if it
    cannot be read)."""
    try:
        data = path.read_bytes()
    except OSError:
        return ""
    if max_bytes is not None:
        data = data[-max_bytes:]
    text = data.decode("utf-8", "replace")
    if lines is not None:
        text = "\n".join(text.splitlines()[-lines:])
    return text


class LoggedProcess:
    """Mixin for a caller's process record with a `proc` and a `log_path`: whether it still
    runs, and what it logged (`log_tail()` gives the last TAIL_LINES lines)."""

    TAIL_LINES = 30
    proc: subprocess.Popen[bytes]
    log_path: Path

    def alive(self) -> bool:
        return self.proc.poll() is None

    def log(self) -> str:
        """The whole log ("" if it cannot be read)."""
        return log_tail(self.log_path)

    def log_tail(self, n: int | None = None) -> str:
        return log_tail(self.log_path, self.TAIL_LINES if n is None else n)
