"""Executor-side reading (issue 18 item 6): against our nsqd the executors pull their partitions
over HTTP under named leases and the driver finishes the leases after the commit; against the
Go nsqd the driver-side reader stays. Chosen per nsqd, so one query can mix both."""

from __future__ import annotations

from pathlib import Path
from typing import Any

from spark_support import Proc, channel_stats, create_channel, go_nsqd, publish, read_trace
from test_spark_source import bodies

from pyspark_nsq.addresses import Address
from pyspark_nsq.http import finish_lease, leases_supported
from pyspark_nsq.pull import LeasePartition, pull


def partition(nsqd: Proc, topic: str, lease: str, n: int, max_bytes: int = 1 << 20) -> Any:
    return LeasePartition(
        nsqd=nsqd.tcp,
        http=nsqd.http,
        topic=topic,
        channel="spark",
        lease=lease,
        n=n,
        max_bytes=max_bytes,
        vt_ms=60_000,
        retry_ms=0,
        timeout_s=10.0,
    )


def pulled(p: LeasePartition) -> dict[str, list[Any]]:
    """A pulled partition's columns as lists (the executor decodes them into Arrow arrays)."""
    part = pull(p)
    names = ("ids", "bodies", "timestamps_us", "attempts", "nsqds")
    return {n: _plain(getattr(part, n)) for n in names}


def _plain(column: Any) -> list[Any]:
    return column.to_pylist() if hasattr(column, "to_pylist") else list(column)


def test_a_task_run_twice_pulls_the_same_messages(nsqd: Proc, topic: str) -> None:
    """The same partition read twice (a retried or speculative task, a replayed batch) gets the
    same rows, not a second set; another partition gets others; the driver's FIN of the lease
    finishes them all, and a lease that holds nothing finishes nothing, without an error."""
    create_channel(nsqd, topic)
    publish(nsqd, topic, bodies(50))
    assert leases_supported(Address.parse(nsqd.http), 5.0) is True
    first = pulled(partition(nsqd, topic, "tok-1-0", 20))
    again = pulled(partition(nsqd, topic, "tok-1-0", 20))
    other = pulled(partition(nsqd, topic, "tok-1-1", 20))
    assert len(first["ids"]) == 20 and again["ids"] == first["ids"]
    assert again["bodies"] == first["bodies"] and set(first["bodies"]) <= set(bodies(50))
    assert again["attempts"] == [1] * 20 and again["nsqds"] == [nsqd.tcp]
    assert not set(other["ids"]) & set(first["ids"])
    capped = pulled(partition(nsqd, topic, "tok-1-2", 20, max_bytes=30))
    assert len(capped["ids"]) == 3  # 12-byte bodies: the receive stops past 30 bytes
    http = Address.parse(nsqd.http)
    assert finish_lease(http, topic, "spark", "tok-1-0", 5.0) == 20
    assert finish_lease(http, topic, "spark", "tok-1-0", 5.0) == 0
    stats = channel_stats(nsqd, topic, "spark")
    assert (stats["depth"], stats["in_flight_count"]) == (50 - 20 - 20 - 3, 23)


def mixed_query(spark: Any, ours: Proc, go: Proc, topic: str, tmp_path: Path) -> Any:
    """availableNow from both nsqds into Parquet, 1,000 rows per batch at most."""
    reader = (
        spark.readStream.format("nsq")
        .option("nsqd", f"{ours.tcp},{go.tcp}")
        .option("nsqdHttp", f"{ours.http},{go.http}")
        .option("topic", topic)
        .option("channel", "spark")
        .option("maxMessagesPerTrigger", "1000")
        .option("availableNowIdleMs", "5000")
        .load()
    )
    return (
        reader.writeStream.format("parquet")
        .option("path", str(tmp_path / "out"))
        .option("checkpointLocation", str(tmp_path / "ckpt"))
        .trigger(availableNow=True)
        .start()
    )


