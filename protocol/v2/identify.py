"""IDENTIFY: decode the JSON body as Go's encoding/json would, validate it in nsqd's order,
and negotiate the reply and the stream upgrades."""

from __future__ import annotations

import json
import re
import sys
from dataclasses import dataclass, replace
from itertools import accumulate
from typing import Any

from .errors import ErrorCode, NSQError
from .limits import Limits

VERSION = "1.3.0"

# Go struct fields of nsqd's identify body: json key -> expected JSON kind.
_FIELDS: dict[str, type] = {
    "client_id": str,
    "hostname": str,
    "heartbeat_interval": int,
    "output_buffer_size": int,
    "output_buffer_timeout": int,
    "feature_negotiation": bool,
    "tls_v1": bool,
    "deflate": bool,
    "deflate_level": int,
    "snappy": bool,
    "sample_rate": int,
    "user_agent": str,
    "msg_timeout": int,
}
_INT64 = (-(2**63), 2**63 - 1)
_INT32 = (-(2**31), 2**31 - 1)


@dataclass(slots=True, frozen=True)
class ClientSettings:
    """A client's effective settings: nsqd's defaults until IDENTIFY changes them."""

    client_id: str = ""
    hostname: str = ""
    user_agent: str = ""
    heartbeat_interval_ms: int = 30_000  # 0 = disabled
    output_buffer_size: int = 16384
    output_buffer_timeout_ms: int = 250  # 0 = no timed flush
    sample_rate: int = 0
    msg_timeout_ms: int = 60_000
    msg_timeout_set: bool = False  # IDENTIFY named one (a channel's default does not apply)
    feature_negotiation: bool = False
    tls_v1: bool = False
    deflate: bool = False
    deflate_level: int = 0
    snappy: bool = False

    @classmethod
    def defaults(cls, limits: Limits, remote_ip: str = "") -> ClientSettings:
        return cls(
            client_id=remote_ip,
            hostname=remote_ip,
            heartbeat_interval_ms=limits.heartbeat_interval_ms,
            output_buffer_size=limits.output_buffer_size,
            output_buffer_timeout_ms=limits.output_buffer_timeout_ms,
            msg_timeout_ms=limits.msg_timeout_ms,
        )


def _reject_constant(name: str) -> Any:
    raise ValueError(f"invalid JSON constant {name}")


class _Object(list[tuple[str, Any]]):
    """A decoded JSON object as its (key, value) pairs, told apart from a JSON array."""


class _HugeInt:
    """An integer literal too long for any Go int (Go skips it under an unknown key)."""


def _parse_int(text: str) -> Any:
    return int(text) if len(text) <= 24 else _HugeInt()


def _loads(text: str) -> Any:
    return json.loads(
        text, object_pairs_hook=_Object, parse_constant=_reject_constant, parse_int=_parse_int
    )


_GO_MAX_DEPTH = 10_000
_STRING = re.compile(r'"(?:[^"\\]|\\.)*"')
_NOT_BRACKET = re.compile(r"[^\[\]{}]+")
_FRAMES_PER_LEVEL = 2  # the scanner's _scan_once, then parse_array or parse_object


def _deep_decoder() -> json.JSONDecoder:
    """A decoder on the pure-Python scanner: its recursion is in Python frames, which
    sys.setrecursionlimit bounds on every version. The C scanner's is bounded by the C
    recursion limit since Python 3.12 (3.13 refuses 10,000 levels whatever the recursion limit
    says). Made here, not at import: json.scanner, or json.JSONDecoder read at import, would
    load json at start, which nsqd/lazy.py defers (and deep bodies are rare)."""
    from json.scanner import py_make_scanner

    decoder = json.JSONDecoder(
        object_pairs_hook=_Object, parse_constant=_reject_constant, parse_int=_parse_int
    )
    decoder.scan_once = py_make_scanner(decoder)
    return decoder


def _loads_deep(text: str) -> Any:
    """Go's decoder accepts nesting up to 10,000 levels, Python's stops near 1,000: measure
    the depth ourselves, refuse past Go's limit, else parse with room on the stack."""
    brackets = _NOT_BRACKET.sub("", _STRING.sub("", text))
    depth = max(accumulate(1 if c in "[{" else -1 for c in brackets), default=0)
    if depth > _GO_MAX_DEPTH:
        raise ValueError("exceeded max depth")
    old = sys.getrecursionlimit()
    sys.setrecursionlimit(old + _FRAMES_PER_LEVEL * depth + 100)
    try:
        return _deep_decoder().decode(text)
    finally:
        sys.setrecursionlimit(old)


def decode_identify_body(body: bytes) -> dict[str, Any]:
    """Go-like decode: only UTF-8 objects, keys matched case-insensitively, last one wins,
    a value of the wrong JSON type is an error (a float where an int is expected too)."""
    text = body.decode("utf-8", "replace")
    try:
        try:
            pairs = _loads(text)
        except RecursionError:
            pairs = _loads_deep(text)
    except (ValueError, RecursionError) as exc:
        raise _decode_error() from exc
    if pairs is None:
        return {}
    if not isinstance(pairs, _Object):
        raise _decode_error()
    fields: dict[str, Any] = {}
    for key, value in pairs:
        name = key if key in _FIELDS else _fold(key)
        if name is None or value is None:
            continue
        fields[name] = _check_type(name, value)
    return fields


