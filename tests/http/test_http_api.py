"""Our nsqd's HTTP API against a daemon subprocess: every endpoint but /stats
(test_http_stats.py) and its errors, nsqd's V1 rendering and headers, routing, /pub and /mpub,
topics and channels, /config (connections: test_http_connections.py). Expected texts are what
nsqd v1.3.0 answers (test_http_reference.py checks the same against the Go binary)."""

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
