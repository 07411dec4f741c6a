"""--auth-http-address with --workers: clients AUTH in the worker they reach, as with one nsqd,
and a worker's pull links AUTH at their peers with the group's own secret (drawn by the
supervisor), which the peers grant everything without asking the auth server. So a consumer
allowed on a channel receives what an allowed publisher published in the other worker, and a
client with no grant, or another secret, is refused in every worker."""

from __future__ import annotations

import json
import threading
from collections.abc import Iterator
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from urllib.parse import parse_qs, urlsplit

import pytest

from protocol.v2 import encoders
from tests.ops.conftest import V2

from .conftest import Group

GRANT = {
    "ttl": 3600,
    "identity": "app",
    "identity_url": "",
    "authorizations": [
        {"topic": "^t$", "channels": [".*"], "permissions": ["publish", "subscribe"]}
    ],
}


@pytest.fixture
def authd() -> Iterator[tuple[str, list[str]]]:
    """An auth server granting GRANT to the secret "app-secret" (404 otherwise); the secrets
    it was asked about."""
    asked: list[str] = []

    class Handler(BaseHTTPRequestHandler):
        protocol_version = "HTTP/1.1"

        def do_GET(self) -> None:
            secret = parse_qs(urlsplit(self.path).query).get("secret", [""])[0]
            asked.append(secret)
            status, doc = (200, GRANT) if secret == "app-secret" else (404, {"message": "no"})
            body = json.dumps(doc).encode()
            self.send_response(status)
            self.send_header("Content-Type", "application/json")
            self.send_header("Content-Length", str(len(body)))
            self.end_headers()
            self.wfile.write(body)

        def log_message(self, format: str, *args: object) -> None:
            pass

    server = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
    thread = threading.Thread(target=server.serve_forever, daemon=True)
    thread.start()
    yield f"127.0.0.1:{server.server_address[1]}", asked
    server.shutdown()
    server.server_close()


def _authed(conn: V2, secret: bytes) -> tuple[int, bytes]:
    conn.send(encoders.auth(secret))
    return conn.frame()


def test_a_consumer_gets_what_was_published_in_the_other_worker(group: Group, authd) -> None:
    address, asked = authd
    group.start(f"--auth-http-address={address}")
    with group.pin(1) as sub, group.pin(0) as pub:
        assert _authed(sub, b"app-secret")[0] == 0
        sub.sub("t", "c")
        sub.rdy(10)
        assert _authed(pub, b"app-secret")[0] == 0
        for i in range(5):
            pub.pub("t", b"m%d" % i)
        got = set()
        for _ in range(5):
            msg_id, body = sub.message()
            got.add(body)
            sub.fin(msg_id)
        assert got == {b"m%d" % i for i in range(5)}
    assert set(asked) == {"app-secret"}  # the links' secret is never the auth server's


def test_clients_without_a_grant_are_refused_in_every_worker(group: Group, authd) -> None:
    address, _ = authd
    group.start(f"--auth-http-address={address}")
    for k in (0, 1):
        with V2(group.link(k)) as conn:
            conn.send(encoders.sub("t", "c"))
            kind, data = conn.frame()
            assert (kind, data) == (1, b"E_AUTH_FIRST AUTH required before SUB")
        with V2(group.link(k)) as conn:
            kind, data = _authed(conn, b"guess")
            assert (kind, data) == (1, b"E_AUTH_FAILED AUTH failed")


def test_under_tls_required_the_private_link_takes_only_the_groups_secret(
    group: Group, authd, tmp_path
) -> None:
    """An application's secret, good on the shared port (over TLS), is refused on a worker's
    private link listener, where the group's secret stands in for TLS: a client cannot skip
    TLS by connecting there."""
    from nsqd.certs import write_all

    address, asked = authd
    files = write_all(tmp_path / "certs")
    tls = (f"--tls-cert={files.server_cert}", f"--tls-key={files.server_key}")
    group.start(f"--auth-http-address={address}", *tls, "--tls-required=true")
    for k in (0, 1):
        with V2(group.link(k)) as conn:
            assert _authed(conn, b"app-secret") == (1, b"E_AUTH_FAILED AUTH failed")
    assert asked == []  # not even asked of the auth server
