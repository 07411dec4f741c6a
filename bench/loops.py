"""Closed-loop round trips: N connections, each with one request in flight, for a fixed time.

Used for single PUB round trips (V2) and HTTP keep-alive POST /pub and /mpub. The connections
are shared out over client processes (non-blocking sockets on epoll, one request per connection
at a time); each process starts at the same monotonic instant, stops sending at the end of the
window, then waits for the answers still owed (bounded), so every request sent is counted and
the daemon's message count can be checked against it exactly.
"""

from __future__ import annotations

import multiprocessing
import queue
import re
import selectors
import socket
import struct
import time
from dataclasses import dataclass
from typing import Final, Literal

from nsqv2 import FRAME_ERROR, HEARTBEAT, MAGIC, OK, ProtocolError, Timeout

Addr = tuple[str, int]
Kind = Literal["v2", "http"]

FRAME_HEADER: Final = struct.Struct(">ii")
SETTLE_S: Final = 5.0  # how long answers still owed at the end of the window may take
START_DELAY_S: Final = 1.0  # connect time before the common start instant
CONTENT_LENGTH: Final = re.compile(rb"\r\ncontent-length:\s*(\d+)\r\n", re.IGNORECASE)


@dataclass(frozen=True)
class LoopResult:
    completed: int  # requests answered OK
    seconds: float  # from the common start to the last answer
    client_cpu_s: float  # CPU the client processes used (they share the cores with the daemon)


class _Conn:
    """One connection's receive buffer and response parser."""

    __slots__ = ("buf", "kind", "sock")

    def __init__(self, sock: socket.socket, kind: Kind) -> None:
        self.sock = sock
        self.kind = kind
        self.buf = bytearray()

    def take_responses(self) -> int:
        """Remove complete responses from the buffer; return how many were OK (raise on others)."""
        return self._take_v2() if self.kind == "v2" else self._take_http()

    def _take_v2(self) -> int:
        buf, ok, off = self.buf, 0, 0
        while len(buf) - off >= 8:
            size, ftype = FRAME_HEADER.unpack_from(buf, off)
            if len(buf) - off < 4 + size:
                break
            data = bytes(buf[off + 8 : off + 4 + size])
            off += 4 + size
            if ftype == FRAME_ERROR:
                raise ProtocolError(data.decode(errors="replace"))
            if data == HEARTBEAT:
                self.sock.sendall(b"NOP\n")
            elif data == OK:
                ok += 1
            else:
                raise ProtocolError(f"unexpected frame {ftype} {data[:80]!r}")
        del buf[:off]
        return ok

    def _take_http(self) -> int:
        buf, ok = self.buf, 0
        while (head_end := buf.find(b"\r\n\r\n")) >= 0:
            head = bytes(buf[: head_end + 2])
            match = CONTENT_LENGTH.search(head)
            if match is None:
                raise ProtocolError(f"HTTP answer without Content-Length: {head[:200]!r}")
            end = head_end + 4 + int(match[1])
            if len(buf) < end:
                break
            body = bytes(buf[head_end + 4 : end])
            del buf[:end]
            if not head.startswith(b"HTTP/1.1 200 ") or body != OK:
                raise ProtocolError(f"HTTP answer {head[:60]!r} {body[:80]!r}")
            ok += 1
        return ok


def _connect(addr: Addr, kind: Kind) -> socket.socket:
    sock = socket.create_connection(addr, timeout=5.0)
    sock.setsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)
    if kind == "v2":
        sock.sendall(MAGIC)
    # a timeout (not non-blocking): recv only runs when epoll says readable, and sendall may
    # then wait for buffer space for a large /mpub body instead of failing on a partial send
    sock.settimeout(10.0)
    return sock


