"""Start and stop one nsqd (the real v1.3.0 or ours) on free 127.0.0.1 ports, fresh data path."""

from __future__ import annotations

import os
import shutil
import socket
import subprocess
import sys
import tempfile
import time
from dataclasses import dataclass, field
from pathlib import Path
from typing import IO, Final

REPO_ROOT: Final = Path(__file__).resolve().parent.parent
HOST: Final = "127.0.0.1"
START_TIMEOUT_S: Final = 20.0
STOP_TIMEOUT_S: Final = 10.0
TARGETS: Final = ("reference", "ours")


class DaemonError(RuntimeError):
    """A daemon could not be started."""


def free_ports(count: int) -> list[int]:
    """Distinct ports free on HOST right now (all bound together, then released)."""
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


def _tmp_root() -> str | None:
    """/dev/shm when usable: nsqd fsyncs nsqd.dat on every topic/channel creation (holding its
    global lock), and a busy disk would otherwise stretch replies past the read windows."""
    shm = Path("/dev/shm")
    return str(shm) if shm.is_dir() and os.access(shm, os.W_OK | os.X_OK) else None


def reference_bin() -> Path:
    """The real nsqd, installing it first if needed (raises ReferenceInstallError)."""
    sys.path.insert(0, str(REPO_ROOT / "scripts"))
    try:
        from reference import ensure_reference
    finally:
        sys.path.pop(0)
    return ensure_reference() / "nsqd"


# `python -m nsqd`, minus the import hooks of an editable install (`pip install -e .`): they would
# fill in modules missing from another --ours-root with this checkout's.
_OURS_BOOTSTRAP: Final = (
    "import runpy, sys; "
    "sys.meta_path[:] = [f for f in sys.meta_path "
    "if '__editable__' not in str(getattr(f, '__module__', ''))]; "
    "sys.argv[0] = 'nsqd'; "
    "runpy.run_module('nsqd', run_name='__main__', alter_sys=True)"
)


def command(target: str) -> list[str]:
    if target == "reference":
        return [str(reference_bin())]
    if target == "ours":
        return [sys.executable, "-c", _OURS_BOOTSTRAP]
    raise ValueError(f"unknown target {target!r}")


@dataclass
class Daemon:
    """A running nsqd subprocess; `stop()` kills it and removes its temp directory."""

    target: str
    flags: tuple[str, ...]
    proc: subprocess.Popen[bytes]
    tcp_port: int
    tmp: Path
    _log: IO[bytes] = field(repr=False)

    @property
    def addr(self) -> tuple[str, int]:
        return (HOST, self.tcp_port)

    def alive(self) -> bool:
        return self.proc.poll() is None

    def log_tail(self, max_bytes: int = 3000) -> str:
        self._log.flush()
        path = self.tmp / "nsqd.log"
        data = path.read_bytes() if path.exists() else b""
        return data[-max_bytes:].decode(errors="replace")

    def stop(self) -> None:
        if self.alive():
            self.proc.kill()
        try:
            self.proc.wait(timeout=STOP_TIMEOUT_S)
        except subprocess.TimeoutExpired:
            pass
        self._log.close()
        shutil.rmtree(self.tmp, ignore_errors=True)


def _wait_accepting(daemon: Daemon, timeout: float) -> None:
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        if not daemon.alive():
            raise DaemonError(
                f"{daemon.target} nsqd {' '.join(daemon.flags)} exited with "
                f"{daemon.proc.returncode}:\n{daemon.log_tail()}"
            )
        try:
            with socket.create_connection(daemon.addr, timeout=0.5):
                return
        except OSError:
            time.sleep(0.05)
    raise DaemonError(
        f"{daemon.target} nsqd did not accept on {HOST}:{daemon.tcp_port} within {timeout:.0f}s:"
        f"\n{daemon.log_tail()}"
    )


def start(
    target: str,
    flags: tuple[str, ...] = (),
    ports: tuple[int, int] | None = None,
    ours_root: Path = REPO_ROOT,
) -> Daemon:
    """Start `target` with nsqd flags `flags` on (tcp, http) `ports` (default: free ones);
    returns once its TCP port accepts connections. `ours_root` is the source tree our daemon
    runs from (default: this checkout)."""
    argv0 = command(target)
    tcp_port, http_port = ports or free_ports(2)
    tmp = Path(tempfile.mkdtemp(prefix=f"nsq-conformance-{target}-", dir=_tmp_root()))
    data = tmp / "data"
    data.mkdir()
    argv = [
        *argv0,
        f"--tcp-address={HOST}:{tcp_port}",
        f"--http-address={HOST}:{http_port}",
        f"--data-path={data}",
        *flags,
    ]
    root = ours_root if target == "ours" else REPO_ROOT
    env = dict(os.environ)
    env["PYTHONPATH"] = os.pathsep.join(filter(None, [str(root), env.get("PYTHONPATH")]))
    log = (tmp / "nsqd.log").open("wb")
    proc = subprocess.Popen(
        argv, cwd=root, env=env, stdin=subprocess.DEVNULL, stdout=log, stderr=log
    )
    daemon = Daemon(target, flags, proc, tcp_port, tmp, log)
    try:
        _wait_accepting(daemon, START_TIMEOUT_S)
    except BaseException:
        daemon.stop()
        raise
    return daemon
