"""The benchmark rows. Each workload runs on a freshly started daemon (or starts its own), returns
{metric: value}, and checks its own counts against the daemon's /stats: a row whose count does not
add up raises Unsound instead of printing a figure."""

from __future__ import annotations

import multiprocessing
import os
import queue
import re
import ssl
import statistics
import subprocess
import time
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path
from typing import Final

from clients import body_timestamp, consume, paced_publisher_process, publish_mpub, publish_mpub_on
from daemons import Daemon, seconds_to_first_ping
from loops import Kind, closed_loop, http_request
from nsqv2 import Connection, Timeout, pub_command

Metrics = dict[str, float | int | bool | None]

MSG_SIZE: Final = 200
BODY: Final = b"m" * MSG_SIZE
RDY: Final = 2500
MPUB_TOTAL: Final = 200_000
MPUB_BATCH: Final = 200
RSS_TOTAL: Final = 1_000_000
HTTP_MPUB_BATCH: Final = 200
MANY_CONNS: Final = 32
LATENCY_WARMUP_S: Final = 0.5
TOOL_LINE: Final = re.compile(
    r"duration: (?P<duration>\S+) - (?P<mbs>[\d.]+)mb/s - "
    r"(?P<ops>[\d.]+)ops/s - (?P<us>[\d.]+)us/op"
)
GO_DURATION_PART: Final = re.compile(r"(\d+(?:\.\d+)?)(ms|us|µs|ns|h|m|s)")  # "ms" before "m"
GO_UNIT_S: Final = {
    "h": 3600.0,
    "m": 60.0,
    "s": 1.0,
    "ms": 1e-3,
    "us": 1e-6,
    "µs": 1e-6,
    "ns": 1e-9,
}
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


class Unsound(RuntimeError):
    """The row's own count check failed: the figure would not measure what the row says."""


@dataclass(frozen=True)
class CertPaths:
    ca: Path
    cert: Path
    key: Path


@dataclass(frozen=True)
class Settings:
    bin_dir: Path | None
    runfor: str  # Go duration, passed to bench_writer/bench_reader
    runfor_s: float  # also the window of the round-trip, HTTP and scale-out rows
    latency_rate: int
    latency_seconds: float
    mem_queue_size: int
    ours_cmd: tuple[str, ...]
    backlog: int  # messages queued (in memory) before bench_reader starts
    start_samples: int  # daemon starts per start → /ping measurement
    certs: CertPaths | None = None


@dataclass(frozen=True)
class Metric:
    key: str
    label: str
    unit: str
    higher_is_better: bool


def check(ok: bool, what: str) -> None:
    if not ok:
        raise Unsound(what)


def wait_for(predicate: Callable[[], bool], timeout: float, what: str) -> None:
    """Poll until predicate() holds; Unsound if it does not within timeout."""
    deadline = time.monotonic() + timeout
    while not predicate():
        if time.monotonic() > deadline:
            raise Unsound(f"not within {timeout:.0f}s: {what}")
        time.sleep(0.05)


# -- the Go bench tools ----------------------------------------------------------------------


@dataclass(frozen=True)
class ToolRun:
    ops: float  # messages/s as the tool printed it
    seconds: float
    count: int  # messages the tool published or received (ops * duration)


def parse_go_duration(text: str) -> float:
    parts = GO_DURATION_PART.findall(text)
    if not parts or "".join(n + u for n, u in parts) != text:
        raise ToolError(f"not a Go duration: {text!r}")
    return sum(float(n) * GO_UNIT_S[u] for n, u in parts)


def parse_tool_output(tool: str, returncode: int, stderr: str) -> ToolRun:
    match = TOOL_LINE.search(stderr)
    if returncode != 0 or match is None:
        raise ToolError(f"{tool} exited {returncode}: {stderr[-1500:]}")
    ops, seconds = float(match["ops"]), parse_go_duration(match["duration"])
    # the tool prints rate and duration, not its count; both carry enough digits to recover it
    return ToolRun(ops, seconds, round(ops * seconds))


