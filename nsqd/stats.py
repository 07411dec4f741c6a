"""/stats: a snapshot of topics, channels and clients with nsqd's keys in nsqd's order, rendered
as nsqd's JSON or its text page; plus the memory block, end-to-end latency quantiles and the Go
formatting helpers (durations, floats, JSON escaping) they need.

The snapshot is built from plain dicts in the order nsqd's Go structs declare their fields, so
`go_json` of it is byte-for-byte what nsqd's encoder writes for the same state."""

from __future__ import annotations

import gc
import json
import math
import os
import platform
import sys
import time
from collections import deque
from datetime import datetime
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    from .engine.broker import Broker
    from .engine.channel import Channel
    from .engine.topic import Topic

VERSION = "1.3.0"
BUILD = f"nsqd v{VERSION} (built w/python{platform.python_version()})"

# -- Go formatting ---------------------------------------------------------------------------

_GO_ESCAPES = str.maketrans(
    {"<": "\\u003c", ">": "\\u003e", "&": "\\u0026", "\u2028": "\\u2028", "\u2029": "\\u2029"}
)


def go_json(value: Any) -> bytes:
    """encoding/json.Marshal: compact, raw UTF-8, with <, >, & and U+2028/9 escaped."""
    text = json.dumps(value, separators=(",", ":"), ensure_ascii=False)
    if any(c in text for c in "<>&\u2028\u2029"):
        text = text.translate(_GO_ESCAPES)
    return text.encode("utf-8", "surrogateescape")


def go_float(x: float) -> float | int:
    """A float64 the way Go's JSON encoder prints it: integral values without a '.0'."""
    if math.isfinite(x) and x == int(x) and abs(x) < 1e21:
        return int(x)
    return x


def _frac(v: int, digits: int) -> str:
    whole, frac = divmod(v, 10**digits)
    text = f"{frac:0{digits}d}".rstrip("0")
    return f"{whole}.{text}" if text else str(whole)


def go_duration(ns: int) -> str:
    """time.Duration.String: 0s, 850ns, 1.5µs, 65.643µs, 2.3ms, 58.2s, 1m5s, 2h0m1s."""
    if ns == 0:
        return "0s"
    sign = "-" if ns < 0 else ""
    u = abs(ns)
    if u < 1000:
        return f"{sign}{u}ns"
    if u < 1_000_000:
        return f"{sign}{_frac(u, 3)}µs"
    if u < 1_000_000_000:
        return f"{sign}{_frac(u, 6)}ms"
    minutes, rem = divmod(u, 60_000_000_000)
    text = f"{_frac(rem, 9)}s"
    if minutes:
        hours, minutes = divmod(minutes, 60)
        text = f"{minutes}m{text}"
        if hours:
            text = f"{hours}h{text}"
    return sign + text


def nanoseconds_to_human(v: float) -> str:
    """nsq's stringy.NanoSecondToHuman, used for e2e% in the text page."""
    if v > 1e9:
        return f"{v / 1e9:0.1f}s"
    if v > 1e6:
        return f"{v / 1e6:0.1f}ms"
    if v > 1e3:
        return f"{v / 1e3:0.1f}us"
    return f"{v:0.1f}ns"


def rfc3339(ts: int) -> str:
    """Go's time.Format(time.RFC3339) in local time: 2006-01-02T15:04:05Z07:00."""
    dt = datetime.fromtimestamp(ts).astimezone()
    offset = dt.utcoffset()
    if offset is not None and offset.total_seconds() == 0:
        return dt.strftime("%Y-%m-%dT%H:%M:%SZ")
    return dt.isoformat(timespec="seconds")


# -- end-to-end processing latency -----------------------------------------------------------

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


def _merge_buckets(into: dict[int, list[int]], other: dict[int, list[int]]) -> None:
    for bucket, (n, total) in other.items():
        cell = into.setdefault(bucket, [0, 0])
        cell[0] += n
        cell[1] += total


# -- memory ------------------------------------------------------------------------------------

_GC_PAUSES: deque[int] = deque(maxlen=256)  # ns, as Go's MemStats.PauseNs ring
_gc_started = 0


def _gc_callback(phase: str, info: dict[str, int]) -> None:
    global _gc_started
    if phase == "start":
        _gc_started = time.perf_counter_ns()
    elif _gc_started:
        _GC_PAUSES.append(time.perf_counter_ns() - _gc_started)


def track_gc_pauses() -> None:
    """Record collector pauses for gc_pause_usec_* (idempotent)."""
    if _gc_callback not in gc.callbacks:
        gc.callbacks.append(_gc_callback)


def _rss_bytes() -> int:
    try:
        with open("/proc/self/statm", "rb") as f:
            return int(f.read().split()[1]) * os.sysconf("SC_PAGE_SIZE")
    except (OSError, ValueError, IndexError):
        return 0


