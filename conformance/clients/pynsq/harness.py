"""The harness of the pynsq conformance checks (checks.py): a Scope that owns a check's
Readers and Writers, publishing helpers, and the tallies of what was delivered. Bounded waits
throughout: nothing here waits for ever."""

from __future__ import annotations

import asyncio
import logging
import time
from collections.abc import Awaitable, Callable
from dataclasses import dataclass, field
from typing import Any

import nsq

CLIENT = "pynsq"
# How late a timer-driven event (message timeout, REQ delay, DPUB delay) may be seen: nsqd
# v1.3.0 only scans the channels it learnt about at its last 5s refresh.
MAX_LAG_S = 5.5
RUN_ID = str(time.time_ns() % 1_000_000_000)

log = logging.getLogger("pynsq-check")

Message = Any  # nsq.Message (pynsq has no type information)
Handler = Callable[[Message, float], None]


def now() -> float:
    return time.monotonic()


def secs(s: float) -> str:
    return f"{s:.3f}s"


async def wait_for(cond: Callable[[], bool], within: float) -> bool:
    """Poll ``cond`` every 10ms until it holds (True) or ``within`` seconds pass (False)."""
    deadline = now() + within
    while now() <= deadline:
        if cond():
            return True
        await asyncio.sleep(0.01)
    return cond()


def _noop(*_args: Any, **_kwargs: Any) -> None:
    return None


class _ClosedTopicsFilter(logging.Filter):
    """Drops pynsq's log lines about connections a finished check closed on purpose (pynsq
    logs every deliberate close as ``IntegrityError('failed to unpack size')``)."""

    closed: set[str] = set()

    def filter(self, record: logging.LogRecord) -> bool:
        text = record.getMessage()
        if record.name == "nsq.writer" and text.endswith("connection closed"):
            return False  # only says host:port; a lost writer fails its publish anyway
        return not any(topic in text for topic in self.closed)


class Scope:
    """The Readers and Writers one check opened; ``close()`` shuts them all for good."""

    def __init__(self, nsqd: str, topic: str) -> None:
        self.nsqd = nsqd
        self.topic = topic
        self.readers: list[Any] = []
        self.writers: list[Any] = []

    async def writer(self) -> Any:
        w = nsq.Writer([self.nsqd], reconnect_interval=60.0, name=f"{self.topic}:writer")
        self.writers.append(w)
        if not await wait_for(lambda: bool(w.conns), 5.0):
            raise RuntimeError("Writer did not connect within 5s")
        return w

    async def reader(self, topic: str, channel: str, handler: Handler, **options: Any) -> Any:
        """A Reader calling ``handler(message, received_at)``; returns once it is connected
        (its SUB and first RDY are sent right after IDENTIFY)."""

        def on_message(message: Message) -> None:
            message.enable_async()  # the handlers answer explicitly
            handler(message, now())

        r = nsq.Reader(
            topic=topic,
            channel=channel,
            message_handler=on_message,
            nsqd_tcp_addresses=[self.nsqd],
            **options,
        )
        self.readers.append(r)
        if not await wait_for(lambda: bool(r.conns), 5.0):
            raise RuntimeError(f"Reader {topic}/{channel} did not connect within 5s")
        return r

    def close(self) -> None:
        _ClosedTopicsFilter.closed.add(self.topic)
        # pynsq reconnects closed nsqd connections after a delay; disable that first.
        for client in (*self.readers, *self.writers):
            client.connect_to_nsqd = _noop
        for r in self.readers:
            r.close()
        for w in self.writers:
            for conn in list(w.conns.values()):
                conn.close()


def _publish(w: Any, command: str, *args: Any) -> Awaitable[None]:
    loop = asyncio.get_running_loop()
    fut: asyncio.Future[None] = loop.create_future()

    def callback(_conn: Any, data: Any) -> None:
        if fut.done():
            return
        if isinstance(data, Exception):
            fut.set_exception(RuntimeError(f"{command} failed: {data!r}"))
        else:
            fut.set_result(None)

    getattr(w, command)(*args, callback=callback)
    return asyncio.wait_for(fut, 5.0)


async def pub(w: Any, topic: str, body: bytes) -> None:
    await _publish(w, "pub", topic, body)


async def mpub(w: Any, topic: str, bodies: list[bytes]) -> None:
    await _publish(w, "mpub", topic, bodies)


async def dpub(w: Any, topic: str, delay_ms: int, body: bytes) -> None:
    await _publish(w, "dpub", topic, delay_ms, body)


def make_bodies(prefix: str, start: int, stop: int) -> list[bytes]:
    return [f"{prefix}{i}".encode() for i in range(start, stop)]


@dataclass
class Tally:
    """Which bodies one consumer received (FIN on receipt; probes are not counted)."""

    expected: set[bytes]
    seen: dict[bytes, int] = field(default_factory=dict)
    probes: int = 0
    dupes: int = 0
    bad_attempts: int = 0

    def handle(self, message: Message, _at: float) -> None:
        body = bytes(message.body)
        if body.startswith(b"probe-"):
            self.probes += 1
        else:
            n = self.seen.get(body, 0) + 1
            self.seen[body] = n
            if n > 1:
                self.dupes += 1
            if message.attempts != 1:
                self.bad_attempts += 1
        message.finish()

    @property
    def unique(self) -> int:
        return len(self.seen)

    def summary(self) -> tuple[bool, str]:
        missing = sum(1 for b in self.expected if b not in self.seen)
        unexpected = sum(1 for b in self.seen if b not in self.expected)
        ok = missing == 0 and unexpected == 0 and self.dupes == 0 and self.bad_attempts == 0
        return ok, (
            f"received={len(self.seen)} missing={missing} unexpected={unexpected} "
            f"duplicates={self.dupes} attempts!=1:{self.bad_attempts}"
        )


async def publish_probes_until(w: Any, topic: str, ready: Callable[[], bool]) -> None:
    deadline = now() + 5.0
    i = 0
    while not ready():
        if now() > deadline:
            raise RuntimeError("consumers not all subscribed after 5s of probes")
        await pub(w, topic, f"probe-{i}".encode())
        await wait_for(ready, 0.05)
        i += 1


@dataclass
class Delivery:
    id: bytes
    attempts: int
    at: float
    body: bytes


@dataclass
class Deliveries:
    list: list[Delivery] = field(default_factory=list)

    def push(self, message: Message, at: float) -> None:
        self.list.append(Delivery(message.id, message.attempts, at, bytes(message.body)))

    async def wait(self, n: int, within: float) -> list[Delivery]:
        await wait_for(lambda: len(self.list) >= n, within)
        return self.list[:n]

    def same_message(self) -> bool:
        first = self.list[0]
        return all(d.id == first.id and d.body == first.body for d in self.list)

    def attempts(self) -> str:
        return ",".join(str(d.attempts) for d in self.list)
