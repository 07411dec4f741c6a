"""Helpers for the durability tests: a blocking raw-socket V2 client and a daemon process.

The client encodes commands itself and reads server frames with ``protocol.FrameDecoder`` and
message bodies with ``protocol.decode_message``. Every read has a deadline, so no test can hang
on a silent daemon. The daemon helper runs ours (``python -m nsqd``) or the Go reference
(``.reference/bin/nsqd``) on free 127.0.0.1 ports and a given --data-path, with its log in a
file, and can stop it with SIGTERM (clean) or SIGKILL (crash)."""

from __future__ import annotations

import contextlib
import functools
import json
import os
import socket
import struct
import subprocess
import sys
import time
import urllib.error
import urllib.request
from collections import deque
from collections.abc import Callable, Iterable, Iterator
from dataclasses import dataclass, field
from pathlib import Path

from protocol.v2 import FrameDecoder, FrameType, decode_message
from protocol.v2.frames import Frame
from protocol.v2.message import DecodedMessage
from tests.ops.conftest import Deflated

sys.path.append(str(Path(__file__).resolve().parents[2] / "scripts"))
import nsqd_process

REPO_ROOT = Path(__file__).resolve().parents[2]
HOST = nsqd_process.HOST
START_TIMEOUT = 15.0
STOP_TIMEOUT = 10.0
HEARTBEAT = b"_heartbeat_"
_I32 = struct.Struct(">i")
SPAWNED: list[Daemon] = []  # every daemon started, so a fixture can kill leftovers


# -- commands (client side) ------------------------------------------------------------------


def command(line: bytes | str, body: bytes | None = None) -> bytes:
    if isinstance(line, str):
        line = line.encode()
    data = line + b"\n"
    if body is not None:
        data += _I32.pack(len(body)) + body
    return data


def mpub_command(topic: str, bodies: list[bytes]) -> bytes:
    body = _I32.pack(len(bodies)) + b"".join(_I32.pack(len(b)) + b for b in bodies)
    return command(f"MPUB {topic}", body)


class ConnectionClosed(Exception):
    """The daemon closed the connection."""


class ErrorFrame(Exception):
    """The daemon answered with an error frame."""


