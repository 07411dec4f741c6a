"""IDENTIFY: settings before and after, repeated IDENTIFY, and negotiate()'s reply byte for
byte. The JSON decoding and validation table (IDENTIFY_JSON_CASES in nsq_cases.py) runs in
test_parser.py, fed whole, split and byte by byte."""

from __future__ import annotations

import json
from typing import Any

import pytest
from negotiate_cases import BOTH_ERROR, NEGOTIATE_CASES, NEGOTIATE_DEFAULT_JSON
from v2wire import EOF, MAGIC, identify, run, settings

from protocol.v2 import (
    ClientSettings,
    ErrorCode,
    Identify,
    Limits,
    Negotiation,
    NSQError,
    ServerFeatures,
    V2Connection,
    negotiate,
)

NSQD_KEY_ORDER = [
    "max_rdy_count",
    "version",
    "max_msg_timeout",
    "msg_timeout",
    "tls_v1",
    "deflate",
    "deflate_level",
    "max_deflate_level",
    "snappy",
    "sample_rate",
    "auth_required",
    "output_buffer_size",
    "output_buffer_timeout",
]


def identify_once(
    body: bytes | str | dict[str, Any],
    limits: Limits | None = None,
) -> ClientSettings:
    conn = V2Connection(limits)
    conn.receive_data(MAGIC + identify(body))
    event = conn.next_command()
    assert isinstance(event, Identify)
    conn.resume()
    assert conn.settings == event.settings
    return event.settings


def test_defaults_before_identify() -> None:
    conn = V2Connection(remote_ip="10.1.2.3")
    assert conn.settings == ClientSettings(
        client_id="10.1.2.3",
        hostname="10.1.2.3",
        user_agent="",
        heartbeat_interval_ms=30000,
        output_buffer_size=16384,
        output_buffer_timeout_ms=250,
        sample_rate=0,
        msg_timeout_ms=60000,
        feature_negotiation=False,
        tls_v1=False,
        deflate=False,
        deflate_level=0,
        snappy=False,
    )


def test_defaults_follow_limits() -> None:
    limits = Limits(
        msg_timeout_ms=5000,
        heartbeat_interval_ms=1000,
        output_buffer_size=100,
        output_buffer_timeout_ms=50,
    )
    s = V2Connection(limits).settings
    assert (
        s.msg_timeout_ms,
        s.heartbeat_interval_ms,
        s.output_buffer_size,
        s.output_buffer_timeout_ms,
    ) == (5000, 1000, 100, 50)


def test_identify_replaces_client_id_and_hostname() -> None:
    # nsqd copies client_id/hostname/user_agent as sent: absent means empty, not the remote IP.
    conn = V2Connection(remote_ip="10.1.2.3")
    conn.receive_data(MAGIC + identify(b'{"user_agent":"ua"}'))
    event = conn.next_command()
    assert isinstance(event, Identify)
    assert (event.settings.client_id, event.settings.hostname) == ("", "")
    assert event.settings.user_agent == "ua"


def test_repeated_identify_keeps_what_zero_leaves_alone() -> None:
    conn = V2Connection()
    conn.receive_data(MAGIC)
    first = {
        "heartbeat_interval": -1,
        "output_buffer_size": -1,
        "msg_timeout": 2000,
        "sample_rate": 10,
        "client_id": "a",
        "deflate": True,
    }
    conn.receive_data(identify(first) + identify(b"{}"))
    assert isinstance(conn.next_command(), Identify)
    conn.resume()
    second = conn.next_command()
    assert isinstance(second, Identify)
    # 0 (absent) keeps the heartbeat, buffering and msg timeout; the rest is taken as sent
    assert second.settings == settings(
        heartbeat_interval_ms=0,
        output_buffer_size=1,
        output_buffer_timeout_ms=0,
        msg_timeout_ms=2000,
        msg_timeout_set=True,  # the first IDENTIFY named one: a channel default never applies
        sample_rate=0,
        client_id="",
        deflate=False,
    )


def test_output_buffer_size_minus_one_means_unbuffered() -> None:
    events, end = run([MAGIC + identify({"output_buffer_size": -1, "output_buffer_timeout": 500})])
    assert end is EOF
    s = events[0].settings  # type: ignore[union-attr]
    assert (s.output_buffer_size, s.output_buffer_timeout_ms) == (1, 0)


