"""Differential checks against the Go nsqd v1.3.0: the same requests, in the same order, to
both daemons (same flags); same status, same body (times, ports, paths and addresses masked),
same content headers; /stats with the same key paths at every level for the same scenario."""

from __future__ import annotations

import json
import re
import socket
import time
from collections.abc import Iterator
from typing import Any

import httpx
import pytest
from nsqhttp_support import (
    CONTENT_HEADERS,
    HOST,
    Daemon,
    TCPClient,
    binary_mpub,
    key_paths,
    normalize,
    wait_until,
)

# (method, target, body); body None = no body, a list = sent chunked
Case = tuple[str, str, Any]


DAEMONS = ("ours",)  # these tests compare ours with the `reference` fixture themselves


ROUTING: list[Case] = [
    ("GET", "/ping", None),
    ("GET", "/info", None),
    ("GET", "/nope", None),
    ("GET", "/ping/", None),
    ("POST", "/ping/", None),
    ("GET", "/PING", None),
    ("GET", "//ping", None),
    ("GET", "/Stats?format=json&include_mem=false&x=1", None),
    ("POST", "/Pub?topic=routing", b"x"),
    ("POST", "/pub/?topic=routing", b"x"),
    ("PUT", "/pub/?topic=routing", b"x"),
    ("GET", "/pub?topic=routing", None),
    ("PUT", "/pub", b"x"),
    ("POST", "/ping", None),
    ("HEAD", "/ping", None),
    ("DELETE", "/ping", None),
    ("OPTIONS", "/pub", None),
    ("OPTIONS", "/config/x", None),
    ("OPTIONS", "/nope", None),
    ("OPTIONS", "/ping/", None),
    ("GET", "/config/", None),
    ("GET", "/config", None),
    ("GET", "/config/a/b", None),
    ("POST", "/config/x", None),
    ("GET", "/config/mem_queue_size/", None),
    ("GET", "/CONFIG/mem_queue_size", None),
    ("PUT", "/Config/log_level", b"info"),
    ("POST", "/topic/Create?topic=routing", None),
    ("GET", "/topic/create?topic=routing", None),
    ("GET", "/a%2Fb", None),
    ("GET", "/p%69ng", None),
    ("POST", "/put?topic=routing", b"x"),
    ("POST", "/create_topic?topic=routing", None),
    ("GET", "/debug/setblockrate", None),
    ("PUT", "/debug/setblockrate?rate=x", None),
    ("PUT", "/debug/setblockrate", None),
    ("PUT", "/debug/setblockrate?rate=99999999999999999999", None),
    ("PUT", "/debug/setblockrate?rate=0", None),
    # Request.FormValue keeps the pairs that parse: a bad one beside `rate` is no 400
    ("PUT", "/debug/setblockrate?rate=x&a=1;b=2", None),
    ("PUT", "/debug/setblockrate?a=1;b=2&rate=0", None),
    ("POST", "/debug/freememory", None),
    ("GET", "/debug/pprof", None),
    ("OPTIONS", "/debug/pprof/symbol", None),
    ("PUT", "/debug/pprof/heap", None),
    ("GET", "/debug/pprof/nope", None),
    ("GET", "/debug/pprof/allocs", None),
]

