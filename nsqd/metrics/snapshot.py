"""A snapshot of topics, channels and clients with nsqd's keys in nsqd's order (NSQD.GetStats),
with the end-to-end latency quantiles; the JSON document of /stats around it.

Built from plain dicts in the order nsqd's Go structs declare their fields, so `go_json` of it is
byte-for-byte what nsqd's encoder writes for the same state. A Prometheus renderer reads the same
snapshot."""

from __future__ import annotations

import math
from typing import TYPE_CHECKING, Any

from ..gocompat.json import go_float
from ..version import VERSION

if TYPE_CHECKING:
    from ..engine.broker import Broker
    from ..engine.channel import Channel
    from ..engine.topic import Topic


def e2e_result(buckets: dict[int, list[int]] | None, percentiles: list[float]) -> dict[str, Any]:
    """{"count": N, "percentiles": [{"quantile": q, "value": ns}, ...]} (null without a stream)."""
    if buckets is None:
        return {"count": 0, "percentiles": None}
    cells = sorted(buckets.items())
    count = sum(n for _, (n, _) in cells)
    out = []
    for q in percentiles:
        value = 0.0
        if count:
            rank = max(1, math.ceil(q * count))
            seen = 0
            for _, (n, total) in cells:
                seen += n
                if seen >= rank:
                    value = total / n
                    break
        out.append({"quantile": go_float(q), "value": go_float(float(round(value)))})
    return {"count": count, "percentiles": out}


def merge_buckets(into: dict[int, list[int]], other: dict[int, list[int]]) -> None:
    for bucket, (n, total) in other.items():
        cell = into.setdefault(bucket, [0, 0])
        cell[0] += n
        cell[1] += total


def _channel_buckets(channel: Channel, percentiles: list[float]) -> dict[int, list[int]] | None:
    if not percentiles:
        return None
    stream = getattr(channel, "e2e_latency", None)
    return stream.buckets() if stream is not None else {}


def channel_stats(
    channel: Channel,
    clients: list[dict[str, Any]] | None,
    buckets: dict[int, list[int]] | None,
    percentiles: list[float],
) -> dict[str, Any]:
    return {
        "channel_name": channel.name,
        "depth": channel.depth,
        "backend_depth": channel.backlog.backend_depth,
        "in_flight_count": len(channel.in_flight),
        "deferred_count": len(channel.deferred),
        "message_count": channel.message_count,
        "requeue_count": channel.requeue_count,
        "timeout_count": channel.timeout_count,
        "client_count": len(channel.consumers),
        "clients": clients,
        "paused": channel.paused,
        "e2e_processing_latency": e2e_result(buckets, percentiles),
    }


def topic_stats(
    topic: Topic,
    channels: list[dict[str, Any]],
    buckets: dict[int, list[int]] | None,
    percentiles: list[float],
) -> dict[str, Any]:
    return {
        "topic_name": topic.name,
        "channels": channels,
        "depth": topic.depth,
        "backend_depth": topic.backlog.backend_depth,
        "message_count": topic.message_count,
        "message_bytes": topic.message_bytes,
        "paused": topic.paused,
        "e2e_processing_latency": e2e_result(buckets, percentiles),
    }


def snapshot(
    broker: Broker, topic_filter: str = "", channel_filter: str = "", include_clients: bool = True
) -> tuple[list[dict[str, Any]] | None, list[dict[str, Any]] | None]:
    """NSQD.GetStats: (topics, producers); topics None when the topic filter matches nothing,
    producers None when there are none or clients are not included."""
    percentiles = broker.settings.e2e_percentiles
    if topic_filter:
        found = broker.topics.get(topic_filter)
        if found is None:
            return None, None
        topics = [found]
    else:
        topics = [broker.topics[name] for name in sorted(broker.topics)]
    out: list[dict[str, Any]] = []
    for topic in topics:
        if channel_filter:
            only = topic.channels.get(channel_filter)
            if only is None:
                continue
            channels = [only]
        else:
            channels = [topic.channels[name] for name in sorted(topic.channels)]
        channel_out = []
        for channel in channels:
            clients = None
            if include_clients:
                clients = [
                    c.stats(topic_filter)
                    for _, c in sorted(channel.consumers.items(), key=lambda kv: kv[0])
                ]
            channel_out.append(
                channel_stats(channel, clients, _channel_buckets(channel, percentiles), percentiles)
            )
        # nsqd merges every channel's stream into the topic's, whatever the channel filter
        merged: dict[int, list[int]] | None = None
        if percentiles:
            for channel in topic.channels.values():
                stream = getattr(channel, "e2e_latency", None)
                merged = {} if merged is None else merged
                if stream is not None:
                    merge_buckets(merged, stream.buckets())
        out.append(topic_stats(topic, channel_out, merged, percentiles))
    producers = None
    if include_clients:
        found_producers = [
            c.stats(topic_filter)
            for _, c in sorted(broker.clients.items(), key=lambda kv: kv[0])
            if c.pub_counts
        ]
        producers = found_producers or None
    return out, producers


def stats_json(
    broker: Broker,
    topics: list[dict[str, Any]] | None,
    producers: list[dict[str, Any]] | None,
    memory: dict[str, int] | None,
    health: str = "",
) -> dict[str, Any]:
    """The /stats document (`health`: a group's, else the broker's)."""
    d: dict[str, Any] = {
        "version": VERSION,
        "health": health or broker.health,
        "start_time": broker.start_time,
        "topics": topics,
    }
    if memory is not None:
        d["memory"] = memory
    d["producers"] = producers
    return d
