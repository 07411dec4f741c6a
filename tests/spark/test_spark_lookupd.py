"""Discovery through the real nsqlookupd v1.3.0 (.reference/bin, scripts/install_reference.sh)
with our nsqd registering with it: the JSON shapes parsed are the real ones."""

from __future__ import annotations

import importlib.util
import sys
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
from spark_support import (
    REPO_ROOT,
    Proc,
    channel_stats,
    drain,
    publish,
    start_process,
    wait_until,
)

from pyspark_nsq.addresses import Address
from pyspark_nsq.consumer import Consumer
from pyspark_nsq.http import channel_counts, lookup
from pyspark_nsq.options import SourceOptions


def _binary(name: str) -> Path:
    """A reference tool from .reference/bin, installed if missing (the test fails if it
    cannot be)."""
    spec = importlib.util.spec_from_file_location(
        "reference", REPO_ROOT / "scripts" / "reference.py"
    )
    assert spec is not None and spec.loader is not None
    reference = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(reference)
    try:
        return Path(reference.ensure_reference()) / name
    except reference.ReferenceInstallError as exc:
        pytest.fail(f"reference NSQ tools could not be installed: {exc}", pytrace=False)


@pytest.fixture(scope="module")
def lookupd() -> Iterator[Proc]:
    proc = start_process("nsqlookupd", [str(_binary("nsqlookupd"))], data_flag="")
    try:
        yield proc
    finally:
        proc.stop()


@pytest.fixture(scope="module")
def nsqd_l(lookupd: Proc) -> Iterator[Proc]:
    """Our nsqd, registered with the nsqlookupd."""
    proc = start_process(
        "nsqd-lookupd",
        [sys.executable, "-m", "nsqd"],
        [
            f"--lookupd-tcp-address={lookupd.tcp}",
            "--broadcast-address=127.0.0.1",
        ],
    )
    try:
        yield proc
    finally:
        proc.stop()


def registered(lookupd: Proc, topic: str) -> list[Any]:
    return lookup([Address.parse(lookupd.http)], topic, 5.0)


def test_lookup_parses_real_nsqlookupd(lookupd: Proc, nsqd_l: Proc, topic: str) -> None:
    assert registered(lookupd, topic) == []  # 404 TOPIC_NOT_FOUND: no producers
    publish(nsqd_l, topic, [b"x"])
    producers = wait_until(lambda: registered(lookupd, topic), 15, 0.2, "registration")
    assert [(str(p.tcp), str(p.http)) for p in producers] == [(nsqd_l.tcp, nsqd_l.http)]
    nodes = lookup([Address.parse(lookupd.http)], None, 5.0)
    assert [str(p.tcp) for p in nodes] == [nsqd_l.tcp]
    drain(nsqd_l.tcp, topic, "c", 1)
    counts = channel_counts(Address.parse(nsqd_l.http), topic, "c", 5.0)
    assert counts is not None and (counts.depth, counts.in_flight) == (0, 0)
    assert channel_counts(Address.parse(nsqd_l.http), topic, "other", 5.0) is None


def test_consumer_discovers_a_producer_that_appears_later(
    lookupd: Proc, nsqd_l: Proc, topic: str
) -> None:
    opts = SourceOptions.parse(
        {
            "lookupd": lookupd.http,
            "topic": topic,
            "channel": "c",
            "lookupdPollIntervalMs": "200",
            "executorReads": "off",  # the driver-side consumer's discovery
        }
    )
    consumer = Consumer(opts)
    consumer.start()  # no producer yet: not an error
    try:
        assert consumer.links() == []
        publish(nsqd_l, topic, [b"m%d" % i for i in range(100)])
        wait_until(lambda: consumer.buffered() == 100, 30, 0.1, "100 messages via lookupd")
        end = consumer.take(0, None)
        assert consumer.fin_through(end) == 100
    finally:
        consumer.close()


def test_spark_source_and_sink_through_lookupd(
    spark: Any, lookupd: Proc, nsqd_l: Proc, topic: str, tmp_path: Path
) -> None:
    sent = [b"lk-%d" % i for i in range(500)]
    publish(nsqd_l, topic, sent)
    wait_until(lambda: registered(lookupd, topic), 15, 0.2, "registration")
    query = (
        spark.readStream.format("nsq")
        .option("lookupd", lookupd.http)
        .option("topic", topic)
        .option("channel", "spark")
        .option("availableNowIdleMs", "5000")
        .load()
        .writeStream.format("parquet")
        .option("path", str(tmp_path / "out"))
        .option("checkpointLocation", str(tmp_path / "ckpt"))
        .trigger(availableNow=True)
        .start()
    )
    assert query.awaitTermination(90)
    df = spark.read.parquet(str(tmp_path / "out"))
    assert sorted(bytes(r.body) for r in df.collect()) == sorted(sent)

    target = f"{topic}_w"
    publish(nsqd_l, target, [b"first"])  # so nsqlookupd knows a producer of the topic
    wait_until(lambda: registered(lookupd, target), 15, 0.2, "registration")
    (
        df.select("body")
        .write.format("nsq")
        .option("lookupd", lookupd.http)
        .option("topic", target)
        .mode("append")
        .save()
    )
    got = drain(nsqd_l.tcp, target, "check", len(sent) + 1)
    assert sorted(got) == sorted([*sent, b"first"])


def test_nsqd_and_lookupd_together_subscribe_once(lookupd: Proc, nsqd_l: Proc, topic: str) -> None:
    """The nsqd listed as localhost:port is the one nsqlookupd reports as 127.0.0.1:port (its
    /info says so): one subscription (here 2 connections), not two."""
    publish(nsqd_l, topic, [b"x"])
    wait_until(lambda: registered(lookupd, topic), 15, 0.2, "registration")
    listed = f"localhost:{nsqd_l.tcp_port}"
    opts = SourceOptions.parse(
        {
            "nsqd": listed,
            "nsqdHttp": f"localhost:{nsqd_l.http_port}",
            "lookupd": lookupd.http,
            "topic": topic,
            "channel": "c",
            "maxInFlight": "5000",
            "lookupdPollIntervalMs": "100",
            "executorReads": "off",  # the driver-side consumer's subscriptions
        }
    )
    consumer = Consumer(opts)
    consumer.start()
    try:
        wait_until(lambda: consumer.buffered() == 1, 15, 0.05, "the message")
        time.sleep(2.5)  # several nsqlookupd polls and a reconnect round
        assert sorted((str(link.nsqd), link.index) for link in consumer.links()) == [
            (listed, 0),
            (listed, 1),
        ]
        assert len(channel_stats(nsqd_l, topic, "c")["clients"]) == 2
    finally:
        consumer.close()
