"""The benchmark workloads. Each takes a freshly started daemon and returns {metric: value}."""

from __future__ import annotations

import multiprocessing
import queue
import re
import subprocess
import time
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path
from typing import Final

from clients import body_timestamp, consume, paced_publisher_process, publish_mpub
from daemons import Daemon
from nsqv2 import Connection, Timeout

Metrics = dict[str, float | int | bool | None]

MSG_SIZE: Final = 200
RDY: Final = 2500
MPUB_TOTAL: Final = 200_000
MPUB_BATCH: Final = 200
RSS_TOTAL: Final = 1_000_000
LATENCY_WARMUP_S: Final = 0.5
TOOL_LINE: Final = re.compile(
    r"duration: (?P<duration>\S+) - (?P<mbs>[\d.]+)mb/s - "
    r"(?P<ops>[\d.]+)ops/s - (?P<us>[\d.]+)us/op"
)
# The throughput consumer bounds nsqd's flush timer (default 250 ms) so the tail of the run does not
# sit in an output buffer; the latency consumer turns output buffering off (every message is written
# at once), so the figure is the daemon's forwarding latency, not its buffering policy.
THROUGHPUT_IDENTIFY: Final = {
    "client_id": "bench",
    "hostname": "bench",
    "output_buffer_timeout": 25,
}
LATENCY_IDENTIFY: Final = {"client_id": "bench-lat", "hostname": "bench", "output_buffer_size": -1}


class ToolError(RuntimeError):
    """A Go bench tool failed or printed no result line."""


@dataclass(frozen=True)
class Settings:
    bin_dir: Path | None
    runfor: str  # Go duration, passed to bench_writer/bench_reader
    runfor_s: float
    latency_rate: int
    latency_seconds: float
    mem_queue_size: int
    ours_cmd: tuple[str, ...]


def run_go_tool(settings: Settings, tool: str, daemon: Daemon, *args: str) -> float:
    """Run bench_writer/bench_reader against the daemon; return its ops/s."""
    if settings.bin_dir is None:
        raise ToolError("the reference tools are not installed")
    argv = [
        str(settings.bin_dir / tool),
        f"--nsqd-tcp-address={daemon.tcp_address}",
        f"--runfor={settings.runfor}",
        f"--size={MSG_SIZE}",
        *args,
    ]
    try:
        proc = subprocess.run(
            argv, capture_output=True, text=True, timeout=settings.runfor_s + 60, check=False
        )
    except subprocess.TimeoutExpired as exc:
        raise ToolError(f"{tool} did not finish in time") from exc
    match = TOOL_LINE.search(proc.stderr)
    if proc.returncode != 0 or match is None:
        raise ToolError(f"{tool} exited {proc.returncode}: {proc.stderr[-1500:]}")
    return float(match["ops"])


def channel_drained(daemon: Daemon, topic: str, channel: str) -> bool | None:
    """True if the channel is empty (depth and in-flight 0), None if /stats is unavailable."""
    stats = daemon.stats(topic)
    try:
        for t in (stats or {})["topics"] or []:
            for c in t["channels"]:
                if t["topic_name"] == topic and c["channel_name"] == channel:
                    return bool(c["depth"] == 0 and c["in_flight_count"] == 0)
    except (KeyError, TypeError):
        return None
    return None


def go_bench_tools(daemon: Daemon, settings: Settings) -> Metrics:
    """bench_writer batch 200, then batch 1 (same topic), then bench_reader on the backlog."""
    metrics: Metrics = {}
    metrics["writer_b200"] = run_go_tool(settings, "bench_writer", daemon, "--batch-size=200")
    metrics["writer_b1"] = run_go_tool(settings, "bench_writer", daemon, "--batch-size=1")
    metrics["reader"] = run_go_tool(settings, "bench_reader", daemon, f"--rdy={RDY}")
    metrics["reader_drained"] = channel_drained(daemon, "sub_bench", "ch")
    return metrics


def mpub_then_consume(daemon: Daemon, settings: Settings) -> Metrics:
    """200,000 messages by MPUB (batches of 200, one socket), then consumed with RDY 2500 + FIN."""
    deadline = time.monotonic() + 120.0
    pub_s = publish_mpub(daemon.tcp_addr, "mpub_bench", MPUB_TOTAL, MPUB_BATCH, MSG_SIZE, deadline)
    with Connection(daemon.tcp_addr) as conn:
        conn.identify(THROUGHPUT_IDENTIFY, deadline)
        start = time.perf_counter()
        conn.subscribe("mpub_bench", "ch", RDY, deadline)
        received = consume(conn, MPUB_TOTAL, deadline)
        sub_s = time.perf_counter() - start
    if received != MPUB_TOTAL:
        raise Timeout(f"consumed {received} of {MPUB_TOTAL} messages")
    return {"mpub200k_pub": MPUB_TOTAL / pub_s, "mpub200k_sub": MPUB_TOTAL / sub_s}


