"""Our nsqd's HTTP API against a daemon subprocess: every endpoint and its errors, nsqd's V1
rendering and headers, keep-alive, /stats counters after TCP traffic, and a stuck HTTP client
that must not hold up the TCP protocol. Expected texts are what nsqd v1.3.0 answers
(test_http_reference.py checks the same against the Go binary)."""

from __future__ import annotations

import re
import socket
import time
from typing import Any

import httpx
import pytest
from nsqhttp_support import (
    HOST,
    JSON,
    TEXT,
    V1,
    Daemon,
    TCPClient,
    binary_mpub,
    channel_stats,
    stats,
    topic_stats,
    wait_until,
)

# -- rendering and routing ----------------------------------------------------------------------


def test_ping_is_plain_text(http: httpx.Client) -> None:
    r = http.get("/ping")
    assert (r.status_code, r.text) == (200, "OK")
    assert r.headers["content-type"] == TEXT
    assert "x-nsq-content-type" not in r.headers
    assert "server" not in r.headers
    assert "date" in r.headers


def test_info(http: httpx.Client, nsqd: Daemon) -> None:
    r = http.get("/info")
    assert r.status_code == 200
    assert r.headers["content-type"] == JSON
    assert r.headers["x-nsq-content-type"] == V1
    info = r.json()
    assert list(info) == [
        "version",
        "broadcast_address",
        "hostname",
        "http_port",
        "tcp_port",
        "start_time",
        "max_heartbeat_interval",
        "max_output_buffer_size",
        "max_output_buffer_timeout",
        "max_deflate_level",
    ]
    assert info["version"] == "1.3.0"
    assert info["hostname"] == socket.gethostname() == info["broadcast_address"]
    assert (info["http_port"], info["tcp_port"]) == (nsqd.http_port, nsqd.tcp_port)
    assert info["max_heartbeat_interval"] == 60_000_000_000
    assert info["max_output_buffer_size"] == 65536
    assert info["max_output_buffer_timeout"] == 30_000_000_000
    assert info["max_deflate_level"] == 6
    assert abs(info["start_time"] - time.time()) < 300
    assert b" " not in r.content  # compact, like Go's encoder


@pytest.mark.parametrize(
    ("method", "path", "status", "body", "extra"),
    [
        ("GET", "/nope", 404, b'{"message":"NOT_FOUND"}', {}),
        ("GET", "/put", 404, b'{"message":"NOT_FOUND"}', {}),  # pre-1.0 endpoints are gone
        ("GET", "/pub", 405, b'{"message":"METHOD_NOT_ALLOWED"}', {"allow": "OPTIONS, POST"}),
        ("POST", "/ping", 405, b'{"message":"METHOD_NOT_ALLOWED"}', {"allow": "GET, OPTIONS"}),
        (
            "DELETE",
            "/config/x",
            405,
            b'{"message":"METHOD_NOT_ALLOWED"}',
            {"allow": "GET, OPTIONS, PUT"},
        ),
        ("OPTIONS", "/pub", 200, b"", {"allow": "OPTIONS, POST"}),
        (
            "GET",
            "/ping/",
            301,
            b'<a href="/ping">Moved Permanently</a>.\n\n',
            {"location": "/ping"},
        ),
        ("GET", "/PING", 301, b'<a href="/ping">Moved Permanently</a>.\n\n', {"location": "/ping"}),
        ("POST", "/pub/?topic=a", 307, b"", {"location": "/pub?topic=a"}),
        ("POST", "/Topic/Create?topic=a", 307, b"", {"location": "/topic/create?topic=a"}),
        ("GET", "/config/", 404, b'{"message":"NOT_FOUND"}', {}),
        ("PUT", "/pub/", 404, b'{"message":"NOT_FOUND"}', {}),
    ],
)
def test_routing(
    http: httpx.Client, method: str, path: str, status: int, body: bytes, extra: dict[str, str]
) -> None:
    r = http.request(method, path)
    assert (r.status_code, r.content) == (status, body)
    for key, value in extra.items():
        assert r.headers[key] == value
    if status in (404, 405):
        assert r.headers["content-type"] == JSON
        assert r.headers["x-nsq-content-type"] == V1


# -- /pub and /mpub ------------------------------------------------------------------------------


