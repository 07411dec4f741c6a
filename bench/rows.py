"""The rows of the side-by-side benchmark (bench/run.py): each workload, the rows it measures and
the function that measures them, in table order."""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass
from typing import Final

from daemons import Daemon
from defaults import defaults_reader, defaults_writer, defaults_writer_reader
from scaleout import scale_out
from workloads import (
    HTTP_MPUB_BATCH,
    MANY_CONNS,
    Metric,
    Metrics,
    Settings,
    bench_writer,
    latency,
    mpub_then_consume,
    reader_on_backlog,
    round_trips,
    rss_after_1m,
    start_to_ping,
    upgraded_mpub,
)


@dataclass(frozen=True)
class Workload:
    """One or more rows measured together: on a fresh daemon (`on_daemon`), or by a function
    that starts its own daemons (`own`)."""

    name: str
    group: str
    rows: tuple[Metric, ...]
    on_daemon: Callable[[Daemon, Settings], Metrics] | None = None
    own: Callable[[str, Settings], Metrics] | None = None
    tls: bool = False  # the daemon gets --tls-cert/--tls-key
    defaults: bool = False  # the daemon runs with its default --mem-queue-size


def _rt(key: str, label: str, kind: str, conns: int, per_request: int) -> Workload:
    group = "rt" if kind == "v2" else "http"
    metrics = (Metric(key, label, "msgs/s", True),)
    if conns > 1 and per_request == 1:  # the rows bound by the daemon's CPU per request
        metrics += (Metric(f"{key}_cpu_us", f"{label}: daemon CPU", "us/msg", False),)
    return Workload(
        key,
        group,
        metrics,
        on_daemon=round_trips(key, "v2" if kind == "v2" else "http", conns, per_request),
    )


def _writer(key: str, label: str, batch: int, channel: bool) -> Workload:
    return Workload(
        key,
        "writer",
        (Metric(key, label, "msgs/s", True),),
        on_daemon=bench_writer(key, batch, channel),
    )


def _defaults(key: str, label: str, batch: int) -> Workload:
    return Workload(
        key,
        "defaults",
        (
            Metric(key, label, "msgs/s", True),
            Metric(f"{key}_cpu_us", f"{label}: daemon CPU", "us/msg", False),
        ),
        on_daemon=defaults_writer(key, batch),
        defaults=True,
    )


N: Final = MANY_CONNS

WORKLOADS: Final = (
    _writer("writer_b200", "bench_writer MPUB 200, no channel", 200, False),
    _writer("writer_b200_ch", "bench_writer MPUB 200, 1 channel", 200, True),
    _writer("writer_b1", "bench_writer batch 1, no channel", 1, False),
    _writer("writer_b1_ch", "bench_writer batch 1, 1 channel", 1, True),
    Workload(
        "reader",
        "reader",
        (Metric("reader", "bench_reader on {backlog} backlog", "msgs/s", True),),
        on_daemon=reader_on_backlog,
    ),
    _defaults("def_writer_b200", "defaults: bench_writer MPUB 200, 1 channel", 200),
    _defaults("def_writer_b1", "defaults: bench_writer batch 1, 1 channel", 1),
    Workload(
        "def_reader",
        "defaults",
        (
            Metric("def_reader", "defaults: bench_reader on a disk backlog", "msgs/s", True),
            Metric("def_reader_cpu_us", "defaults: bench_reader: daemon CPU", "us/msg", False),
        ),
        on_daemon=defaults_reader,
        defaults=True,
    ),
    Workload(
        "def_rw",
        "defaults",
        (
            Metric("def_rw_written", "defaults: writer + reader at once: written", "msgs/s", True),
            Metric("def_rw_read", "defaults: writer + reader at once: read", "msgs/s", True),
            Metric("def_rw_cpu_us", "defaults: writer + reader: daemon CPU", "us/msg", False),
        ),
        on_daemon=defaults_writer_reader,
        defaults=True,
    ),
    Workload(
        "mpub",
        "mpub",
        (
            Metric("mpub200k_pub", "MPUB 200k: publish (batch 200)", "msgs/s", True),
            Metric("mpub200k_sub", "MPUB 200k: consume (RDY 2500, FIN)", "msgs/s", True),
        ),
        on_daemon=mpub_then_consume,
    ),
    Workload(
        "tls",
        "tls",
        (Metric("tls_mpub", "MPUB 200k over TLS", "msgs/s", True),),
        on_daemon=upgraded_mpub("tls_mpub", tls=True, snappy=False),
        tls=True,
    ),
    Workload(
        "snappy",
        "snappy",
        (Metric("snappy_mpub", "MPUB 200k over snappy", "msgs/s", True),),
        on_daemon=upgraded_mpub("snappy_mpub", tls=False, snappy=True),
    ),
    _rt("pub_rt_1", "PUB round trips, 1 connection", "v2", 1, 1),
    _rt("pub_rt_32", f"PUB round trips, {N} connections", "v2", N, 1),
    _rt("http_pub_1", "HTTP /pub keep-alive, 1 connection", "http", 1, 1),
    _rt("http_pub_32", f"HTTP /pub keep-alive, {N} connections", "http", N, 1),
    _rt("http_mpub_1", f"HTTP /mpub {HTTP_MPUB_BATCH}, 1 connection", "http", 1, HTTP_MPUB_BATCH),
    _rt(
        "http_mpub_32", f"HTTP /mpub {HTTP_MPUB_BATCH}, {N} connections", "http", N, HTTP_MPUB_BATCH
    ),
    Workload(
        "latency",
        "latency",
        (
            Metric("latency_p50_us", "PUB→deliver p50 @ {rate} msgs/s", "us", False),
            Metric("latency_p99_us", "PUB→deliver p99 @ {rate} msgs/s", "us", False),
            Metric("latency_cpu_us", "PUB→deliver @ {rate} msgs/s: daemon CPU", "us/msg", False),
        ),
        on_daemon=latency,
    ),
    Workload(
        "start",
        "start",
        (Metric("start_ping_ms", "start → first /ping answered", "ms", False),),
        own=start_to_ping,
    ),
    Workload(
        "rss",
        "rss",
        (
            Metric("rss_idle_mib", "RSS idle", "MiB", False),
            Metric("rss_1m_mib", "RSS with 1M queued", "MiB", False),
        ),
        on_daemon=rss_after_1m,
    ),
    Workload(
        "scaleout",
        "scaleout",
        (
            Metric("scale_pub", "scale-out {cores} cores: publish, MPUB 200", "msgs/s", True),
            Metric("scale_sub", "scale-out {cores} cores: consume, same time", "msgs/s", True),
        ),
        own=scale_out,
    ),
)

METRICS: Final = tuple(m for w in WORKLOADS for m in w.rows)


def select_workloads(only: str) -> list[Workload]:
    """Workloads named by row keys, workload names or groups (in table order); ValueError if a
    name is unknown."""
    wanted = {w.strip() for w in only.split(",") if w.strip()}
    chosen = [
        w
        for w in WORKLOADS
        if w.name in wanted or w.group in wanted or any(m.key in wanted for m in w.rows)
    ]
    known = {w.name for w in WORKLOADS} | {w.group for w in WORKLOADS} | {m.key for m in METRICS}
    unknown = wanted - known
    if unknown:
        raise ValueError(f"unknown rows {sorted(unknown)}; see --list")
    return chosen
