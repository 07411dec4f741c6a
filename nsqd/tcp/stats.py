"""A V2 client's /stats entry: nsqd's ClientV2Stats, keys in nsqd's order, with the TLS
fields nsqd derives from the connection state."""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    from .connection import Client


def client_stats(client: Client, topic_filter: str = "") -> dict[str, Any]:
    """clientV2.Stats: one ClientV2Stats object, keys in nsqd's order."""
    s = client.settings
    pub_counts = None
    for topic, count in client.pub_counts.items():
        if topic_filter and topic != topic_filter:
            continue
        pub_counts = [{"topic": topic, "count": count}]
        break  # nsqd's quirk: at most one entry
    d: dict[str, Any] = {
        "client_id": s.client_id,
        "hostname": s.hostname,
        "version": "V2",
        "remote_address": client.remote_address,
        "state": int(client.state),
        "ready_count": client.rdy,
        "in_flight_count": client.in_flight,
        "message_count": client.message_count,
        "finish_count": client.finish_count,
        "requeue_count": client.requeue_count,
        "connect_ts": client.connect_ts,
        "sample_rate": client.sample_rate,
        "deflate": client.deflate,
        "snappy": client.snappy,
        "user_agent": s.user_agent,
    }
    auth = client.auth
    if auth is not None:  # each omitted when false / empty
        if auth.authed:
            d["authed"] = True
        if auth.identity:
            d["auth_identity"] = auth.identity
        if auth.identity_url:
            d["auth_identity_url"] = auth.identity_url
    if pub_counts:
        d["pub_counts"] = pub_counts
    d.update(_tls_stats(client.tls_stream))
    return d


# OpenSSL cipher name -> IANA number; nsqd names only the suites its own table lists
# (prettyConnectionState.GetCipherSuite) and prints "Unknown <number>" for the rest, TLS 1.3's
# included.
_CIPHERS = {
    "TLS_AES_128_GCM_SHA256": 0x1301,
    "TLS_AES_256_GCM_SHA384": 0x1302,
    "TLS_CHACHA20_POLY1305_SHA256": 0x1303,
    "DES-CBC3-SHA": 0x000A,
    "AES128-SHA": 0x002F,
    "AES256-SHA": 0x0035,
    "AES128-SHA256": 0x003C,
    "AES128-GCM-SHA256": 0x009C,
    "AES256-GCM-SHA384": 0x009D,
    "ECDHE-ECDSA-AES128-SHA": 0xC009,
    "ECDHE-ECDSA-AES256-SHA": 0xC00A,
    "ECDHE-RSA-DES-CBC3-SHA": 0xC012,
    "ECDHE-RSA-AES128-SHA": 0xC013,
    "ECDHE-RSA-AES256-SHA": 0xC014,
    "ECDHE-ECDSA-AES128-SHA256": 0xC023,
    "ECDHE-RSA-AES128-SHA256": 0xC027,
    "ECDHE-ECDSA-AES128-GCM-SHA256": 0xC02B,
    "ECDHE-ECDSA-AES256-GCM-SHA384": 0xC02C,
    "ECDHE-RSA-AES128-GCM-SHA256": 0xC02F,
    "ECDHE-RSA-AES256-GCM-SHA384": 0xC030,
    "ECDHE-RSA-CHACHA20-POLY1305": 0xCCA8,
    "ECDHE-ECDSA-CHACHA20-POLY1305": 0xCCA9,
}
_NSQD_CIPHER_NAMES = {
    0x0005: "TLS_RSA_WITH_RC4_128_SHA",
    0x000A: "TLS_RSA_WITH_3DES_EDE_CBC_SHA",
    0x002F: "TLS_RSA_WITH_AES_128_CBC_SHA",
    0x0035: "TLS_RSA_WITH_AES_256_CBC_SHA",
    0xC007: "TLS_ECDHE_ECDSA_WITH_RC4_128_SHA",
    0xC009: "TLS_ECDHE_ECDSA_WITH_AES_128_CBC_SHA",
    0xC00A: "TLS_ECDHE_ECDSA_WITH_AES_256_CBC_SHA",
    0xC011: "TLS_ECDHE_RSA_WITH_RC4_128_SHA",
    0xC012: "TLS_ECDHE_RSA_WITH_3DES_EDE_CBC_SHA",
    0xC013: "TLS_ECDHE_RSA_WITH_AES_128_CBC_SHA",
    0xC014: "TLS_ECDHE_RSA_WITH_AES_256_CBC_SHA",
    0xC02F: "TLS_ECDHE_RSA_WITH_AES_128_GCM_SHA256",
    0xC02B: "TLS_ECDHE_ECDSA_WITH_AES_128_GCM_SHA256",
}
_TLS_VERSIONS = {
    "SSLv3": "SSL30",
    "TLSv1": "TLS1.0",
    "TLSv1.1": "TLS1.1",
    "TLSv1.2": "TLS1.2",
    "TLSv1.3": "TLS1.3",
}


def _tls_stats(stream: Any) -> dict[str, Any]:
    """The tls_* fields of a client's stats, from its trio.SSLStream (None: plain TCP)."""
    if stream is None:
        return {
            "tls": False,
            "tls_cipher_suite": "",
            "tls_version": "",
            "tls_negotiated_protocol": "",
            "tls_negotiated_protocol_is_mutual": False,
        }
    try:
        cipher = stream.cipher()
        version = stream.version() or ""
        alpn = stream.selected_alpn_protocol() or ""
    except Exception:  # the handshake has not completed
        cipher, version, alpn = None, "", ""
    number = _CIPHERS.get(cipher[0], 0) if cipher else 0
    return {
        "tls": True,
        "tls_cipher_suite": _NSQD_CIPHER_NAMES.get(number, f"Unknown {number}"),
        "tls_version": _TLS_VERSIONS.get(version, f"Unknown {version}"),
        "tls_negotiated_protocol": alpn,
        "tls_negotiated_protocol_is_mutual": True,  # Go: deprecated, always true
    }
