"""What a message costs when it crosses workers (ours with --workers): the publisher pinned to
one worker, the consumer to another, through their private links (`worker-K.link`: a
connection there stays in that worker). Give the same worker twice for the path inside one.

    python bench/across_workers.py --workers 2 --publish-in 1 --consume-in 0
    python bench/across_workers.py --workers 16 --publish-in 1 --consume-in 0 --repeat 3

Two figures each round, with the group's CPU (every worker and the supervisor, /proc):
- latency: a steady PUB stream at --rate for --seconds, PUB->deliver p50 and p99;
- backlog: --backlog messages published (MPUB 200) in one worker, then read and FIN'd by a
  consumer in the other: messages a second and CPU per message.
Medians of --repeat rounds, each on a fresh group. No reference daemon: the Go nsqd has no
workers (compare with bench/run.py's latency and bench_reader rows)."""

from __future__ import annotations

import argparse
import json
import multiprocessing
import multiprocessing.queues
import statistics
import sys
import time
from pathlib import Path

from clients import consume, paced_publisher_process, publish_mpub
from daemons import Daemon, start_daemon
from nsqv2 import Connection
from workloads import (
    LATENCY_IDENTIFY,
    MPUB_BATCH,
    MSG_SIZE,
    RDY,
    LatencyRecorder,
    check,
    percentile,
)

LINKS_WAIT_S = 15.0


def link_address(daemon: Daemon, worker: int) -> tuple[str, int]:
    """Worker `worker`'s private V2 address (the first line of its link file)."""
    path = Path(daemon.data_path) / f"worker-{worker}.link"
    host, _, port = path.read_text().split()[0].rpartition(":")
    return host, int(port)


def wait_for_links(daemon: Daemon, workers: int) -> None:
    deadline = time.monotonic() + LINKS_WAIT_S
    paths = [Path(daemon.data_path) / f"worker-{k}.link" for k in range(workers)]
    while not all(p.exists() for p in paths):
        check(time.monotonic() < deadline, f"the {workers} workers' link files never came")
        time.sleep(0.05)


def latency_round(
    daemon: Daemon, pub: tuple[str, int], sub: tuple[str, int], args: argparse.Namespace
) -> dict[str, float]:
    total = int(args.rate * args.seconds)
    recorder = LatencyRecorder()
    ctx = multiprocessing.get_context("fork")
    results: multiprocessing.queues.Queue[tuple[int, int, str | None]] = ctx.Queue()
    deadline = time.monotonic() + args.seconds + 10.0
    with Connection(sub) as conn:
        conn.identify(LATENCY_IDENTIFY, deadline)
        conn.subscribe("across_lat", "ch", RDY, deadline)
        time.sleep(0.3)  # the other workers' pulls start (their scan: 0.1 s)
        cpu = daemon.cpu_seconds()
        publisher = ctx.Process(
            target=paced_publisher_process,
            args=(pub, "across_lat", args.rate, args.seconds, MSG_SIZE, results),
            daemon=True,
        )
        publisher.start()
        received = consume(conn, total, deadline, recorder)
        publisher.join(timeout=10.0)
        cpu = daemon.cpu_seconds() - cpu
    sent, acked, error = results.get(timeout=5.0)
    check(not error and sent == acked == total, f"publisher: {error} ({acked}/{sent}/{total})")
    check(received == total, f"{received} of {total} delivered")
    samples = sorted(recorder.samples)
    return {
        "p50_us": percentile(samples, 0.50) / 1e3,
        "p99_us": percentile(samples, 0.99) / 1e3,
        "latency_cpu_us": cpu / total * 1e6,
    }


def backlog_round(
    daemon: Daemon, pub: tuple[str, int], sub: tuple[str, int], args: argparse.Namespace
) -> dict[str, float]:
    deadline = time.monotonic() + 120.0
    daemon.http_post("/topic/create?topic=across_bl")
    daemon.http_post("/channel/create?topic=across_bl&channel=ch")
    publish_mpub(pub, "across_bl", args.backlog, MPUB_BATCH, MSG_SIZE, deadline)
    with Connection(sub) as conn:
        cpu, start = daemon.cpu_seconds(), time.monotonic()
        conn.subscribe("across_bl", "ch", RDY, deadline)
        received = consume(conn, args.backlog, deadline)
        seconds = time.monotonic() - start
        cpu = daemon.cpu_seconds() - cpu
    check(received == args.backlog, f"{received} of {args.backlog} read")
    return {"read_per_s": received / seconds, "read_cpu_us": cpu / received * 1e6}


def main() -> int:
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    p.add_argument("--workers", type=int, default=2)
    p.add_argument("--publish-in", type=int, default=1, help="the publisher's worker")
    p.add_argument("--consume-in", type=int, default=0, help="the consumer's worker")
    p.add_argument("--rate", type=int, default=10_000, help="latency stream, msgs/s")
    p.add_argument("--seconds", type=float, default=3.0, help="latency stream length")
    p.add_argument("--backlog", type=int, default=1_000_000)
    p.add_argument("--repeat", type=int, default=3)
    p.add_argument("--results-dir", type=Path, default=Path(__file__).parent / "results")
    args = p.parse_args()
    check(args.workers >= 2, "--workers: 2 or more")
    for worker in (args.publish_in, args.consume_in):
        check(0 <= worker < args.workers, f"no worker {worker} in {args.workers}")
    rounds: list[dict[str, float]] = []
    for _ in range(args.repeat):
        flags = [f"--workers={args.workers}"]
        with start_daemon("ours", 10_000_000, extra_flags=flags) as daemon:
            wait_for_links(daemon, args.workers)
            pub = link_address(daemon, args.publish_in)
            sub = link_address(daemon, args.consume_in)
            row = latency_round(daemon, pub, sub, args) | backlog_round(daemon, pub, sub, args)
        print("  " + "  ".join(f"{k} {v:,.1f}" for k, v in row.items()), flush=True)
        rounds.append(row)
    where = f"--workers={args.workers}, published in {args.publish_in}, read in {args.consume_in}"
    print(f"row ({where}, medians of {len(rounds)})")
    medians = {key: statistics.median(r[key] for r in rounds) for key in rounds[0]}
    for key, label in [
        ("p50_us", f"PUB->deliver p50 @ {args.rate:,}/s (us)"),
        ("p99_us", "PUB->deliver p99 (us)"),
        ("latency_cpu_us", "  group CPU per message (us)"),
        ("read_per_s", f"backlog of {args.backlog:,} read (msgs/s)"),
        ("read_cpu_us", "  group CPU per message (us)"),
    ]:
        print(f"{label:44s} {medians[key]:12,.1f}")
    args.results_dir.mkdir(parents=True, exist_ok=True)
    stamp = time.strftime("%Y%m%dT%H%M%SZ", time.gmtime())
    path = args.results_dir / f"across-{stamp}.json"
    settings = {k: str(v) for k, v in vars(args).items()}
    path.write_text(json.dumps({"settings": settings, "rounds": rounds, "medians": medians}))
    print(f"results: {path}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
