"""The nsq sink: batch and streaming writes, topic column vs option, bad schemas."""

from __future__ import annotations

from collections import Counter
from pathlib import Path
from typing import Any

import pytest
from spark_support import Proc, drain, publish


def test_batch_write_round_trip(spark: Any, nsqd: Proc, topic: str) -> None:
    n = 5000
    df = spark.createDataFrame([(f"row-{i}",) for i in range(n)], "body string").repartition(3)
    (
        df.write.format("nsq")
        .option("nsqd", nsqd.tcp)
        .option("topic", topic)
        .option("batchSize", "700")
        .mode("append")
        .save()
    )
    got = drain(nsqd.tcp, topic, "check", n)
    assert sorted(got) == sorted(f"row-{i}".encode() for i in range(n))


def test_batch_write_topic_column_and_binary_body(spark: Any, nsqd: Proc, topic: str) -> None:
    a, b = f"{topic}_a", f"{topic}_b"
    rows = [(bytes([i % 256, 0, 255]) + b"%d" % i, a if i % 3 else b) for i in range(900)]
    df = spark.createDataFrame(rows, "body binary, topic string")
    df.write.format("nsq").option("nsqd", nsqd.tcp).mode("append").save()
    got_a = drain(nsqd.tcp, a, "check", 600)
    got_b = drain(nsqd.tcp, b, "check", 300)
    assert Counter(got_a) == Counter(body for body, t in rows if t == a)
    assert Counter(got_b) == Counter(body for body, t in rows if t == b)


def test_streaming_write_round_trip(spark: Any, nsqd: Proc, topic: str, tmp_path: Path) -> None:
    """NSQ topic -> nsq source -> nsq sink -> another topic, with Trigger.AvailableNow; the
    sink's `topic` option overrides the source's `topic` column (as Kafka's sink does)."""
    n = 3000
    sent = [b"stream-%d" % i for i in range(n)]
    publish(nsqd, topic, sent)
    target = f"{topic}_out"
    query = (
        spark.readStream.format("nsq")
        .option("nsqd", nsqd.tcp)
        .option("nsqdHttp", nsqd.http)
        .option("topic", topic)
        .option("channel", "spark")
        .option("maxMessagesPerTrigger", "1000")
        .option("availableNowIdleMs", "5000")
        .load()
        .writeStream.format("nsq")
        .option("nsqd", nsqd.tcp)
        .option("topic", target)
        .option("checkpointLocation", str(tmp_path / "ckpt"))
        .trigger(availableNow=True)
        .start()
    )
    assert query.awaitTermination(120)
    assert sum(p["numInputRows"] for p in query.recentProgress) == n
    got = drain(nsqd.tcp, target, "check", n)
    assert sorted(got) == sorted(sent)


@pytest.mark.parametrize(
    ("ddl", "options", "message"),
    [
        ("value string", {"topic": "t"}, "needs a 'body' column"),
        ("body int", {"topic": "t"}, "column 'body' must be binary or string"),
        ("body string, topic int", {}, "column 'topic' must be string"),
        ("body string", {}, "set option 'topic' or add a string 'topic' column"),
        ("body string", {"topic": "bad topic"}, "is not a valid NSQ name"),
        ("body string", {"topic": "t", "nsqd": "nowhere"}, "expected host:port"),
    ],
)
def test_sink_rejects_bad_schema(
    spark: Any, nsqd: Proc, ddl: str, options: dict[str, str], message: str
) -> None:
    df = spark.createDataFrame([], ddl)
    writer = df.write.format("nsq").option("nsqd", nsqd.tcp).mode("append")
    for key, value in options.items():
        writer = writer.option(key, value)
    with pytest.raises(Exception, match=message):
        writer.save()


def test_sink_reports_null_body_and_refused_publish(spark: Any, nsqd: Proc, topic: str) -> None:
    df = spark.createDataFrame([("a",), (None,)], "body string").coalesce(1)
    with pytest.raises(Exception, match="a row has a null body"):
        df.write.format("nsq").option("nsqd", nsqd.tcp).option("topic", topic).mode("append").save()
    big = spark.createDataFrame([("x" * 2_000_000,)], "body string")
    with pytest.raises(Exception, match="failed after publishing 0 messages"):
        big.write.format("nsq").option("nsqd", nsqd.tcp).option("topic", topic).mode(
            "append"
        ).save()