PUB: list[Case] = [
    ("POST", "/pub?topic=pub", b"hello"),
    ("POST", "/pub?topic=pub", b""),
    ("POST", "/pub?topic=pub", None),
    ("POST", "/pub", b"x"),
    ("POST", "/pub?other=1", b"x"),
    ("POST", "/pub?topic=t*", b"x"),
    ("POST", "/pub?topic=", b"x"),
    ("POST", "/pub?topic=" + "a" * 65, b"x"),
    ("POST", "/pub?topic=" + "a" * 64, b"x"),
    ("POST", "/pub?topic=pub%23ephemeral", b"x"),
    ("POST", "/pub?topic=pub&topic=t*", b"x"),
    ("POST", "/pub?topic=t*&topic=pub", b"x"),
    ("POST", "/pub?topic=pub&defer=abc", b"x"),
    # nsqd makes the topic before it reads `defer`: a refused one leaves it made
    ("POST", "/pub?topic=pubdefer&defer=abc", b"x"),
    ("POST", "/pub?topic=pubdefer2&defer=-1", b"x"),
    ("GET", "/stats?format=json&include_mem=false&topic=pubdefer", None),
    ("GET", "/stats?format=json&include_mem=false&topic=pubdefer2", None),
    ("POST", "/pub?topic=pub&defer=-1", b"x"),
    ("POST", "/pub?topic=pub&defer=10001", b"x"),
    ("POST", "/pub?topic=pub&defer=10000", b"x"),
    ("POST", "/pub?topic=pub&defer=+5", b"x"),
    ("POST", "/pub?topic=pub&defer=0", b"x"),
    ("POST", "/pub?topic=pub&defer=", b"x"),
    ("POST", "/pub?topic=pub&defer=5_0", b"x"),
    ("POST", "/pub?topic=pub&defer=0x10", b"x"),
    ("POST", "/pub?topic=pub&defer=99999999999999999999", b"x"),
    # digits of other scripts: superscript two, Arabic-Indic 12, fullwidth 12 (Go: ASCII only)
    ("POST", "/pub?topic=pub&defer=%C2%B2", b"x"),
    ("POST", "/pub?topic=pub&defer=%D9%A1%D9%A2", b"x"),
    ("POST", "/pub?topic=pub&defer=%EF%BC%91%EF%BC%92", b"x"),
    ("POST", "/pub?topic=pub&defer=9223372036854775807", b"x"),
    ("POST", "/pub?topic=p%zzb", b"x"),
    ("POST", "/pub?topic=pub;x=1", b"x"),
    ("POST", "/pub?topic=pub&a=%", b"x"),
    ("POST", "/pub?topic=p+b", b"x"),
    ("POST", "/pub?topic=pub", b"y" * 100),
    ("POST", "/pub?topic=pub", b"y" * 101),
    ("POST", "/pub?topic=t*", b"y" * 101),
    ("POST", "/pub?topic=pub", [b"y" * 60, b"y" * 40]),
    ("POST", "/pub?topic=pub", [b"y" * 60, b"y" * 41]),
    ("POST", "/pub?topic=pub", [b"y" * 60, b"y" * 1000]),
    ("POST", "/pub?topic=pub", b"\x00\xff binary \r\n"),
]

MPUB: list[Case] = [
    ("POST", "/mpub?topic=mpub", b"a\nb\r\n\n\nc"),
    ("POST", "/mpub?topic=mpub", b""),
    ("POST", "/mpub?topic=mpub", b"\n\n\n"),
    ("POST", "/mpub?topic=mpub", b"one\n"),
    ("POST", "/mpub", b"a"),
    ("POST", "/mpub?topic=t*", b"a"),
    ("POST", "/mpub?topic=mpub", b"ok\n" + b"z" * 101 + b"\nok"),
    ("POST", "/mpub?topic=mpub", b"z" * 100 + b"\n" + b"z" * 100),
    ("POST", "/mpub?topic=mpub", (b"z" * 99 + b"\n") * 10),
    ("POST", "/mpub?topic=mpub", (b"z" * 99 + b"\n") * 10 + b"z"),
    ("POST", "/mpub?topic=mpub", (b"z" * 99 + b"\n") * 11),
    ("POST", "/mpub?topic=t*", (b"z" * 99 + b"\n") * 11),
    ("POST", "/mpub?topic=mpub", [(b"z" * 99 + b"\n") * 5, (b"z" * 99 + b"\n") * 5]),
    ("POST", "/mpub?topic=mpub", [(b"z" * 99 + b"\n") * 5, (b"z" * 99 + b"\n") * 5 + b"z"]),
    ("POST", "/mpub?topic=mpub", [b"z" * 500, b"z" * 501 + b"\nq"]),
    ("POST", "/mpub?topic=mpub", [(b"z" * 99 + b"\n") * 9, b"z" * 110]),
    ("POST", "/mpub?topic=mpub&binary=true", binary_mpub(b"x", b"yz")),
    ("POST", "/mpub?topic=mpub&binary=1", binary_mpub(b"x" * 100)),
    ("POST", "/mpub?topic=mpub&binary=yes", binary_mpub(b"x", b"yz")),
    ("POST", "/mpub?topic=mpub&binary=", binary_mpub(b"x")),
    ("POST", "/mpub?topic=mpub&binary=T", binary_mpub(b"x")),
    ("POST", "/mpub?topic=mpub&binary=false", b"a\nb"),
    ("POST", "/mpub?topic=mpub&binary=0", b"a\nb"),
    ("POST", "/mpub?topic=mpub&binary=true", b"a\nb"),
    ("POST", "/mpub?topic=mpub&binary=true", b""),
    ("POST", "/mpub?topic=mpub&binary=true", b"\x00\x00"),
    ("POST", "/mpub?topic=mpub&binary=true", binary_mpub(count=0)),
    ("POST", "/mpub?topic=mpub&binary=true", binary_mpub(count=-1)),
    ("POST", "/mpub?topic=mpub&binary=true", binary_mpub(b"x", count=199)),
    ("POST", "/mpub?topic=mpub&binary=true", binary_mpub(b"x", count=200)),
    ("POST", "/mpub?topic=mpub&binary=true", binary_mpub(b"x", count=2)),
    ("POST", "/mpub?topic=mpub&binary=true", binary_mpub(b"x", b"")),
    ("POST", "/mpub?topic=mpub&binary=true", binary_mpub(b"x", b"y" * 101)),
    ("POST", "/mpub?topic=mpub&binary=true", binary_mpub(b"x", b"yy")[:-1]),
    ("POST", "/mpub?topic=mpub&binary=true", binary_mpub(b"x") + b"trailing junk"),
    ("POST", "/mpub?topic=mpub&binary=true", [binary_mpub(b"x", b"y")[:7], b"\x00\x01y"]),
    ("POST", "/mpub?topic=mpub&binary=true", b"z" * 1001),
    ("POST", "/mpub?topic=t*&binary=true", binary_mpub(b"x")),
    ("POST", "/mpub?topic=p%zz", b"a"),
    ("GET", "/stats?format=json&topic=mpub&include_mem=false", None),
]

