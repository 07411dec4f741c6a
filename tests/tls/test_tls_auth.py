"""AUTH through a real HTTP auth server, ours against the real nsqd v1.3.0: the same
scenarios run on both daemons (started with the same flags, asking the same auth server), and
the transcripts - every frame up to the close - and the requests the auth server received
must be identical. The expected texts are asserted too, so the reference proves them."""

from __future__ import annotations

import json
import time
import urllib.request
from typing import Any

import pytest
from auth_support import (
    KINDS,
    PUBLISH,
    SUBSCRIBE,
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
    Daemon,
    RawClient,
    command_bytes,
    mpub_body,
    negotiate,
    start_daemon,
)

from protocol.v2 import FrameType

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


@pytest.mark.parametrize(
    ("pattern", "topic"),
    [
        ("\\pL+_t", "allowed_t"),  # Unicode classes
        ("\\p{Latin}", "allowed_t"),
        ("\\Q_t\\E$", "allowed_t"),  # quoted literal text
        ("(?U)^a.+", "allowed_t"),  # ungreedy
        ("[[:^digit:]]_t", "allowed_t"),  # negated POSIX class
        ("^a(?i)LLOWED", "allowed_t"),  # flags in mid-pattern
        ("(" * 999 + "allowed" + ")" * 999, "allowed_t"),  # RE2 nests to 1000; re gave out at ~450
    ],
    ids=["pL", "p-Latin", "Q-E", "ungreedy", "posix-negated", "mid-flags", "nested-999"],
)
def test_re2_only_syntax_is_accepted(
    pair: dict[str, Daemon], policy: Policy, pattern: str, topic: str
) -> None:
    """RE2 syntax Python's `re` lacks: taken as nsqd takes it, and matching."""
    secret = policy.secret(grant({"topic": pattern, "channels": [""], "permissions": ["publish"]}))
    assert both(pair, [auth(secret), pub(topic)])[1:] == [(FrameType.RESPONSE, b"OK")]


def test_pathological_pattern_is_matched_in_linear_time(policy: Policy) -> None:
    """`(a+)+$` backtracks exponentially in a backtracking engine (re took 1.1 s at 24
    characters, doubling each); RE2, as Go's regexp, is linear: a 64-character topic name is
    answered at once. Own daemons: a daemon stuck in a match must not hold the module's pair
    (a read times out after 3 s, and its stop kills it)."""
    server = AuthServer(policy).start()
    try:
        secret = policy.secret(
            grant({"topic": "(a+)+$", "channels": [""], "permissions": ["publish"]})
        )
        topic = "a" * 63 + "_"
        assert len(topic) == 64
        elapsed = {}
        for kind in KINDS:
            d = start_daemon(kind, [f"--auth-http-address={server.address}"])
            try:
                start = time.monotonic()
                frames = session(d, [auth(secret), pub(topic)])
                elapsed[kind] = time.monotonic() - start
            finally:
                d.stop()
            assert frames[1:] == err(f'E_UNAUTHORIZED AUTH failed for PUB on "{topic}" ""'.encode())
        assert elapsed["ours"] < 1.0, elapsed
    finally:
        server.stop()


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
        # RE2 refuses nesting past 1000; Python's parser recursed out and closed the connection
        (200, {"ttl": 60, "authorizations": [{**PUBLISH, "topic": "(" * 5000 + ")" * 5000}]}),
        # Go refuses what RE2's own parser takes: \\C, a non-ASCII group name, nesting past 1000
        (200, {"ttl": 60, "authorizations": [{**PUBLISH, "topic": "a\\C"}]}),
        (200, {"ttl": 60, "authorizations": [{**PUBLISH, "topic": "(?P<n\u00e4>a)"}]}),
        (200, {"ttl": 60, "authorizations": [{**PUBLISH, "topic": "(" * 1000 + ")" * 1000}]}),
        (200, {"ttl": 60, "authorizations": [{**PUBLISH, "topic": "(a" * 501 + ")" * 501}]}),
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
        "regex-nested-too-deeply",
        "any-byte-escape",
        "non-ascii-group-name",
        "nested-1000",
        "tree-height-1002",
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
