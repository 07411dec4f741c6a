"""The HTTP server layer (nsqd/http/server.py) on the wire: what net/http answers to malformed
requests, pipelining, oversized bodies and HTTPS against a daemon subprocess (ours, or the Go
nsqd: the expected bytes are what nsqd v1.3.0 sends). Every wait is bounded. (The timeouts,
100-continue and shutdown in process: test_http_server_inprocess.py.)"""

from __future__ import annotations

import re
import socket
import ssl
import threading
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import httpx
import pytest
from nsqhttp_support import HOST, Daemon, ReferenceUnavailable, https_port, reference_nsqd, start

IO_TIMEOUT = 5.0
JSON = b"Content-Type: application/json; charset=utf-8\r\nX-Nsq-Content-Type: nsq; version=1.0"
GO_ERROR = b"Content-Type: text/plain; charset=utf-8\r\nConnection: close\r\n\r\n"
GO_400 = b"HTTP/1.1 400 Bad Request\r\n" + GO_ERROR + b"400 Bad Request"


def go_status_error(status: bytes, text: bytes) -> bytes:
    return b"HTTP/1.1 %s: %s\r\n%s%s: %s" % (status, text, GO_ERROR, status, text)


DATE = re.compile(rb"\r\nDate: [A-Z][a-z]{2}, \d\d [A-Z][a-z]{2} \d{4} \d\d:\d\d:\d\d GMT")


def mask_date(data: bytes) -> bytes:
    return re.sub(
        rb"\r\nDate: [A-Z][a-z]{2}, \d\d [A-Z][a-z]{2} \d{4} \d\d:\d\d:\d\d GMT", b"", data
    )


def exchange(port: int, request: bytes, *, until_closed: bool = True) -> bytes:
    """Send `request` (from a thread, so a server that stops reading cannot block us) and read
    everything until the server closes, or until the socket is quiet for a moment."""
    with socket.create_connection((HOST, port), timeout=IO_TIMEOUT) as s:
        s.settimeout(IO_TIMEOUT if until_closed else 0.5)

        def send() -> None:
            try:
                s.sendall(request)
            except OSError:
                pass  # the server answered and closed before taking all of it

        sender = threading.Thread(target=send, daemon=True)
        sender.start()
        data = b""
        try:
            while True:
                chunk = s.recv(65536)
                if not chunk:
                    data += b"<EOF>"
                    break
                data += chunk
        except TimeoutError:
            if until_closed:
                raise
        except ConnectionResetError:
            data += b"<RST>"
        sender.join(IO_TIMEOUT)
    return mask_date(data)


# -- malformed requests: net/http's answers ----------------------------------------------------

MISSING_HOST = go_status_error(b"400 Bad Request", b"missing required Host header")
BAD_HOST = go_status_error(b"400 Bad Request", b"malformed Host header")
BAD_NAME = go_status_error(b"400 Bad Request", b"invalid header name")
BAD_VERSION = go_status_error(b"505 HTTP Version Not Supported", b"unsupported protocol version")
NO_GZIP = b"HTTP/1.1 501 Not Implemented\r\n" + GO_ERROR + b"Unsupported transfer encoding"
UNREADABLE = (  # a body that cannot be read: nsqd's handler answers 500, the connection closes
    b"HTTP/1.1 500 Internal Server Error\r\n" + JSON + b"\r\nContent-Length: 28\r\n"
    b"Connection: close\r\n\r\n" + b'{"message":"INTERNAL_ERROR"}'
)
# an Expect other than 100-continue (Date masked)
EXPECTATION_FAILED = (
    b"HTTP/1.1 417 Expectation Failed\r\nConnection: close\r\nContent-Length: 0\r\n\r\n"
)
GET = b"GET /ping HTTP/1.1\r\nHost: x\r\n"
POST = b"POST /pub?topic=m HTTP/1.1\r\nHost: x\r\n"