ADMIN: list[Case] = [
    ("POST", "/topic/create?topic=adm", None),
    ("POST", "/topic/create?topic=adm", b"ignored body"),
    ("POST", "/topic/create", None),
    ("POST", "/topic/create?topic=", None),
    ("POST", "/topic/create?topic=a*", None),
    ("POST", "/topic/create?topic=%zz", None),
    ("POST", "/topic/delete?topic=nope", None),
    ("POST", "/topic/delete?topic=a*", None),
    ("POST", "/topic/delete", None),
    ("POST", "/topic/empty?topic=nope", None),
    ("POST", "/topic/empty?topic=a*", None),
    ("POST", "/topic/empty", None),
    ("POST", "/topic/pause?topic=nope", None),
    ("POST", "/topic/pause?topic=a*", None),
    ("POST", "/topic/unpause", None),
    ("POST", "/channel/create", None),
    ("POST", "/channel/create?topic=a*", None),
    ("POST", "/channel/create?topic=adm", None),
    ("POST", "/channel/create?topic=adm&channel=c*", None),
    ("POST", "/channel/create?topic=adm&channel=", None),
    ("POST", "/channel/create?topic=nope&channel=c", None),
    ("POST", "/channel/create?topic=adm&channel=c1", None),
    ("POST", "/channel/create?topic=adm&channel=c2#ephemeral", None),
    ("POST", "/channel/create?topic=adm&channel=c3%23ephemeral", None),
    ("POST", "/channel/delete?topic=adm&channel=nope", None),
    ("POST", "/channel/delete?topic=nope&channel=c1", None),
    ("POST", "/channel/delete?topic=adm&channel=c*", None),
    ("POST", "/channel/empty?topic=adm&channel=nope", None),
    ("POST", "/channel/pause?topic=adm&channel=nope", None),
    ("POST", "/channel/unpause?topic=adm&channel=nope", None),
    ("POST", "/pub?topic=adm", b"m1"),
    ("POST", "/mpub?topic=adm", b"m2\nm3"),
    ("POST", "/topic/pause?topic=adm", None),
    ("POST", "/channel/pause?topic=adm&channel=c1", None),
    ("POST", "/pub?topic=adm", b"m4"),
    ("GET", "/stats?format=json&topic=adm&include_mem=false", None),
    ("GET", "/stats?topic=adm&include_mem=false", None),
    ("POST", "/topic/unpause?topic=adm", None),
    ("POST", "/channel/unpause?topic=adm&channel=c1", None),
    ("GET", "/stats?format=json&topic=adm&include_mem=false", None),
    ("POST", "/channel/empty?topic=adm&channel=c1", None),
    ("POST", "/topic/empty?topic=adm", None),
    ("GET", "/stats?format=json&topic=adm&include_mem=false", None),
    ("POST", "/channel/delete?topic=adm&channel=c1", None),
    ("GET", "/stats?format=json&topic=adm&include_mem=false", None),
    ("POST", "/topic/delete?topic=adm", None),
    ("POST", "/topic/delete?topic=adm", None),
    ("GET", "/stats?format=json&topic=adm&include_mem=false", None),
    ("GET", "/stats?format=json&topic=adm&channel=c1&include_mem=false", None),
    ("GET", "/stats?format=json&channel=nope&include_mem=false", None),
    ("GET", "/stats?format=json&include_mem=0&include_clients=0&topic=%zz", None),
    ("GET", "/stats?format=text&include_mem=false&topic=nope", None),
]

