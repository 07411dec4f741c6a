"""Our nsqd's HTTP connections against a daemon subprocess: keep-alive and pipelining, a
stuck HTTP client that must not hold up the TCP protocol, the debug endpoints, TLS required,
malformed requests. Expected texts are what nsqd v1.3.0 answers."""

from __future__ import annotations

import re
import socket
import ssl
import time
from typing import Any

import httpx
from nsqhttp_support import HOST, JSON, V1, Daemon, TCPClient, stats, topic_stats


def test_keep_alive_on_one_connection(nsqd: Daemon) -> None:
    with httpx.Client(base_url=nsqd.url, timeout=5.0) as client:
        ports = set()
        for request in (
            lambda: client.get("/ping"),
            lambda: client.post("/pub?topic=ka", content=b"x"),
            lambda: client.post("/pub?topic=ka", content=b""),  # an error keeps it too
            lambda: client.post("/topic/create?topic=ka2", content=b"unread body"),
            lambda: client.get("/nope"),
            lambda: client.get("/stats?format=json"),
            lambda: client.put("/config/log_level", content=b"info"),
        ):
            r = request()
            assert r.status_code in (200, 400, 404)
            ports.add(r.extensions["network_stream"].get_extra_info("client_addr")[1])
        assert len(ports) == 1
    # pipelined requests on a raw socket are answered in order
    with socket.create_connection((HOST, nsqd.http_port), timeout=5) as s:
        s.settimeout(5)
        s.sendall(
            b"GET /ping HTTP/1.1\r\nHost: x\r\n\r\n"
            b"POST /pub?topic=ka HTTP/1.1\r\nHost: x\r\nContent-Length: 3\r\n\r\nabc"
            b"GET /nope HTTP/1.1\r\nHost: x\r\n\r\n"
        )
        data = b""
        while data.count(b"HTTP/1.1 ") < 3 or not data.endswith(b'{"message":"NOT_FOUND"}'):
            chunk = s.recv(65536)
            assert chunk, data
            data += chunk
    assert [int(m) for m in re.findall(rb"HTTP/1\.1 (\d{3})", data)] == [200, 200, 404]


def test_stuck_http_client_does_not_stall_tcp(http: httpx.Client, nsqd: Daemon) -> None:
    half_headers = socket.create_connection((HOST, nsqd.http_port), timeout=5)
    half_body = socket.create_connection((HOST, nsqd.http_port), timeout=5)
    try:
        half_headers.sendall(b"POST /pub?topic=stuck HTTP/1.1\r\nHost: x\r\nContent-Le")
        half_body.sendall(
            b"POST /pub?topic=stuck HTTP/1.1\r\nHost: x\r\nContent-Length: 10\r\n\r\nabc"
        )
        time.sleep(0.2)
        start = time.monotonic()
        with TCPClient(nsqd.tcp_addr) as consumer, TCPClient(nsqd.tcp_addr) as producer:
            consumer.sub("roundtrip", "c")
            consumer.rdy(1)
            producer.pub("roundtrip", b"through")
            msg_id, _, body = consumer.message()
            consumer.fin(msg_id)
        assert body == b"through"
        assert http.get("/ping").text == "OK"  # and other HTTP clients are served too
        assert time.monotonic() - start < 2.0
        assert stats(http, topic="stuck")["topics"] is None  # nothing published yet
        half_body.sendall(b"defghij")  # the rest of the body: the request completes
        half_body.settimeout(5)
        assert half_body.recv(4096).startswith(b"HTTP/1.1 200")
        assert topic_stats(http, "stuck")["message_count"] == 1
    finally:
        half_headers.close()
        half_body.close()


def test_debug_endpoints_answer_like_nsqd(http: httpx.Client, nsqd: Daemon) -> None:
    r = http.put("/debug/setblockrate?rate=x")
    assert (r.status_code, r.text) == (
        400,
        'invalid block rate : strconv.Atoi: parsing "x": invalid syntax',
    )
    r = http.put("/debug/setblockrate?rate=1")  # nsqd answers success with a 500
    assert (r.status_code, r.json()) == (500, {"message": "INTERNAL_ERROR"})
    assert http.post("/debug/freememory").status_code == 500
    r = http.get("/debug/pprof")
    assert (r.status_code, r.headers["location"]) == (301, "/debug/pprof/")
    cmdline = http.get("/debug/pprof/cmdline").content.split(b"\x00")
    assert f"--http-address={HOST}:{nsqd.http_port}".encode() in cmdline


def test_tls_required_refuses_plain_http(tmp_path: Any) -> None:
    import trustme
    from nsqhttp_support import https_port, start

    ca = trustme.CA()
    cert = ca.issue_cert("127.0.0.1")
    cert.private_key_pem.write_to_path(tmp_path / "key.pem")
    cert.cert_chain_pems[0].write_to_path(tmp_path / "cert.pem")
    daemon = start(
        "ours",
        f"--tls-cert={tmp_path / 'cert.pem'}",
        f"--tls-key={tmp_path / 'key.pem'}",
        "--tls-required=true",
    )
    try:
        port = https_port(daemon)
        for method, path in (("GET", "/ping"), ("POST", "/pub?topic=x"), ("GET", "/nope")):
            r = httpx.request(method, daemon.url + path, content=b"x", timeout=5)
            assert r.status_code == 403
            assert r.content == b'{"message": "TLS_REQUIRED", "https_port": %d}' % port
            assert (r.headers["content-type"], r.headers["x-nsq-content-type"]) == (JSON, V1)
        ctx = ssl.create_default_context()
        ca.configure_trust(ctx)
        r = httpx.post(f"https://{HOST}:{port}/pub?topic=x", content=b"x", verify=ctx, timeout=5)
        assert (r.status_code, r.text) == (200, "OK")  # HTTPS is not refused
    finally:
        assert daemon.stop() == 0


def test_malformed_request_gets_400_and_the_daemon_carries_on(
    http: httpx.Client, nsqd: Daemon
) -> None:
    with socket.create_connection((HOST, nsqd.http_port), timeout=5) as s:
        s.settimeout(5)
        s.sendall(b"NOT HTTP AT ALL\r\n\r\n")
        assert s.recv(4096).startswith(b"HTTP/1.1 400")
    with TCPClient(nsqd.tcp_addr) as producer:
        producer.pub("after-garbage", b"x")
    assert topic_stats(http, "after-garbage")["message_count"] == 1
