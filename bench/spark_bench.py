"""Benchmark of the PySpark connector (pyspark_nsq) against a local nsqd; not run in CI.

    python bench/spark_bench.py [--messages 100000] [--size 200] [--rdy 2500,20000]
                                [--rate 2,500] [--duration 10] [--daemon ours|reference]

Starts one nsqd on free 127.0.0.1 ports (ours by default, `--max-rdy-count` raised to the
largest --rdy) and one local[2] Spark session, then prints:

  NSQ -> Parquet     rows/s of a Trigger.AvailableNow query draining --messages messages of
                     --size bytes into Parquet, once per in-flight window (--rdy), FINs included;
                     then into the noop sink (the source's own ceiling) with the largest window
  DataFrame -> NSQ   rows/s of a batch write (df.write.format("nsq")) and of a streaming write
                     (NSQ source -> nsq sink, availableNow) of --messages rows; each is drained
                     from a channel created beforehand and must hold exactly --messages
  latency            publish -> row latency: a publisher PUBs --rate messages/s for --duration
                     seconds carrying its clock; a foreachBatch query (trigger 0 s) notes when
                     each row reaches the driver; p50/p90/p99/max

Every row checks its own count (rows read, messages written, rows seen) and stops the run with
an AssertionError naming the row when it does not add up.
"""

from __future__ import annotations

import argparse
import os
import shutil
import statistics
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

REPO = Path(__file__).resolve().parents[1]
sys.path[:0] = [str(REPO), str(REPO / "tests" / "spark")]

from spark_support import (  # noqa: E402
    build_session,
    drain,
    publish,
    spark_env,
    start_process,
    wait_until,
)


def nsq_source(spark: Any, nsqd: Any, topic: str, **options: str) -> Any:
    reader = (
        spark.readStream.format("nsq")
        .option("nsqd", nsqd.tcp)
        .option("nsqdHttp", nsqd.http)
        .option("topic", topic)
        .option("channel", "bench")
        .option("availableNowIdleMs", "3000")
    )
    for key, value in options.items():
        reader = reader.option(key, value)
    return reader.load()


def create_channel(nsqd: Any, topic: str, channel: str) -> None:
    import urllib.request

    paths = (f"/topic/create?topic={topic}", f"/channel/create?topic={topic}&channel={channel}")
    for path in paths:
        request = urllib.request.Request(f"http://{nsqd.http}{path}", method="POST")
        urllib.request.urlopen(request, timeout=10).close()


def bench_read(
    spark: Any, nsqd: Any, tmp: Path, messages: int, size: int, rdy: int, sink: str = "parquet"
) -> float:
    topic = f"read_{sink}_{rdy}_{int(time.time())}"
    body = b"x" * size
    publish(nsqd, topic, [body] * messages)
    out = tmp / topic
    started = time.perf_counter()
    # rdy = the whole in-flight window, on one connection (nsqd's --max-rdy-count is raised)
    query = (
        nsq_source(spark, nsqd, topic, rdy=str(rdy), maxInFlight=str(rdy))
        .writeStream.format(sink)
        .option("path", str(out / "data"))
        .option("checkpointLocation", str(out / "ckpt"))
        .trigger(availableNow=True)
        .start()
    )
    query.awaitTermination(900)
    elapsed = time.perf_counter() - started
    rows = sum(p["numInputRows"] for p in query.recentProgress)
    batches = sum(1 for p in query.recentProgress if p["numInputRows"])
    assert rows == messages, f"read {rows} of {messages}"
    print(
        f"  NSQ -> {sink:<8} rdy {rdy:>6}: {messages / elapsed:>9,.0f} rows/s "
        f"({messages:,} rows, {batches} batches, {elapsed:.1f} s wall incl. query start)"
    )
    return messages / elapsed


def bench_write(spark: Any, nsqd: Any, tmp: Path, messages: int, size: int) -> None:
    from pyspark.sql import functions as F

    topic = f"write_{int(time.time())}"
    for channel in ("check", "bench"):  # both see every message written
        create_channel(nsqd, topic, channel)
    df = spark.range(messages, numPartitions=2).select(
        F.concat(F.col("id").cast("string"), F.lit("x" * size)).alias("body")
    )
    df.cache().count()
    started = time.perf_counter()
    df.write.format("nsq").option("nsqd", nsqd.tcp).option("topic", topic).mode("append").save()
    elapsed = time.perf_counter() - started
    print(
        f"  DataFrame -> NSQ batch write:  {messages / elapsed:>9,.0f} rows/s "
        f"({messages:,} rows, {elapsed:.2f} s)"
    )
    df.unpersist()
    # every row written must be in the topic exactly once (drain's settle catches extras)
    written = drain(nsqd.tcp, topic, "check", messages, timeout=300)
    assert len(written) == messages, f"batch write: {len(written)} messages of {messages} rows"

    target = f"{topic}_s"
    create_channel(nsqd, target, "check")  # so the sink's messages are kept for the count below
    started = time.perf_counter()
    query = (
        nsq_source(spark, nsqd, topic, rdy="20000", maxInFlight="20000")
        .writeStream.format("nsq")
        .option("nsqd", nsqd.tcp)
        .option("topic", target)
        .option("checkpointLocation", str(tmp / "wckpt"))
        .trigger(availableNow=True)
        .start()
    )
    query.awaitTermination(900)
    elapsed = time.perf_counter() - started
    batches = sum(1 for p in query.recentProgress if p["numInputRows"])
    rows = sum(p["numInputRows"] for p in query.recentProgress)
    assert query.exception() is None, f"streaming write failed: {query.exception()}"
    assert rows == messages, f"streaming write: the source read {rows} of {messages} rows"
    arrived = drain(nsqd.tcp, target, "check", messages, timeout=300)
    assert len(arrived) == messages, f"streaming write: {len(arrived)} of {messages} arrived"
    print(
        f"  NSQ -> NSQ streaming write:    {messages / elapsed:>9,.0f} rows/s "
        f"({batches} batches, {elapsed:.1f} s wall incl. query start)"
    )


