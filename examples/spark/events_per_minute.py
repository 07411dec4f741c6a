"""Count events per minute and kind from an NSQ topic into Parquet, with PySpark 4.

Each message body is a JSON event such as {"ts": "2026-01-01T10:00:05Z", "kind": "click"}.
Minutes are written to Parquet once the watermark (newest event time seen - 1 minute) has
passed their end, so each (minute, kind) row is final and written exactly once.

    pip install -e '.[spark]'
    python -m nsqd --tcp-address=127.0.0.1:4150 --http-address=127.0.0.1:4151 &
    python examples/spark/publish_events.py --nsqd 127.0.0.1:4150 --topic events
    python examples/spark/events_per_minute.py --nsqd 127.0.0.1:4150 --topic events \\
        --out /tmp/events_per_minute --checkpoint /tmp/events_ckpt --available-now

It prints the Parquet table at the end (minute, kind, events).

Without --available-now the query runs until interrupted. Messages are FINed on nsqd only after
Spark has committed the micro-batch that holds them, so a restart with the same --checkpoint
loses nothing (at-least-once from NSQ; the windowed counts themselves are checkpointed)."""

from __future__ import annotations

import argparse
import os
import sys
from typing import Any

EVENT_SCHEMA = "ts timestamp, kind string, user long"


def events_per_minute(
    spark: Any, nsqd: str, topic: str, channel: str = "events_per_minute", **options: str
) -> Any:
    """The streaming DataFrame: minute, kind, events."""
    from pyspark.sql import functions as F

    reader = (
        spark.readStream.format("nsq")  # pyspark_nsq, found by Spark without a register()
        .option("nsqd", nsqd)
        .option("topic", topic)
        .option("channel", channel)
        .option("maxMessagesPerTrigger", "20000")
    )
    for key, value in options.items():
        reader = reader.option(key, value)
    events = (
        reader.load()
        .select(F.from_json(F.col("body").cast("string"), EVENT_SCHEMA).alias("e"))
        .select("e.*")
        .where(F.col("ts").isNotNull())
    )
    return (
        events.withWatermark("ts", "1 minute")
        .groupBy(F.window("ts", "1 minute"), "kind")
        .agg(F.count("*").alias("events"))
        .select(F.col("window.start").alias("minute"), "kind", "events")
    )


def start(spark: Any, args: argparse.Namespace, **options: str) -> Any:
    writer = (
        events_per_minute(spark, args.nsqd, args.topic, args.channel, **options)
        .writeStream.format("parquet")
        .outputMode("append")
        .option("path", args.out)
        .option("checkpointLocation", args.checkpoint)
    )
    if args.available_now:
        return writer.trigger(availableNow=True).start()
    return writer.trigger(processingTime="10 seconds").start()


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--nsqd", default="127.0.0.1:4150", help="nsqd TCP address(es)")
    parser.add_argument("--topic", default="events")
    parser.add_argument("--channel", default="events_per_minute")
    parser.add_argument("--out", required=True, help="Parquet output directory")
    parser.add_argument("--checkpoint", required=True)
    parser.add_argument(
        "--available-now", action="store_true", help="process what is queued now, then exit"
    )
    args = parser.parse_args()

    os.environ.setdefault("PYSPARK_PYTHON", sys.executable)  # workers need pyarrow too
    from pyspark.sql import SparkSession

    spark = (
        SparkSession.builder.appName("events_per_minute")
        .config("spark.sql.session.timeZone", "UTC")
        .getOrCreate()
    )
    query = start(spark, args)
    try:
        query.awaitTermination()
    except KeyboardInterrupt:
        query.stop()
    spark.read.parquet(args.out).orderBy("minute", "kind").show(50, truncate=False)
    spark.stop()
    return 0


if __name__ == "__main__":
    sys.exit(main())