CONFIG_NAMES = [
    "log_level",
    "log_prefix",
    "id",
    "https_address",
    "http_address",
    "tcp_address",
    "auth_http_addresses",
    "broadcast_address",
    "broadcast_tcp_port",
    "broadcast_http_port",
    "nsqlookupd_tcp_addresses",
    "http_client_connect_timeout",
    "http_client_request_timeout",
    "data_path",
    "mem_queue_size",
    "max_bytes_per_file",
    "sync_every",
    "sync_timeout",
    "queue_scan_worker_pool_max",
    "queue_scan_selection_count",
    "msg_timeout",
    "max_msg_timeout",
    "max_msg_size",
    "max_req_timeout",
    "max_body_size",
    "max_heartbeat_interval",
    "max_rdy_count",
    "max_output_buffer_size",
    "max_output_buffer_timeout",
    "min_output_buffer_timeout",
    "output_buffer_timeout",
    "max_channel_consumers",
    "statsd_address",
    "statsd_interval",
    "statsd_mem_stats",
    "statsd_prefix",
    "statsd_udp_packet_size",
    "statsd_exclude_ephemeral",
    "e2e_processing_latency_percentiles",
    "e2e_processing_latency_window_time",
    "tls_cert",
    "tls_key",
    "tls_client_auth_policy",
    "tls_root_ca_file",
    "tls_required",
    "tls_min_version",
    "deflate",
    "max_deflate_level",
    "snappy",
    # not options of v1.3.0's Options struct
    "config",
    "version",
    "verbose",
    "worker_id",
    "logger",
    "auth_http_request_method",
    "topology_zone",
    "nope",
]

CONFIG: list[Case] = [
    *[("GET", f"/config/{name}", None) for name in CONFIG_NAMES],
    ("PUT", "/config/log_level", b"debug"),
    ("GET", "/config/log_level", None),
    ("PUT", "/config/log_level", b"WARN"),
    ("PUT", "/config/log_level", b"warning"),
    ("PUT", "/config/log_level", b"info\n"),
    ("PUT", "/config/log_level", b""),
    ("PUT", "/config/log_level", None),
    ("PUT", "/config/log_level", b"x" * 101),
    ("PUT", "/config/log_level", b"info"),
    ("PUT", "/config/mem_queue_size", b"5"),
    ("PUT", "/config/nope", b"5"),
    ("PUT", "/config/nope", b""),
    ("PUT", "/config/nsqlookupd_tcp_addresses", b'"x"'),
    ("PUT", "/config/nsqlookupd_tcp_addresses", b"[1]"),
    ("PUT", "/config/nsqlookupd_tcp_addresses", b'["a:1"] x'),
    ("PUT", "/config/nsqlookupd_tcp_addresses", b"null"),
    ("GET", "/config/nsqlookupd_tcp_addresses", None),
    ("PUT", "/config/nsqlookupd_tcp_addresses", b" [ ] "),
    ("GET", "/config/nsqlookupd_tcp_addresses", None),
]


def exchange(client: httpx.Client, case: Case) -> tuple[int, dict[str, str], bytes]:
    method, target, body = case
    content: Any = body
    if isinstance(body, list):
        chunks = body

        def gen() -> Iterator[bytes]:
            yield from chunks

        content = gen()
    response = client.request(method, target, content=content)
    headers = {k: response.headers[k] for k in CONTENT_HEADERS if k in response.headers}
    assert (
        int(response.headers.get("content-length", len(response.content))) == len(response.content)
        or method == "HEAD"
    )
    return response.status_code, headers, response.content