def go_tool_argv(settings: Settings, tool: str, address: str, *args: str) -> list[str]:
    if settings.bin_dir is None:
        raise ToolError("the reference tools are not installed")
    return [
        str(settings.bin_dir / tool),
        f"--nsqd-tcp-address={address}",
        f"--runfor={settings.runfor}",
        f"--size={MSG_SIZE}",
        *args,
    ]


def run_go_tool(settings: Settings, tool: str, daemon: Daemon, *args: str) -> ToolRun:
    """Run bench_writer/bench_reader against the daemon (one connection per core)."""
    argv = go_tool_argv(settings, tool, daemon.tcp_address, *args)
    try:
        proc = subprocess.run(
            argv, capture_output=True, text=True, timeout=settings.runfor_s + 60, check=False
        )
    except subprocess.TimeoutExpired as exc:
        raise ToolError(f"{tool} did not finish in time") from exc
    return parse_tool_output(tool, proc.returncode, proc.stderr)


def close_enough(a: int, b: int) -> bool:
    """Equal but for the last digit of the tools' printed rate (a message or so)."""
    return abs(a - b) <= max(1, b // 1_000_000)


def bench_writer(key: str, batch: int, channel: bool) -> Callable[[Daemon, Settings], Metrics]:
    def run(daemon: Daemon, settings: Settings) -> Metrics:
        topic = "sub_bench"
        if channel:
            daemon.create_channel(topic, "ch")
        tool = run_go_tool(settings, "bench_writer", daemon, f"--batch-size={batch}")
        accepted, spilled = daemon.topic_counts(topic)
        check(
            close_enough(accepted, tool.count),
            f"bench_writer counted {tool.count} messages, the topic accepted {accepted}",
        )
        if channel:
            wait_for(
                lambda: daemon.channel_stats(topic, "ch").message_count >= accepted,
                30.0,
                f"every one of {accepted} messages reaching the channel",
            )
            spilled = daemon.channel_stats(topic, "ch").backend_depth
        # both daemons keep the messages in memory, or the row would compare disk queues
        check(spilled == 0, f"{spilled} messages went to disk: raise --mem-queue-size")
        return {key: tool.ops, f"{key}_count": tool.count}

    return run


def reader_on_backlog(daemon: Daemon, settings: Settings) -> Metrics:
    """bench_reader (RDY 2500, one connection per core) on a backlog of settings.backlog messages,
    all in memory before it starts; the backlog must outlast the window (else the rate would only
    say how big the backlog was)."""
    topic, channel, backlog = "read_bench", "ch", settings.backlog
    daemon.create_channel(topic, channel)
    publish_mpub(daemon.tcp_addr, topic, backlog, MPUB_BATCH, MSG_SIZE, time.monotonic() + 300)
    wait_for(
        lambda: daemon.channel_stats(topic, channel).depth >= backlog,
        60.0,
        f"a channel depth of {backlog}",
    )
    before = daemon.channel_stats(topic, channel)
    check(before.depth == backlog, f"backlog {before.depth}, not {backlog}")
    check(
        before.backend_depth == 0,
        f"{before.backend_depth} of the backlog on disk: raise --mem-queue-size",
    )
    tool = run_go_tool(
        settings, "bench_reader", daemon, f"--rdy={RDY}", f"--topic={topic}", f"--channel={channel}"
    )
    after = daemon.channel_stats(topic, channel)
    check(
        after.depth > 0,
        f"bench_reader drained the whole backlog of {backlog} ({tool.count} read): raise --backlog",
    )
    # what left the queue (delivered, in flight or finished) bounds what the reader counted; the
    # slack covers in-flight messages a daemon may requeue when the reader's connections close
    slack = RDY * (os.cpu_count() or 1)
    check(
        tool.count <= backlog - after.depth + slack,
        f"bench_reader counted {tool.count}, but only {backlog - after.depth} left the queue",
    )
    return {
        "reader": tool.ops,
        "reader_backlog": backlog,
        "reader_count": tool.count,
        "reader_left": after.depth,
    }


# -- our own clients -------------------------------------------------------------------------


def mpub_then_consume(daemon: Daemon, settings: Settings) -> Metrics:
    """200,000 messages by MPUB (batches of 200, one socket), then consumed with RDY 2500 + FIN."""
    deadline = time.monotonic() + 120.0
    pub_s = publish_mpub(daemon.tcp_addr, "mpub_bench", MPUB_TOTAL, MPUB_BATCH, MSG_SIZE, deadline)
    accepted = daemon.topic_message_count("mpub_bench")
    check(accepted == MPUB_TOTAL, f"the topic accepted {accepted} of {MPUB_TOTAL}")
    with Connection(daemon.tcp_addr) as conn:
        conn.identify(THROUGHPUT_IDENTIFY, deadline)
        start = time.perf_counter()
        conn.subscribe("mpub_bench", "ch", RDY, deadline)
        received = consume(conn, MPUB_TOTAL, deadline)
        sub_s = time.perf_counter() - start
    check(received == MPUB_TOTAL, f"consumed {received} of {MPUB_TOTAL} messages")
    return {"mpub200k_pub": MPUB_TOTAL / pub_s, "mpub200k_sub": MPUB_TOTAL / sub_s}


def upgraded_mpub(key: str, *, tls: bool, snappy: bool) -> Callable[[Daemon, Settings], Metrics]:
    """MPUB 200k (batches of 200) on one connection upgraded to TLS and/or snappy."""

    def run(daemon: Daemon, settings: Settings) -> Metrics:
        context = None
        if tls:
            if settings.certs is None:
                raise ToolError("no certificates")
            context = ssl.create_default_context(cafile=str(settings.certs.ca))
        topic = f"{key}_bench"
        deadline = time.monotonic() + 120.0
        with Connection(daemon.tcp_addr) as conn:
            reply = conn.upgrade(deadline, tls=context, snappy=snappy)
            seconds = publish_mpub_on(conn, topic, MPUB_TOTAL, MPUB_BATCH, MSG_SIZE, deadline)
        accepted = daemon.topic_message_count(topic)
        check(accepted == MPUB_TOTAL, f"the topic accepted {accepted} of {MPUB_TOTAL}")
        check(
            bool(reply.get("tls_v1")) == tls and bool(reply.get("snappy")) == snappy,
            f"IDENTIFY negotiated {reply}",
        )
        return {key: MPUB_TOTAL / seconds}

    return run


def client_processes(conns: int, cores: int) -> int:
    """How many client processes share a round-trip row's connections: one Python client is
    not to be the ceiling. One per four cores, at least two: on 16 cores two
    processes were saturated (4.0 CPU-seconds in a 2 s window) with either daemon at 32
    connections, so the row measured the clients; on 2 cores the row is as it was."""
    if conns == 1:
        return 1
    return min(conns, max(2, cores // 4))


def round_trips(
    key: str, kind: Kind, conns: int, per_request: int
) -> Callable[[Daemon, Settings], Metrics]:
    """Closed-loop round trips (one request in flight per connection) for --runfor: single PUBs
    over V2, or keep-alive HTTP POST /pub (one message) or /mpub (per_request messages)."""

    def run(daemon: Daemon, settings: Settings) -> Metrics:
        topic = f"{key}_bench"
        if kind == "v2":
            addr, request = daemon.tcp_addr, pub_command(topic, BODY)
        elif per_request == 1:
            addr, request = daemon.http_addr, http_request(f"/pub?topic={topic}", BODY)
        else:
            body = b"\n".join([BODY] * per_request)
            addr, request = daemon.http_addr, http_request(f"/mpub?topic={topic}", body)
        procs = client_processes(conns, os.cpu_count() or 1)
        cpu = daemon.cpu_seconds()
        result = closed_loop(addr, kind, request, conns, procs, settings.runfor_s)
        cpu = daemon.cpu_seconds() - cpu
        published = result.completed * per_request
        accepted = daemon.topic_message_count(topic)
        check(accepted == published, f"{published} acknowledged, the topic accepted {accepted}")
        return {
            key: published / result.seconds,
            f"{key}_count": published,
            f"{key}_cpu_us": cpu / max(published, 1) * 1e6,
            f"{key}_client_cpu_s": result.client_cpu_s,
        }

    return run


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
    """A steady PUB stream (another process) at latency_rate msgs/s; publish→deliver percentiles.
    Every message published must be delivered, and the publisher must have held the rate."""
    rate, seconds = settings.latency_rate, settings.latency_seconds
    total = int(rate * seconds)
    recorder = LatencyRecorder()
    ctx = multiprocessing.get_context("fork")
    results = ctx.Queue()
    deadline = time.monotonic() + seconds + 5.0
    with Connection(daemon.tcp_addr) as conn:
        conn.identify(LATENCY_IDENTIFY, deadline)
        conn.subscribe("lat_bench", "ch", RDY, deadline)
        args = (daemon.tcp_addr, "lat_bench", rate, seconds, MSG_SIZE, results)
        publisher = ctx.Process(target=paced_publisher_process, args=args, daemon=True)
        cpu = daemon.cpu_seconds()
        publisher.start()
        try:
            received = consume(conn, total, deadline, recorder)
        finally:
            publisher.join(timeout=10.0)
            if publisher.is_alive():
                publisher.kill()
        cpu = daemon.cpu_seconds() - cpu
    try:
        sent, acked, error = results.get(timeout=5.0)
    except queue.Empty:
        sent, acked, error = 0, 0, "the publisher process reported nothing"
    if error:
        raise Timeout(f"latency publisher: {error} (sent {sent}, acked {acked})")
    check(sent == total, f"the publisher sent {sent} of {total} in {seconds + 1:.0f}s")
    check(acked == sent, f"{acked} of {sent} PUBs acknowledged")
    check(received == sent, f"{received} of {sent} published messages delivered")
    check(bool(recorder.samples), "no messages after the warm-up")
    samples = sorted(recorder.samples)
    return {
        "latency_p50_us": percentile(samples, 0.50) / 1e3,
        "latency_p99_us": percentile(samples, 0.99) / 1e3,
        # a light steady load: what the loop's spin costs where each message comes alone
        "latency_cpu_us": cpu / max(received, 1) * 1e6,
        "latency_delivered": received,
        "latency_published": sent,
    }


def rss_after_1m(daemon: Daemon, settings: Settings) -> Metrics:
    """RSS idle, then with 1,000,000 messages of 200 bytes queued in memory on one channel."""
    time.sleep(0.5)
    idle_kib = daemon.rss_kib()
    deadline = time.monotonic() + 180.0
    with Connection(daemon.tcp_addr) as holder:
        holder.subscribe("rss_bench", "ch", 0, deadline)  # channel exists, RDY 0: messages stay
        publish_mpub(daemon.tcp_addr, "rss_bench", RSS_TOTAL, MPUB_BATCH, MSG_SIZE, deadline)
        wait_for(
            lambda: daemon.channel_stats("rss_bench", "ch").depth >= RSS_TOTAL,
            30.0,
            f"a channel depth of {RSS_TOTAL}",
        )
        queued = daemon.channel_stats("rss_bench", "ch")
        check(queued.depth == RSS_TOTAL, f"depth {queued.depth}, not {RSS_TOTAL}")
        check(queued.backend_depth == 0, f"{queued.backend_depth} on disk, not in memory")
        daemon.check_alive()
        rss_kib = daemon.rss_kib()
        peak_kib = daemon.peak_rss_kib()
    return {
        "rss_idle_mib": idle_kib / 1024,
        "rss_1m_mib": rss_kib / 1024,
        "rss_1m_peak_mib": peak_kib / 1024,
    }


def start_to_ping(target: str, settings: Settings) -> Metrics:
    """Process start → first answered GET /ping, the median of several fresh starts."""
    samples = [
        seconds_to_first_ping(target, settings.mem_queue_size, settings.bin_dir, settings.ours_cmd)
        for _ in range(settings.start_samples)
    ]
    return {
        "start_ping_ms": statistics.median(samples) * 1e3,
        "start_ping_min_ms": min(samples) * 1e3,
        "start_ping_max_ms": max(samples) * 1e3,
    }
