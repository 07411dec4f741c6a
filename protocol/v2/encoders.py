"""Client-side V2 commands as bytes: what a consumer or a publisher sends (V2Connection parses
them on nsqd's side). Used by the Spark connector, tests and tools."""

from __future__ import annotations

import json
import struct
from collections.abc import Mapping, Sequence
from typing import Any, Final

_I32: Final = struct.Struct(">i")
NOP: Final = b"NOP\n"
CLS: Final = b"CLS\n"


def identify(settings: Mapping[str, Any]) -> bytes:
    body = json.dumps(dict(settings), separators=(",", ":")).encode()
    return b"IDENTIFY\n" + _I32.pack(len(body)) + body


def auth(secret: bytes) -> bytes:
    return b"AUTH\n" + _I32.pack(len(secret)) + secret


def sub(topic: str, channel: str) -> bytes:
    return f"SUB {topic} {channel}\n".encode()


def rdy(count: int) -> bytes:
    return b"RDY %d\n" % count


def fin(msg_id: bytes) -> bytes:
    return b"FIN " + msg_id + b"\n"


def touch(msg_id: bytes) -> bytes:
    return b"TOUCH " + msg_id + b"\n"


def req(msg_id: bytes, delay_ms: int = 0) -> bytes:
    return b"REQ " + msg_id + b" %d\n" % delay_ms


def pub(topic: str, body: bytes) -> bytes:
    return f"PUB {topic}\n".encode() + _I32.pack(len(body)) + body


def dpub(topic: str, delay_ms: int, body: bytes) -> bytes:
    return f"DPUB {topic} {delay_ms}\n".encode() + _I32.pack(len(body)) + body


def mpub(topic: str, bodies: Sequence[bytes]) -> bytes:
    parts = [_I32.pack(len(bodies))]
    for body in bodies:
        parts.append(_I32.pack(len(body)))
        parts.append(body)
    payload = b"".join(parts)
    return f"MPUB {topic}\n".encode() + _I32.pack(len(payload)) + payload


def mpub_size(bodies_bytes: int, count: int) -> int:
    """MPUB's body size for `count` messages totalling `bodies_bytes` (nsqd's max-body-size)."""
    return 4 + 4 * count + bodies_bytes
