"""Our nsqd's /stats against a daemon subprocess: its JSON and text renderings, its filters
(topic, channel, include_clients, include_mem) and the counters after TCP traffic. Expected
texts are what nsqd v1.3.0 answers (test_http_reference.py checks the same against the Go
binary)."""

from __future__ import annotations

import re
import time
from typing import Any

import httpx
from nsqhttp_support import (
    HOST,
    JSON,
    TEXT,
    V1,
    Daemon,
    TCPClient,
    stats,
    wait_until,
)

TOPIC_KEYS = [
    "topic_name",
    "channels",
    "depth",
    "backend_depth",
    "message_count",
    "message_bytes",
    "paused",
    "e2e_processing_latency",
]
CHANNEL_KEYS = [
    "channel_name",
    "depth",
    "backend_depth",
    "in_flight_count",
    "deferred_count",
    "message_count",
    "requeue_count",
    "timeout_count",
    "client_count",
    "clients",
    "paused",
    "e2e_processing_latency",
]
CLIENT_KEYS = [
    "client_id",
    "hostname",
    "version",
    "remote_address",
    "state",
    "ready_count",
    "in_flight_count",
    "message_count",
    "finish_count",
    "requeue_count",
    "connect_ts",
    "sample_rate",
    "deflate",
    "snappy",
    "user_agent",
    "tls",
    "tls_cipher_suite",
    "tls_version",
    "tls_negotiated_protocol",
    "tls_negotiated_protocol_is_mutual",
]
MEMORY_KEYS = [
    "heap_objects",
    "heap_idle_bytes",
    "heap_in_use_bytes",
    "heap_released_bytes",
    "gc_pause_usec_100",
    "gc_pause_usec_99",
    "gc_pause_usec_95",
    "next_gc_bytes",
    "gc_total_runs",
]


def test_stats_counts_tcp_traffic(http: httpx.Client, nsqd: Daemon) -> None:
    with (
        TCPClient(nsqd.tcp_addr, client_id="p1", hostname="ph", user_agent="pa/1") as producer,
        TCPClient(nsqd.tcp_addr, client_id="c1", hostname="ch", user_agent="ca/1") as consumer,
    ):
        for i in range(5):
            producer.pub("counted", b"m%d" % i)
        consumer.sub("counted", "c")  # the first channel takes the topic's backlog
        for i in range(5, 9):
            producer.pub("counted", b"m%d" % i)
        consumer.rdy(3)
        ids = [consumer.message()[0] for _ in range(3)]
        consumer.fin(ids[0])
        consumer.req(ids[1])
        consumer.nop()
        # two slots free again: two fresh messages (the requeued one waits at the back)
        assert [consumer.message()[1] for _ in range(2)] == [1, 1]

        def settled() -> dict[str, Any]:
            snap = stats(http, topic="counted")
            c = snap["topics"][0]["channels"][0]
            return snap if c["clients"] and c["clients"][0]["finish_count"] == 1 else {}

        snap = wait_until(settled)
        t = snap["topics"][0]
        assert list(snap) == ["version", "health", "start_time", "topics", "producers"]
        assert (snap["version"], snap["health"]) == ("1.3.0", "OK")
        assert list(t) == TOPIC_KEYS
        assert (t["topic_name"], t["message_count"], t["message_bytes"]) == ("counted", 9, 18)
        assert (t["depth"], t["backend_depth"], t["paused"]) == (0, 0, False)
        c = t["channels"][0]
        assert list(c) == CHANNEL_KEYS
        assert c["channel_name"] == "c"
        assert (c["message_count"], c["depth"], c["in_flight_count"]) == (9, 5, 3)
        assert (c["requeue_count"], c["timeout_count"], c["deferred_count"]) == (1, 0, 0)
        assert c["client_count"] == 1
        assert c["e2e_processing_latency"] == {"count": 0, "percentiles": None}
        cl = c["clients"][0]
        assert list(cl) == CLIENT_KEYS
        consumer_port = consumer.sock.getsockname()[1]
        assert cl["remote_address"] == f"{HOST}:{consumer_port}"
        assert (cl["client_id"], cl["hostname"], cl["user_agent"]) == ("c1", "ch", "ca/1")
        assert (cl["version"], cl["state"], cl["ready_count"]) == ("V2", 3, 3)
        assert (cl["in_flight_count"], cl["message_count"]) == (3, 5)
        assert (cl["finish_count"], cl["requeue_count"]) == (1, 1)
        assert abs(cl["connect_ts"] - time.time()) < 60
        (prod,) = snap["producers"]
        assert list(prod) == [*CLIENT_KEYS[:15], "pub_counts", *CLIENT_KEYS[15:]]
        assert (prod["client_id"], prod["state"], prod["message_count"]) == ("p1", 0, 0)
        assert prod["pub_counts"] == [{"topic": "counted", "count": 9}]

        text = http.get("/stats", params={"topic": "counted", "include_mem": "false"}).text
        assert re.search(
            r"\n   \[counted        \] depth: 0     be-depth: 0     msgs: 9        e2e%: \n", text
        )
        assert re.search(
            r"\n      \[c {24}\] depth: 5     be-depth: 0     inflt: 3    def: 0    re-q: 1     "
            r"timeout: 0     msgs: 9        e2e%: \n",
            text,
        )
        assert re.search(
            rf"\n        \[V2 ch:{consumer_port} ca/1 *\] state: 3 inflt: 3    rdy: 3    "
            r"fin: 1        re-q: 1        msgs: 5        connected: \d+s\n",
            text,
        )
        assert re.search(
            r"\nProducers:\n   \[V2 ph:\d+ pa/1 *\] msgs: 9        topics: counted=9 ", text
        )


