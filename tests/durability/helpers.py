"""Helpers for the durability tests: a daemon process and the files it leaves. The daemon
helper runs ours (``python -m nsqd``) or the Go reference (``.reference/bin/nsqd``) on free
127.0.0.1 ports and a given --data-path, with its log in a file, and can stop it with SIGTERM
(clean) or SIGKILL (crash). The V2 client the tests talk to it with is client.py's,
re-exported here."""

from __future__ import annotations

import contextlib
import functools
import os
import struct
import subprocess
import sys
import time
import urllib.error
import urllib.request
from collections.abc import Callable, Iterable, Iterator, Sequence
from dataclasses import dataclass, field
from pathlib import Path

from protocol.v2 import FrameType
from protocol.v2.message import DecodedMessage

from .client import HEARTBEAT, Client, ConnectionClosed, ErrorFrame, command, mpub_command

__all__ = ["HEARTBEAT", "Client", "ConnectionClosed", "ErrorFrame", "command", "mpub_command"]

sys.path.append(str(Path(__file__).resolve().parents[2] / "scripts"))
import nsqd_process

REPO_ROOT = Path(__file__).resolve().parents[2]
HOST = nsqd_process.HOST
START_TIMEOUT = 15.0
STOP_TIMEOUT = 10.0
_I32 = struct.Struct(">i")  # the disk queue's record size
SPAWNED: list[Daemon] = []  # every daemon started, so a fixture can kill leftovers


# -- daemons ---------------------------------------------------------------------------------


_reference: list[Path | str] = []


def reference_binary() -> Path | None:
    """The Go nsqd v1.3.0, or None (with the reason in ``reference_problem()``)."""
    if not _reference:
        try:
            _reference.append(nsqd_process.reference_dir() / "nsqd")
        except nsqd_process.ReferenceInstallError as exc:
            _reference.append(str(exc))
    found = _reference[0]
    return found if isinstance(found, Path) else None


def reference_problem() -> str:
    return str(_reference[0]) if _reference and isinstance(_reference[0], str) else ""


def daemon_command(kind: str) -> list[str]:
    if kind == "ours":
        return nsqd_process.ours_command()
    if kind == "reference":
        binary = reference_binary()
        if binary is None:
            raise RuntimeError(f"reference nsqd unavailable: {reference_problem()}")
        return [str(binary)]
    raise ValueError(kind)


@dataclass
class Daemon(nsqd_process.LoggedProcess):
    kind: str
    data_path: Path
    proc: subprocess.Popen[bytes]
    tcp_port: int
    http_port: int
    log_path: Path
    args: list[str] = field(default_factory=list)

    @property
    def addr(self) -> tuple[str, int]:
        return (HOST, self.tcp_port)

    def client(self) -> Client:
        return Client(self.addr)

    def terminate(self, timeout: float = STOP_TIMEOUT) -> tuple[int | None, float]:
        """SIGTERM; (exit status or None if still running after ``timeout``, seconds taken).
        A daemon that does not exit in time is killed."""
        start = time.monotonic()
        rc = nsqd_process.terminate(self.proc, timeout, kill_timeout=10)
        return rc, time.monotonic() - start

    def stop(self) -> None:
        """SIGTERM and require exit status 0 within STOP_TIMEOUT."""
        rc, elapsed = self.terminate()
        assert rc == 0, (
            f"{self.kind} nsqd: exit {rc} {elapsed:.1f}s after SIGTERM (want 0 within "
            f"{STOP_TIMEOUT:.0f}s); log tail:\n{self.log_tail()}"
        )

    def kill(self) -> None:
        """SIGKILL: a crash, nothing flushed."""
        nsqd_process.kill(self.proc, 10)

    def http(self, method: str, path: str, timeout: float = 2.0) -> tuple[int, bytes]:
        req = urllib.request.Request(f"http://{HOST}:{self.http_port}{path}", method=method)
        with urllib.request.urlopen(req, timeout=timeout) as resp:
            return resp.status, resp.read()

    def request(
        self, method: str, path: str, body: bytes | None = None, timeout: float = 5.0
    ) -> tuple[int, bytes]:
        """An HTTP request's status and body, an error status included."""
        url = f"http://{HOST}:{self.http_port}{path}"
        req = urllib.request.Request(url, data=body, method=method)
        try:
            with urllib.request.urlopen(req, timeout=timeout) as resp:
                return resp.status, resp.read()
        except urllib.error.HTTPError as exc:
            return exc.code, exc.read()

    def has_http(self) -> bool:
        try:
            status, body = self.http("GET", "/ping")
        except (OSError, ValueError):
            return False
        return status == 200 and body == b"OK"


def answers(port: int) -> bool:
    """The daemon serves V2: an IDENTIFY gets its answer (an open port alone is not enough:
    ours binds its listeners before it loads nsqd.dat and installs its signal handlers)."""
    try:
        with Client((HOST, port), connect_timeout=0.5) as conn:
            conn.send(command("IDENTIFY", b"{}"))
            frame = conn.read_frame(2.0)
            return frame.frame_type == FrameType.RESPONSE
    except (OSError, ConnectionClosed):
        return False


