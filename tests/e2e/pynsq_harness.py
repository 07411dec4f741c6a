"""Driving pynsq 0.9.1 (Tornado) from synchronous tests.

Each scenario is a coroutine run on a fresh asyncio loop (Tornado's IOLoop wraps it) under
``asyncio.wait_for``: a scenario that hangs fails with TimeoutError instead of blocking the
suite. Readers and writers are closed before the loop ends."""

from __future__ import annotations

import asyncio
import logging
import time
from collections.abc import Awaitable, Callable, Coroutine
from dataclasses import dataclass, field
from typing import Any, TypeVar

import nsq

T = TypeVar("T")

logging.getLogger("nsq").setLevel(logging.WARNING)


def run(scenario: Callable[[], Coroutine[Any, Any, T]], timeout: float) -> T:
    async def bounded() -> T:
        return await asyncio.wait_for(scenario(), timeout)

    return asyncio.run(bounded())


async def wait_until(predicate: Callable[[], bool], within: float, what: str = "") -> None:
    deadline = time.monotonic() + within
    while not predicate():
        if time.monotonic() > deadline:
            raise TimeoutError(f"timed out after {within}s waiting for {what or predicate}")
        await asyncio.sleep(0.01)


# -- writer ----------------------------------------------------------------------------------


class Publisher:
    """nsq.Writer plus bookkeeping of the responses to what it sent."""

    def __init__(self, address: str) -> None:
        self.writer = nsq.Writer([address], reconnect_interval=60)
        self.sent = 0
        self.ok = 0
        self.errors: list[Any] = []

    async def connected(self, within: float = 5) -> Publisher:
        await wait_until(
            lambda: any(c.connected() for c in self.writer.conns.values()),
            within,
            "the writer to connect",
        )
        return self

    def _callback(self, conn: Any, data: Any) -> None:
        if isinstance(data, Exception):
            self.errors.append(data)
        else:
            assert data == b"OK", data
            self.ok += 1

    def pub(self, topic: str, body: bytes) -> None:
        self.sent += 1
        self.writer.pub(topic, body, callback=self._callback)

    def mpub(self, topic: str, bodies: list[bytes]) -> None:
        self.sent += 1
        self.writer.mpub(topic, bodies, callback=self._callback)

    def dpub(self, topic: str, delay_ms: int, body: bytes) -> None:
        self.sent += 1
        self.writer.dpub(topic, delay_ms, body, callback=self._callback)

    async def all_acknowledged(self, within: float = 10) -> None:
        await wait_until(lambda: self.ok + len(self.errors) >= self.sent, within, "PUB OKs")
        assert self.errors == [], self.errors

    def close(self) -> None:
        for conn in list(self.writer.conns.values()):
            conn.close()


# -- reader ----------------------------------------------------------------------------------


@dataclass
class Delivery:
    id: bytes
    body: bytes
    attempts: int
    timestamp: int
    at: float  # time.monotonic() when the handler saw it


class RecordingReader(nsq.Reader):
    """An nsq.Reader that records connection errors (E_FIN_FAILED and the like)."""

    def __init__(self, *args: Any, **kwargs: Any) -> None:
        self.connection_errors: list[Any] = []
        self.closing = False
        super().__init__(*args, **kwargs)

    def _on_connection_error(self, conn: Any, error: Any, **kwargs: Any) -> None:
        if not self.closing:  # pynsq reports its own close as a failed read
            self.connection_errors.append(error)
        super()._on_connection_error(conn, error, **kwargs)

    def close(self) -> None:
        self.closing = True
        super().close()


@dataclass
class Consumer:
    """A Reader whose handler records every delivery, then defers to `on_message` (default:
    FIN at once). `on_message` returns True/False like a pynsq handler or handles the message
    itself after `message.enable_async()`."""

    address: str
    topic: str
    channel: str
    max_in_flight: int = 1
    on_message: Callable[[nsq.Message, Delivery], Any] | None = None
    reader_kwargs: dict[str, Any] = field(default_factory=dict)
    deliveries: list[Delivery] = field(default_factory=list)
    reader: RecordingReader | None = None

    def start(self) -> Consumer:
        self.reader = RecordingReader(
            self.topic,
            self.channel,
            message_handler=self._handle,
            nsqd_tcp_addresses=[self.address],
            max_in_flight=self.max_in_flight,
            max_tries=0,
            **self.reader_kwargs,
        )
        return self

    def _handle(self, message: nsq.Message) -> Any:
        d = Delivery(
            message.id, message.body, message.attempts, message.timestamp, time.monotonic()
        )
        self.deliveries.append(d)
        if self.on_message is None:
            return True
        return self.on_message(message, d)

    async def subscribed(self, within: float = 5) -> Consumer:
        """Connected, and SUB + first RDY sent (pynsq sends both once the IDENTIFY is done)."""
        assert self.reader is not None
        await wait_until(
            lambda: any(c.rdy > 0 for c in self.reader.conns.values()),  # type: ignore[union-attr]
            within,
            f"{self.topic}/{self.channel} reader to subscribe",
        )
        return self

    @property
    def bodies(self) -> list[bytes]:
        return [d.body for d in self.deliveries]

    @property
    def errors(self) -> list[Any]:
        return [] if self.reader is None else self.reader.connection_errors

    def close(self) -> None:
        if self.reader is not None:
            self.reader.close()


async def settle(
    consumers: list[Consumer], expected_total: int, within: float, what: str = ""
) -> None:
    await wait_until(
        lambda: sum(len(c.deliveries) for c in consumers) >= expected_total,
        within,
        what or f"{expected_total} deliveries",
    )


async def later(delay: float, fn: Callable[[], Awaitable[None]] | Callable[[], None]) -> None:
    await asyncio.sleep(delay)
    result = fn()
    if asyncio.iscoroutine(result):
        await result