def compare(nsqd: Daemon, reference: Daemon, cases: list[Case]) -> None:
    mismatches = []
    with (
        httpx.Client(base_url=nsqd.url, timeout=5.0) as ours,
        httpx.Client(base_url=reference.url, timeout=5.0) as ref,
    ):
        for case in cases:
            got = exchange(ours, case)
            want = exchange(ref, case)
            got = (got[0], got[1], normalize(nsqd, got[2]))
            want = (want[0], want[1], normalize(reference, want[2]))
            if got != want:
                shown = case if not isinstance(case[2], bytes | list) else case[:2]
                mismatches.append(f"{shown}:\n    ours: {got!r}\n    ref:  {want!r}")
    assert not mismatches, "differences from nsqd v1.3.0:\n" + "\n".join(mismatches)


def test_routing_like_httprouter(nsqd: Daemon, reference: Daemon) -> None:
    compare(nsqd, reference, ROUTING)


def test_pub_statuses_and_bodies(nsqd: Daemon, reference: Daemon) -> None:
    compare(nsqd, reference, PUB)


def test_mpub_statuses_and_bodies(nsqd: Daemon, reference: Daemon) -> None:
    compare(nsqd, reference, MPUB)


def test_topic_and_channel_admin(nsqd: Daemon, reference: Daemon) -> None:
    compare(nsqd, reference, ADMIN)


def test_config_get_and_put(nsqd: Daemon, reference: Daemon) -> None:
    compare(nsqd, reference, CONFIG)


def raw_exchange(daemon: Daemon, request: bytes) -> bytes:
    """A hand-written request on its own connection; the status line and content headers."""
    with socket.create_connection((HOST, daemon.http_port), timeout=5.0) as s:
        s.settimeout(5.0)
        s.sendall(request)
        data = b""
        while b"\r\n\r\n" not in data:
            chunk = s.recv(65536)
            if not chunk:
                break
            data += chunk
    head = data.split(b"\r\n\r\n", 1)[0].split(b"\r\n")
    status = head[0].split(b" ")[1]
    keep = [h for h in head[1:] if h.split(b":")[0].lower() in (b"location", b"allow")]
    return b" ".join([status, *sorted(keep)])


@pytest.mark.parametrize(
    "target",
    [
        *(b"/./info", b"/a/../ping", b"/pub/../ping/", b"*", b"/info?", b"/ping?x"),
        # absolute form: any scheme, its path after the authority; opaque: no path
        *(b"ftp://h/ping", b"HTTP://h/info", b"x:/ping", b"mailto:x", b"http://h%zz/ping"),
        # redirected: the absolute form's scheme and authority stay in Location, a lone `?`
        # too; a path without them is cleaned by http.Redirect; `/config//` is an empty :opt
        *(b"HTTP://h/ping/", b"http://u@h/Info?x=1", b"/ping/?", b"/INFO?", b"/config//"),
        *(b"/config/./", b"/config/../", b"/config/%2F", b"http://h/config/./"),
        # url.parseHost: only bytes past ASCII may be escaped in a host (a 400 otherwise)
        *(b"http://h%41/ping", b"http://u%41@h%C3%A9/ping", b"http://h%25/ping"),
    ],
)
@pytest.mark.parametrize("method", [b"GET", b"OPTIONS", b"POST"])
def test_unusual_targets(nsqd: Daemon, reference: Daemon, method: bytes, target: bytes) -> None:
    request = b"%s %s HTTP/1.1\r\nHost: x\r\nContent-Length: 0\r\n\r\n" % (method, target)
    assert raw_exchange(nsqd, request) == raw_exchange(reference, request)


# -- /stats for the same TCP + HTTP scenario ------------------------------------------------


