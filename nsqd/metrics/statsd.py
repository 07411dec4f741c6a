"""Pushing stats to statsd, as nsqd's statsdLoop.

Every --statsd-interval: collect the topics and channels (sorted by name), write one line per
metric, `<prefix><stat>:<value>|c` for counters (the delta since the previous push) or `|g` for
gauges, pack the lines into UDP packets of at most --statsd-udp-packet-size bytes and send them
spread evenly over the interval less one second, from a fresh UDP socket each time.

The prefix is --statsd-prefix with `%s` replaced by `<broadcast address>_<broadcast HTTP port>`
(`.` and `:` made `_`), with a trailing `.` added if missing: `nsq.%s` -> `nsq.myhost_4151.`.

The figures are a /stats snapshot's topics (metrics.snapshot), taken by a `Topics` source: the
broker's own in one nsqd; in a group, worker 0 alone pushes, the group's (summed as /stats sums
them), so a gauge is the group's and not the last worker's to push.
"""

from __future__ import annotations

import socket
from collections.abc import Awaitable, Callable, Iterator
from typing import TYPE_CHECKING, Any

import trio

from ..log import log
from .memory import memory_stats
from .snapshot import snapshot

if TYPE_CHECKING:
    from ..engine.broker import Broker
    from ..node import Node

Topics = Callable[[], Awaitable[list[dict[str, Any]]]]  # a /stats snapshot's topics, by name
EPHEMERAL = "#ephemeral"
# (metric, c for a counter's delta or g for a gauge, the /stats key it reads), in nsqd's order
TOPIC_METRICS = (
    ("message_count", "c", "message_count"),
    ("message_bytes", "c", "message_bytes"),
    ("depth", "g", "depth"),
    ("backend_depth", "g", "backend_depth"),
)
CHANNEL_METRICS = (
    ("message_count", "c", "message_count"),
    ("depth", "g", "depth"),
    ("backend_depth", "g", "backend_depth"),
    ("in_flight_count", "g", "in_flight_count"),
    ("deferred_count", "g", "deferred_count"),
    ("requeue_count", "c", "requeue_count"),
    ("timeout_count", "c", "timeout_count"),
    ("clients", "g", "client_count"),
)
MEM_GAUGES = (
    "heap_objects",
    "heap_idle_bytes",
    "heap_in_use_bytes",
    "heap_released_bytes",
    "gc_pause_usec_100",
    "gc_pause_usec_99",
    "gc_pause_usec_95",
    "next_gc_bytes",
)


def host_key(host: str, port: int) -> str:
    """statsd.HostKey(net.JoinHostPort(host, port))."""
    joined = f"[{host}]:{port}" if ":" in host else f"{host}:{port}"
    return joined.replace(".", "_").replace(":", "_")


def prefix_for(node: Node) -> str:
    prefix = node.options.statsd_prefix
    if not prefix:
        return ""
    prefix = prefix.replace(
        "%s", host_key(node.options.broadcast_address, node.broadcast_http_port)
    )
    return prefix if prefix.endswith(".") else prefix + "."


def pack(lines: list[bytes], size: int) -> list[bytes]:
    """nsqd's BoundaryBufferedWriter over a bufio.Writer of `size` bytes: a line never straddles
    two packets unless it is longer than a packet on its own (then it is cut, as bufio does)."""
    size = max(1, size)
    packets: list[bytes] = []
    buf = bytearray()
    for line in lines:
        if len(line) > size - len(buf) and buf:
            packets.append(bytes(buf))
            buf.clear()
        while len(line) > size:  # longer than a packet: bufio writes it through in pieces
            packets.append(line[:size])
            line = line[size:]
        buf += line
    if buf:
        packets.append(bytes(buf))
    return packets


def _e2e_gauges(latency: dict[str, Any]) -> list[tuple[str, int]]:
    """(suffix, value) for each percentile of a snapshot's `e2e_processing_latency`."""
    return [
        (f"e2e_processing_latency_{float(item['quantile']) * 100:.0f}", int(float(item["value"])))
        for item in latency["percentiles"] or ()
    ]


def broker_topics(broker: Broker) -> Topics:
    """One nsqd's source: its broker's snapshot."""

    async def topics() -> list[dict[str, Any]]:
        return snapshot(broker, include_clients=False)[0] or []

    return topics


