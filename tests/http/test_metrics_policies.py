"""GET /metrics' policy counters (dead-lettered, expired, dropped) against /topic/config and
/channel/config's counts, with a V2 consumer that requeues past max_attempts."""

from __future__ import annotations

import time
from collections.abc import Iterator

import httpx
import pytest
from nsqhttp_support import Daemon, TCPClient, start, wait_until
from test_metrics import scrape, value


@pytest.fixture(scope="module")
def daemon() -> Iterator[Daemon]:
    d = start("ours")
    try:
        yield d
    finally:
        assert d.stop() == 0


def test_policy_counters(daemon: Daemon) -> None:
    with httpx.Client(base_url=daemon.url, timeout=5.0) as c:
        ok = c.post("/channel/config?topic=pol&channel=dl&max_attempts=1").is_success
        assert ok
        ok = c.post("/channel/config?topic=pol&channel=full&max_depth=2&overflow=drop_oldest")
        assert ok.is_success
        ok = c.post("/channel/config?topic=pol&channel=old&ttl=100")
        assert ok.is_success
        body = b"\n".join(b"m%d" % i for i in range(5))
        assert c.post("/mpub?topic=pol", content=body).is_success
        with TCPClient(daemon.tcp_addr) as consumer:
            consumer.sub("pol", "dl")
            consumer.rdy(1)
            msg_id = consumer.message()[0]
            consumer.req(msg_id)
            consumer.nop()
            dl = "/channel/config?topic=pol&channel=dl"
            wait_until(lambda: c.get(dl).json()["counts"]["dead_lettered"] >= 1)
        time.sleep(0.5)
        samples, _ = scrape(c)
        for ch in ("dl", "full", "old"):
            counts = c.get(f"/channel/config?topic=pol&channel={ch}").json()["counts"]
            labels = {"topic": "pol", "channel": ch}
            dead = value(samples, "nsq_channel_dead_lettered_total", **labels)
            assert dead == counts["dead_lettered"]
            assert value(samples, "nsq_channel_expired_total", **labels) == counts["expired"]
            assert value(samples, "nsq_channel_dropped_total", **labels) == counts["dropped"]
        tcounts = c.get("/topic/config?topic=pol").json()["counts"]
        assert value(samples, "nsq_topic_expired_total", topic="pol") == tcounts["expired"]
        assert value(samples, "nsq_topic_dropped_total", topic="pol") == tcounts["dropped"]
        assert value(samples, "nsq_channel_dead_lettered_total", topic="pol", channel="dl") == 1
        assert value(samples, "nsq_channel_dropped_total", topic="pol", channel="full") == 3
        assert value(samples, "nsq_channel_expired_total", topic="pol", channel="old") >= 1
