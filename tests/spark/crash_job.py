"""A streaming job run as its own process by test_spark_crash.py: NSQ -> foreachBatch, which
appends each micro-batch to Parquet. With --crash-batch K it writes batch K, then creates the
marker file and hangs inside the batch, so the test can kill the whole process tree mid-batch
(batch K is written but not committed to the checkpoint). Without it, it drains the topic
with Trigger.AvailableNow and exits."""

from __future__ import annotations

import argparse
import sys
import time
from pathlib import Path
from typing import Any

sys.path.insert(0, str(Path(__file__).resolve().parent))

from spark_support import build_session


def main() -> int:
    parser = argparse.ArgumentParser()
    for name in ("nsqd", "nsqd-http", "topic", "checkpoint", "out", "marker"):
        parser.add_argument(f"--{name}", required=True)
    parser.add_argument("--crash-batch", type=int, default=-1)
    args = parser.parse_args()

    spark = build_session("pyspark_nsq-crash-job")
    spark.sparkContext.setLogLevel("ERROR")
    marker = Path(args.marker)

    def sink(batch: Any, batch_id: int) -> None:
        batch.write.mode("append").parquet(args.out)
        if batch_id == args.crash_batch:
            marker.write_text(str(batch_id))
            time.sleep(600)  # killed here

    reader = (
        spark.readStream.format("nsq")
        .option("nsqd", args.nsqd)
        .option("nsqdHttp", args.nsqd_http)
        .option("topic", args.topic)
        .option("channel", "spark")
        .option("maxMessagesPerTrigger", "1000")
        .option("msgTimeoutMs", "3000")
        .option("availableNowIdleMs", "8000")
        .load()
    )
    writer = reader.writeStream.foreachBatch(sink).option("checkpointLocation", args.checkpoint)
    if args.crash_batch >= 0:
        query = writer.trigger(processingTime="100 milliseconds").start()
    else:
        query = writer.trigger(availableNow=True).start()
    query.awaitTermination(300)
    query.stop()
    spark.stop()
    return 0


if __name__ == "__main__":
    sys.exit(main())