@pytest.mark.parametrize(
    ("target", "body", "status", "answer"),
    [
        ("/pub?topic=p1", b"hello", 200, "OK"),
        ("/pub?topic=p1", b"", 400, "MSG_EMPTY"),
        ("/pub", b"x", 400, "MISSING_ARG_TOPIC"),
        ("/pub?topic=p*", b"x", 400, "INVALID_TOPIC"),
        ("/pub?topic=", b"x", 400, "INVALID_TOPIC"),
        ("/pub?topic=p%zz", b"x", 400, "INVALID_REQUEST"),
        ("/pub?topic=p1;x", b"x", 400, "INVALID_REQUEST"),
        ("/pub?topic=p1&defer=x", b"x", 400, "INVALID_DEFER"),
        ("/pub?topic=p1&defer=-1", b"x", 400, "INVALID_DEFER"),
        ("/pub?topic=p1&defer=10001", b"x", 400, "INVALID_DEFER"),  # > --max-req-timeout
        ("/pub?topic=p1&defer=10000", b"x", 200, "OK"),
        ("/pub?topic=p1", b"y" * 100, 200, "OK"),  # --max-msg-size=100
        ("/pub?topic=p1", b"y" * 101, 413, "MSG_TOO_BIG"),
        ("/pub?topic=p*", b"y" * 101, 413, "MSG_TOO_BIG"),  # the body is checked first
        ("/mpub?topic=p1", b"a\nb", 200, "OK"),
        ("/mpub?topic=p1", b"", 200, "OK"),
        ("/mpub", b"a", 400, "MISSING_ARG_TOPIC"),
        ("/mpub?topic=p*", b"a", 400, "INVALID_TOPIC"),
        ("/mpub?topic=p1", b"a\n" + b"z" * 101, 413, "MSG_TOO_BIG"),
        ("/mpub?topic=p1", b"z" * 1001, 413, "BODY_TOO_BIG"),  # --max-body-size=1000
        ("/mpub?topic=p1", (b"z" * 99 + b"\n") * 10, 200, "OK"),
        ("/mpub?topic=p1&binary=true", binary_mpub(b"a", b"bc"), 200, "OK"),
        ("/mpub?topic=p1&binary=true", b"", 413, "BAD_BODY"),
        ("/mpub?topic=p1&binary=true", binary_mpub(count=0), 413, "BAD_BODY"),
        ("/mpub?topic=p1&binary=true", binary_mpub(b"a", count=200), 413, "BAD_BODY"),
        ("/mpub?topic=p1&binary=true", binary_mpub(b"a", b""), 413, "BAD_MESSAGE"),
        ("/mpub?topic=p1&binary=true", binary_mpub(b"z" * 101), 413, "BAD_MESSAGE"),
        ("/mpub?topic=p1&binary=true", binary_mpub(b"a", b"bc")[:-1], 413, "BAD_MESSAGE"),
    ],
)
def test_pub_and_mpub_answers(
    http: httpx.Client, target: str, body: bytes, status: int, answer: str
) -> None:
    r = http.post(target, content=body)
    assert r.status_code == status
    assert r.headers["x-nsq-content-type"] == V1
    if status == 200:
        assert r.content == b"OK"
        assert r.headers["content-type"] == TEXT
    else:
        assert r.content == b'{"message":"%s"}' % answer.encode()
        assert r.headers["content-type"] == JSON


def test_size_limits_apply_to_chunked_bodies(http: httpx.Client) -> None:
    def chunks(*parts: bytes) -> Any:
        yield from parts

    assert http.post("/pub?topic=chunked", content=chunks(b"y" * 60, b"y" * 40)).text == "OK"
    r = http.post("/pub?topic=chunked", content=chunks(b"y" * 60, b"y" * 41))
    assert (r.status_code, r.json()) == (413, {"message": "MSG_TOO_BIG"})
    r = http.post("/mpub?topic=chunked", content=chunks(b"z\n" * 300, b"z\n" * 201))
    assert (r.status_code, r.json()) == (413, {"message": "BODY_TOO_BIG"})
    assert topic_stats(http, "chunked")["message_count"] == 1


def test_published_messages_arrive_intact(http: httpx.Client, nsqd: Daemon) -> None:
    with TCPClient(nsqd.tcp_addr) as consumer:
        consumer.sub("intact", "c")
        consumer.rdy(100)
        assert http.post("/pub?topic=intact", content=b"\x00\xff raw \r\n").text == "OK"
        assert http.post("/mpub?topic=intact", content=b"a\nb\r\n\n\nc\n").text == "OK"
        binary = binary_mpub(b"x\ny", b"\n")
        assert http.post("/mpub?topic=intact&binary=1", content=binary).text == "OK"
        assert http.post("/mpub?topic=intact&binary=0", content=b"t1\nt2").text == "OK"
        got = []
        for _ in range(8):
            msg_id, attempts, body = consumer.message()
            assert attempts == 1
            consumer.fin(msg_id)
            got.append(body)
    assert got == [b"\x00\xff raw \r\n", b"a", b"b\r", b"c", b"x\ny", b"\n", b"t1", b"t2"]
    t = topic_stats(http, "intact")
    assert (t["message_count"], t["message_bytes"]) == (8, 9 + 1 + 2 + 1 + 3 + 1 + 2 + 2)


