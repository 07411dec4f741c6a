"""AUTH through a real HTTP auth server, ours against the real nsqd v1.3.0: the same
scenarios run on both daemons (started with the same flags, asking the same auth server), and
the transcripts - every frame up to the close - and the requests the auth server received
must be identical. The expected texts are asserted too, so the reference proves them."""

from __future__ import annotations

import itertools
import json
import ssl
import threading
import time
import urllib.request
from collections.abc import Callable, Iterator
from typing import Any

import pytest
from tls_support import (
    AuthServer,
    Certs,
    Closed,
    Daemon,
    RawClient,
    command_bytes,
    free_ports,
    mpub_body,
    negotiate,
    start_daemon,
)

from protocol.v2 import FrameType

KINDS = ("ours", "reference")
_seq = itertools.count()


def grant(
    *authorizations: dict[str, Any], ttl: int = 3600, identity: str = "", url: str = ""
) -> tuple[int, Any]:
    return 200, {
        "ttl": ttl,
        "identity": identity,
        "identity_url": url,
        "authorizations": list(authorizations),
    }


PUBLISH = {"topic": "^allowed", "channels": [".*"], "permissions": ["publish"]}
SUBSCRIBE = {"topic": "^allowed", "channels": ["^ch$"], "permissions": ["subscribe"]}


class Policy:
    """The auth server's answers, by secret (unknown secrets: 404)."""

    def __init__(self) -> None:
        self.by_secret: dict[str, tuple[int, Any] | Callable[[], tuple[int, Any]]] = {}
        self.lock = threading.Lock()

    def __call__(self, secret: str, query: dict[str, list[str]]) -> tuple[int, Any]:
        with self.lock:
            entry = self.by_secret.get(secret, (404, {"message": "unknown secret"}))
        return entry() if callable(entry) else entry

    def secret(self, answer: tuple[int, Any] | Callable[[], tuple[int, Any]]) -> str:
        name = f"secret-{next(_seq)}"
        with self.lock:
            self.by_secret[name] = answer
        return name


@pytest.fixture(scope="module")
def policy() -> Policy:
    return Policy()


@pytest.fixture(scope="module")
def authd(policy: Policy) -> Iterator[AuthServer]:
    server = AuthServer(policy).start()
    yield server
    server.stop()


def start_pair(args: list[str]) -> dict[str, Daemon]:
    started: dict[str, Daemon] = {}
    try:
        for kind in KINDS:
            started[kind] = start_daemon(kind, args)
    except BaseException:
        for d in started.values():
            d.stop()
        raise
    return started


def stop_pair(pair: dict[str, Daemon]) -> None:
    codes = {kind: d.stop() for kind, d in pair.items()}
    assert codes == dict.fromkeys(pair, 0), codes


@pytest.fixture(scope="module")
def pair(authd: AuthServer, certs: Certs) -> Iterator[dict[str, Daemon]]:
    daemons = start_pair(
        [
            *certs.server_args,
            f"--auth-http-address={authd.address}",
            "--http-client-request-timeout=2s",
        ]
    )
    yield daemons
    stop_pair(daemons)


Frames = list[tuple[int, bytes]]


def session(
    d: Daemon,
    commands: list[bytes],
    *,
    identify: bool = True,
    certs: Certs | None = None,
    tls: bool = False,
    client_cert: bool = False,
) -> Frames:
    """Run `commands` one by one, recording each answer, until the daemon closes."""
    out: Frames = []
    with RawClient(d.tcp_port) as c:
        if identify:
            reply = negotiate(c, certs, tls=tls, client_cert=client_cert)
            assert reply["auth_required"] is True
        for cmd in commands:
            c.send(cmd)
            try:
                f = c.read_response(3.0)
            except Closed:
                out.append((-1, b"closed"))
                return out
            out.append((f.frame_type, f.data))
            if f.frame_type == FrameType.ERROR:
                break
        try:
            c.expect_closed(0.3)
            out.append((-1, b"closed"))
        except AssertionError:
            pass
    return out


def both(pair: dict[str, Daemon], commands: list[bytes], **kw: Any) -> Frames:
    results = {kind: session(d, commands, **kw) for kind, d in pair.items()}
    assert results["ours"] == results["reference"]
    return results["ours"]


def auth(secret: str | bytes) -> bytes:
    return command_bytes("AUTH", secret.encode() if isinstance(secret, str) else secret)


def pub(topic: str) -> bytes:
    return command_bytes(f"PUB {topic}", b"body")


def err(text: bytes) -> list[tuple[int, bytes]]:
    return [(FrameType.ERROR, text), (-1, b"closed")]


# -- before AUTH ----------------------------------------------------------------------------


