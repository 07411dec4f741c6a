"""A child Spark job for test_spark_sink_dedupe.py: local[2,4] (tasks retried up to 4 times,
which the tests' shared local[2] session cannot do), a batch write to nsq whose task 0 fails on
its first attempt after publishing part of its rows: on attempt 0 the row `fail_at` gets a
2 MiB body, which nsqd (--max-msg-size 1 MiB, its default) refuses, so the task fails at that
row's chunk with the chunks before it published; the retry sends the row's usual body.

Usage: sink_retry_job.py NSQD_TCP NSQD_HTTP ROWS FAIL_AT TOPIC=DEDUPE [TOPIC=DEDUPE...]
(one write per TOPIC, with option dedupe=DEDUPE). Prints a JSON line when done."""

from __future__ import annotations

import json
import sys
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))

from spark_support import SPARK_CONF


def main() -> None:
    tcp, http, rows, fail_at = sys.argv[1:5]
    writes = [arg.split("=", 1) for arg in sys.argv[5:]]
    n, fail_row = int(rows), int(fail_at)
    from pyspark import TaskContext
    from pyspark.sql import SparkSession
    from pyspark.sql.functions import col, udf

    builder = SparkSession.builder.master("local[2,4]").appName("sink-retry")
    for key, value in SPARK_CONF.items():
        builder = builder.config(key, value)
    spark = builder.getOrCreate()
    spark.sparkContext.setLogLevel("ERROR")

    @udf("string")
    def body(i: int) -> str:
        ctx = TaskContext.get()
        if i == fail_row and ctx is not None and ctx.attemptNumber() == 0:
            return "x" * (2 * 1024 * 1024)
        return f"row-{i}"

    df = spark.range(0, n, 1, 2).select(body(col("id")).alias("body"))
    for topic, dedupe in writes:
        (
            df.write.format("nsq")
            .option("nsqd", tcp)
            .option("nsqdHttp", http)
            .option("topic", topic)
            .option("dedupe", dedupe)
            .option("batchSize", "100")
            .mode("append")
            .save()
        )
    spark.stop()
    print(json.dumps({"done": [topic for topic, _ in writes]}))


if __name__ == "__main__":
    main()