def _scenario(daemon: Daemon) -> list[TCPClient]:
    """A producer, two consumers on two channels, HTTP publishes; FIN, REQ, in flight."""
    url = daemon.url
    producer = TCPClient(daemon.tcp_addr, client_id="prod", hostname="prodhost", user_agent="ua/1")
    for i in range(3):
        producer.pub("sc", b"msg%d" % i)
    consumer = TCPClient(daemon.tcp_addr, client_id="cons", hostname="conshost", user_agent="u/2")
    consumer.sub("sc", "ch1")
    consumer.rdy(2)
    msg_id, _, _ = consumer.message()
    consumer.fin(msg_id)
    msg_id, _, _ = consumer.message()
    consumer.req(msg_id)
    httpx.post(f"{url}/pub?topic=sc&defer=5000", content=b"later", timeout=5)
    idle = TCPClient(daemon.tcp_addr)
    idle.sub("sc", "ch2")
    httpx.post(f"{url}/pub?topic=sc", content=b"now", timeout=5)
    httpx.post(f"{url}/mpub?topic=other", content=b"a\nb", timeout=5)
    httpx.post(f"{url}/topic/create?topic=empty", timeout=5)
    httpx.post(f"{url}/channel/pause?topic=sc&channel=ch2", timeout=5)

    def settled() -> bool:
        stats = httpx.get(f"{url}/stats?format=json&topic=sc&include_clients=false", timeout=5)
        chans = {c["channel_name"]: c for c in stats.json()["topics"][0]["channels"]}
        return chans["ch1"]["in_flight_count"] == 2 and chans["ch1"]["deferred_count"] == 1

    wait_until(settled)
    return [producer, consumer, idle]


STATS_QUERIES = [
    "format=json",
    "format=json&include_mem=false",
    "format=json&include_clients=false",
    "format=json&include_clients=0&include_mem=0",
    "format=json&topic=sc",
    "format=json&topic=sc&channel=ch1",
    "format=json&channel=ch2",
    "format=json&topic=nope",
    "format=json&topic=other&channel=nope",
    "format=json&include_clients=maybe",
]


def test_stats_same_keys_and_values_for_the_same_scenario(nsqd: Daemon, reference: Daemon) -> None:
    clients = _scenario(nsqd) + _scenario(reference)
    try:
        problems = []
        for query in STATS_QUERIES:
            got = httpx.get(f"{nsqd.url}/stats?{query}", timeout=5)
            want = httpx.get(f"{reference.url}/stats?{query}", timeout=5)
            assert got.status_code == want.status_code == 200
            assert got.headers["content-type"] == want.headers["content-type"]
            got_json, want_json = got.json(), want.json()
            if key_paths(got_json) != key_paths(want_json):
                problems.append(
                    f"{query}: key paths\n  ours {key_paths(got_json)}\n"
                    f"  ref  {key_paths(want_json)}"
                )
            got_body = normalize(nsqd, got.content)
            want_body = normalize(reference, want.content)
            if got_body != want_body:
                problems.append(f"{query}:\n  ours {got_body!r}\n  ref  {want_body!r}")
        for query in (
            "include_mem=false",
            "include_mem=false&topic=sc",
            "topic=nope&include_mem=0",
        ):
            got = httpx.get(f"{nsqd.url}/stats?{query}", timeout=5)
            want = httpx.get(f"{reference.url}/stats?{query}", timeout=5)
            assert got.headers["content-type"] == want.headers["content-type"]
            got_text = normalize(nsqd, got.content)
            want_text = normalize(reference, want.content)
            if got_text != want_text:
                problems.append(
                    f"text {query}:\n{got_text.decode()}\n-- ref --\n{want_text.decode()}"
                )
        # the memory block: nsqd's keys in nsqd's order, integers
        got_mem = httpx.get(f"{nsqd.url}/stats?format=json", timeout=5).json()["memory"]
        want_mem = httpx.get(f"{reference.url}/stats?format=json", timeout=5).json()["memory"]
        assert list(got_mem) == list(want_mem)
        assert all(isinstance(v, int) for v in got_mem.values())
        text = httpx.get(f"{nsqd.url}/stats", timeout=5).text
        ref_text = httpx.get(f"{reference.url}/stats", timeout=5).text
        assert re.findall(r"(?m)^   (\w+) +\t\d+$", text) == re.findall(
            r"(?m)^   (\w+) +\t\d+$", ref_text
        )
        assert not problems, "\n".join(problems)
    finally:
        for client in clients:
            client.close()


def test_info_same_keys(nsqd: Daemon, reference: Daemon) -> None:
    got = httpx.get(f"{nsqd.url}/info", timeout=5).json()
    want = httpx.get(f"{reference.url}/info", timeout=5).json()
    assert list(got) == list(want)
    assert got["http_port"] == nsqd.http_port and got["tcp_port"] == nsqd.tcp_port
    assert abs(got["start_time"] - time.time()) < 120
    assert json.dumps({k: v for k, v in got.items() if "port" not in k and k != "start_time"}) == (
        json.dumps({k: v for k, v in want.items() if "port" not in k and k != "start_time"})
    )


