"""The nsq streaming source in a real local Spark session against our nsqd."""

from __future__ import annotations

import time
from pathlib import Path
from typing import Any

import pytest
from spark_support import Proc, channel_stats, publish, read_trace, wait_until

from pyspark_nsq.schema import SOURCE_DDL

N = 10_000


def bodies(n: int, prefix: str = "event") -> list[bytes]:
    return [b'{"%s":%d}' % (prefix.encode(), i) for i in range(n)]


def source(spark: Any, nsqd: Proc, topic: str, **options: str) -> Any:
    reader = (
        spark.readStream.format("nsq")  # found by Spark's pyspark_* scan: no register()
        .option("nsqd", nsqd.tcp)
        .option("nsqdHttp", nsqd.http)
        .option("topic", topic)
        .option("channel", "spark")
    )
    for key, value in options.items():
        reader = reader.option(key, value)
    return reader.load()


def committed_rows(spark: Any, out: Path) -> Any:
    if not (out / "_spark_metadata").exists():
        return None
    return spark.read.schema(SOURCE_DDL).parquet(str(out))


def count_rows(spark: Any, out: Path) -> int:
    df = committed_rows(spark, out)
    return 0 if df is None else df.count()


def to_parquet(reader: Any, out: Path, ckpt: Path) -> Any:
    """A streaming query of `reader` into Parquet at `out`, a trigger every 200 ms."""
    return (
        reader.writeStream.format("parquet")
        .option("path", str(out))
        .option("checkpointLocation", str(ckpt))
        .trigger(processingTime="200 milliseconds")
        .start()
    )


def stop(query: Any) -> None:
    query.stop()
    query.awaitTermination(30)


def test_stream_10k_into_parquet_exactly_once(
    spark: Any, nsqd: Proc, topic: str, tmp_path: Path, report: Any
) -> None:
    """Messages published while the query runs land in Parquet once each, with every column."""
    out, ckpt = tmp_path / "out", tmp_path / "ckpt"
    publish(nsqd, topic, bodies(1))  # the topic exists before the channel: nothing is lost
    query = to_parquet(source(spark, nsqd, topic), out, ckpt)
    try:
        expected = bodies(N)
        publish(nsqd, topic, expected[1:])
        started = time.monotonic()
        wait_until(lambda: count_rows(spark, out) >= N, 120, 1.0, f"{N} rows in parquet")
        elapsed = time.monotonic() - started
    finally:
        stop(query)
    df = spark.read.parquet(str(out))
    rows = df.collect()
    assert len(rows) == N
    assert len({r.id for r in rows}) == N
    assert sorted(bytes(r.body) for r in rows) == sorted(expected)
    assert {(r.topic, r.channel, r.attempts) for r in rows} == {(topic, "spark", 1)}
    assert all(r.timestamp is not None for r in rows)
    assert len(rows[0].id) == 16
    report(f"clean run: {N} rows NSQ -> parquet in {elapsed:.1f}s, 0 duplicates, 0 missing")


def test_available_now_read_limit_and_fin(
    spark: Any, nsqd: Proc, topic: str, tmp_path: Path, trace_path: Path
) -> None:
    """availableNow drains what was there at the start, in batches of at most
    maxMessagesPerTrigger, ends by itself and leaves every message FINed; messages published
    after the start are handed back to nsqd (requeued once), not read."""
    n = 3000
    publish(nsqd, topic, bodies(n))
    out, ckpt = tmp_path / "out", tmp_path / "ckpt"
    query = (
        source(spark, nsqd, topic, maxMessagesPerTrigger="1000", availableNowIdleMs="5000")
        .writeStream.format("parquet")
        .option("path", str(out))
        .option("checkpointLocation", str(ckpt))
        .trigger(availableNow=True)
        .start()
    )
    wait_until(
        lambda: query.lastProgress and query.lastProgress["numInputRows"],
        60,
        0.1,
        "the first batch",
    )
    publish(nsqd, topic, [b"after-start"] * 300)  # after the run's target: left for later
    assert query.awaitTermination(120), "availableNow query did not end"
    sizes = [p["numInputRows"] for p in query.recentProgress if p["numInputRows"]]
    assert sum(sizes) == n
    assert max(sizes) <= 1000 and len(sizes) >= 3
    df = spark.read.parquet(str(out))
    assert df.count() == n and df.select("id").distinct().count() == n
    events = read_trace(trace_path, topic)
    # our nsqd: the executors take the messages, the driver finishes their leases
    assert next(e["executor_nsqds"] for e in events if e["event"] == "latestOffset") == [nsqd.tcp]
    fins = sum(e.get("fin", 0) + e.get("leased_fin", 0) for e in events)
    assert fins == n, "every message FINed after its commit"
    stats = channel_stats(nsqd, topic, "spark")
    if stats is not None:  # nsqd's HTTP API answers
        targets = [e["target"] for e in events if e["event"] in ("target", "executor_target")]
        assert targets == [0, n]  # driver-side, executor-side
        wait_until(
            lambda: channel_stats(nsqd, topic, "spark")["in_flight_count"] == 0,
            10,
            0.1,
            "the late messages requeued",
        )
        stats = channel_stats(nsqd, topic, "spark")
        assert (stats["depth"], stats["timeout_count"]) == (300, 0)
        assert stats["requeue_count"] <= 300, "late messages requeued more than once each"


