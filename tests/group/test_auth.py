"""--auth-http-address with --workers: clients AUTH in the worker they reach, as with one nsqd,
and a worker's pull links AUTH at their peers with the group's own secret (drawn by the
supervisor), which the peers grant everything without asking the auth server. So a consumer
allowed on a channel receives what an allowed publisher published in the other worker, and a
client with no grant, or another secret, is refused in every worker."""

from __future__ import annotations

import sys
from collections.abc import Iterator
from pathlib import Path

import pytest

sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "tls"))

from tls_support import AuthServer

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
def authd() -> Iterator[AuthServer]:
    """An auth server granting GRANT to the secret "app-secret" (404 otherwise)."""

    def policy(secret: str, query: dict[str, list[str]]) -> tuple[int, object]:
        return (200, GRANT) if secret == "app-secret" else (404, {"message": "no"})

    server = AuthServer(policy).start()
    yield server
    server.stop()


def _asked(server: AuthServer) -> list[str]:
    """The secrets the auth server was asked about."""
    return [r.query.get("secret", [""])[0] for r in server.requests]


def _authed(conn: V2, secret: bytes) -> tuple[int, bytes]:
    conn.send(encoders.auth(secret))
    return conn.frame()


def test_a_consumer_gets_what_was_published_in_the_other_worker(group: Group, authd) -> None:
    group.start(f"--auth-http-address={authd.address}")
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
    assert set(_asked(authd)) == {"app-secret"}  # the links' secret is never the auth server's


def test_clients_without_a_grant_are_refused_in_every_worker(group: Group, authd) -> None:
    group.start(f"--auth-http-address={authd.address}")
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

    files = write_all(tmp_path / "certs")
    tls = (f"--tls-cert={files.server_cert}", f"--tls-key={files.server_key}")
    group.start(f"--auth-http-address={authd.address}", *tls, "--tls-required=true")
    for k in (0, 1):
        with V2(group.link(k)) as conn:
            assert _authed(conn, b"app-secret") == (1, b"E_AUTH_FAILED AUTH failed")
    assert _asked(authd) == []  # not even asked of the auth server
