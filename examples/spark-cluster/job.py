"""The streaming job of cluster.py, run as its own driver against the standalone master:
NSQ (via nsqlookupd) -> Parquet with a checkpoint, until every expected message is in the
output (or --timeout). Prints one JSON line with rows, missing, duplicates and rows/s."""

from __future__ import annotations

import argparse
import datetime as dt
import json
import os
import sys
import time
from pathlib import Path
from typing import Any


def session(args: argparse.Namespace) -> Any:
    from pyspark.sql import SparkSession

    builder = (
        SparkSession.builder.master(args.master)
        .appName("nsq-to-parquet")
        .config("spark.driver.host", "127.0.0.1")
        .config("spark.driver.bindAddress", "127.0.0.1")
        .config("spark.ui.enabled", "false")
        .config("spark.executor.cores", "1")
        .config("spark.cores.max", str(args.executors))
        .config("spark.pyspark.python", sys.executable)
        .config("spark.executorEnv.PYTHONPATH", os.environ.get("PYTHONPATH", ""))
        .config("spark.sql.shuffle.partitions", "2")
    )
    return builder.getOrCreate()


def parse_ts(text: str) -> float:
    return dt.datetime.fromisoformat(text.replace("Z", "+00:00")).timestamp()


def parse_args() -> argparse.Namespace:
    parser = argparse.ArgumentParser()
    for name in ("master", "topic", "lookupd", "out", "checkpoint"):
        parser.add_argument(f"--{name}", required=True)
    parser.add_argument("--expected", type=int, required=True)
    parser.add_argument("--executors", type=int, default=2)
    parser.add_argument("--timeout", type=float, default=600)
    parser.add_argument("--option", action="append", default=[])
    parser.add_argument("--signal-after", type=int, default=0)
    parser.add_argument("--signal-file", default="")
    return parser.parse_args()


def start_query(spark: Any, args: argparse.Namespace) -> Any:
    reader = (
        spark.readStream.format("nsq")
        .option("lookupd", args.lookupd)
        .option("topic", args.topic)
        .option("channel", "spark")
        .option("lookupdPollIntervalMs", "2000")
    )
    for option in args.option:
        key, _, value = option.partition("=")
        reader = reader.option(key, value)
    return (
        reader.load()
        .writeStream.format("parquet")
        .option("path", args.out)
        .option("checkpointLocation", args.checkpoint)
        .start()
    )


def follow(spark: Any, query: Any, args: argparse.Namespace) -> tuple[dict, float | None]:
    """Collect every batch's progress until every expected message is in the output (then
    the time), or --timeout (None). Creates --signal-file once --signal-after rows are in."""
    batches: dict[int, dict[str, Any]] = {}
    signalled = False
    deadline = time.monotonic() + args.timeout
    while time.monotonic() < deadline:
        if query.exception() is not None:
            raise RuntimeError(str(query.exception()))
        for p in query.recentProgress:
            batches[p["batchId"]] = p
        total = sum(p["numInputRows"] for p in batches.values())
        if args.signal_after and not signalled and total >= args.signal_after:
            Path(args.signal_file).write_text("now")
            signalled = True
        if total >= args.expected:
            if spark.read.parquet(args.out).select("body").distinct().count() >= args.expected:
                return batches, time.time()
            time.sleep(2.0)
        time.sleep(0.25)
    return batches, None


def rates(batches: dict[int, dict[str, Any]], started: float) -> dict[str, Any]:
    """rows/s from the first batch's start, and without the first batch (which also starts
    the executors' Python workers)."""
    with_rows = sorted(
        (p for p in batches.values() if p["numInputRows"]), key=lambda p: p["batchId"]
    )
    spans = [
        (
            parse_ts(p["timestamp"]),
            parse_ts(p["timestamp"]) + p["durationMs"]["triggerExecution"] / 1000,
            p["numInputRows"],
        )
        for p in with_rows
    ]
    first = spans[0][0] if spans else started
    last = spans[-1][1] if spans else started
    steady = None
    if len(spans) > 1 and last > spans[0][1]:
        steady = sum(n for _, _, n in spans[1:]) / (last - spans[0][1])
    total = sum(n for _, _, n in spans)
    return {
        "batches": len(spans),
        "rows_per_s": round(total / (last - first)) if last > first else None,
        "steady_rows_per_s": round(steady) if steady else None,
        "max_batch": max((n for _, _, n in spans), default=0),
    }


def main() -> int:
    args = parse_args()
    spark = session(args)
    spark.sparkContext.setLogLevel("ERROR")
    started = time.time()
    query = start_query(spark, args)
    batches, done_at = follow(spark, query, args)
    query.stop()
    with open("progress.jsonl", "w") as f:  # the work directory (cluster.py --keep)
        for p in sorted(batches.values(), key=lambda p: p["batchId"]):
            f.write(json.dumps(p, default=str) + "\n")
    rows = spark.read.parquet(args.out)
    n_rows = rows.count()
    heads = {
        int(bytes(r.head)[:10])
        for r in rows.selectExpr("substring(body, 1, 10) as head").distinct().collect()
    }
    result = {
        "rows": n_rows,
        "missing": len(set(range(args.expected)) - heads),
        "duplicates": n_rows - len(heads),
        "distinct_nsqd_id": rows.select("nsqd", "id").distinct().count(),
        "elapsed_s": round((done_at or time.time()) - started, 1),
        **rates(batches, started),
        "timed_out": done_at is None,
    }
    print(json.dumps(result), flush=True)
    spark.stop()
    return 0


if __name__ == "__main__":
    sys.exit(main())