MALFORMED = [
    (b"NOT HTTP AT ALL\r\n\r\n", GO_400),
    (b"GET /ping\r\n\r\n", GO_400),
    (b"GET ping HTTP/1.1\r\nHost: x\r\n\r\n", GO_400),
    (b"GET /pi%zzng HTTP/1.1\r\nHost: x\r\n\r\n", GO_400),
    (b"GET /ping HTTP/1.1\r\n\r\n", MISSING_HOST),
    (b"GET /ping HTTP/1.1\r\nHost: x/y\r\n\r\n", BAD_HOST),
    (GET + b"Host: y\r\n\r\n", GO_400),
    (GET + b"bad header\r\n\r\n", GO_400),
    (GET + b"X Y: z\r\n\r\n", BAD_NAME),
    (GET + b"X(: z\r\n\r\n", GO_400),
    (GET + b"X: a\x01b\r\n\r\n", GO_400),
    (GET + b"X: a\x00b\r\n\r\n", GO_400),
    (b"GET /ping HTTP/2.0\r\nHost: x\r\n\r\n", BAD_VERSION),
    (b"GET /ping HTTP/0.9\r\nHost: x\r\n\r\n", BAD_VERSION),
    (GET + b"Content-Length: abc\r\n\r\n", GO_400),
    (GET + b"Content-Length: -1\r\n\r\n", GO_400),
    (POST + b"Content-Length: 9223372036854775808\r\n\r\n", GO_400),  # past int64
    (POST + b"Content-Length: 3\r\nContent-Length: 4\r\n\r\nabc", GO_400),
    (GET + b"Transfer-Encoding: gzip\r\n\r\n", NO_GZIP),
    (POST + b"Transfer-Encoding: chunked\r\n\r\nzz\r\n", UNREADABLE),
    (POST + b"Expect: foo\r\nContent-Length: 3\r\n\r\nabc" + GET + b"\r\n", EXPECTATION_FAILED),
    (GET + b"Expect: 200-ok, x\r\nExpect: 100-continue\r\n\r\n", EXPECTATION_FAILED),
]


@pytest.mark.parametrize(("request_bytes", "answer"), MALFORMED, ids=lambda v: repr(v)[:40])
def test_malformed_request_gets_net_https_answer_and_close(
    nsqd: Daemon, request_bytes: bytes, answer: bytes
) -> None:
    assert exchange(nsqd.http_port, request_bytes) == answer + b"<EOF>"


@pytest.mark.parametrize(
    ("method", "target", "status", "message"),
    [
        # handlers that read the body as nsqd's do: NewReqParams, /pub, /mpub, /config
        (b"POST", b"/topic/empty?topic=u", 400, b"INVALID_REQUEST"),
        (b"POST", b"/channel/create?topic=u&channel=c", 400, b"INVALID_REQUEST"),
        (b"GET", b"/stats", 400, b"INVALID_REQUEST"),
        (b"POST", b"/pub?topic=u", 500, b"INTERNAL_ERROR"),
        (b"POST", b"/mpub?topic=u", 500, b"INTERNAL_ERROR"),
        (b"POST", b"/mpub?topic=u&binary=true", 413, b"BAD_BODY"),
        (b"PUT", b"/config/log_level", 500, b"INTERNAL_ERROR"),
        # handlers that never read it answer as usual; the connection is not kept
        (b"POST", b"/topic/create?topic=u", 200, None),
        (b"GET", b"/info", 200, None),
    ],
)
def test_unreadable_body_answers_per_endpoint(
    nsqd: Daemon, method: bytes, target: bytes, status: int, message: bytes | None
) -> None:
    request = b"%s %s HTTP/1.1\r\nHost: x\r\nTransfer-Encoding: chunked\r\n\r\nzz\r\n" % (
        method,
        target,
    )
    got = exchange(nsqd.http_port, request)
    head, _, body = got.partition(b"\r\n\r\n")
    assert head.startswith(b"HTTP/1.1 %d " % status), got
    assert head.endswith(b"\r\nConnection: close"), got
    assert body.endswith(b"<EOF>")
    if message is not None:
        assert body == b'{"message":"%s"}<EOF>' % message


def test_header_too_large_gets_431(nsqd: Daemon, http: httpx.Client) -> None:
    request = b"GET /ping HTTP/1.1\r\nHost: x\r\nX: " + b"a" * (2 << 20) + b"\r\n\r\n"
    line = b"431 Request Header Fields Too Large"
    got = exchange(nsqd.http_port, request)
    assert got.startswith(b"HTTP/1.1 " + line + b"\r\n" + GO_ERROR + line), got[:200]
    big_but_allowed = b"GET /ping HTTP/1.1\r\nHost: x\r\nX: " + b"a" * (1 << 19) + b"\r\n\r\n"
    assert exchange(nsqd.http_port, big_but_allowed, until_closed=False).startswith(
        b"HTTP/1.1 200 OK\r\n"
    )
    assert http.get("/ping").text == "OK"


MAX_HEAD = (1 << 20) + 4096  # net/http reads at most this much for a request's head