def bench_latency(spark: Any, nsqd: Any, tmp: Path, rate: int, duration: float) -> None:
    from pyspark_nsq.addresses import Address
    from pyspark_nsq.conn import Publisher

    topic = f"latency_{int(time.time())}"
    publish(nsqd, topic, [b"warmup"])
    latencies: list[float] = []

    def sink(batch: Any, batch_id: int) -> None:
        now = time.time()
        for row in batch.select("body").collect():
            body = bytes(row.body)
            if body != b"warmup":
                latencies.append(now - float(body.decode()))

    query = (
        nsq_source(spark, nsqd, topic)
        .writeStream.foreachBatch(sink)
        .option("checkpointLocation", str(tmp / f"lckpt{rate}"))
        .trigger(processingTime="0 seconds")
        .start()
    )
    wait_until(
        lambda: query.lastProgress is not None and query.lastProgress["numInputRows"],
        120,
        0.2,
        "the query's first batch",
    )
    sent = max(1, int(rate * duration))
    with Publisher(Address.parse(nsqd.tcp)) as pub:
        start = time.perf_counter()
        for i in range(sent):
            delay = start + i / rate - time.perf_counter()
            if delay > 0:
                time.sleep(delay)
            pub.publish(topic, repr(time.time()).encode())
    wait_until(lambda: len(latencies) >= sent, 60, 0.1, "every published row")
    query.stop()
    assert len(latencies) == sent, f"latency: {len(latencies)} rows for {sent} published"
    ms = sorted(x * 1000 for x in latencies)
    pct = statistics.quantiles(ms, n=100, method="inclusive")
    progress = [
        p["durationMs"]["triggerExecution"] for p in query.recentProgress if p["numInputRows"]
    ]
    print(
        f"  publish -> row at {rate}/s for {duration:.0f} s ({sent} rows): "
        f"p50 {pct[49]:.0f} ms, p90 {pct[89]:.0f} ms, p99 {pct[98]:.0f} ms, max {ms[-1]:.0f} ms"
        f"; micro-batch median {statistics.median(progress):.0f} ms"
    )


def main() -> int:
    parser = argparse.ArgumentParser(
        description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    parser.add_argument("--messages", type=int, default=100_000)
    parser.add_argument("--size", type=int, default=200)
    parser.add_argument("--rdy", default="2500,20000", help="in-flight windows to measure")
    parser.add_argument("--rate", default="2,500", help="publish rates (msgs/s) for latency")
    parser.add_argument("--duration", type=float, default=10.0)
    parser.add_argument("--daemon", choices=("ours", "reference"), default="ours")
    parser.add_argument("--only", default="read,write,latency")
    args = parser.parse_args()
    windows = [int(x) for x in args.rdy.split(",")]
    only = set(args.only.split(","))

    os.environ.update(spark_env())
    if args.daemon == "ours":
        command = [sys.executable, "-m", "nsqd"]
    else:
        command = [str(REPO / ".reference" / "bin" / "nsqd")]
    nsqd = start_process(
        "bench-nsqd",
        command,
        [f"--max-rdy-count={max([*windows, 20000])}", "--mem-queue-size=1000000"],
    )
    tmp = Path(tempfile.mkdtemp(prefix="spark-bench-"))
    started = time.perf_counter()
    os.environ["PYSPARK_SUBMIT_ARGS"] = "--conf spark.ui.showConsoleProgress=false pyspark-shell"
    spark = build_session("pyspark_nsq-bench")
    spark.sparkContext.setLogLevel("ERROR")
    print(
        f"{args.daemon} nsqd at {nsqd.tcp}; Spark session up in "
        f"{time.perf_counter() - started:.1f} s; {os.cpu_count()} cores"
    )
    try:
        if "read" in only:
            for rdy in windows:
                bench_read(spark, nsqd, tmp, args.messages, args.size, rdy)
            bench_read(spark, nsqd, tmp, args.messages, args.size, max(windows), "noop")
        if "write" in only:
            bench_write(spark, nsqd, tmp, args.messages, args.size)
        if "latency" in only:
            for rate in (int(x) for x in args.rate.split(",")):
                bench_latency(spark, nsqd, tmp, rate, args.duration)
    finally:
        spark.stop()
        nsqd.stop()
        shutil.rmtree(tmp, ignore_errors=True)
    return 0


if __name__ == "__main__":
    sys.exit(main())
