"""The nsq streaming source against `nsqd --workers=2`: the executors read over HTTP leases
(receive, then fin by lease at commit), whichever worker each request reaches, and every
message published in either worker lands in Parquet once, none of them left to time out (a
fin that reached a worker without the lease would have left its messages to time out and be
read again). The sink's exactly-once path against a group with --dedupe-window: a write run
again publishes nothing, whichever worker each task's keyed /mpub reaches."""

from __future__ import annotations

from pathlib import Path
from typing import Any

from spark_support import channel_stats, our_nsqd, publish, wait_until
from test_spark_sink_dedupe import write_twice_and_again
from test_spark_source import bodies, count_rows, source, stop, to_parquet

N = 2000


def test_a_group_streams_into_parquet_exactly_once(spark: Any, topic: str, tmp_path: Path) -> None:
    group = our_nsqd(["--workers=2"])
    try:
        expected = bodies(N)
        for i in range(0, N, 100):  # a connection each: they land in both workers
            publish(group, topic, expected[i : i + 100])
        out, ckpt = tmp_path / "out", tmp_path / "ckpt"
        query = to_parquet(source(spark, group, topic), out, ckpt)
        try:
            wait_until(lambda: count_rows(spark, out) >= N, 120, 1.0, f"{N} rows in parquet")
        finally:
            stop(query)
        rows = spark.read.parquet(str(out)).collect()
        assert sorted(bytes(r.body) for r in rows) == sorted(expected)
        assert len({r.id for r in rows}) == N
        channel = channel_stats(group, topic, "spark")
        assert channel is not None
        counts = {k: channel[k] for k in ("depth", "in_flight_count", "timeout_count")}
        assert counts == {"depth": 0, "in_flight_count": 0, "timeout_count": 0}, channel
    finally:
        group.stop()


def test_a_group_with_a_dedupe_window_takes_a_write_once(spark: Any, topic: str) -> None:
    group = our_nsqd(["--workers=2", "--dedupe-window=10m"])
    try:
        write_twice_and_again(spark, group, topic, 3000, 6)
    finally:
        group.stop()