def head_of(size: int) -> bytes:
    """A GET /ping head of `size` bytes, its blank line included."""
    start = b"GET /ping HTTP/1.1\r\nHost: x\r\nX: "
    return start + b"a" * (size - len(start) - 4) + b"\r\n\r\n"


def test_head_size_limit_is_net_https_to_the_byte(nsqd: Daemon) -> None:
    """A first request's head may have MAX_HEAD bytes, whole or not; one more is a 431 (the
    limit of a later one also counts what net/http's read buffer held: not checked here)."""
    line = b"431 Request Header Fields Too Large"
    too_large = b"HTTP/1.1 " + line + b"\r\n" + GO_ERROR + line + b"<EOF>"
    assert exchange(nsqd.http_port, head_of(MAX_HEAD) + PING, until_closed=False) == PING_OK * 2
    assert exchange(nsqd.http_port, head_of(MAX_HEAD + 1) + PING) == too_large
    assert exchange(nsqd.http_port, head_of(MAX_HEAD + 10)[:MAX_HEAD]) == too_large  # unended


def test_unusual_but_valid_heads_are_served(nsqd: Daemon) -> None:
    for head in (
        b"GET /ping HTTP/1.1\r\nHost: \r\n\r\n",
        b"GET /ping HTTP/1.1\r\nHost: [::1]:4151\r\n\r\n",
        b"GET /ping HTTP/1.1\nHost: x\n\n",  # bare LF line ends
        b"GET http://x/ping HTTP/1.1\r\nHost: x\r\n\r\n",  # absolute form
        b"GET /ping HTTP/1.1\r\nHost: x\r\nX: a\tb \xff\r\n\r\n",
        b"GET /ping HTTP/1.1\r\nHost: x\r\nExpect: 100-continue\r\n\r\n",  # no body: no 100
    ):
        got = exchange(nsqd.http_port, head, until_closed=False)
        assert got == (
            b"HTTP/1.1 200 OK\r\nContent-Length: 2\r\nContent-Type: text/plain; charset=utf-8"
            b"\r\n\r\nOK"
        ), head


# -- pipelining and keep-alive ------------------------------------------------------------------


def read_responses(sock: socket.socket, count: int) -> list[tuple[int, dict[str, str], bytes]]:
    """`count` responses framed by Content-Length, in order: (status, headers, body)."""
    buf = b""
    out = []
    while len(out) < count:
        head_end = buf.find(b"\r\n\r\n")
        if head_end >= 0:
            lines = buf[:head_end].decode("latin-1").split("\r\n")
            headers = dict(line.lower().split(": ", 1) for line in lines[1:])
            length = int(headers.get("content-length", "0"))
            if len(buf) >= head_end + 4 + length:
                body = buf[head_end + 4 : head_end + 4 + length]
                out.append((int(lines[0].split(" ")[1]), headers, body))
                buf = buf[head_end + 4 + length :]
                continue
        chunk = sock.recv(65536)
        assert chunk, f"closed after {len(out)} responses"
        buf += chunk
    return out


def pub(topic: str, body: bytes) -> bytes:
    return b"POST /pub?topic=%s HTTP/1.1\r\nHost: x\r\nContent-Length: %d\r\n\r\n%s" % (
        topic.encode(),
        len(body),
        body,
    )


def test_pipelined_requests_are_answered_in_order(nsqd: Daemon, http: httpx.Client) -> None:
    requests = [pub("pipe", b"m%03d" % i) for i in range(60)]
    expected = [200] * 60
    extra = [
        (b"GET /ping HTTP/1.1\r\nHost: x\r\n\r\n", 200),
        (b"POST /topic/create?topic=pipe2 HTTP/1.1\r\nHost: x\r\nContent-Length: 11\r\n\r\n"
         b"unread body", 200),
        (b"GET /nope HTTP/1.1\r\nHost: x\r\n\r\n", 404),
        (pub("pipe", b"y" * 200), 413),  # over --max-msg-size: the body is discarded
        (b"POST /pub?topic=pipe HTTP/1.1\r\nHost: x\r\nTransfer-Encoding: chunked\r\n\r\n"
         b"3\r\nchu\r\n4\r\nnked\r\n0\r\n\r\n", 200),
        (b"POST /mpub?topic=pipe HTTP/1.1\r\nHost: x\r\nContent-Length: 5\r\n\r\nm1\nm2", 200),
    ]  # fmt: skip
    for i, (request, status) in enumerate(extra):
        requests.insert(10 * i + 5, request)
        expected.insert(10 * i + 5, status)
    data = b"".join(requests)
    with socket.create_connection((HOST, nsqd.http_port), timeout=IO_TIMEOUT) as s:
        s.settimeout(IO_TIMEOUT)
        s.setsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)
        # all at once, then again in pieces that split heads and bodies anywhere
        s.sendall(data)
        first = read_responses(s, len(requests))
        for start in range(0, len(data), 97):
            s.sendall(data[start : start + 97])
            time.sleep(0.001)
        second = read_responses(s, len(requests))
    for responses in (first, second):
        assert [status for status, _, _ in responses] == expected
        publishes = [i for i, r in enumerate(requests) if r.startswith((b"POST /pub", b"POST /mp"))]
        assert all(responses[i][2] == b"OK" for i in publishes if expected[i] == 200)
    topic = http.get("/stats", params={"format": "json", "topic": "pipe"}).json()["topics"][0]
    assert topic["message_count"] == 2 * (60 + 1 + 2)


