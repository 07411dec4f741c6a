"""Start and stop one nsqd (the real v1.3.0 or ours) on free 127.0.0.1 ports, fresh data path."""

from __future__ import annotations

import os
import shutil
import subprocess
import sys
import tempfile
from dataclasses import dataclass
from pathlib import Path
from typing import Final

sys.path.append(str(Path(__file__).resolve().parent.parent / "scripts"))
import nsqd_process
from nsqd_process import free_ports

REPO_ROOT: Final = nsqd_process.REPO_ROOT
HOST: Final = nsqd_process.HOST
START_TIMEOUT_S: Final = 20.0
STOP_TIMEOUT_S: Final = 10.0
TARGETS: Final = ("reference", "ours")


class DaemonError(RuntimeError):
    """A daemon could not be started."""


def _tmp_root() -> str | None:
    """/dev/shm when usable: nsqd fsyncs nsqd.dat on every topic/channel creation (holding its
    global lock), and a busy disk would otherwise stretch replies past the read windows."""
    shm = Path("/dev/shm")
    return str(shm) if shm.is_dir() and os.access(shm, os.W_OK | os.X_OK) else None


def reference_bin() -> Path:
    """The real nsqd, installing it first if needed (raises ReferenceInstallError)."""
    return nsqd_process.reference_dir() / "nsqd"


# `python -m nsqd`, minus the import hooks of an editable install (`pip install -e .`): they would
# fill in modules missing from another --ours-root with this checkout's.
_OURS_BOOTSTRAP: Final = (
    "import runpy, sys; "
    "sys.meta_path[:] = [f for f in sys.meta_path "
    "if '__editable__' not in str(getattr(f, '__module__', ''))]; "
    "sys.argv[0] = 'nsqd'; "
    "runpy.run_module('nsqd', run_name='__main__', alter_sys=True)"
)


# flags added to every start of ours (--ours-flags: e.g. --workers=2, the suite against a group)
OURS_FLAGS: list[str] = []


def command(target: str) -> list[str]:
    if target == "reference":
        return [str(reference_bin())]
    if target == "ours":
        return [sys.executable, "-c", _OURS_BOOTSTRAP, *OURS_FLAGS]
    raise ValueError(f"unknown target {target!r}")


@dataclass
class Daemon:
    """A running nsqd subprocess; `stop()` kills it and removes its temp directory."""

    target: str
    flags: tuple[str, ...]
    proc: subprocess.Popen[bytes]
    tcp_port: int
    tmp: Path

    @property
    def addr(self) -> tuple[str, int]:
        return (HOST, self.tcp_port)

    def alive(self) -> bool:
        return self.proc.poll() is None

    def log_tail(self, max_bytes: int = 3000) -> str:
        return nsqd_process.log_tail(self.tmp / "nsqd.log", max_bytes=max_bytes)

    def stop(self) -> None:
        nsqd_process.kill(self.proc, STOP_TIMEOUT_S)
        shutil.rmtree(self.tmp, ignore_errors=True)


def _wait_accepting(daemon: Daemon, timeout: float) -> None:
    if nsqd_process.wait_accepting(daemon.proc, daemon.tcp_port, timeout):
        return
    if not daemon.alive():
        raise DaemonError(
            f"{daemon.target} nsqd {' '.join(daemon.flags)} exited with "
            f"{daemon.proc.returncode}:\n{daemon.log_tail()}"
        )
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
    argv = [*argv0, *nsqd_process.address_flags(tcp_port, http_port, data), *flags]
    root = ours_root if target == "ours" else REPO_ROOT
    env = nsqd_process.pythonpath_env(root)
    proc = nsqd_process.launch(argv, tmp / "nsqd.log", cwd=root, env=env)
    daemon = Daemon(target, flags, proc, tcp_port, tmp)
    try:
        _wait_accepting(daemon, START_TIMEOUT_S)
    except BaseException:
        daemon.stop()
        raise
    return daemon