@pytest.mark.parametrize(
    ("field", "value", "text"),
    [
        ("heartbeat_interval", 300001, "heartbeat interval (300001) is invalid"),
        ("output_buffer_timeout", 1, "output buffer timeout (1) is invalid"),
        ("output_buffer_size", 1, "output buffer size (1) is invalid"),
        ("sample_rate", 100, "sample rate (100) is invalid"),
        ("msg_timeout", 1, "msg timeout (1) is invalid"),
    ],
)
def test_validation_error_is_fatal_bad_body(field: str, value: int, text: str) -> None:
    conn = V2Connection()
    conn.receive_data(MAGIC + identify({field: value}))
    with pytest.raises(NSQError) as info:
        conn.next_command()
    err = info.value
    assert (err.code, err.desc, err.fatal) == (ErrorCode.E_BAD_BODY, f"IDENTIFY {text}", True)
    assert bytes(err) == f"E_BAD_BODY IDENTIFY {text}".encode()


# -- negotiate() -------------------------------------------------------------------------------


def negotiated(body: dict[str, Any], server: ServerFeatures, limits: Limits) -> Negotiation:
    s = identify_once({**body, "feature_negotiation": True}, limits)
    return negotiate(s, server, limits)


@pytest.mark.parametrize(
    ("body", "server", "limits", "expected"),
    [case[1:] for case in NEGOTIATE_CASES],
    ids=[case[0] for case in NEGOTIATE_CASES],
)
def test_negotiate_reply_bytes(
    body: dict[str, Any], server: ServerFeatures, limits: Limits, expected: bytes | str
) -> None:
    if isinstance(expected, str):
        with pytest.raises(NSQError) as info:
            negotiated(body, server, limits)
        assert bytes(info.value) == expected.encode()
        assert info.value.code == ErrorCode.E_IDENTIFY_FAILED and info.value.fatal
        return
    n = negotiated(body, server, limits)
    assert n.response == expected
    reply = json.loads(expected)
    assert list(reply) == NSQD_KEY_ORDER
    assert (n.tls, n.deflate, n.snappy, n.deflate_level) == (
        reply["tls_v1"],
        reply["deflate"],
        reply["snappy"],
        reply["deflate_level"],
    )


def test_negotiate_default_reply_is_compact_and_ordered() -> None:
    n = negotiated({}, ServerFeatures(), Limits())
    assert n.response == NEGOTIATE_DEFAULT_JSON
    assert b" " not in n.response
    assert list(json.loads(n.response)) == NSQD_KEY_ORDER


@pytest.mark.parametrize(
    ("asked", "max_level", "expected"),
    [
        (0, 6, 6),
        (1, 6, 1),
        (5, 6, 5),
        (6, 6, 6),
        (7, 6, 6),
        (9, 6, 6),
        (9, 9, 9),
        (8, 9, 8),
        (-1, 9, 6),
        (3, 1, 1),
        (0, 1, 1),
    ],
)
def test_deflate_level_capping(asked: int, max_level: int, expected: int) -> None:
    n = negotiated(
        {"deflate": True, "deflate_level": asked},
        ServerFeatures(max_deflate_level=max_level),
        Limits(),
    )
    assert n.deflate and n.deflate_level == expected
    assert json.loads(n.response)["deflate_level"] == expected


def test_snappy_and_deflate_both_refused() -> None:
    with pytest.raises(NSQError) as info:
        negotiated({"snappy": True, "deflate": True}, ServerFeatures(), Limits())
    assert bytes(info.value) == BOTH_ERROR.encode()


def test_negotiate_needs_both_sides() -> None:
    server = ServerFeatures(tls=False, deflate=False, snappy=False)
    n = negotiated({"tls_v1": True, "deflate": True, "snappy": True}, server, Limits())
    assert (n.tls, n.deflate, n.snappy) == (False, False, False)
    n = negotiated({}, ServerFeatures(tls=True, deflate=True, snappy=True), Limits())
    assert (n.tls, n.deflate, n.snappy) == (False, False, False)