# -- oversized bodies ---------------------------------------------------------------------------

MSG_TOO_BIG = b'{"message":"MSG_TOO_BIG"}'
BODY_TOO_BIG = b'{"message":"BODY_TOO_BIG"}'
PING_OK = (
    b"HTTP/1.1 200 OK\r\nContent-Length: 2\r\nContent-Type: text/plain; charset=utf-8\r\n\r\nOK"
)
PING = b"GET /ping HTTP/1.1\r\nHost: x\r\n\r\n"


def too_large(body: bytes, close: bool) -> bytes:
    return (
        b"HTTP/1.1 413 Request Entity Too Large\r\n" + JSON + b"\r\nContent-Length: %d\r\n%s\r\n%s"
    ) % (len(body), b"Connection: close\r\n" if close else b"", body)


def chunked(body: bytes, size: int = 4096) -> bytes:
    pieces = [body[i : i + size] for i in range(0, len(body), size)]
    return b"".join(b"%x\r\n%s\r\n" % (len(piece), piece) for piece in pieces) + b"0\r\n\r\n"


def test_oversized_bodies(nsqd: Daemon, http: httpx.Client) -> None:
    port = nsqd.http_port
    head = b"POST /%s?topic=big HTTP/1.1\r\nHost: x\r\nContent-Length: %d\r\n\r\n"
    # a declared length over the limit is refused before any body is read; with more than
    # 256 KiB announced the connection is not kept
    assert exchange(port, head % (b"pub", 10_000_000)) == too_large(MSG_TOO_BIG, True) + b"<EOF>"
    assert exchange(port, head % (b"mpub", 10_000_000)) == too_large(BODY_TOO_BIG, True) + b"<EOF>"
    # a small excess is read and dropped: the connection goes on
    got = exchange(port, head % (b"pub", 1000) + b"y" * 1000 + PING, until_closed=False)
    assert got == too_large(MSG_TOO_BIG, False) + PING_OK
    got = exchange(port, head % (b"mpub", 1001) + b"y" * 1001 + PING, until_closed=False)
    assert got == too_large(BODY_TOO_BIG, False) + PING_OK
    # chunked bodies are cut at the limit while reading; 300 KB left over closes the connection
    te = b"POST /%s?topic=big HTTP/1.1\r\nHost: x\r\nTransfer-Encoding: chunked\r\n\r\n"
    got = exchange(port, te % b"pub" + chunked(b"z" * 300_000) + PING)
    assert got == too_large(MSG_TOO_BIG, True) + b"<EOF>"
    got = exchange(port, te % b"pub" + chunked(b"z" * 5000) + PING, until_closed=False)
    assert got == too_large(MSG_TOO_BIG, False) + PING_OK
    got = exchange(port, te % b"mpub" + chunked(b"a\n" * 600) + PING, until_closed=False)
    assert got == too_large(BODY_TOO_BIG, False) + PING_OK
    topics = http.get("/stats", params={"format": "json", "topic": "big"}).json()["topics"]
    assert topics[0]["message_count"] == 0  # /mpub makes the topic before it reads the body


# -- HTTPS --------------------------------------------------------------------------------------


@pytest.fixture(params=["ours", "reference"])
def kind(request: pytest.FixtureRequest) -> str:
    if request.param == "reference":
        try:
            reference_nsqd()
        except ReferenceUnavailable as exc:
            pytest.fail(f"reference nsqd unavailable: {exc}", pytrace=False)
    return request.param


