"""The reader's driver-side consumer against our nsqd, without Spark: limits negotiated with
nsqd, several nsqds, a message that times out while held, connection errors."""

from __future__ import annotations

import time
from collections.abc import Iterator

import pytest
from spark_support import Proc, channel_stats, our_nsqd, publish, wait_until

from pyspark_nsq.consumer import Consumer
from pyspark_nsq.options import SourceOptions


def consumer_for(nsqd: str, topic: str, **options: str) -> Consumer:
    # the driver-side consumer (executorReads off: our nsqd would go to the executors)
    options = {"executorReads": "off", **options}
    return Consumer(SourceOptions.parse({"nsqd": nsqd, "topic": topic, "channel": "c", **options}))


@pytest.fixture
def second_nsqd() -> Iterator[Proc]:
    proc = our_nsqd()
    try:
        yield proc
    finally:
        proc.stop()


def test_limits_are_lowered_to_nsqds(nsqd: Proc, topic: str) -> None:
    """rdy above --max-rdy-count (2500) and msgTimeoutMs above --max-msg-timeout (15m)."""
    publish(nsqd, topic, [b"a"])
    consumer = consumer_for(
        nsqd.tcp, topic, rdy="100000", maxInFlight="2500", msgTimeoutMs="3600000"
    )
    consumer.start()
    try:
        (link,) = consumer.links()
        assert (link.rdy, link.msg_timeout) == (2500, 900.0)
        wait_until(lambda: consumer.buffered() == 1, 10, 0.05, "the message")
    finally:
        consumer.close()


def test_in_flight_budget_over_several_connections(nsqd: Proc, topic: str) -> None:
    """Default options against a default nsqd (--max-rdy-count 2500): 8 connections of RDY
    2500, so 20,000 messages are in flight to the reader at once."""
    n = 20_000
    publish(nsqd, topic, [b"m%d" % i for i in range(n + 500)])
    consumer = consumer_for(nsqd.tcp, topic)
    consumer.start()
    try:
        assert sorted(link.rdy for link in consumer.links()) == [2500] * 8
        wait_until(lambda: consumer.buffered() == n, 30, 0.05, f"{n} messages")
        stats = channel_stats(nsqd, topic, "c")
        assert (stats["in_flight_count"], stats["depth"], len(stats["clients"])) == (n, 500, 8)
        end = consumer.take(0, None)
        assert len({h.id for h in consumer.rows(0, end)}) == n
        assert consumer.fin_through(end) == n
        wait_until(lambda: consumer.buffered() == 500, 10, 0.05, "the rest")
    finally:
        consumer.close()


def test_unknown_topic_is_reported_not_created(nsqd: Proc, topic: str) -> None:
    """SUB would create a misspelled topic: the reader does not subscribe to an nsqd without
    it, says where it is missing, and subscribes once the topic appears."""
    consumer = consumer_for(nsqd.tcp, topic, maxInFlight="100", nsqdHttp=nsqd.http)
    consumer.start()
    try:
        assert consumer.links() == []
        assert consumer.subs.unknown_topic() == [nsqd.tcp]
        time.sleep(0.5)
        assert channel_stats(nsqd, topic, "c") is None  # neither topic nor channel created
        publish(nsqd, topic, [b"late"])
        wait_until(lambda: consumer.buffered() == 1, 15, 0.1, "the subscription")
        assert consumer.subs.unknown_topic() == []
    finally:
        consumer.close()


def test_two_nsqds(nsqd: Proc, second_nsqd: Proc, topic: str) -> None:
    publish(nsqd, topic, [b"one-%d" % i for i in range(300)])
    publish(second_nsqd, topic, [b"two-%d" % i for i in range(200)])
    consumer = consumer_for(f"{nsqd.tcp},{second_nsqd.tcp}", topic)
    consumer.start()
    try:
        wait_until(lambda: consumer.buffered() == 500, 20, 0.05, "500 messages")
        end = consumer.take(0, None)
        bodies = {h.body for h in consumer.rows(0, end)}
        assert len(bodies) == 500 and consumer.fin_through(end) == 500
    finally:
        consumer.close()
    for daemon in (nsqd, second_nsqd):
        wait_until(
            lambda d=daemon: channel_stats(d, topic, "c")["in_flight_count"] == 0,
            10,
            0.1,
            "FINs on both nsqds",
        )


def test_message_timing_out_while_held_is_kept_once(nsqd: Proc, topic: str) -> None:
    """Untouched, nsqd times the messages out and redelivers them to the same reader: they
    stay one copy each, and the FIN by id settles the redelivered copy."""
    publish(nsqd, topic, [b"m%d" % i for i in range(10)])
    consumer = consumer_for(nsqd.tcp, topic, msgTimeoutMs="1000")
    consumer.start()
    try:
        wait_until(lambda: consumer.buffered() == 10, 10, 0.05, "10 messages")
        end = consumer.take(0, 4)  # 4 in an offset range, 6 still buffered
        for held in consumer.rows(0, end) + list(consumer._buffer):
            held.touched = time.monotonic() + 3600  # no TOUCH
        wait_until(lambda: consumer.redelivered >= 10, 15, 0.1, "redeliveries")
        assert consumer.buffered() == 6 and consumer.accepted == 10
        assert {h.attempts for h in consumer.rows(0, end)} == {2}
        end = consumer.take(end, None)
        assert end == 10 and consumer.fin_through(end) == 10
    finally:
        consumer.close()
    wait_until(lambda: channel_stats(nsqd, topic, "c")["in_flight_count"] == 0, 10, 0.1, "FINs")
    stats = channel_stats(nsqd, topic, "c")
    assert (stats["depth"], stats["timeout_count"]) == (0, 10)


def test_unreachable_nsqd_is_a_clear_error(topic: str) -> None:
    from spark_support import free_port

    consumer = consumer_for(f"127.0.0.1:{free_port()}", topic, connectTimeoutMs="1000")
    with pytest.raises(ConnectionError, match="could not subscribe to any nsqd"):
        consumer.start()
