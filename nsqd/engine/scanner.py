"""The queue-scan sweep: time out in-flight messages and release deferred ones.

nsqd samples channels every 100 ms; one sweep of every channel costs little here, and releases
each message at its exact deadline."""

from __future__ import annotations

from typing import TYPE_CHECKING

import trio

if TYPE_CHECKING:
    from .broker import Broker

SCAN_INTERVAL = 0.1


async def run(broker: Broker, interval: float = SCAN_INTERVAL) -> None:
    while True:
        await trio.sleep(interval)
        broker.scan(broker.settings.clock())
