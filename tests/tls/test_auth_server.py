"""AUTH's side of the auth server, ours against the real nsqd v1.3.0: the requests it sends
(query, TLS, the client certificate's common name), TTL expiry and refresh, a server that is
down, slow or one of several, full URLs, an HTTPS server and a 403 redirect."""

from __future__ import annotations

import ssl
import time
from typing import Any

from auth_support import (
    PUBLISH,
    Frames,
    Policy,
    auth,
    both,
    err,
    grant,
    pub,
    session,
    start_pair,
    stop_pair,
)
from tls_support import (
    AuthServer,
    Certs,
    Closed,
    Daemon,
    RawClient,
    free_ports,
)

from protocol.v2 import FrameType

# -- what the auth server receives ----------------------------------------------------------


def _requests_for(authd: AuthServer, secret_param: str) -> list[Any]:
    return [r for r in authd.requests if secret_param in r.path]


def test_request_format(pair: dict[str, Daemon], policy: Policy, authd: AuthServer) -> None:
    """The query string byte for byte (sorted keys, Go's QueryEscape), the Accept header."""
    base = policy.secret(grant(PUBLISH))
    raw_secret = base.encode() + b" s/e&c=r+t%\xc3\xa9~*"
    # the server decodes the query; register the secret as it will see it
    seen_as = raw_secret.decode()
    with policy.lock:
        policy.by_secret[seen_as] = grant(PUBLISH)
    paths = {}
    for kind, d in pair.items():
        before = len(authd.requests)
        assert session(d, [auth(raw_secret)])[0][0] == FrameType.RESPONSE
        new = authd.requests[before:]
        assert len(new) == 1
        paths[kind] = new[0].path
        assert new[0].headers.get("Accept") == "application/vnd.nsq; version=1.0"
    assert paths["ours"] == paths["reference"]
    assert paths["ours"] == (
        f"/auth?common_name=&remote_ip=127.0.0.1&secret={base}+s%2Fe%26c%3Dr%2Bt%25%C3%A9~%2A"
        "&tls=false"
    )


def test_request_over_tls(
    pair: dict[str, Daemon], policy: Policy, authd: AuthServer, certs: Certs
) -> None:
    secret = policy.secret(grant(PUBLISH))
    before = len(authd.requests)
    frames = both(pair, [auth(secret), pub("allowed_tls")], certs=certs, tls=True)
    assert frames[1] == (FrameType.RESPONSE, b"OK")
    paths = [r.path for r in authd.requests[before:]]
    assert paths == [f"/auth?common_name=&remote_ip=127.0.0.1&secret={secret}&tls=true"] * 2


def test_common_name_from_client_certificate(
    policy: Policy, authd: AuthServer, certs: Certs
) -> None:
    pair = start_pair(
        [
            *certs.server_args,
            "--tls-client-auth-policy=require-verify",
            f"--tls-root-ca-file={certs.ca}",
            f"--auth-http-address={authd.address}",
        ]
    )
    try:
        secret = policy.secret(grant(PUBLISH, identity="cert user"))
        before = len(authd.requests)
        frames = both(
            pair, [auth(secret), pub("allowed_cn")], certs=certs, tls=True, client_cert=True
        )
        assert frames[1] == (FrameType.RESPONSE, b"OK")
        paths = [r.path for r in authd.requests[before:]]
        assert (
            paths
            == [f"/auth?common_name=tls-test-client&remote_ip=127.0.0.1&secret={secret}&tls=true"]
            * 2
        )
    finally:
        stop_pair(pair)


# -- TTL ------------------------------------------------------------------------------------


def test_ttl_expiry_refetches(pair: dict[str, Daemon], policy: Policy, authd: AuthServer) -> None:
    """ttl 1s: within it no new request; after it the next PUB asks again and the new
    permissions apply (then a failing refresh answers AUTH failed)."""
    state = {"answer": grant(PUBLISH, ttl=1)}
    secret = policy.secret(lambda: state["answer"])
    clients = {kind: RawClient(d.tcp_port) for kind, d in pair.items()}
    try:
        results: dict[str, Frames] = {k: [] for k in clients}

        def step(cmd: bytes) -> None:
            for kind, c in clients.items():
                c.send(cmd)
                try:
                    f = c.read_response(3.0)
                    results[kind].append((f.frame_type, f.data))
                except Closed:
                    results[kind].append((-1, b"closed"))

        step(auth(secret))
        step(pub("allowed_1"))
        assert len(_requests_for(authd, secret)) == 2  # one AUTH each, no refresh yet
        time.sleep(1.2)
        state["answer"] = grant(
            {"topic": "^other", "channels": [".*"], "permissions": ["publish"]}, ttl=1
        )
        step(pub("other_1"))  # refreshed: now allowed
        assert len(_requests_for(authd, secret)) == 4
        step(pub("allowed_2"))  # within the new TTL: refused by the new permissions
        assert len(_requests_for(authd, secret)) == 4
        assert results["ours"] == results["reference"]
        assert results["ours"] == [
            (FrameType.RESPONSE, b'{"identity":"","identity_url":"","permission_count":1}'),
            (FrameType.RESPONSE, b"OK"),
            (FrameType.RESPONSE, b"OK"),
            (FrameType.ERROR, b'E_UNAUTHORIZED AUTH failed for PUB on "allowed_2" ""'),
        ]
    finally:
        for c in clients.values():
            c.close()


