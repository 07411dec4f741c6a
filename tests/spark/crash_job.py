"""A streaming job run as its own process by test_spark_crash.py: NSQ -> foreachBatch, which
appends each micro-batch to Parquet. With --crash-batch K it writes batch K, then creates the
marker file and hangs inside the batch, so the test can kill the whole process tree mid-batch
(batch K is written but not committed to the checkpoint). Without it, it drains the topic
with Trigger.AvailableNow and exits; the test restarts the query with start_query() in its own
session instead (the same query on the same checkpoint, without a second JVM's start)."""

from __future__ import annotations

import argparse
import sys
import time
from pathlib import Path
from typing import Any

sys.path.insert(0, str(Path(__file__).resolve().parent))

from spark_support import build_session


def start_query(
    spark: Any,
    nsqd: str,
    nsqd_http: str,
    topic: str,
    checkpoint: str,
    out: str,
    crash_batch: int = -1,
    marker: Path | None = None,
) -> Any:
    """The job's query: with `crash_batch` >= 0 a trigger every 100 ms that hangs in that
    batch once it is written (after creating `marker`); otherwise availableNow."""

    def sink(batch: Any, batch_id: int) -> None:
        batch.write.mode("append").parquet(out)
        if batch_id == crash_batch:
            assert marker is not None
            marker.write_text(str(batch_id))
            time.sleep(600)  # killed here

    reader = (
        spark.readStream.format("nsq")
        .option("nsqd", nsqd)
        .option("nsqdHttp", nsqd_http)
        .option("topic", topic)
        .option("channel", "spark")
        .option("maxMessagesPerTrigger", "1000")
        .option("msgTimeoutMs", "3000")
        .option("availableNowIdleMs", "8000")
        .load()
    )
    writer = reader.writeStream.foreachBatch(sink).option("checkpointLocation", checkpoint)
    if crash_batch >= 0:
        return writer.trigger(processingTime="100 milliseconds").start()
    return writer.trigger(availableNow=True).start()


def main() -> int:
    parser = argparse.ArgumentParser()
    for name in ("nsqd", "nsqd-http", "topic", "checkpoint", "out", "marker"):
        parser.add_argument(f"--{name}", required=True)
    parser.add_argument("--crash-batch", type=int, default=-1)
    args = parser.parse_args()

    spark = build_session("pyspark_nsq-crash-job")
    spark.sparkContext.setLogLevel("ERROR")
    query = start_query(
        spark,
        args.nsqd,
        args.nsqd_http,
        args.topic,
        args.checkpoint,
        args.out,
        args.crash_batch,
        Path(args.marker),
    )
    query.awaitTermination(300)
    query.stop()
    spark.stop()
    return 0


if __name__ == "__main__":
    sys.exit(main())
