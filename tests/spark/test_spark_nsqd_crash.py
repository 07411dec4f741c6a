"""kill -9 of an nsqd in the middle of a stream, ours and the Go nsqd: nothing is missing.

The nsqd runs with --mem-queue-size=0, so every message it has not handed out is on disk and
survives the kill, and what it had handed out (in flight to the reader) it forgets, or, if its
disk queue had not synced the read position yet, hands out again with the same id. The
forgotten ones are only in the reader's hands: it must keep them, not drop them with the dead
connection. After the restart the reader reconnects by itself and the rest flows."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest
from spark_support import (
    Proc,
    create_channel,
    go_nsqd,
    kill9_and_restart,
    our_nsqd,
    publish,
    read_trace,
    wait_until,
)
from test_spark_source import bodies, committed_rows, count_rows, source, stop

from pyspark_nsq.addresses import Address
from pyspark_nsq.http import channel_counts

N = 6000
# The channel exists before the messages, so they are copied into it as published (the Go
# nsqd loses a message of its own if killed in the middle of that copy).
DURABLE = ["--mem-queue-size=0"]


def topic_depth(daemon: Proc, topic: str) -> int:
    counts = channel_counts(Address.parse(daemon.http), topic, "spark", 5.0)
    assert counts is not None
    return counts.topic_depth


def wait_all(spark: Any, out: Path, daemon: Proc) -> None:
    def done() -> bool:
        df = committed_rows(spark, out)
        return df is not None and df.select("body").distinct().count() >= N

    try:
        wait_until(done, 120, 1.0, f"all {N} messages after the nsqd restart")
    except TimeoutError as exc:
        raise AssertionError(f"{exc}; nsqd's log:\n{daemon.log_tail(80)}") from exc


def stream_through_kill(spark: Any, daemon: Proc, topic: str, tmp_path: Path) -> tuple[Proc, int]:
    """Stream into Parquet, kill -9 the nsqd after the first batch, restart it, wait for all;
    returns the restarted nsqd and the rows written before the kill."""
    out = tmp_path / "out"
    query = (
        source(spark, daemon, topic, maxMessagesPerTrigger="1000", msgTimeoutMs="5000")
        .writeStream.format("parquet")
        .option("path", str(out))
        .option("checkpointLocation", str(tmp_path / "ckpt"))
        .trigger(processingTime="200 milliseconds")
        .start()
    )
    restarted = None
    try:
        wait_until(lambda: count_rows(spark, out) >= 1000, 90, 0.2, "a first batch")
        before = count_rows(spark, out)
        restarted = kill9_and_restart(daemon)
        wait_all(spark, out, restarted)
    except BaseException:
        if restarted is not None:  # the caller only knows the killed one
            restarted.stop()
        raise
    finally:
        stop(query)
    return restarted, before


@pytest.mark.parametrize("kind", ["ours", "go"])
def test_kill9_nsqd_mid_stream_loses_nothing(
    spark: Any, kind: str, topic: str, tmp_path: Path, trace_path: Path, report: Any
) -> None:
    daemon: Proc = our_nsqd(DURABLE) if kind == "ours" else go_nsqd(DURABLE)
    expected = bodies(N, prefix=kind)
    try:
        create_channel(daemon, topic)
        publish(daemon, topic, expected)
        wait_until(lambda: topic_depth(daemon, topic) == 0, 60, 0.1, "the channel's copy")
        daemon, before = stream_through_kill(spark, daemon, topic, tmp_path)
        rows = spark.read.parquet(str(tmp_path / "out")).select("body", "id", "nsqd").collect()
    finally:
        daemon.stop()
    got = [bytes(r.body) for r in rows]
    missing = set(expected) - set(got)
    duplicates = len(got) - len(set(got))
    kept = max((e.get("kept_from_lost", 0) for e in read_trace(trace_path, topic)), default=0)
    report(
        f"kill -9 of {kind} nsqd mid-stream: {before} rows before the kill, reader kept "
        f"{kept} messages of the dead connections, {len(got)} rows, {len(missing)} missing, "
        f"{duplicates} duplicates"
    )
    assert not missing, f"{len(missing)} messages lost"
    assert kept > 0, "the kill came when the reader held nothing: the test tested nothing"
    assert {r.nsqd for r in rows} == {daemon.tcp}
    # a redelivery is the same (nsqd, id) as the first copy
    assert len({(r.nsqd, r.id) for r in rows}) == len(set(got))
    assert duplicates <= N