def test_ttl_refresh_failure(pair: dict[str, Daemon], policy: Policy) -> None:
    state = {"answer": grant(PUBLISH, ttl=1)}
    secret = policy.secret(lambda: state["answer"])
    clients = {kind: RawClient(d.tcp_port) for kind, d in pair.items()}
    try:
        for c in clients.values():
            c.send(auth(secret))
            assert c.read_response().frame_type == FrameType.RESPONSE
        time.sleep(1.2)
        state["answer"] = (500, {"message": "down for maintenance"})
        got = {}
        for kind, c in clients.items():
            c.send(pub("allowed_t"))
            f = c.read_response()
            c.expect_closed()
            got[kind] = (f.frame_type, f.data)
        assert got["ours"] == got["reference"] == (FrameType.ERROR, b"E_AUTH_FAILED AUTH failed")
    finally:
        for c in clients.values():
            c.close()


# -- auth server addresses ------------------------------------------------------------------


def test_auth_server_down() -> None:
    (dead,) = free_ports(1)
    pair = start_pair([f"--auth-http-address=127.0.0.1:{dead}"])
    try:
        start = time.monotonic()
        assert both(pair, [auth("anything")]) == err(b"E_AUTH_FAILED AUTH failed")
        assert time.monotonic() - start < 5
        # and the checks before AUTH are unaffected
        assert both(pair, [pub("t")]) == err(b"E_AUTH_FIRST AUTH required before PUB")
    finally:
        stop_pair(pair)


def test_auth_server_timeout(policy: Policy, authd: AuthServer) -> None:
    def slow() -> tuple[int, Any]:
        time.sleep(1.5)
        return grant(PUBLISH)

    secret = policy.secret(slow)
    pair = start_pair(
        [f"--auth-http-address={authd.address}", "--http-client-request-timeout=300ms"]
    )
    try:
        start = time.monotonic()
        assert both(pair, [auth(secret)]) == err(b"E_AUTH_FAILED AUTH failed")
        assert time.monotonic() - start < 2 * 1.5
    finally:
        stop_pair(pair)


def test_rotation_skips_a_dead_server(policy: Policy, authd: AuthServer) -> None:
    (dead,) = free_ports(1)
    pair = start_pair(
        [f"--auth-http-address=127.0.0.1:{dead}", f"--auth-http-address={authd.address}"]
    )
    try:
        secret = policy.secret(grant(PUBLISH))
        for _ in range(4):  # whichever server the random rotation starts with
            assert both(pair, [auth(secret), pub("allowed_r")])[1] == (FrameType.RESPONSE, b"OK")
    finally:
        stop_pair(pair)


def test_full_url_address(policy: Policy, authd: AuthServer) -> None:
    pair = start_pair([f"--auth-http-address=http://{authd.address}/v2/check"])
    try:
        secret = policy.secret(grant(PUBLISH))
        before = len(authd.requests)
        assert both(pair, [auth(secret)])[0][0] == FrameType.RESPONSE
        paths = [r.path for r in authd.requests[before:]]
        assert (
            paths == [f"/v2/check?common_name=&remote_ip=127.0.0.1&secret={secret}&tls=false"] * 2
        )
    finally:
        stop_pair(pair)


def test_https_auth_server(policy: Policy, certs: Certs) -> None:
    """An https:// auth URL is verified against --tls-root-ca-file."""
    server = AuthServer(policy)
    server.start()
    assert server.server is not None
    ctx = ssl.create_default_context(ssl.Purpose.CLIENT_AUTH)
    ctx.load_cert_chain(certs.files.server_cert, certs.files.server_key)
    server.server.socket = ctx.wrap_socket(server.server.socket, server_side=True)
    try:
        secret = policy.secret(grant(PUBLISH, identity="over https"))
        trusted = start_pair(
            [f"--auth-http-address=https://{server.address}/auth", f"--tls-root-ca-file={certs.ca}"]
        )
        try:
            frames = both(trusted, [auth(secret), pub("allowed_https")])
            assert frames[1] == (FrameType.RESPONSE, b"OK")
        finally:
            stop_pair(trusted)
        untrusted = start_pair([f"--auth-http-address=https://{server.address}/auth"])
        try:  # the test CA is not in the system roots
            assert both(untrusted, [auth(secret)]) == err(b"E_AUTH_FAILED AUTH failed")
        finally:
            stop_pair(untrusted)
    finally:
        server.stop()


def test_403_redirects_to_https_port(policy: Policy, certs: Certs) -> None:
    """As Go's http_api client: a 403 over plain http naming an https_port is retried there."""
    secure = AuthServer(policy).start()
    assert secure.server is not None
    ctx = ssl.create_default_context(ssl.Purpose.CLIENT_AUTH)
    ctx.load_cert_chain(certs.files.server_cert, certs.files.server_key)
    secure.server.socket = ctx.wrap_socket(secure.server.socket, server_side=True)
    https_port = secure.server.server_address[1]
    plain = AuthServer(lambda _s, _q: (403, {"message": "TLS_REQUIRED", "https_port": https_port}))
    plain.start()
    try:
        secret = policy.secret(grant(PUBLISH))
        pair = start_pair(
            [f"--auth-http-address={plain.address}", f"--tls-root-ca-file={certs.ca}"]
        )
        try:
            frames = both(pair, [auth(secret), pub("allowed_403")])
            assert frames[1] == (FrameType.RESPONSE, b"OK")
            assert [r.path for r in secure.requests] == [r.path for r in plain.requests]
            assert len(plain.requests) == 2
        finally:
            stop_pair(pair)
    finally:
        plain.stop()
        secure.stop()