class Client:
    """One blocking V2 connection. Heartbeats are answered with NOP and never returned."""

    def __init__(self, addr: tuple[str, int], *, connect_timeout: float = 5.0) -> None:
        self.sock = socket.create_connection(addr, timeout=connect_timeout)
        self.sock.setsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)
        self.decoder = FrameDecoder()
        self.pending: deque[Frame] = deque()
        self.send(b"  V2")

    def __enter__(self) -> Client:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()

    def close(self) -> None:
        with contextlib.suppress(OSError):
            self.sock.close()

    def send(self, data: bytes) -> None:
        self.sock.settimeout(10.0)
        self.sock.sendall(data)

    def _fill(self, deadline: float) -> None:
        remaining = deadline - time.monotonic()
        if remaining <= 0:
            raise TimeoutError("no frame from the daemon in time")
        self.sock.settimeout(remaining)
        try:
            data = self.sock.recv(1 << 20)
        except ConnectionResetError as exc:
            raise ConnectionClosed from exc
        if not data:
            raise ConnectionClosed
        for frame in self.decoder.feed(data):
            if frame.frame_type == FrameType.RESPONSE and frame.data == HEARTBEAT:
                self.send(b"NOP\n")
            else:
                self.pending.append(frame)

    def deflate(self) -> None:
        """IDENTIFY with deflate: from its answer on the connection is compressed both ways,
        and the daemon serves it in tasks of its own (not in the loop's passes)."""
        body = json.dumps({"feature_negotiation": True, "deflate": True}).encode()
        self.send(command("IDENTIFY", body))
        size = struct.unpack(">i", self._exactly(4))[0]
        answer = self._exactly(size)  # plain: read no further, what follows is compressed
        assert answer[:4] == b"\0\0\0\0" and json.loads(answer[4:])["deflate"], answer
        self.sock = Deflated(self.sock)  # type: ignore[assignment]
        self.expect_ok()

    def _exactly(self, n: int) -> bytes:
        data = b""
        while len(data) < n:
            chunk = self.sock.recv(n - len(data))
            if not chunk:
                raise ConnectionClosed
            data += chunk
        return data

    def read_frame(self, timeout: float = 5.0) -> Frame:
        deadline = time.monotonic() + timeout
        while not self.pending:
            self._fill(deadline)
        return self.pending.popleft()

    def expect_ok(self, timeout: float = 10.0) -> None:
        frame = self.read_frame(timeout)
        if frame.frame_type == FrameType.ERROR:
            raise ErrorFrame(frame.data.decode("utf-8", "replace"))
        assert (frame.frame_type, frame.data) == (FrameType.RESPONSE, b"OK"), frame

    def expect_error(self, timeout: float = 5.0) -> str:
        frame = self.read_frame(timeout)
        assert frame.frame_type == FrameType.ERROR, frame
        return frame.data.decode("utf-8", "replace")

    # -- publishing ------------------------------------------------------------------------

    def pub(self, topic: str, body: bytes) -> None:
        self.send(command(f"PUB {topic}", body))
        self.expect_ok()

    def mpub(self, topic: str, bodies: list[bytes]) -> None:
        self.send(mpub_command(topic, bodies))
        self.expect_ok()

    def mpub_many(self, topic: str, batches: Iterable[list[bytes]], window: int = 8) -> int:
        """MPUB every batch, up to ``window`` unanswered at a time; the number of OKs."""
        outstanding = oks = 0
        for batch in batches:
            if outstanding >= window:
                self.expect_ok(30.0)
                outstanding -= 1
                oks += 1
            self.send(mpub_command(topic, batch))
            outstanding += 1
        for _ in range(outstanding):
            self.expect_ok(30.0)
            oks += 1
        return oks

    # -- consuming -------------------------------------------------------------------------

    def identify(self, **fields: object) -> dict[str, object] | None:
        self.send(command("IDENTIFY", json.dumps(fields).encode()))
        frame = self.read_frame()
        assert frame.frame_type == FrameType.RESPONSE, frame
        return json.loads(frame.data) if frame.data != b"OK" else None

    def sub(self, topic: str, channel: str, rdy: int | None = None) -> None:
        self.send(command(f"SUB {topic} {channel}"))
        self.expect_ok()
        if rdy is not None:
            self.rdy(rdy)

    def rdy(self, n: int) -> None:
        self.send(command(f"RDY {n}"))

    def fin(self, msg_id: bytes) -> None:
        self.send(b"FIN " + msg_id + b"\n")

    def fin_many(self, msg_ids: Iterable[bytes]) -> None:
        data = b"".join(b"FIN " + i + b"\n" for i in msg_ids)
        if data:
            self.send(data)

    def req(self, msg_id: bytes, delay_ms: int = 0) -> None:
        self.send(b"REQ " + msg_id + b" %d\n" % delay_ms)

    def barrier(self) -> None:
        """Wait until the daemon has handled every command sent so far: a FIN for an id never
        delivered answers E_FIN_FAILED (non-fatal), after the commands before it."""
        self.send(b"FIN " + b"0" * 16 + b"\n")
        deadline = time.monotonic() + 10.0
        while True:
            frame = self.read_frame(max(deadline - time.monotonic(), 0.001))
            if frame.frame_type == FrameType.MESSAGE:
                self.pending.appendleft(frame)  # keep the order for a later read
                raise AssertionError("a message arrived while waiting for the barrier")
            assert frame.frame_type == FrameType.ERROR, frame
            assert frame.data.startswith(b"E_FIN_FAILED"), frame
            return

    def message(self, timeout: float = 5.0) -> DecodedMessage:
        frame = self.read_frame(timeout)
        if frame.frame_type == FrameType.ERROR:
            raise ErrorFrame(frame.data.decode("utf-8", "replace"))
        assert frame.frame_type == FrameType.MESSAGE, frame
        return decode_message(frame.data)

    def messages(self, n: int, timeout: float = 10.0) -> list[DecodedMessage]:
        """Exactly the next ``n`` frames, all messages, within ``timeout`` in total."""
        deadline = time.monotonic() + timeout
        return [self.message(max(deadline - time.monotonic(), 0.001)) for _ in range(n)]

    def consume(
        self,
        expected: int,
        *,
        timeout: float = 30.0,
        quiet: float = 0.3,
        idle: float = 3.0,
        fin: bool = True,
    ) -> list[DecodedMessage]:
        """Read messages (FINing them) until ``expected`` arrived, then ``quiet`` seconds more
        to catch extra ones; everything received, so a caller can count duplicates or gaps.
        Gives up early when nothing arrives for ``idle`` seconds (messages are missing)."""
        out: list[DecodedMessage] = []
        deadline = time.monotonic() + timeout
        quiet_until: float | None = None
        while True:
            now = time.monotonic()
            if quiet_until is None and len(out) >= expected:
                quiet_until = now + quiet
            end = min(deadline, now + idle) if quiet_until is None else min(deadline, quiet_until)
            if now >= end:
                return out
            try:
                while not self.pending:
                    self._fill(end)
            except TimeoutError:
                return out
            ids = []
            while self.pending:
                frame = self.pending.popleft()
                if frame.frame_type != FrameType.MESSAGE:
                    raise AssertionError(f"unexpected frame while consuming: {frame}")
                msg = decode_message(frame.data)
                out.append(msg)
                ids.append(msg.id)
            if fin:
                self.fin_many(ids)


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


def spawn(kind: str, data_path: Path, *extra: str, log_name: str | None = None) -> Daemon:
    """Start a daemon without waiting for it (the lock test wants to see it fail)."""
    data_path.mkdir(parents=True, exist_ok=True)
    tcp_port, http_port = nsqd_process.free_ports(2)
    args = [*nsqd_process.address_flags(tcp_port, http_port, data_path), *extra]
    logs = data_path.parent / "logs"
    logs.mkdir(exist_ok=True)
    log_path = logs / (log_name or f"{kind}-{time.monotonic_ns()}.log")
    env = dict(os.environ, PYTHONPATH=str(REPO_ROOT))
    proc = nsqd_process.launch([*daemon_command(kind), *args], log_path, env=env)
    daemon = Daemon(kind, data_path, proc, tcp_port, http_port, log_path, args)
    SPAWNED.append(daemon)
    return daemon


def start(kind: str, data_path: Path, *extra: str) -> Daemon:
    """Start a daemon and wait (bounded) until it answers on its TCP port."""
    last = ""
    for _ in range(3):  # a free port can be taken by someone else meanwhile
        daemon = spawn(kind, data_path, *extra)
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