def test_stop_and_restart_from_checkpoint(
    spark: Any, nsqd: Proc, topic: str, tmp_path: Path, report: Any
) -> None:
    """Stopping mid-stream and restarting from the checkpoint loses nothing; the batch that
    was committed but not yet FINed comes back from nsqd (at-least-once)."""
    # 6,000, not N: the stop is asked for at 2,000 rows (it has come up to 2,000 rows later),
    # so the restart still reads batches after the one it replays; the count is not tested.
    n = 6000
    publish(nsqd, topic, bodies(n))
    out, ckpt = tmp_path / "out", tmp_path / "ckpt"

    def start() -> Any:
        return (
            source(spark, nsqd, topic, maxMessagesPerTrigger="1000", msgTimeoutMs="3000")
            .writeStream.format("parquet")
            .option("path", str(out))
            .option("checkpointLocation", str(ckpt))
            .trigger(processingTime="100 milliseconds")
            .start()
        )

    query = start()
    try:
        wait_until(lambda: count_rows(spark, out) >= 2000, 90, 0.5, "2000 rows before stop")
    finally:
        stop(query)
    before = count_rows(spark, out)
    assert before < n, "stopped too late to test anything"
    query = start()
    try:
        wait_until(
            lambda: (
                (d := committed_rows(spark, out)) is not None
                and d.select("id").distinct().count() >= n
            ),
            120,
            1.0,
            f"all {n} ids after restart",
        )
    finally:
        stop(query)
    rows = spark.read.parquet(str(out)).collect()
    got = [bytes(r.body) for r in rows]
    assert set(got) == set(bodies(n)), "a message is missing after restart"
    duplicates = len(got) - len(set(got))
    report(
        f"stop/restart: {before} rows before the stop, {len(got)} rows in total, "
        f"{duplicates} duplicates (redelivered after the stop)"
    )
    assert duplicates <= 2000


def test_bad_source_options_and_schema(spark: Any, nsqd: Proc, topic: str, tmp_path: Path) -> None:
    def run(df: Any) -> None:
        query = df.writeStream.format("noop").trigger(availableNow=True).start()
        try:
            query.awaitTermination(60)
        finally:
            query.stop()

    with pytest.raises(Exception, match="option 'channel' is required"):
        run(spark.readStream.format("nsq").option("nsqd", nsqd.tcp).option("topic", topic).load())
    with pytest.raises(Exception, match="unknown column 'value'"):
        run(
            spark.readStream.format("nsq")
            .schema("value binary")
            .option("nsqd", nsqd.tcp)
            .option("topic", topic)
            .option("channel", "c")
            .load()
        )
    with pytest.raises(Exception, match="is not a valid NSQ name"):
        run(
            spark.readStream.format("nsq")
            .option("nsqd", nsqd.tcp)
            .option("topic", "a b")
            .option("channel", "c")
            .load()
        )
    with pytest.raises(
        Exception,
        match=r"(?i)unknown option 'maxMessagesPerTriger'; the valid "
        r"ones are nsqd, nsqdHttp, lookupd, topic, channel, maxMessagesPerTrigger",
    ):
        run(
            spark.readStream.format("nsq")
            .option("nsqd", nsqd.tcp)
            .option("topic", topic)
            .option("channel", "c")
            .option("maxMessagesPerTriger", "10")
            .load()
        )
    with pytest.raises(Exception, match=r"(?i)nsq sink: unknown option 'batchsise'"):
        (
            spark.createDataFrame([("x",)], "body string")
            .write.format("nsq")
            .option("nsqd", nsqd.tcp)
            .option("topic", topic)
            .option("batchSise", "10")
            .mode("append")
            .save()
        )
    with pytest.raises(Exception, match=r"use spark\.readStream"):
        spark.read.format("nsq").option("nsqd", nsqd.tcp).option("topic", topic).load().count()