def test_stats_format_and_filters(http: httpx.Client) -> None:
    http.post("/mpub?topic=fa", content=b"1\n2")
    http.post("/channel/create?topic=fa&channel=x")
    http.post("/channel/create?topic=fa&channel=y")
    http.post("/topic/create?topic=fb")
    r = http.get("/stats", params={"format": "json"})
    assert (r.headers["content-type"], r.headers["x-nsq-content-type"]) == (JSON, V1)
    full = r.json()
    assert list(full) == ["version", "health", "start_time", "topics", "memory", "producers"]
    assert list(full["memory"]) == MEMORY_KEYS
    assert all(isinstance(v, int) and v >= 0 for v in full["memory"].values())
    names = [t["topic_name"] for t in full["topics"]]
    assert names == sorted(names) and {"fa", "fb"} <= set(names)
    assert [c["channel_name"] for c in stats(http, topic="fa")["topics"][0]["channels"]] == [
        "x",
        "y",
    ]
    assert stats(http, topic="nope") == {**stats(http, topic="nope"), "topics": None}
    assert stats(http, topic="fa", channel="nope")["topics"] == []
    only = stats(http, channel="y")["topics"]
    assert [t["topic_name"] for t in only] == ["fa"]
    assert [c["channel_name"] for c in only[0]["channels"]] == ["y"]
    no_clients = stats(http, topic="fa", include_clients="false")
    assert no_clients["topics"][0]["channels"][0]["clients"] is None
    assert no_clients["producers"] is None
    assert "memory" in stats(http, include_mem="maybe")  # anything but false/0 means true
    text = http.get("/stats", params={"include_mem": "0", "topic": "fb"})
    assert text.headers["content-type"] == TEXT
    lines = text.text.split("\n")
    assert re.fullmatch(r"nsqd v1\.3\.0 \(built w/\S+\)", lines[0])
    assert re.fullmatch(r"start_time \d{4}-\d\d-\d\dT\d\d:\d\d:\d\d(Z|[+-]\d\d:\d\d)", lines[1])
    assert re.fullmatch(r"uptime [\dhms.µn]+", lines[2])
    assert lines[3:] == [
        "",
        "Health: OK",
        "",
        "Topics:",
        "   [fb             ] depth: 0     be-depth: 0     msgs: 0        e2e%: ",
        "",
        "Producers: None",
        "",
    ]
    assert "Topics: None\n" in http.get("/stats?topic=nope&include_mem=0").text
    assert "\nMemory:\n   heap_objects             \t" in http.get("/stats?topic=nope").text
