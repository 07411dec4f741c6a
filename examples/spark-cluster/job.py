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


def main() -> int:
    parser = argparse.ArgumentParser()
    for name in ("master", "topic", "lookupd", "out", "checkpoint"):
        parser.add_argument(f"--{name}", required=True)
    parser.add_argument("--expected", type=int, required=True)
    parser.add_argument("--executors", type=int, default=2)
    parser.add_argument("--timeout", type=float, default=600)
    parser.add_argument("--option", action="append", default=[])
    parser.add_argument("--signal-after", type=int, default=0)
    parser.add_argument("--signal-file", default="")
    args = parser.parse_args()

    spark = session(args)
    spark.sparkContext.setLogLevel("ERROR")
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
    started = time.time()
    query = (
        reader.load()
        .writeStream.format("parquet")
        .option("path", args.out)
        .option("checkpointLocation", args.checkpoint)
        .start()
    )
    batches: dict[int, dict[str, Any]] = {}
    signalled = False
    done_at = None
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
            distinct = spark.read.parquet(args.out).select("body").distinct().count()
            if distinct >= args.expected:
                done_at = time.time()
                break
            time.sleep(2.0)
        time.sleep(0.25)
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
    keys = rows.select("nsqd", "id").distinct().count()
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
    # Without the first batch, which also starts the executors' Python workers.
    steady = (
        sum(n for _, _, n in spans[1:]) / (last - spans[0][1])
        if len(spans) > 1 and last > spans[0][1]
        else None
    )
    result = {
        "rows": n_rows,
        "missing": len(set(range(args.expected)) - heads),
        "duplicates": n_rows - len(heads),
        "distinct_nsqd_id": keys,
        "batches": len(with_rows),
        "elapsed_s": round((done_at or time.time()) - started, 1),
        "rows_per_s": round(n_rows / (last - first)) if last > first else None,
        "steady_rows_per_s": round(steady) if steady else None,
        "max_batch": max((n for _, _, n in spans), default=0),
        "timed_out": done_at is None,
    }
    print(json.dumps(result), flush=True)
    spark.stop()
    return 0


if __name__ == "__main__":
    sys.exit(main())