@pytest.fixture
def certs(tmp_path: Path) -> dict[str, Any]:
    import trustme

    ca = trustme.CA()
    server = ca.issue_cert("127.0.0.1")
    server.private_key_pem.write_to_path(tmp_path / "key.pem")
    server.cert_chain_pems[0].write_to_path(tmp_path / "cert.pem")
    ca.cert_pem.write_to_path(tmp_path / "ca.pem")
    client = ca.issue_cert("client@example.com", common_name="client")
    client.private_key_and_cert_chain_pem.write_to_path(tmp_path / "client.pem")
    return {
        "ca": ca,
        "args": (f"--tls-cert={tmp_path / 'cert.pem'}", f"--tls-key={tmp_path / 'key.pem'}"),
        "ca_file": tmp_path / "ca.pem",
        "client_pem": tmp_path / "client.pem",
    }


def _client_context(certs: dict[str, Any], with_cert: bool = False) -> ssl.SSLContext:
    ctx = ssl.create_default_context()
    certs["ca"].configure_trust(ctx)
    if with_cert:
        ctx.load_cert_chain(certs["client_pem"])
    return ctx


@pytest.fixture
def tls_daemon(kind: str, certs: dict[str, Any]) -> Iterator[Daemon]:
    daemon = start(kind, *certs["args"])
    try:
        yield daemon
    finally:
        assert daemon.stop() == 0


def test_https_serves_the_api_with_keep_alive(tls_daemon: Daemon, certs: dict[str, Any]) -> None:
    port = https_port(tls_daemon)
    base = f"https://{HOST}:{port}"
    with httpx.Client(base_url=base, verify=_client_context(certs), timeout=IO_TIMEOUT) as c:
        ports = set()
        for _ in range(3):
            r = c.post("/pub?topic=secure", content=b"over tls")
            assert (r.status_code, r.text) == (200, "OK")
            assert r.headers["x-nsq-content-type"] == "nsq; version=1.0"
            ports.add(r.extensions["network_stream"].get_extra_info("client_addr")[1])
        assert len(ports) == 1
        assert c.get("/ping").text == "OK"
        stats = c.get("/stats", params={"format": "json", "topic": "secure"}).json()
        assert stats["topics"][0]["message_count"] == 3
        r = c.get("/nope")
        assert (r.status_code, r.json()) == (404, {"message": "NOT_FOUND"})
    # plain HTTP on the HTTPS port: Go's answer, not a TLS alert
    assert exchange(port, PING) == (
        b"HTTP/1.0 400 Bad Request\r\n\r\nClient sent an HTTP request to an HTTPS server.\n<EOF>"
    )
    # a handshake that never comes does not hold the server: plain HTTP still works
    with socket.create_connection((HOST, port), timeout=IO_TIMEOUT):
        assert httpx.get(f"{tls_daemon.url}/ping", timeout=IO_TIMEOUT).text == "OK"


def test_tls_required_points_plain_http_at_the_https_port(kind: str, certs: dict[str, Any]) -> None:
    daemon = start(kind, *certs["args"], "--tls-required=true")
    try:
        port = https_port(daemon)
        r = httpx.post(f"{daemon.url}/pub?topic=t", content=b"x", timeout=IO_TIMEOUT)
        assert r.status_code == 403
        assert r.content == b'{"message": "TLS_REQUIRED", "https_port": %d}' % port
        r = httpx.post(
            f"https://{HOST}:{port}/pub?topic=t",
            content=b"x",
            verify=_client_context(certs),
            timeout=IO_TIMEOUT,
        )
        assert (r.status_code, r.text) == (200, "OK")
    finally:
        assert daemon.stop() == 0


@pytest.mark.parametrize("policy", ["require", "require-verify"])
def test_https_client_certificate_policy(kind: str, certs: dict[str, Any], policy: str) -> None:
    daemon = start(
        kind,
        *certs["args"],
        f"--tls-client-auth-policy={policy}",
        f"--tls-root-ca-file={certs['ca_file']}",
    )
    try:
        url = f"https://{HOST}:{https_port(daemon)}/ping"
        with pytest.raises(httpx.TransportError):
            httpx.get(url, verify=_client_context(certs), timeout=IO_TIMEOUT)
        r = httpx.get(url, verify=_client_context(certs, with_cert=True), timeout=IO_TIMEOUT)
        assert (r.status_code, r.text) == (200, "OK")
    finally:
        assert daemon.stop() == 0