@pytest.mark.parametrize(
    ("cmd", "verb"),
    [
        (pub("allowed_t"), b"PUB"),
        (command_bytes("MPUB allowed_t"), b"MPUB"),  # checked before the body is read
        (command_bytes("DPUB allowed_t 100", b"x"), b"DPUB"),
        (command_bytes("SUB allowed_t ch"), b"SUB"),
    ],
)
def test_auth_required_first(pair: dict[str, Daemon], cmd: bytes, verb: bytes) -> None:
    assert both(pair, [cmd]) == err(b"E_AUTH_FIRST AUTH required before " + verb)


def test_identify_says_auth_required(pair: dict[str, Daemon]) -> None:
    replies = {}
    for kind, d in pair.items():
        with RawClient(d.tcp_port) as c:
            replies[kind] = c.identify(feature_negotiation=True)
    assert replies["ours"] == replies["reference"]
    assert json.loads(replies["ours"].data)["auth_required"] is True


# -- AUTH and the checks --------------------------------------------------------------------


def test_auth_response_and_permitted_commands(pair: dict[str, Daemon], policy: Policy) -> None:
    secret = policy.secret(
        grant(PUBLISH, SUBSCRIBE, identity='pub <&> "user" é', url="https://x.example/u?a=1&b=2")
    )
    frames = both(
        pair,
        [
            auth(secret),
            pub("allowed_t"),
            command_bytes("MPUB allowed_t", mpub_body([b"a", b"b"])),
            command_bytes("DPUB allowed_t 50", b"d"),
            command_bytes("SUB allowed_t ch"),
        ],
    )
    assert frames[0] == (
        FrameType.RESPONSE,
        '{"identity":"pub \\u003c\\u0026\\u003e \\"user\\" é",'
        '"identity_url":"https://x.example/u?a=1\\u0026b=2","permission_count":2}'.encode(),
    )
    assert frames[1:5] == [(FrameType.RESPONSE, b"OK")] * 4


@pytest.mark.parametrize(
    ("cmd", "text"),
    [
        (pub("other"), b'E_UNAUTHORIZED AUTH failed for PUB on "other" ""'),
        (command_bytes("MPUB other"), b'E_UNAUTHORIZED AUTH failed for MPUB on "other" ""'),
        (
            command_bytes("DPUB other 10", b"x"),
            b'E_UNAUTHORIZED AUTH failed for DPUB on "other" ""',
        ),
        (
            command_bytes("SUB allowed_t other"),
            b'E_UNAUTHORIZED AUTH failed for SUB on "allowed_t" "other"',
        ),
        (command_bytes("SUB other ch"), b'E_UNAUTHORIZED AUTH failed for SUB on "other" "ch"'),
        (
            command_bytes("SUB allowed_t#ephemeral ch#ephemeral"),
            b'E_UNAUTHORIZED AUTH failed for SUB on "allowed_t#ephemeral" "ch#ephemeral"',
        ),
    ],
)
def test_not_permitted(pair: dict[str, Daemon], policy: Policy, cmd: bytes, text: bytes) -> None:
    secret = policy.secret(grant(PUBLISH, SUBSCRIBE))
    frames = both(pair, [auth(secret), cmd])
    assert frames[1:] == err(text)


def test_publish_needs_a_channel_regex_matching_empty(
    pair: dict[str, Daemon], policy: Policy
) -> None:
    secret = policy.secret(grant({"topic": ".*", "channels": ["^x$"], "permissions": ["publish"]}))
    assert both(pair, [auth(secret), pub("anything")])[1:] == err(
        b'E_UNAUTHORIZED AUTH failed for PUB on "anything" ""'
    )


def test_regexes_are_unanchored(pair: dict[str, Daemon], policy: Policy) -> None:
    secret = policy.secret(
        grant(
            {"topic": "llow", "channels": [""], "permissions": ["publish"]},
            {"topic": "llow", "channels": ["h"], "permissions": ["subscribe"]},
        )
    )
    frames = both(pair, [auth(secret), pub("allowed_x"), command_bytes("SUB allowed_x ch")])
    assert frames[1:] == [(FrameType.RESPONSE, b"OK")] * 2


@pytest.mark.parametrize(
    ("pattern", "topic"),
    [
        ("^allowed$", "allowed"),
        ("(?i)ALLOWED", "allowed_t"),
        ("[[:alpha:]]+_t", "allowed_t"),
        ("[[:digit:]]", "allowed_t"),
        ("t{,3}", "allowed_t"),  # RE2: not a repeat, literal braces (re: {0,3})
        ("(?<name>allow)ed", "allowed"),  # RE2 named group without P
        ("^[a-z_]+\\z", "allowed_t"),
        ("\\d+$", "t_123"),
        ("x{2,}+", "xx"),  # possessive: RE2 refuses the pattern
        ("(a)\\1", "aa"),  # backreference: RE2 refuses
        ("a\\Z", "a"),  # \Z is not RE2
        ("(?=a)", "a"),  # lookahead
        ("a{1001}", "a"),  # RE2 repeat limit
    ],
)
def test_regex_dialect(pair: dict[str, Daemon], policy: Policy, pattern: str, topic: str) -> None:
    """Patterns are RE2's: the same answers are accepted or refused, and match the same."""
    secret = policy.secret(grant({"topic": pattern, "channels": [""], "permissions": ["publish"]}))
    both(pair, [auth(secret), pub(topic)])