def _percentile(perc: float, sorted_values: list[int]) -> int:
    n = len(sorted_values)
    if n == 0:
        return 0
    index = min(math.floor(perc / 100.0 * n + 0.5), n - 1)
    return sorted_values[index]


def memory_stats() -> dict[str, int]:
    """nsqd's memStats keys with Python's nearest equivalents: allocated blocks for heap
    objects, resident memory for heap in use, collector pauses and runs (Go-only figures 0)."""
    pauses = sorted(_GC_PAUSES)
    return {
        "heap_objects": sys.getallocatedblocks(),
        "heap_idle_bytes": 0,
        "heap_in_use_bytes": _rss_bytes(),
        "heap_released_bytes": 0,
        "gc_pause_usec_100": _percentile(100.0, pauses) // 1000,
        "gc_pause_usec_99": _percentile(99.0, pauses) // 1000,
        "gc_pause_usec_95": _percentile(95.0, pauses) // 1000,
        "next_gc_bytes": 0,
        "gc_total_runs": sum(s["collections"] for s in gc.get_stats()),
    }


# -- the snapshot ------------------------------------------------------------------------------




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
                    _merge_buckets(merged, stream.buckets())
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
) -> dict[str, Any]:
    d: dict[str, Any] = {
        "version": VERSION,
        "health": broker.health,
        "start_time": broker.start_time,
        "topics": topics,
    }
    if memory is not None:
        d["memory"] = memory
    d["producers"] = producers
    return d


# -- the text page -------------------------------------------------------------------------------


def _e2e_text(e2e: dict[str, Any]) -> str:
    return ", ".join(nanoseconds_to_human(p["value"]) for p in e2e["percentiles"] or ())


def client_line(c: dict[str, Any], now: int) -> str:
    """ClientV2Stats.String."""
    connected = go_duration(max(0, now - c["connect_ts"]) * 1_000_000_000)
    port = c["remote_address"].rpartition(":")[2]
    ident = f"{c['hostname']}:{port} {c['user_agent']}"
    pub_counts = c.get("pub_counts")
    if pub_counts:
        total = sum(p["count"] for p in pub_counts)
        topics = ",".join(f"{p['topic']}={p['count']}" for p in pub_counts)
        return (
            f"[{c['version']} {ident:<21}] msgs: {total:<8d} topics: {topics} "
            f"connected: {connected}"
        )
    return (
        f"[{c['version']} {ident:<21}] state: {c['state']} inflt: {c['in_flight_count']:<4d} "
        f"rdy: {c['ready_count']:<4d} fin: {c['finish_count']:<8d} "
        f"re-q: {c['requeue_count']:<8d} msgs: {c['message_count']:<8d} connected: {connected}"
    )


def stats_text(
    broker: Broker,
    topics: list[dict[str, Any]] | None,
    producers: list[dict[str, Any]] | None,
    memory: dict[str, int] | None,
) -> bytes:
    """httpServer.printStats."""
    now = int(time.time())
    uptime = time.time_ns() - broker.start_time * 1_000_000_000
    w = [
        f"{BUILD}\n",
        f"start_time {rfc3339(broker.start_time)}\n",
        f"uptime {go_duration(uptime)}\n",
        f"\nHealth: {broker.health}\n",
    ]
    if memory is not None:
        w.append("\nMemory:\n")
        w.extend(f"   {name:<25}\t{value}\n" for name, value in memory.items())
    w.append("\nTopics:" if topics else "\nTopics: None\n")
    for t in topics or ():
        prefix = "*P " if t["paused"] else "   "
        w.append(
            f"\n{prefix}[{t['topic_name']:<15}] depth: {t['depth']:<5d} "
            f"be-depth: {t['backend_depth']:<5d} msgs: {t['message_count']:<8d} "
            f"e2e%: {_e2e_text(t['e2e_processing_latency'])}\n"
        )
        for c in t["channels"]:
            prefix = "   *P " if c["paused"] else "      "
            w.append(
                f"{prefix}[{c['channel_name']:<25}] depth: {c['depth']:<5d} "
                f"be-depth: {c['backend_depth']:<5d} inflt: {c['in_flight_count']:<4d} "
                f"def: {c['deferred_count']:<4d} re-q: {c['requeue_count']:<5d} "
                f"timeout: {c['timeout_count']:<5d} msgs: {c['message_count']:<8d} "
                f"e2e%: {_e2e_text(c['e2e_processing_latency'])}\n"
            )
            w.extend(f"        {client_line(cl, now)}\n" for cl in c["clients"] or ())
    if producers:
        w.append("\nProducers:\n")
        w.extend(f"   {client_line(p, now)}\n" for p in producers)
    else:
        w.append("\nProducers: None\n")
    return "".join(w).encode("utf-8", "surrogateescape")
