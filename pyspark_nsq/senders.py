"""How one sink task sends its chunks: TCP MPUB (at-least-once; any nsqd) or HTTP /mpub with
de-duplication keys (exactly once against our nsqd with --dedupe-window).

`open_sender` makes the choice per task from option `dedupe` and a probe of the nsqd
(GET /config/dedupe_window on the task's keep-alive HTTP connection)."""

from __future__ import annotations

import logging
from collections.abc import Sequence
from dataclasses import dataclass
from typing import Protocol

from .addresses import Address
from .conn import Publisher
from .httppub import HttpPublisher
from .options import SinkOptions

log = logging.getLogger("pyspark_nsq")


class SinkError(RuntimeError):
    """A row the sink cannot publish, or nsqd refused a publish."""


@dataclass(frozen=True, slots=True)
class Target:
    """The nsqd a task publishes to: its TCP and HTTP addresses."""

    tcp: Address
    http: Address


class Sender(Protocol):
    mode: str  # "tcp" or "http+keys", reported in the commit message

    def send(self, topic: str, bodies: Sequence[bytes], first_row: int) -> None:
        """Publish one chunk; `first_row` is the topic's row index of bodies[0] in the task."""
        ...

    def close(self) -> None: ...


class TcpSender:
    mode = "tcp"

    def __init__(self, target: Target, timeout: float) -> None:
        self._pub = Publisher(target.tcp, timeout=timeout)

    def send(self, topic: str, bodies: Sequence[bytes], first_row: int) -> None:
        self._pub.mpub(topic, bodies)

    def close(self) -> None:
        self._pub.close()


class KeyedHttpSender:
    mode = "http+keys"

    def __init__(self, pub: HttpPublisher, prefix: str) -> None:
        self._pub = pub
        self.prefix = prefix

    def send(self, topic: str, bodies: Sequence[bytes], first_row: int) -> None:
        self._pub.mpub(topic, bodies, self.prefix, first_row)

    def close(self) -> None:
        self._pub.close()


def _probe(pub: HttpPublisher) -> tuple[int | None, str]:
    """(the nsqd's dedupe window in ns or None, why it cannot be used)."""
    try:
        window = pub.dedupe_window()
    except OSError as exc:
        return None, f"its HTTP API at {pub.address} did not answer ({exc})"
    if window is None:
        return None, "it has no --dedupe-window (the Go nsqd, or not ours)"
    if window <= 0:
        return None, "it runs without --dedupe-window"
    return window, ""


def open_sender(opts: SinkOptions, target: Target, prefix: str | None) -> Sender:
    """The task's sender: keys when option dedupe allows it, the task can name its rows
    (`prefix`), and the nsqd de-duplicates; else TCP (option dedupe=on: else SinkError)."""
    timeout = max(30.0, opts.connect_timeout_ms / 1000)
    if opts.dedupe == "off":
        return TcpSender(target, timeout)
    if prefix is None:
        why = "Spark gave the task no query and batch id to build de-duplication keys from"
        if opts.dedupe == "on":
            raise SinkError(f"nsq sink: option dedupe=on, but {why}")
        log.warning("nsq sink: %s; publishing over TCP (at-least-once)", why)
        return TcpSender(target, timeout)
    pub = HttpPublisher(target.http, timeout=timeout)
    window, why = _probe(pub)
    if window is not None:
        return KeyedHttpSender(pub, prefix)
    pub.close()
    if opts.dedupe == "on":
        raise SinkError(f"nsq sink: option dedupe=on, but nsqd {target.tcp} cannot: {why}")
    log.info("nsq sink: nsqd %s: %s; publishing over TCP (at-least-once)", target.tcp, why)
    return TcpSender(target, timeout)