def spawn(
    kind: str,
    data_path: Path,
    *extra: str,
    log_name: str | None = None,
    wrap: Sequence[str] = (),
) -> Daemon:
    """Start a daemon without waiting for it (the lock test wants to see it fail); `wrap`:
    a command that runs it (strace killing it at a chosen system call)."""
    data_path.mkdir(parents=True, exist_ok=True)
    tcp_port, http_port = nsqd_process.free_ports(2)
    args = [*nsqd_process.address_flags(tcp_port, http_port, data_path), *extra]
    logs = data_path.parent / "logs"
    logs.mkdir(exist_ok=True)
    log_path = logs / (log_name or f"{kind}-{time.monotonic_ns()}.log")
    env = dict(os.environ, PYTHONPATH=str(REPO_ROOT))
    proc = nsqd_process.launch([*wrap, *daemon_command(kind), *args], log_path, env=env)
    daemon = Daemon(kind, data_path, proc, tcp_port, http_port, log_path, args)
    SPAWNED.append(daemon)
    return daemon


def start(kind: str, data_path: Path, *extra: str, wrap: Sequence[str] = ()) -> Daemon:
    """Start a daemon and wait (bounded) until it answers on its TCP port."""
    last = ""
    for _ in range(3):  # a free port can be taken by someone else meanwhile
        daemon = spawn(kind, data_path, *extra, wrap=wrap)
        ready = functools.partial(answers, daemon.tcp_port)
        if nsqd_process.wait_until_ready(daemon.proc, ready, START_TIMEOUT):
            return daemon
        daemon.kill()
        last = daemon.log_tail()
        if "address already in use" not in last:
            break
    raise RuntimeError(f"{kind} nsqd did not start on {data_path}:\n{last}")


@contextlib.contextmanager
def running(kind: str, data_path: Path, *extra: str) -> Iterator[Daemon]:
    """A daemon for the block; stopped with SIGTERM (exit 0 required) unless already gone."""
    daemon = start(kind, data_path, *extra)
    try:
        yield daemon
    except BaseException:
        daemon.kill()
        raise
    if daemon.alive():
        daemon.stop()


def fin_then_kill(daemon: Daemon, topic: str, published: int, read: int) -> list[DecodedMessage]:
    """Publish `published` messages to `topic` (MPUB), read `read` of them on channel "ch",
    FIN them and wait until every FIN is handled and answered for (a barrier), then kill -9
    the daemon at once: what was read, for the caller to look for after the restart."""
    with daemon.client() as producer, daemon.client() as consumer:
        consumer.sub(topic, "ch", rdy=0)
        producer.mpub(topic, [b"m-%03d" % i for i in range(published)])
        consumer.rdy(read)
        got = consumer.messages(read, timeout=10)
        consumer.rdy(0)
        consumer.fin_many(m.id for m in got)
        consumer.barrier()  # every FIN handled and answered for
        daemon.kill()
    return got


def wait_for(predicate: Callable[[], object], timeout: float, interval: float = 0.02) -> bool:
    """Poll ``predicate`` until true or ``timeout`` seconds pass; its last truth value."""
    deadline = time.monotonic() + timeout
    while True:
        if predicate():
            return True
        if time.monotonic() >= deadline:
            return False
        time.sleep(interval)


def sleep(seconds: float) -> None:
    time.sleep(seconds)


# -- the data directory ----------------------------------------------------------------------


def data_files(path: Path) -> list[str]:
    """Names of the files in a data directory (no subdirectories)."""
    return sorted(p.name for p in path.iterdir() if p.is_file())


def queue_files(path: Path, queue: str) -> list[Path]:
    """A disk queue's data files (not the metadata), oldest first."""
    return sorted(
        p for p in path.glob(f"{queue}.diskqueue.*.dat") if not p.name.endswith(".meta.dat")
    )


def read_meta(path: Path, queue: str) -> tuple[int, int, int, int, int]:
    """A disk queue's metadata: depth, read file, read position, write file, write position."""
    text = (path / f"{queue}.diskqueue.meta.dat").read_text()
    depth, read, write = text.split("\n")[:3]
    read_num, read_pos = map(int, read.split(","))
    write_num, write_pos = map(int, write.split(","))
    return int(depth), read_num, read_pos, write_num, write_pos


def unread_records(path: Path, queue: str) -> dict[Path, list[bytes]]:
    """Per data file (oldest first), the records a reader has still to read (from the read
    position in the metadata on)."""
    _, read_num, read_pos, _, _ = read_meta(path, queue)
    out = {}
    for f in queue_files(path, queue):
        num = int(f.name.rsplit(".", 2)[-2])
        if num >= read_num:
            out[f] = read_records(f, read_pos if num == read_num else 0)
    return out


def read_records(path: Path, start: int = 0) -> list[bytes]:
    """Every complete record of a diskqueue data file: [int32 length][payload]."""
    data = path.read_bytes()
    out, pos = [], start
    while pos + 4 <= len(data):
        (size,) = _I32.unpack_from(data, pos)
        if size < 0 or pos + 4 + size > len(data):
            break
        out.append(data[pos + 4 : pos + 4 + size])
        pos += 4 + size
    return out


def record_offsets(path: Path, start: int = 0) -> list[int]:
    data = path.read_bytes()
    offsets, pos = [], start
    while pos + 4 <= len(data):
        offsets.append(pos)
        (size,) = _I32.unpack_from(data, pos)
        pos += 4 + size
    return offsets


def bodies(msgs: Iterable[DecodedMessage]) -> list[bytes]:
    return [m.body for m in msgs]