def test_auth_already_set(pair: dict[str, Daemon], policy: Policy) -> None:
    secret = policy.secret(grant(PUBLISH))
    assert both(pair, [auth(secret), auth(secret)])[1:] == err(b"E_INVALID AUTH already set")


def test_no_authorizations(pair: dict[str, Daemon], policy: Policy) -> None:
    secret = policy.secret(grant(identity="nobody"))
    assert both(pair, [auth(secret)]) == err(b"E_UNAUTHORIZED AUTH no authorizations found")


@pytest.mark.parametrize(
    "answer",
    [
        (500, {"message": "oops"}),
        (404, {"message": "unknown"}),
        (200, b"not json"),
        (200, b"[]"),
        (200, {"ttl": 0, "authorizations": [PUBLISH]}),
        (200, {"ttl": -5, "authorizations": [PUBLISH]}),
        (200, {"ttl": 1.5, "authorizations": [PUBLISH]}),
        (200, {"ttl": "60", "authorizations": [PUBLISH]}),
        (200, {"ttl": 60, "authorizations": [{**PUBLISH, "permissions": ["admin"]}]}),
        (200, {"ttl": 60, "authorizations": [{**PUBLISH, "topic": "("}]}),
        (200, {"ttl": 60, "authorizations": [{**PUBLISH, "channels": ["[z-a]"]}]}),
        (200, {"ttl": 60, "authorizations": [{**PUBLISH, "topic": "(?=a)"}]}),  # RE2: no lookahead
        (200, {"ttl": 60, "authorizations": {"topic": ".*"}}),
        (200, {"ttl": 60, "identity": 5, "authorizations": [PUBLISH]}),
    ],
    ids=[
        "500",
        "404",
        "not-json",
        "array",
        "ttl-0",
        "ttl-negative",
        "ttl-float",
        "ttl-string",
        "unknown-permission",
        "bad-topic-regex",
        "bad-channel-regex",
        "lookahead",
        "authorizations-object",
        "identity-number",
    ],
)
def test_auth_failed(pair: dict[str, Daemon], policy: Policy, answer: tuple[int, Any]) -> None:
    secret = policy.secret(answer)
    assert both(pair, [auth(secret)]) == err(b"E_AUTH_FAILED AUTH failed")


def test_lenient_answer_decoding(pair: dict[str, Daemon], policy: Policy) -> None:
    """Go's decoder: keys case-insensitive, unknown keys and nulls ignored, a null
    authorization is an empty one."""
    secret = policy.secret(
        (
            200,
            {
                "TTL": 60,
                "Identity": "i",
                "extra": [1, 2],
                "identity_url": None,
                "Authorizations": [
                    None,
                    {"TOPIC": "^allowed", "Channels": [""], "Permissions": ["publish"]},
                ],
            },
        )
    )
    frames = both(pair, [auth(secret), pub("allowed_t")])
    assert frames == [
        (FrameType.RESPONSE, b'{"identity":"i","identity_url":"","permission_count":2}'),
        (FrameType.RESPONSE, b"OK"),
    ]


def test_auth_disabled_without_server(certs: Certs) -> None:
    pair = start_pair([])
    try:
        for d in pair.values():
            with RawClient(d.tcp_port) as c:
                c.send(auth("x"))
                f = c.read_frame()
                assert (f.frame_type, f.data) == (FrameType.ERROR, b"E_AUTH_DISABLED AUTH disabled")
    finally:
        stop_pair(pair)


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


# -- /stats ---------------------------------------------------------------------------------


def _stats_clients(d: Daemon) -> list[dict[str, Any]]:
    url = f"http://127.0.0.1:{d.http_port}/stats?format=json"
    with urllib.request.urlopen(url, timeout=5) as resp:
        stats = json.load(resp)
    return [c for t in stats["topics"] for ch in t["channels"] for c in ch["clients"]]


@pytest.mark.parametrize("kind", KINDS)
def test_stats_show_identity(pair: dict[str, Daemon], policy: Policy, kind: str) -> None:
    secret = policy.secret(grant(PUBLISH, SUBSCRIBE, identity="stats-user", url="http://u/1"))
    d = pair[kind]
    with RawClient(d.tcp_port) as c:
        negotiate(c, None, client_id="stats-client")
        c.send(auth(secret))
        assert c.read_response().frame_type == FrameType.RESPONSE
        c.send(command_bytes("SUB allowed_stats ch"))
        assert c.read_response().data == b"OK"
        (client,) = [x for x in _stats_clients(d) if x["client_id"] == "stats-client"]
    assert client["authed"] is True
    assert client["auth_identity"] == "stats-user"
    assert client["auth_identity_url"] == "http://u/1"