def test_ours_read_by_executors_go_by_the_driver_in_one_query(
    spark: Any, nsqd: Proc, topic: str, tmp_path: Path, trace_path: Path, report: Any
) -> None:
    """Our nsqd and the Go nsqd in one query: ours goes to the executors (its leases are in the
    batches' plans), Go's to the driver-side reader (TCP). Every row once, with its nsqd."""
    go = go_nsqd()
    n = 3000
    ours_bodies, go_bodies = bodies(n, "ours"), bodies(n, "go")
    try:
        assert leases_supported(Address.parse(go.http), 5.0) is False
        for daemon, sent in ((nsqd, ours_bodies), (go, go_bodies)):
            create_channel(daemon, topic)
            publish(daemon, topic, sent)
        query = mixed_query(spark, nsqd, go, topic, tmp_path)
        assert query.awaitTermination(180), "availableNow query did not end"
        rows = spark.read.parquet(str(tmp_path / "out")).select("body", "nsqd", "id").collect()
        go_stats = channel_stats(go, topic, "spark")
    finally:
        go.stop()
    got = [bytes(r.body) for r in rows]
    missing = set(ours_bodies + go_bodies) - set(got)
    duplicates = len(got) - len(set(got))
    by_nsqd = {a: sum(1 for r in rows if r.nsqd == a) for a in (nsqd.tcp, go.tcp)}
    report(f"mixed ours + Go nsqd: {len(got)} rows, {len(missing)} missing, {duplicates} dup")
    assert not missing and not duplicates
    assert by_nsqd == {nsqd.tcp: n, go.tcp: n}
    assert {bytes(r.body) for r in rows if r.nsqd == nsqd.tcp} == set(ours_bodies)
    events = read_trace(trace_path, topic)
    planned = [e for e in events if e["event"] == "latestOffset"]
    assert {tuple(e["executor_nsqds"]) for e in planned} == {(nsqd.tcp,)}
    leases = [lease for e in events if e["event"] == "partitions" for lease in e["leases"]]
    assert leases and {lease["nsqd"] for lease in leases} == {nsqd.tcp}
    assert sum(e.get("leased_fin", 0) for e in events) == n  # ours: FIN of whole leases
    assert sum(e.get("fin", 0) for e in events) == n  # Go's: FIN by the driver-side reader
    ours_stats = channel_stats(nsqd, topic, "spark")
    for stats in (ours_stats, go_stats):
        assert (stats["depth"], stats["in_flight_count"], stats["timeout_count"]) == (0, 0, 0)
    assert ours_stats["client_count"] == 0  # no TCP connection to ours


def test_the_plan_follows_depth_and_caps(nsqd: Proc, topic: str) -> None:
    """The driver's plan for one of our nsqds, from its /stats: partitions enough to fill
    maxBytesPerTrigger (32 / 8 MiB: 4), at most the depth in messages, maxMessagesPerTrigger
    shared, the per-partition byte cap lowered when more partitions share the trigger."""
    from pyspark_nsq.http import Producer
    from pyspark_nsq.leased import LeasedReader, shares
    from pyspark_nsq.options import SourceOptions

    create_channel(nsqd, topic)
    publish(nsqd, topic, bodies(5000))
    producer = Producer(Address.parse(nsqd.tcp), Address.parse(nsqd.http))
    opts = SourceOptions.parse({"nsqd": nsqd.tcp, "topic": topic, "channel": "spark"})
    plan = LeasedReader(opts).plan([producer], None)
    assert plan == [[nsqd.tcp, nsqd.http, [1250] * 4, 8 << 20]]
    assert LeasedReader(opts).plan([producer], 1000)[0][2] == [250] * 4
    small = SourceOptions.parse(
        {"nsqd": nsqd.tcp, "topic": topic, "channel": "spark", "maxBytesPerTrigger": "1000"}
    )
    assert LeasedReader(small).plan([producer], 3) == [[nsqd.tcp, nsqd.http, [2, 1], 500]]
    assert shares(10, [30, 10, 0]) == [8, 2, 0] and shares(10, [3, 4]) == [3, 4]