def test_e2e_latency_shape_with_percentiles(nsqd: Daemon, reference: Daemon) -> None:
    """With --e2e-processing-latency-percentile the quantile lists appear on channels and
    their topics (no FIN yet, so the values are comparable: zeros)."""
    from nsqhttp_support import start

    args = ("--e2e-processing-latency-percentile=1.0,0.5", "--mem-queue-size=50")
    daemons = [start("ours", *args), start("reference", *args)]
    try:
        bodies = []
        for daemon in daemons:
            httpx.post(f"{daemon.url}/topic/create?topic=e", timeout=5)
            httpx.post(f"{daemon.url}/topic/create?topic=f", timeout=5)
            httpx.post(f"{daemon.url}/channel/create?topic=e&channel=c", timeout=5)
            httpx.post(f"{daemon.url}/mpub?topic=f", content=b"x\n" * 60, timeout=5)
            json_body = httpx.get(f"{daemon.url}/stats?format=json&include_mem=0", timeout=5)
            text = httpx.get(f"{daemon.url}/stats?include_mem=0", timeout=5)
            config = httpx.get(f"{daemon.url}/config/e2e_processing_latency_percentiles")
            bodies.append(
                (
                    normalize(daemon, json_body.content),
                    normalize(daemon, text.content),
                    config.text,
                )
            )
        assert bodies[0] == bodies[1]
        assert b'"depth":60,"backend_depth":10,' in bodies[0][0]  # memory 50, the rest on disk
    finally:
        for daemon in daemons:
            daemon.stop()


def _e2e_after_fins(
    daemon: Daemon, hold: float, n: int
) -> tuple[dict[str, Any], list[float], list[float]]:
    """PUB n messages one by one; a consumer (RDY 1) FINs each `hold` seconds after it came:
    the channel's e2e_processing_latency from /stats, and the bounds the client saw of each
    message's life in ns (it began inside the PUB request and ended inside the FIN write):
    sorted lower bounds (PUB answered to FIN sent) and upper bounds (PUB sent to FIN written)."""
    lower, upper = [], []
    with TCPClient((HOST, daemon.tcp_port)) as consumer:
        consumer.sub("lat", "c")
        consumer.rdy(1)
        for i in range(n):
            before = time.monotonic()
            httpx.post(f"{daemon.url}/pub?topic=lat", content=b"m%d" % i, timeout=5)
            published = time.monotonic()
            msg_id, _, _ = consumer.message()
            time.sleep(hold)
            fin_at = time.monotonic()
            consumer.fin(msg_id)
            upper.append((time.monotonic() - before) * 1e9)
            lower.append((fin_at - published) * 1e9)
        consumer.nop()
        time.sleep(0.2)  # the last FIN is in
    stats = httpx.get(f"{daemon.url}/stats?format=json&topic=lat", timeout=5).json()
    latency = stats["topics"][0]["channels"][0]["e2e_processing_latency"]
    return latency, sorted(lower), sorted(upper)


def test_e2e_latency_values_agree_with_go_on_real_fins() -> None:
    """The same workload with real FINs on both daemons: the quantiles agree in shape, and
    each daemon's values lie within what its client saw (ours exact per bucket, Go's a
    sampled estimate). Each is checked against its own run's bounds, not against the
    other's: the two runs happen one after the other on a machine whose load changes."""
    from nsqhttp_support import start

    args = ("--e2e-processing-latency-percentile=1.0,0.99,0.5",)
    hold, n = 0.05, 40
    results = {}
    for kind in ("ours", "reference"):
        daemon = start(kind, *args)
        try:
            results[kind] = _e2e_after_fins(daemon, hold, n)
        finally:
            daemon.stop()
    ours, go = results["ours"][0], results["reference"][0]
    assert ours["count"] == go["count"] == n, results
    quantiles = [[p["quantile"] for p in r["percentiles"]] for r in (ours, go)]
    assert quantiles == [[1, 0.99, 0.5]] * 2, results
    slack = 2e6  # clock reads and the bucket a value is reported in
    for kind, (latency, lower, upper) in results.items():
        top, p99, p50 = (p["value"] for p in latency["percentiles"])
        assert hold * 1e9 <= p50 <= p99 <= top, (kind, latency)
        assert lower[-1] - slack <= top <= upper[-1] + slack, (kind, top, lower, upper)
        mid = n // 2
        assert lower[mid] * 0.9 - slack <= p50 <= upper[mid] * 1.1 + slack, (kind, p50, upper)