def _fold(key: str) -> str | None:
    # Go matches keys with Unicode case folding (the long s U+017F matches "s").
    folded = key.casefold()
    return folded if folded in _FIELDS else None


def _check_type(name: str, value: Any) -> Any:
    kind = _FIELDS[name]
    if kind is int:
        low, high = _INT32 if name == "sample_rate" else _INT64
        if type(value) is not int or not low <= value <= high:
            raise _decode_error()
    elif type(value) is not kind:
        raise _decode_error()
    return value


def _decode_error() -> NSQError:
    return NSQError(ErrorCode.E_BAD_BODY, "IDENTIFY failed to decode JSON body")


def _invalid(what: str, value: int) -> NSQError:
    return NSQError(ErrorCode.E_BAD_BODY, f"IDENTIFY {what} ({value}) is invalid")


def apply_identify(body: bytes, current: ClientSettings, limits: Limits) -> ClientSettings:
    """Validate an IDENTIFY body against the limits, in nsqd's order; 0 keeps the current value."""
    f = decode_identify_body(body)
    heartbeat = f.get("heartbeat_interval", 0)
    if heartbeat == -1:
        heartbeat_ms = 0
    elif heartbeat == 0:
        heartbeat_ms = current.heartbeat_interval_ms
    elif 1000 <= heartbeat <= limits.max_heartbeat_interval_ms:
        heartbeat_ms = heartbeat
    else:
        raise _invalid("heartbeat interval", heartbeat)
    size, timeout_ms = _output_buffer(f, current, limits)
    sample_rate = f.get("sample_rate", 0)
    if not 0 <= sample_rate <= 99:
        raise _invalid("sample rate", sample_rate)
    msg_timeout = f.get("msg_timeout", 0)
    msg_timeout_set = current.msg_timeout_set or msg_timeout != 0
    if msg_timeout == 0:
        msg_timeout = current.msg_timeout_ms
    elif not 1000 <= msg_timeout <= limits.max_msg_timeout_ms:
        raise _invalid("msg timeout", msg_timeout)
    return replace(
        current,
        client_id=f.get("client_id", ""),
        hostname=f.get("hostname", ""),
        user_agent=f.get("user_agent", ""),
        heartbeat_interval_ms=heartbeat_ms,
        output_buffer_size=size,
        output_buffer_timeout_ms=timeout_ms,
        sample_rate=sample_rate,
        msg_timeout_ms=msg_timeout,
        msg_timeout_set=msg_timeout_set,
        feature_negotiation=f.get("feature_negotiation", False),
        tls_v1=f.get("tls_v1", False),
        deflate=f.get("deflate", False),
        deflate_level=f.get("deflate_level", 0),
        snappy=f.get("snappy", False),
    )


def _output_buffer(f: dict[str, Any], current: ClientSettings, limits: Limits) -> tuple[int, int]:
    timeout = f.get("output_buffer_timeout", 0)
    if timeout == -1:
        timeout_ms = 0
    elif timeout == 0:
        timeout_ms = current.output_buffer_timeout_ms
    elif limits.min_output_buffer_timeout_ms <= timeout <= limits.max_output_buffer_timeout_ms:
        timeout_ms = timeout
    else:
        raise _invalid("output buffer timeout", timeout)
    size = f.get("output_buffer_size", 0)
    if size == -1:
        return 1, 0  # no buffering: every frame goes straight out
    if size == 0:
        return current.output_buffer_size, timeout_ms
    if 64 <= size <= limits.max_output_buffer_size:
        return size, timeout_ms
    raise _invalid("output buffer size", size)


@dataclass(slots=True, frozen=True)
class ServerFeatures:
    """What this nsqd offers in negotiation."""

    tls: bool = False
    deflate: bool = True
    snappy: bool = True
    max_deflate_level: int = 6
    auth_required: bool = False


@dataclass(slots=True, frozen=True)
class Negotiation:
    response: bytes  # the JSON body of the response frame
    tls: bool
    snappy: bool
    deflate: bool
    deflate_level: int


def negotiate(s: ClientSettings, server: ServerFeatures, limits: Limits) -> Negotiation:
    """The reply to an IDENTIFY with feature_negotiation, keys in nsqd's order."""
    tls = server.tls and s.tls_v1
    deflate = server.deflate and s.deflate
    level = s.deflate_level if deflate and s.deflate_level > 0 else 6
    level = min(level, server.max_deflate_level)
    snappy = server.snappy and s.snappy
    if deflate and snappy:
        raise NSQError(
            ErrorCode.E_IDENTIFY_FAILED, "cannot enable both deflate and snappy compression"
        )
    body = {
        "max_rdy_count": limits.max_rdy_count,
        "version": VERSION,
        "max_msg_timeout": limits.max_msg_timeout_ms,
        "msg_timeout": s.msg_timeout_ms,
        "tls_v1": tls,
        "deflate": deflate,
        "deflate_level": level,
        "max_deflate_level": server.max_deflate_level,
        "snappy": snappy,
        "sample_rate": s.sample_rate,
        "auth_required": server.auth_required,
        "output_buffer_size": s.output_buffer_size,
        "output_buffer_timeout": s.output_buffer_timeout_ms,
    }
    response = json.dumps(body, separators=(",", ":")).encode()
    return Negotiation(response, tls, snappy, deflate, level)