def _run(
    addr: Addr, kind: Kind, request: bytes, n_conns: int, start_at: float, seconds: float
) -> tuple[int, float]:
    """One client process's share: (requests answered OK, seconds from start to last answer)."""
    conns = [_Conn(_connect(addr, kind), kind) for _ in range(n_conns)]
    if n_conns == 1:
        return _run_one(conns[0], request, start_at, seconds)
    sel = selectors.DefaultSelector()
    try:
        for c in conns:
            sel.register(c.sock, selectors.EVENT_READ, c)
        time.sleep(max(0.0, start_at - time.monotonic()))
        end = start_at + seconds
        hard_end = end + SETTLE_S
        for c in conns:
            c.sock.sendall(request)
        completed, last, open_conns = 0, time.monotonic(), n_conns
        while open_conns:
            now = time.monotonic()
            if now > hard_end:
                raise Timeout(f"{open_conns} answers still owed {SETTLE_S:.0f}s after the window")
            for key, _ in sel.select(timeout=hard_end - now):
                c = key.data
                chunk = c.sock.recv(1 << 16)
                if not chunk:
                    raise ProtocolError("connection closed by the daemon")
                c.buf += chunk
                answered = c.take_responses()
                if not answered:
                    continue
                completed += answered
                last = time.monotonic()
                if last < end:
                    c.sock.sendall(request)
                else:
                    sel.unregister(c.sock)
                    open_conns -= 1
        return completed, last - start_at
    finally:
        sel.close()
        for c in conns:
            c.sock.close()


def _run_one(c: _Conn, request: bytes, start_at: float, seconds: float) -> tuple[int, float]:
    """_run for one connection: plain blocking send and recv, no epoll, so the client's own
    cost per round trip (which adds to every round trip's time) is as small as Python allows.
    A kernel receive timeout (SO_RCVTIMEO) bounds each wait without a poll() per recv."""
    sock = c.sock
    sock.settimeout(None)
    sock.setsockopt(socket.SOL_SOCKET, socket.SO_RCVTIMEO, struct.pack("ll", int(SETTLE_S), 0))
    try:
        time.sleep(max(0.0, start_at - time.monotonic()))
        end = start_at + seconds
        completed = 0
        now = time.monotonic()
        while now < end:
            sock.sendall(request)
            answered = 0
            while not answered:
                try:
                    chunk = sock.recv(1 << 16)
                except BlockingIOError:
                    raise Timeout(f"no answer within {SETTLE_S:.0f}s") from None
                if not chunk:
                    raise ProtocolError("connection closed by the daemon")
                c.buf += chunk
                answered = c.take_responses()
            completed += answered
            now = time.monotonic()
        return completed, now - start_at
    finally:
        sock.close()


def _worker(
    addr: Addr,
    kind: Kind,
    request: bytes,
    n_conns: int,
    start_at: float,
    seconds: float,
    results: multiprocessing.queues.Queue[tuple[int, float, float, str | None]],
) -> None:
    try:
        completed, elapsed = _run(addr, kind, request, n_conns, start_at, seconds)
        results.put((completed, elapsed, time.process_time(), None))
    except Exception as exc:
        results.put((0, 0.0, time.process_time(), f"{type(exc).__name__}: {exc}"))


def closed_loop(
    addr: Addr, kind: Kind, request: bytes, conns: int, procs: int, seconds: float
) -> LoopResult:
    """`conns` connections over `procs` client processes, each sending `request` again as soon as
    the previous one is answered, for `seconds`; raise if any client failed."""
    procs = max(1, min(procs, conns))
    shares = [conns // procs + (i < conns % procs) for i in range(procs)]
    ctx = multiprocessing.get_context("fork")
    results = ctx.Queue()
    start_at = time.monotonic() + START_DELAY_S
    workers = [
        ctx.Process(
            target=_worker,
            args=(addr, kind, request, share, start_at, seconds, results),
            daemon=True,
        )
        for share in shares
    ]
    for w in workers:
        w.start()
    try:
        wait = START_DELAY_S + seconds + SETTLE_S + 10.0
        outcomes = [results.get(timeout=wait) for _ in workers]
    except queue.Empty:
        raise Timeout("a round-trip client process reported nothing") from None
    finally:
        for w in workers:
            w.join(timeout=5.0)
            if w.is_alive():
                w.kill()
    errors = [e for *_, e in outcomes if e]
    if errors:
        raise ProtocolError("; ".join(errors))
    return LoopResult(
        completed=sum(o[0] for o in outcomes),
        seconds=max(o[1] for o in outcomes),
        client_cpu_s=sum(o[2] for o in outcomes),
    )


def http_request(path: str, body: bytes) -> bytes:
    """A keep-alive HTTP/1.1 POST as a client library would send it."""
    return (
        b"POST %s HTTP/1.1\r\nHost: 127.0.0.1\r\nUser-Agent: nsq-bench\r\n"
        b"Content-Length: %d\r\n\r\n%s" % (path.encode(), len(body), body)
    )