def test_deferred_pub(http: httpx.Client, nsqd: Daemon) -> None:
    http.post("/topic/create?topic=later")
    http.post("/channel/create?topic=later&channel=c")
    assert http.post("/pub?topic=later&defer=300", content=b"soon").text == "OK"
    c = channel_stats(http, "later", "c")
    assert (c["deferred_count"], c["depth"]) == (1, 0)
    wait_until(lambda: channel_stats(http, "later", "c")["depth"] == 1, timeout=5)
    assert channel_stats(http, "later", "c")["deferred_count"] == 0


def test_deferred_pub_is_deferred_on_every_channel(http: httpx.Client) -> None:
    http.post("/topic/create?topic=later2")
    http.post("/channel/create?topic=later2&channel=a")
    http.post("/channel/create?topic=later2&channel=b")
    assert http.post("/pub?topic=later2&defer=9000", content=b"x").text == "OK"

    def both_deferred() -> bool:
        chans = topic_stats(http, "later2")["channels"]
        return [(c["depth"], c["deferred_count"]) for c in chans] == [(0, 1), (0, 1)]

    wait_until(both_deferred, timeout=1.0)


# -- topics and channels -------------------------------------------------------------------------


def error(r: httpx.Response) -> tuple[int, str]:
    return r.status_code, r.json()["message"]


def test_topic_admin(http: httpx.Client, nsqd: Daemon) -> None:
    r = http.post("/topic/create?topic=adm")
    assert (r.status_code, r.content, r.headers["x-nsq-content-type"]) == (200, b"", V1)
    assert "content-type" not in r.headers
    assert error(http.post("/topic/create")) == (400, "MISSING_ARG_TOPIC")
    assert error(http.post("/topic/create?topic=a*")) == (400, "INVALID_TOPIC")
    assert error(http.post("/topic/delete?topic=a*")) == (404, "TOPIC_NOT_FOUND")
    assert error(http.post("/topic/empty?topic=a*")) == (400, "INVALID_TOPIC")
    assert error(http.post("/topic/empty?topic=nope")) == (404, "TOPIC_NOT_FOUND")
    assert error(http.post("/topic/pause?topic=nope")) == (404, "TOPIC_NOT_FOUND")
    assert error(http.post("/topic/unpause")) == (400, "MISSING_ARG_TOPIC")

    http.post("/mpub?topic=adm", content=b"1\n2\n3")
    assert topic_stats(http, "adm")["depth"] == 3
    assert http.post("/topic/empty?topic=adm").status_code == 200
    assert topic_stats(http, "adm")["depth"] == 0

    with TCPClient(nsqd.tcp_addr) as consumer:
        consumer.sub("adm", "c")
        consumer.rdy(10)
        assert http.post("/topic/pause?topic=adm").status_code == 200
        assert topic_stats(http, "adm")["paused"] is True
        http.post("/pub?topic=adm", content=b"held")
        time.sleep(0.1)
        t = topic_stats(http, "adm")
        assert (t["depth"], t["channels"][0]["in_flight_count"]) == (1, 0)
        assert http.post("/topic/unpause?topic=adm").status_code == 200
        msg_id, _, body = consumer.message()
        assert body == b"held"
        consumer.fin(msg_id)
        assert topic_stats(http, "adm")["paused"] is False

        assert http.post("/topic/delete?topic=adm").status_code == 200
        assert stats(http, topic="adm")["topics"] is None
        assert error(http.post("/topic/delete?topic=adm")) == (404, "TOPIC_NOT_FOUND")
        with pytest.raises((ConnectionError, OSError)):  # its consumers are disconnected
            consumer.frame()


