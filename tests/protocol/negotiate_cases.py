"""IDENTIFY's feature negotiation: for an IDENTIFY body, the server's features and limits, the
JSON reply nsqd v1.3.0 sends (byte for byte, keys in its order) or its error (checked by
test_against_nsqd.py against .reference/bin/nsqd; run without sockets by test_identify.py)."""

from __future__ import annotations

import json
from typing import Any

from protocol.v2 import Limits, ServerFeatures


def reply(**changes: Any) -> bytes:
    """nsqd's negotiation JSON with its defaults, keys in nsqd's order."""
    fields: dict[str, Any] = {
        "max_rdy_count": 2500,
        "version": "1.3.0",
        "max_msg_timeout": 900000,
        "msg_timeout": 60000,
        "tls_v1": False,
        "deflate": False,
        "deflate_level": 6,
        "max_deflate_level": 6,
        "snappy": False,
        "sample_rate": 0,
        "auth_required": False,
        "output_buffer_size": 16384,
        "output_buffer_timeout": 250,
    }
    assert set(changes) <= set(fields)
    fields.update(changes)
    return json.dumps(fields, separators=(",", ":")).encode()


NEGOTIATE_DEFAULT_JSON = (
    b'{"max_rdy_count":2500,"version":"1.3.0","max_msg_timeout":900000,"msg_timeout":60000,'
    b'"tls_v1":false,"deflate":false,"deflate_level":6,"max_deflate_level":6,"snappy":false,'
    b'"sample_rate":0,"auth_required":false,"output_buffer_size":16384,'
    b'"output_buffer_timeout":250}'
)
assert reply() == NEGOTIATE_DEFAULT_JSON

NO_COMPRESSION = ServerFeatures(deflate=False, snappy=False)
BOTH_ERROR = "E_IDENTIFY_FAILED cannot enable both deflate and snappy compression"

# (id, IDENTIFY body, server features, limits, expected reply JSON or error text)
NEGOTIATE_CASES: list[tuple[str, dict[str, Any], ServerFeatures, Limits, bytes | str]] = [
    ("defaults", {}, ServerFeatures(), Limits(), NEGOTIATE_DEFAULT_JSON),
    (
        "client-settings-echoed",
        {
            "msg_timeout": 5000,
            "sample_rate": 42,
            "output_buffer_size": 1024,
            "output_buffer_timeout": 1000,
            "heartbeat_interval": 2000,
        },
        ServerFeatures(),
        Limits(),
        reply(
            msg_timeout=5000, sample_rate=42, output_buffer_size=1024, output_buffer_timeout=1000
        ),
    ),
    (
        "no-output-buffer",
        {"output_buffer_size": -1},
        ServerFeatures(),
        Limits(),
        reply(output_buffer_size=1, output_buffer_timeout=0),
    ),
    (
        "server-limits",
        {},
        ServerFeatures(),
        Limits(max_rdy_count=50, max_msg_timeout_ms=60000, msg_timeout_ms=30000),
        reply(max_rdy_count=50, max_msg_timeout=60000, msg_timeout=30000),
    ),
    ("deflate", {"deflate": True}, ServerFeatures(), Limits(), reply(deflate=True)),
    (
        "deflate-level-3",
        {"deflate": True, "deflate_level": 3},
        ServerFeatures(),
        Limits(),
        reply(deflate=True, deflate_level=3),
    ),
    (
        "deflate-level-capped",
        {"deflate": True, "deflate_level": 9},
        ServerFeatures(),
        Limits(),
        reply(deflate=True, deflate_level=6),
    ),
    (
        "deflate-level-9-allowed",
        {"deflate": True, "deflate_level": 9},
        ServerFeatures(max_deflate_level=9),
        Limits(),
        reply(deflate=True, deflate_level=9, max_deflate_level=9),
    ),
    (
        "deflate-level-negative",
        {"deflate": True, "deflate_level": -2},
        ServerFeatures(max_deflate_level=9),
        Limits(),
        reply(deflate=True, deflate_level=6, max_deflate_level=9),
    ),
    (
        "deflate-refused-level-6",
        {"deflate": True, "deflate_level": 3},
        ServerFeatures(deflate=False, max_deflate_level=9),
        Limits(),
        reply(max_deflate_level=9),
    ),
    (
        "level-capped-without-deflate",
        {},
        ServerFeatures(max_deflate_level=4),
        Limits(),
        reply(deflate_level=4, max_deflate_level=4),
    ),
    ("snappy", {"snappy": True}, ServerFeatures(), Limits(), reply(snappy=True)),
    ("snappy-refused", {"snappy": True}, NO_COMPRESSION, Limits(), reply()),
    (
        "snappy-and-deflate",
        {"snappy": True, "deflate": True},
        ServerFeatures(),
        Limits(),
        BOTH_ERROR,
    ),
    (
        "snappy-and-deflate-no-snappy",
        {"snappy": True, "deflate": True},
        ServerFeatures(snappy=False),
        Limits(),
        reply(deflate=True),
    ),
    (
        "snappy-and-deflate-no-deflate",
        {"snappy": True, "deflate": True},
        ServerFeatures(deflate=False),
        Limits(),
        reply(snappy=True),
    ),
    ("tls-not-configured", {"tls_v1": True}, ServerFeatures(), Limits(), reply()),
    ("tls", {"tls_v1": True}, ServerFeatures(tls=True), Limits(), reply(tls_v1=True)),
    ("tls-not-asked", {}, ServerFeatures(tls=True), Limits(), reply()),
    ("auth-required", {}, ServerFeatures(auth_required=True), Limits(), reply(auth_required=True)),
]