def percentile(sorted_values: list[int], q: float) -> float:
    return float(sorted_values[min(len(sorted_values) - 1, int(q * len(sorted_values)))])


@dataclass
class LatencyRecorder:
    """Collects receive-time minus body-timestamp for messages published after the warm-up."""

    samples: list[int] = field(default_factory=list)
    warm_from_ns: int | None = None

    def __call__(self, messages: list[bytes], now_ns: int) -> None:
        for m in messages:
            ts = body_timestamp(m)
            if self.warm_from_ns is None:
                self.warm_from_ns = ts + int(LATENCY_WARMUP_S * 1e9)
            if ts >= self.warm_from_ns:
                self.samples.append(now_ns - ts)


def latency(daemon: Daemon, settings: Settings) -> Metrics:
    """A steady PUB stream (another process) at latency_rate msgs/s; publish→deliver percentiles."""
    rate, seconds = settings.latency_rate, settings.latency_seconds
    recorder = LatencyRecorder()
    ctx = multiprocessing.get_context("fork")
    results = ctx.Queue()
    deadline = time.monotonic() + seconds + 5.0
    with Connection(daemon.tcp_addr) as conn:
        conn.identify(LATENCY_IDENTIFY, deadline)
        conn.subscribe("lat_bench", "ch", RDY, deadline)
        args = (daemon.tcp_addr, "lat_bench", rate, seconds, MSG_SIZE, results)
        publisher = ctx.Process(target=paced_publisher_process, args=args, daemon=True)
        publisher.start()
        try:
            received = consume(conn, int(rate * seconds), deadline, recorder)
        finally:
            publisher.join(timeout=10.0)
            if publisher.is_alive():
                publisher.kill()
    try:
        sent, acked, error = results.get(timeout=5.0)
    except queue.Empty:
        sent, acked, error = 0, 0, "the publisher process reported nothing"
    if error or not recorder.samples:
        raise Timeout(f"latency publisher: {error or 'no samples'} (sent {sent}, acked {acked})")
    samples = sorted(recorder.samples)
    return {
        "latency_p50_us": percentile(samples, 0.50) / 1e3,
        "latency_p99_us": percentile(samples, 0.99) / 1e3,
        "latency_delivered": received,
        "latency_published": sent,
    }


def wait_until_queued(daemon: Daemon, topic: str, channel: str, count: int, timeout: float) -> bool:
    """Poll /stats until the channel holds `count` messages; False if not seen (or no /stats)."""
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        stats = daemon.stats(topic)
        if stats is None:
            time.sleep(1.0)  # no /stats: give the daemon a moment to settle
            return False
        depths = [
            c["depth"]
            for t in stats.get("topics") or []
            for c in t["channels"]
            if c["channel_name"] == channel
        ]
        if depths and depths[0] >= count:
            return True
        time.sleep(0.1)
    return False


def rss_after_1m(daemon: Daemon, settings: Settings) -> Metrics:
    """RSS idle, then with 1,000,000 messages of 200 bytes queued in memory on one channel."""
    time.sleep(0.5)
    idle_kib = daemon.rss_kib()
    deadline = time.monotonic() + 180.0
    with Connection(daemon.tcp_addr) as holder:
        holder.subscribe("rss_bench", "ch", 0, deadline)  # channel exists, RDY 0: messages stay
        publish_mpub(daemon.tcp_addr, "rss_bench", RSS_TOTAL, MPUB_BATCH, MSG_SIZE, deadline)
        queued = wait_until_queued(daemon, "rss_bench", "ch", RSS_TOTAL, timeout=30.0)
        daemon.check_alive()
        rss_kib = daemon.rss_kib()
        peak_kib = daemon.peak_rss_kib()
    return {
        "rss_idle_mib": idle_kib / 1024,
        "rss_1m_mib": rss_kib / 1024,
        "rss_1m_peak_mib": peak_kib / 1024,
        "rss_1m_confirmed": queued,
    }


Workload = Callable[[Daemon, Settings], Metrics]
WORKLOADS: Final[dict[str, Workload]] = {
    "bench": go_bench_tools,
    "mpub": mpub_then_consume,
    "latency": latency,
    "rss": rss_after_1m,
}