class StatsdPusher:
    def __init__(self, node: Node) -> None:
        self.node = node
        self.last: dict[str, int] = {}  # counter name -> value at the previous push

    def _counter(self, name: str, value: int) -> bytes:
        delta = value - self.last.get(name, 0)
        self._seen[name] = value
        return f"{self._prefix}{name}:{delta}|c\n".encode()

    def _gauge(self, name: str, value: int) -> bytes:
        return f"{self._prefix}{name}:{int(value)}|g\n".encode()

    def lines(self, topics: list[dict[str, Any]]) -> list[bytes]:
        """One push worth of metric lines; remembers counters for the next push's deltas."""
        opts = self.node.options
        self._prefix = prefix_for(self.node)
        self._seen: dict[str, int] = {}
        out = list(self._topic_lines(topics, opts.statsd_exclude_ephemeral))
        if opts.statsd_mem_stats:
            ms = memory_stats()
            out.extend(self._gauge(f"mem.{key}", int(ms.get(key, 0))) for key in MEM_GAUGES)
            out.append(self._counter("mem.gc_runs", int(ms.get("gc_total_runs", 0))))
        # nsqd keeps the last collection whole: counters of a topic that disappears and comes
        # back restart from 0; mem.gc_runs is kept even when mem stats are switched off
        if "mem.gc_runs" not in self._seen and "mem.gc_runs" in self.last:
            self._seen["mem.gc_runs"] = self.last["mem.gc_runs"]
        self.last = self._seen
        return out

    def _topic_lines(
        self, topics: list[dict[str, Any]], exclude_ephemeral: bool
    ) -> Iterator[bytes]:
        for topic in topics:
            if exclude_ephemeral and topic["topic_name"].endswith(EPHEMERAL):
                continue
            t = f"topic.{topic['topic_name']}"
            yield from self._queue_lines(t, topic, TOPIC_METRICS)
            for channel in topic["channels"]:
                if exclude_ephemeral and channel["channel_name"].endswith(EPHEMERAL):
                    continue
                c = f"{t}.channel.{channel['channel_name']}"
                yield from self._queue_lines(c, channel, CHANNEL_METRICS)

    def _queue_lines(
        self, name: str, stats: dict[str, Any], metrics: tuple[tuple[str, str, str], ...]
    ) -> Iterator[bytes]:
        """A topic's or channel's metrics (in nsqd's order), then its e2e percentiles."""
        for metric, kind, key in metrics:
            line = self._counter if kind == "c" else self._gauge
            yield line(f"{name}.{metric}", stats[key])
        for suffix, value in _e2e_gauges(stats["e2e_processing_latency"]):
            yield self._gauge(f"{name}.{suffix}", value)

    async def push(self, address: str, spread: float, topics: list[dict[str, Any]]) -> None:
        host, _, port = address.rpartition(":")
        host = host.strip("[]")
        try:
            infos = await trio.socket.getaddrinfo(host, int(port), type=socket.SOCK_DGRAM)
            family, _, _, _, sockaddr = infos[0]
            sock = trio.socket.socket(family, socket.SOCK_DGRAM)
            await sock.connect(sockaddr)
        except (OSError, ValueError, IndexError) as exc:
            log.error("failed to create UDP socket to statsd(%s) - %s", address, exc)
            return
        with sock:
            log.info("STATSD: pushing stats to %s", address)
            packets = pack(self.lines(topics), self.node.options.statsd_udp_packet_size)
            pause = spread / len(packets) if packets else 0.0
            for i, packet in enumerate(packets):
                if i and pause > 0:
                    await trio.sleep(pause)
                try:
                    await sock.send(packet)
                except OSError:  # nobody listening (ICMP port unreachable): statsd is lossy
                    pass


async def run(node: Node, topics: Topics) -> None:
    """The push loop (a no-op without --statsd-address); started once by NSQD.run."""
    opts = node.options
    if not opts.statsd_address:
        return
    interval = opts.statsd_interval
    if interval <= 0:
        log.error("STATSD: --statsd-interval must be > 0, not pushing")
        return
    pusher = StatsdPusher(node)
    next_at = trio.current_time() + interval
    while True:
        await trio.sleep_until(next_at)
        next_at += interval
        if trio.current_time() > next_at:  # a push overran: skip ticks, as Go's ticker
            next_at = trio.current_time() + interval
        address = node.options.statsd_address
        if address:
            await pusher.push(address, max(0.0, interval - 1.0), await topics())