def _tls_consumer(daemon: Daemon) -> Any:
    import ssl

    client = TCPClient(daemon.tcp_addr, tls_v1=True, feature_negotiation=True, client_id="t")
    context = ssl.create_default_context()
    context.check_hostname = False
    context.verify_mode = ssl.CERT_NONE
    context.maximum_version = ssl.TLSVersion.TLSv1_2
    client.sock = context.wrap_socket(client.sock)
    client.buf = b""
    assert client.expect_response() == b"OK"
    client.sub("tls", "c")
    return client


def test_tls_client_stats(nsqd: Daemon, reference: Daemon, tmp_path: Any) -> None:
    import trustme
    from nsqhttp_support import start

    cert = trustme.CA().issue_cert("127.0.0.1")
    cert.private_key_pem.write_to_path(tmp_path / "key.pem")
    cert.cert_chain_pems[0].write_to_path(tmp_path / "cert.pem")
    args = (f"--tls-cert={tmp_path / 'cert.pem'}", f"--tls-key={tmp_path / 'key.pem'}")
    daemons = [start("ours", *args), start("reference", *args)]
    clients = []
    try:
        snaps = []
        for daemon in daemons:
            clients.append(_tls_consumer(daemon))
            r = httpx.get(f"{daemon.url}/stats?format=json&topic=tls&include_mem=0", timeout=5)
            snaps.append(r.json())
        assert key_paths(snaps[0]) == key_paths(snaps[1])
        ours, ref = (s["topics"][0]["channels"][0]["clients"][0] for s in snaps)
        for key in ("tls", "tls_version", "tls_negotiated_protocol"):
            assert ours[key] == ref[key]
        assert ours["tls_negotiated_protocol_is_mutual"] is True
        # the suite each side negotiates may differ (OpenSSL's preferences vs Go's)
        assert re.fullmatch(r"TLS_\w+|Unknown \d+", ours["tls_cipher_suite"])
    finally:
        for client in clients:
            client.close()
        for daemon in daemons:
            daemon.stop()


def whole_answer(daemon: Daemon, request: bytes) -> tuple[bytes, float]:
    """The whole answer to a hand-written request (Date removed) and how long it took: read
    until the daemon closes or 1.5 s pass without a byte (an open keep-alive connection)."""
    start = time.monotonic()
    with socket.create_connection((HOST, daemon.http_port), timeout=5.0) as s:
        s.sendall(request)
        s.settimeout(1.5)
        data = b""
        try:
            while chunk := s.recv(65536):
                data += chunk
        except TimeoutError:
            pass
    answered = time.monotonic() - start
    return re.sub(rb"\r\nDate: [^\r]*", b"", data), answered


@pytest.mark.parametrize(
    "raw",
    [
        # a chunk size past 16 hex digits: Go's chunked reader refuses it at once
        b"POST /pub?topic=t HTTP/1.1\r\nHost: x\r\nTransfer-Encoding: chunked\r\n\r\n"
        b"ffffffffffffffffff\r\nabc\r\n",
        b"CONNECT example.com:443 HTTP/1.1\r\nHost: example.com:443\r\n\r\n",
        b"PRI * HTTP/2.0\r\n\r\nSM\r\n\r\n",  # an HTTP/2 preface
        # a body read past its end on a `Connection: close` request (no answer for 60 s)
        b"POST /mpub?topic=t&binary=true HTTP/1.1\r\nHost: x\r\nConnection: close\r\n"
        b"Content-Length: 1\r\n\r\n\x00",
        b"POST /mpub?topic=t&binary=true HTTP/1.0\r\nHost: x\r\nContent-Length: 2\r\n\r\n\x00\x00",
    ],
    ids=["huge_chunk_size", "connect", "http2_preface", "cut_binary_mpub", "cut_binary_mpub_10"],
)
def test_edge_requests_answered_as_go(nsqd: Daemon, reference: Daemon, raw: bytes) -> None:
    ours, ours_s = whole_answer(nsqd, raw)
    go, go_s = whole_answer(reference, raw)
    assert ours == go
    assert ours_s < go_s + 1.0  # no waiting where Go answers at once