def test_channel_admin(http: httpx.Client, nsqd: Daemon) -> None:
    assert error(http.post("/channel/create")) == (400, "MISSING_ARG_TOPIC")
    assert error(http.post("/channel/create?topic=a*")) == (400, "INVALID_ARG_TOPIC")
    assert error(http.post("/channel/create?topic=ch")) == (400, "MISSING_ARG_CHANNEL")
    assert error(http.post("/channel/create?topic=ch&channel=c*")) == (400, "INVALID_ARG_CHANNEL")
    assert error(http.post("/channel/create?topic=ch&channel=c")) == (404, "TOPIC_NOT_FOUND")
    http.post("/topic/create?topic=ch")
    r = http.post("/channel/create?topic=ch&channel=c")
    assert (r.status_code, r.content) == (200, b"")
    for action in ("delete", "empty", "pause", "unpause"):
        r = http.post(f"/channel/{action}?topic=ch&channel=nope")
        assert error(r) == (404, "CHANNEL_NOT_FOUND")

    http.post("/mpub?topic=ch", content=b"1\n2")
    assert channel_stats(http, "ch", "c")["depth"] == 2
    assert http.post("/channel/pause?topic=ch&channel=c").status_code == 200
    with TCPClient(nsqd.tcp_addr) as consumer:
        consumer.sub("ch", "c")
        consumer.rdy(10)
        time.sleep(0.1)
        c = channel_stats(http, "ch", "c")
        assert (c["paused"], c["depth"], c["in_flight_count"]) == (True, 2, 0)
        assert http.post("/channel/unpause?topic=ch&channel=c").status_code == 200
        ids = [consumer.message()[0] for _ in range(2)]
        c = channel_stats(http, "ch", "c")
        assert (c["paused"], c["depth"], c["in_flight_count"]) == (False, 0, 2)
        assert http.post("/channel/empty?topic=ch&channel=c").status_code == 200
        assert channel_stats(http, "ch", "c")["in_flight_count"] == 0
        consumer.fin(ids[0])  # no longer in flight: a non-fatal E_FIN_FAILED
        kind, data = consumer.frame()
        assert (kind, data.split(b" ")[0]) == (1, b"E_FIN_FAILED")
        assert http.post("/channel/delete?topic=ch&channel=c").status_code == 200
        assert topic_stats(http, "ch")["channels"] == []
        with pytest.raises((ConnectionError, OSError)):
            consumer.frame()


# -- /config ---------------------------------------------------------------------------------------


def test_config(http: httpx.Client, nsqd: Daemon) -> None:
    def get(name: str) -> tuple[int, str, str]:
        r = http.get(f"/config/{name}")
        return r.status_code, r.text, r.headers.get("content-type", "")

    assert get("mem_queue_size") == (200, "10000", JSON)
    assert get("max_msg_size") == (200, "100", JSON)
    assert get("msg_timeout") == (200, "60000000000", JSON)
    assert get("max_req_timeout") == (200, "10000000000", JSON)
    assert get("nsqlookupd_tcp_addresses") == (200, "[]", JSON)
    assert get("snappy") == (200, "true", JSON)
    assert get("tls_required") == (200, "0", JSON)
    assert get("tls_min_version") == (200, "769", JSON)
    assert get("log_level") == (200, "2", JSON)
    assert get("log_prefix") == (200, "[nsqd] ", TEXT)  # strings are raw, not JSON
    assert get("tls_cert") == (200, "", "")
    assert get("tcp_address") == (200, f"{HOST}:{nsqd.tcp_port}", TEXT)
    assert get("broadcast_http_port") == (200, str(nsqd.http_port), JSON)
    assert get("statsd_prefix")[1] == f"nsq.{socket.gethostname()}_{nsqd.http_port}.".replace(
        ":", "_"
    )
    assert get("nope")[:2] == (400, '{"message":"INVALID_OPTION"}')
    assert get("verbose")[:2] == (400, '{"message":"INVALID_OPTION"}')

    def put(name: str, body: bytes) -> tuple[int, str]:
        r = http.put(f"/config/{name}", content=body)
        return r.status_code, r.text

    assert put("log_level", b"DEBUG") == (200, "1")
    assert put("log_level", b"warning") == (400, '{"message":"INVALID_VALUE"}')
    assert put("log_level", b"") == (413, '{"message":"INVALID_VALUE"}')
    assert put("log_level", b"x" * 101) == (413, '{"message":"INVALID_VALUE"}')
    assert put("mem_queue_size", b"1") == (400, '{"message":"INVALID_OPTION"}')
    assert put("nsqlookupd_tcp_addresses", b"[1]") == (400, '{"message":"INVALID_VALUE"}')
    assert put("nsqlookupd_tcp_addresses", b'["127.0.0.1:4160"]') == (200, '["127.0.0.1:4160"]')
    assert put("nsqlookupd_tcp_addresses", b"null") == (200, "null")
    assert get("nsqlookupd_tcp_addresses") == (200, "null", JSON)
    assert put("nsqlookupd_tcp_addresses", b"[]") == (200, "[]")
    # log_level takes effect: at warn, requests are no longer logged
    assert put("log_level", b"warn") == (200, "3")
    http.get("/info?quiet=1")
    assert put("log_level", b"info") == (200, "2")
    http.get("/info?loud=1")
    log = wait_until(lambda: "/info?loud=1" in nsqd.log() and nsqd.log())
    assert "/info?quiet=1" not in log
    assert re.search(r"INFO: 200 GET /info\?loud=1 \(127\.0\.0\.1:\d+\) [\d.]+(ns|µs|ms|s)\n", log)


# -- /stats ----------------------------------------------------------------------------------------

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
