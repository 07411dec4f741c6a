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
            tname = topic["topic_name"]
            if exclude_ephemeral and tname.endswith(EPHEMERAL):
                continue
            t = f"topic.{tname}"
            yield self._counter(f"{t}.message_count", topic["message_count"])
            yield self._counter(f"{t}.message_bytes", topic["message_bytes"])
            yield self._gauge(f"{t}.depth", topic["depth"])
            yield self._gauge(f"{t}.backend_depth", topic["backend_depth"])
            for suffix, value in _e2e_gauges(topic["e2e_processing_latency"]):
                yield self._gauge(f"{t}.{suffix}", value)
            for channel in topic["channels"]:
                if exclude_ephemeral and channel["channel_name"].endswith(EPHEMERAL):
                    continue
                c = f"{t}.channel.{channel['channel_name']}"
                yield self._counter(f"{c}.message_count", channel["message_count"])
                yield self._gauge(f"{c}.depth", channel["depth"])
                yield self._gauge(f"{c}.backend_depth", channel["backend_depth"])
                yield self._gauge(f"{c}.in_flight_count", channel["in_flight_count"])
                yield self._gauge(f"{c}.deferred_count", channel["deferred_count"])
                yield self._counter(f"{c}.requeue_count", channel["requeue_count"])
                yield self._counter(f"{c}.timeout_count", channel["timeout_count"])
                yield self._gauge(f"{c}.clients", channel["client_count"])
                for suffix, value in _e2e_gauges(channel["e2e_processing_latency"]):
                    yield self._gauge(f"{c}.{suffix}", value)

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
