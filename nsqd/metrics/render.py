"""/stats?format=text: nsqd's printStats page from a snapshot."""

from __future__ import annotations

import time
from typing import TYPE_CHECKING, Any

from ..gocompat.timefmt import go_duration, nanoseconds_to_human, rfc3339
from ..version import BUILD

if TYPE_CHECKING:
    from ..engine.broker import Broker


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
    health: str = "",
) -> bytes:
    """httpServer.printStats (`health`: a group's, else the broker's)."""
    now = int(time.time())
    uptime = time.time_ns() - broker.start_time * 1_000_000_000
    w = [
        f"{BUILD}\n",
        f"start_time {rfc3339(broker.start_time)}\n",
        f"uptime {go_duration(uptime)}\n",
        f"\nHealth: {health or broker.health}\n",
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
