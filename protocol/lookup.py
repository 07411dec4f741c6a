"""nsqlookupd's V1 protocol from nsqd's side: commands out, size-prefixed responses in.

Responses are [int32 size][data] with no frame type; errors come back the same way as text
(E_INVALID ..., E_BAD_BODY ...)."""

from __future__ import annotations

import json
import struct
from typing import Final

MAGIC_V1: Final = b"  V1"
_SIZE: Final = struct.Struct(">i")


def encode_identify(
    broadcast_address: str, hostname: str, http_port: int, tcp_port: int, version: str
) -> bytes:
    # Go marshals nsqd's map with sorted keys.
    body = json.dumps(
        {
            "broadcast_address": broadcast_address,
            "hostname": hostname,
            "http_port": http_port,
            "tcp_port": tcp_port,
            "version": version,
        },
        separators=(",", ":"),
        sort_keys=True,
    ).encode()
    return b"IDENTIFY\n" + _SIZE.pack(len(body)) + body


def encode_register(topic: str, channel: str | None = None) -> bytes:
    return f"REGISTER {topic} {channel}\n".encode() if channel else f"REGISTER {topic}\n".encode()


def encode_unregister(topic: str, channel: str | None = None) -> bytes:
    if channel:
        return f"UNREGISTER {topic} {channel}\n".encode()
    return f"UNREGISTER {topic}\n".encode()


PING: Final = b"PING\n"


class ResponseDecoder:
    """Incremental reader of lookupd responses."""

    def __init__(self, max_size: int) -> None:
        self._buf = bytearray()
        self._max = max_size

    def feed(self, data: bytes) -> list[bytes]:
        self._buf += data
        out: list[bytes] = []
        while len(self._buf) >= 4:
            (size,) = _SIZE.unpack_from(self._buf, 0)
            if size < 0 or size > self._max:
                raise ValueError(f"response of {size} bytes from nsqlookupd")
            if len(self._buf) < 4 + size:
                break
            out.append(bytes(self._buf[4 : 4 + size]))
            del self._buf[: 4 + size]
        return out


def is_error(response: bytes) -> bool:
    return response.startswith(b"E_")
