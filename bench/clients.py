"""Benchmark clients on raw sockets: bulk MPUB publisher, FIN-ing consumer, paced PUB publisher."""

from __future__ import annotations

import multiprocessing.queues
import struct
import time
from collections.abc import Callable
from typing import Final

from nsqv2 import (
    FRAME_ERROR,
    FRAME_MESSAGE,
    HEARTBEAT,
    OK,
    Connection,
    ProtocolError,
    Timeout,
    fin_commands,
    mpub_command,
    pub_command,
)

Addr = tuple[str, int]
OnMessages = Callable[[list[bytes], int], None]

MPUB_WINDOW: Final = 4  # MPUB commands in flight on the publishing socket
TIMESTAMP: Final = struct.Struct(">q")
BODY_OFFSET: Final = 26  # [int64 ts][uint16 attempts][16-byte id] before the body
NOP: Final = b"NOP\n"


def count_acks(conn: Connection, frames: list[tuple[int, bytes]]) -> int:
    """Count OK responses among frames (answering heartbeats); raise on anything else."""
    acks = 0
    for ftype, data in frames:
        if ftype == FRAME_ERROR:
            raise ProtocolError(data.decode(errors="replace"))
        if data == OK:
            acks += 1
        elif data == HEARTBEAT:
            conn.send(NOP)
        else:
            raise ProtocolError(f"unexpected frame type {ftype}: {data[:80]!r}")
    return acks


def publish_mpub(
    addr: Addr, topic: str, total: int, batch: int, size: int, deadline: float
) -> float:
    """Publish `total` messages of `size` bytes as MPUBs of `batch`; return the seconds it took."""
    with Connection(addr) as conn:
        return publish_mpub_on(conn, topic, total, batch, size, deadline)


def publish_mpub_on(
    conn: Connection, topic: str, total: int, batch: int, size: int, deadline: float
) -> float:
    """publish_mpub on an open (possibly upgraded) connection: every MPUB must be answered OK."""
    if total % batch:
        raise ValueError("total must be a multiple of batch")
    command = mpub_command(topic, [b"m" * size] * batch)
    n_commands = total // batch
    start = time.perf_counter()
    sent = acked = 0
    while acked < n_commands:
        burst = min(MPUB_WINDOW - (sent - acked), n_commands - sent)
        if burst > 0:
            conn.send(command * burst)
            sent += burst
        frames = conn.recv_frames(deadline)
        if not frames:
            raise Timeout(f"MPUB: {acked} of {n_commands} acknowledged before the deadline")
        acked += count_acks(conn, frames)
    return time.perf_counter() - start


def consume(
    conn: Connection,
    expected: int,
    deadline: float,
    on_messages: OnMessages | None = None,
) -> int:
    """Receive and FIN messages (FINs batched per received chunk) until `expected` or the deadline.

    Returns how many messages arrived. on_messages(message datas, receive time ns) sees each chunk.
    """
    received = 0
    while received < expected:
        frames = conn.recv_frames(deadline)
        if not frames:
            break
        now_ns = time.monotonic_ns()
        messages = []
        for ftype, data in frames:
            if ftype == FRAME_MESSAGE:
                messages.append(data)
            elif ftype == FRAME_ERROR:
                raise ProtocolError(data.decode(errors="replace"))
            elif data == HEARTBEAT:
                conn.send(NOP)
        if messages:
            conn.send(fin_commands([m[10:26] for m in messages]))
            received += len(messages)
            if on_messages is not None:
                on_messages(messages, now_ns)
    return received


def timestamped_body(size: int) -> bytes:
    """A body whose first 8 bytes are the monotonic clock (ns) at the time of the call."""
    return TIMESTAMP.pack(time.monotonic_ns()) + b"x" * (size - TIMESTAMP.size)


def body_timestamp(message: bytes) -> int:
    return TIMESTAMP.unpack_from(message, BODY_OFFSET)[0]


def paced_publish(
    addr: Addr, topic: str, rate: float, seconds: float, size: int
) -> tuple[int, int]:
    """PUB one message at a time at `rate` msgs/s for `seconds`; returns (sent, acknowledged).

    Waiting for acknowledgements doubles as the pacing sleep (it blocks until the next send time).
    """
    total = int(rate * seconds)
    with Connection(addr) as conn:
        start = time.monotonic()
        sent = acked = 0
        while sent < total and time.monotonic() < start + seconds + 1.0:
            due = min(total, int((time.monotonic() - start) * rate) + 1)
            if due > sent:
                conn.send(pub_command(topic, timestamped_body(size)) * (due - sent))
                sent = due
            acked += count_acks(conn, conn.recv_frames(start + sent / rate))
        final = time.monotonic() + 5.0
        while acked < sent and (frames := conn.recv_frames(final)):
            acked += count_acks(conn, frames)
    return sent, acked


def paced_publisher_process(
    addr: Addr,
    topic: str,
    rate: float,
    seconds: float,
    size: int,
    results: multiprocessing.queues.Queue[tuple[int, int, str | None]],
) -> None:
    """Latency publisher subprocess entry point: reports (sent, acked, error) on `results`."""
    try:
        sent, acked = paced_publish(addr, topic, rate, seconds, size)
        results.put((sent, acked, None))
    except Exception as exc:
        results.put((0, 0, f"{type(exc).__name__}: {exc}"))
