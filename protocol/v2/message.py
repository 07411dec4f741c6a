"""The message layout nsqd sends and stores: [int64 ts ns][uint16 attempts][16-byte id][body]."""

from __future__ import annotations

import struct
from dataclasses import dataclass
from typing import Final

MSG_ID_LENGTH: Final = 16
MESSAGE_HEADER: Final = struct.Struct(">qH")
MESSAGE_HEADER_SIZE: Final = MESSAGE_HEADER.size + MSG_ID_LENGTH  # 26
# Frame header + message header in one pack: size, type 2, timestamp, attempts.
MESSAGE_FRAME_HEADER: Final = struct.Struct(">iiqH")


def encode_message(timestamp: int, attempts: int, msg_id: bytes, body: bytes) -> bytes:
    return MESSAGE_HEADER.pack(timestamp, attempts) + msg_id + body


def encode_message_frame(timestamp: int, attempts: int, msg_id: bytes, body: bytes) -> bytes:
    size = MESSAGE_HEADER_SIZE + len(body) + 4
    return MESSAGE_FRAME_HEADER.pack(size, 2, timestamp, attempts) + msg_id + body


@dataclass(slots=True, frozen=True)
class DecodedMessage:
    timestamp: int
    attempts: int
    id: bytes
    body: bytes


def decode_message(data: bytes) -> DecodedMessage:
    if len(data) < MESSAGE_HEADER_SIZE:
        raise ValueError(f"message too short: {len(data)} bytes")
    timestamp, attempts = MESSAGE_HEADER.unpack_from(data, 0)
    return DecodedMessage(timestamp, attempts, bytes(data[10:26]), bytes(data[26:]))
