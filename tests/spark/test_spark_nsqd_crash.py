"""kill -9 of an nsqd in the middle of a stream, ours and the Go nsqd: nothing is missing.

The nsqd runs with --mem-queue-size=0, so every message it has not handed out is on disk and
survives the kill. The Go nsqd is read by the driver-side reader: what it had handed out (in
flight to the reader) it forgets, or, if its disk queue had not synced the read position yet,
hands out again with the same id. The forgotten ones are only in the reader's hands: it must
keep them, not drop them with the dead connection. After the restart the reader reconnects by
itself and the rest flows.

Ours is read by the executors under leases, and runs with --durable-inflight too: a leased
message survives the kill and comes back (a receive the kill cut off would otherwise lose its
messages). A task whose nsqd does not answer asks again until it is back; the driver's FIN of
a lease the restart forgot finishes nothing; the copies nsqd hands out again are duplicates
with the original's (nsqd, id)."""

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
OURS = [*DURABLE, "--durable-inflight"]


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


def leased(daemon: Proc, topic: str) -> int:
    counts = channel_counts(Address.parse(daemon.http), topic, "spark", 5.0)
    return 0 if counts is None else counts.in_flight


def stream_through_kill(
    spark: Any, daemon: Proc, topic: str, tmp_path: Path, kind: str
) -> tuple[Proc, int, int]:
    """Stream into Parquet, kill -9 the nsqd after the first batch (ours: while it holds
    leased messages), restart it, wait for all; returns the restarted nsqd, the rows written
    before the kill and the messages ours held leased just before it."""
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
        held = 0
        if kind == "ours":
            held = wait_until(lambda: leased(daemon, topic), 60, 0.01, "leased messages")
        before = count_rows(spark, out)
        restarted = kill9_and_restart(daemon)
        wait_all(spark, out, restarted)
    except BaseException:
        if restarted is not None:  # the caller only knows the killed one
            restarted.stop()
        raise
    finally:
        stop(query)
    return restarted, before, held


@pytest.mark.parametrize("kind", ["ours", "go"])
def test_kill9_nsqd_mid_stream_loses_nothing(
    spark: Any, kind: str, topic: str, tmp_path: Path, trace_path: Path, report: Any
) -> None:
    daemon: Proc = our_nsqd(OURS) if kind == "ours" else go_nsqd(DURABLE)
    expected = bodies(N, prefix=kind)
    try:
        create_channel(daemon, topic)
        publish(daemon, topic, expected)
        wait_until(lambda: topic_depth(daemon, topic) == 0, 60, 0.1, "the channel's copy")
        daemon, before, held = stream_through_kill(spark, daemon, topic, tmp_path, kind)
        rows = spark.read.parquet(str(tmp_path / "out")).select("body", "id", "nsqd").collect()
    finally:
        daemon.stop()
    got = [bytes(r.body) for r in rows]
    missing = set(expected) - set(got)
    duplicates = len(got) - len(set(got))
    events = read_trace(trace_path, topic)
    kept = max((e.get("kept_from_lost", 0) for e in events), default=0)
    executor_side = {n for e in events for n in e.get("executor_nsqds", ())}
    report(
        f"kill -9 of {kind} nsqd mid-stream: {before} rows before the kill, "
        + (
            f"{held} messages leased to executors at the kill"
            if kind == "ours"
            else f"reader kept {kept} messages of the dead connections"
        )
        + f", {len(got)} rows, {len(missing)} missing, {duplicates} duplicates"
    )
    assert not missing, f"{len(missing)} messages lost"
    if kind == "ours":  # read by the executors
        assert executor_side == {daemon.tcp} and held > 0
    else:
        assert not executor_side
        assert kept > 0, "the kill came when the reader held nothing: the test tested nothing"
    assert {r.nsqd for r in rows} == {daemon.tcp}
    # a redelivery is the same (nsqd, id) as the first copy
    assert len({(r.nsqd, r.id) for r in rows}) == len(set(got))
    assert duplicates <= N