def test_schema_subset(spark: Any, nsqd: Proc, topic: str, tmp_path: Path) -> None:
    """readStream.schema(...) may pick and reorder the source's columns."""
    publish(nsqd, topic, bodies(10))
    query = (
        spark.readStream.format("nsq")
        .schema("body binary, attempts int")
        .option("nsqd", nsqd.tcp)
        .option("nsqdHttp", nsqd.http)
        .option("topic", topic)
        .option("channel", "spark")
        .option("availableNowIdleMs", "3000")
        .load()
        .writeStream.format("memory")
        .queryName("subset_" + topic[-6:].replace("_", ""))
        .trigger(availableNow=True)
        .start()
    )
    assert query.awaitTermination(60)
    rows = spark.sql(f"select * from {query.name}").collect()
    assert sorted(bytes(r.body) for r in rows) == sorted(bodies(10))
    assert rows[0].__fields__ == ["body", "attempts"]


def test_slow_batch_keeps_messages_in_flight_with_touch(
    spark: Any, nsqd: Proc, topic: str, tmp_path: Path
) -> None:
    """A batch that takes 2x msgTimeoutMs: TOUCH keeps its messages (and the ones waiting in
    the reader's buffer) in flight, so nsqd times none out and nothing is delivered twice."""
    n = 1000
    publish(nsqd, topic, bodies(n))
    seen: list[bytes] = []

    def slow_sink(batch: Any, batch_id: int) -> None:
        rows = batch.collect()
        seen.extend(bytes(r.body) for r in rows)
        if rows and len(seen) == len(rows):
            # 4 s, not the 6 s (3x) it once was: a TOUCH is due every msgTimeoutMs / 2, so
            # outliving 2x takes several in a row (a first TOUCH alone only reaches 3 s)
            time.sleep(4.0)

    query = (
        source(
            spark,
            nsqd,
            topic,
            msgTimeoutMs="2000",
            maxMessagesPerTrigger="200",
            maxInFlight="500",
            executorReads="off",  # the driver-side reader and its TOUCHes
            availableNowIdleMs="5000",
        )
        .writeStream.foreachBatch(slow_sink)
        .option("checkpointLocation", str(tmp_path / "ckpt"))
        .trigger(availableNow=True)
        .start()
    )
    assert query.awaitTermination(120)
    assert sorted(seen) == sorted(bodies(n)), "lost or duplicated messages"
    stats = channel_stats(nsqd, topic, "spark")
    if stats is not None:
        assert (stats["timeout_count"], stats["in_flight_count"], stats["depth"]) == (0, 0, 0)


def test_unknown_topic_is_reported_in_progress(
    spark: Any, nsqd: Proc, topic: str, tmp_path: Path
) -> None:
    """A topic that does not exist is not created by the reader; the query's progress counts
    where it is missing (latestOffset.unknownTopic) until it appears."""
    import json

    name = "unknown_" + topic[-6:].replace("_", "")
    query = (
        source(spark, nsqd, topic)
        .writeStream.format("memory")
        .queryName(name)
        .option("checkpointLocation", str(tmp_path / "ckpt"))
        .trigger(processingTime="200 milliseconds")
        .start()
    )

    def unknown() -> int | None:
        progress = query.lastProgress
        latest = progress and progress["sources"][0].get("latestOffset")
        return None if not latest else json.loads(latest)["unknownTopic"]

    try:
        wait_until(lambda: unknown() == 1, 60, 0.2, "unknownTopic 1 in the progress")
        assert channel_stats(nsqd, topic, "spark") is None, "the reader created the topic"
        publish(nsqd, topic, [b"now"])
        wait_until(lambda: spark.sql(f"select * from {name}").count() == 1, 60, 0.5, "the row")
        wait_until(lambda: unknown() == 0, 30, 0.2, "unknownTopic 0")
    finally:
        stop(query)
